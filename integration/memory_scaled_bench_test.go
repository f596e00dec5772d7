package integration

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"robotsgate/cache/cachetest"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkOriginsScaled measures the resident memory of the robotsgate
// binary, running as its own process, per cached origin at counts where a
// port per origin (BenchmarkOriginsRSS) no longer fits: b.N origins named
// "http://127.A.B.C" (IP literals, judged without DNS; the default
// ROBOTSGATE_DENY_DESTINATIONS allows 127.0.0.0/8), all reached through
// ROBOTSGATE_UPSTREAM_PROXY, one HTTP proxy in this process that answers
// every absolute-form request: /robots.txt with one corpus file, any other
// path with a short page. It counts the robots.txt requests per origin.
//
//   - 2.2KB-82rules: stackoverflow.com.txt (2,143 bytes, 77 rules), the
//     file of the figures;
//   - median: the corpus file of median size (computed as
//     robots/fetch's BenchmarkBytesPerOrigin does).
//
// The cache budget holds every file (scaledBudget), so each origin must
// see exactly one robots.txt fetch in all the rounds; the benchmark fails
// otherwise. originsClients keep-alive clients share one http.Client,
// each holding one connection to robotsgate, and crawl as
// BenchmarkOriginsRSS does (crawlHalves: the first half three rounds, a
// reading, the second half three rounds, a reading, a last round over
// all), so that the client and the upstream cost a few connections
// whatever the count. It reports what BenchmarkOriginsRSS does (totals
// from start and slopes from half to after, the slope being the figure
// per origin), the proxy's CPU time per origin over the crawl
// (cpu-ms/origin) and the wall time from the first request to the last
// (wall-s). ns/op is the time of the halves' rounds per origin.
//
// b.N is the number of origins, up to 2^24-2:
//
//	go test ./integration -run '^$' -bench '^BenchmarkOriginsScaled$' -benchtime 100000x -timeout 60m
func BenchmarkOriginsScaled(b *testing.B) {
	files, err := cachetest.Corpus(scaledCorpusDir)
	if err != nil {
		b.Fatal(err)
	}
	like := slices.IndexFunc(files, func(f cachetest.File) bool { return filepath.Base(f.Path) == filepath.Base(originsSource) })
	if like < 0 {
		b.Fatalf("%s is not in the corpus", originsSource)
	}
	for _, bc := range []struct {
		name string
		file cachetest.File
	}{
		{"2.2KB-82rules", files[like]},
		{"median", cachetest.Median(files)},
	} {
		b.Run(bc.name, func(b *testing.B) { benchOriginsScaled(b, bc.file) })
	}
}

const (
	// scaledCorpusDir is where the corpus files are.
	scaledCorpusDir = "../robots/testdata/corpus"
	// scaledBytesPerOrigin and scaledBudgetBase make a cache budget that
	// holds every origin's file, with room to spare: about 3.7 KB is
	// charged per stackoverflow.com.txt, plus the cache's index.
	scaledBytesPerOrigin = 6 << 10
	scaledBudgetBase     = 64 << 20
	// scaledFDs is the file descriptors robotsgate needs: a few
	// connections to the upstream proxy and from the crawlers.
	scaledFDs = fdMargin
)

// scaledBudget is a cache budget that holds n origins' files.
func scaledBudget(n int) int64 { return int64(n)*scaledBytesPerOrigin + scaledBudgetBase }

func benchOriginsScaled(b *testing.B, file cachetest.File) {
	if b.N > cachetest.MaxOrigins {
		b.Fatalf("%d origins asked, at most %d IP literals 127.A.B.C", b.N, cachetest.MaxOrigins)
	}
	counts := make([]atomic.Int32, b.N)
	var others, notProxied atomic.Int64
	upstream := serveUpstream(b, func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.IsAbs() {
			notProxied.Add(1)
			http.Error(w, "a proxy request must be in absolute form", http.StatusBadRequest)
			return
		}
		if r.URL.Path != "/robots.txt" {
			io.WriteString(w, "page\n")
			return
		}
		// The warm-up origin has a port, and is no origin of the crawl.
		if i := cachetest.Index(r.URL.Host); i >= 0 && i < len(counts) {
			counts[i].Add(1)
		} else {
			others.Add(1)
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(file.Body)))
		w.Write(file.Body)
	})
	hosts := make([]string, b.N)
	for i := range hosts {
		hosts[i] = cachetest.Host(i)
	}
	fetches := func() int64 {
		var n int64
		for i := range counts {
			n += int64(counts[i].Load())
		}
		return n
	}

	budget := scaledBudget(b.N)
	p, crawler, metricsClient, start := startMeasured(b, originsClients, scaledFDs,
		"ROBOTSGATE_UPSTREAM_PROXY=http://"+upstream,
		"ROBOTSGATE_CACHE_MAX_BYTES="+strconv.FormatInt(budget, 10))
	b.Logf("robotsgate runs with %s, %s (unset: the runtime's defaults); %s: %d bytes, %d rules",
		childEnv(p, "GOGC"), childEnv(p, "GOMEMLIMIT"), file.Path, len(file.Body), file.Rules)

	began := time.Now()
	h := crawlHalves(b, p, crawler, metricsClient, hosts, fetches)
	wall := time.Since(began)
	after := h.after
	n := float64(b.N)
	delta := func(name string) float64 { return after[name] - start[name] }
	b.ReportMetric(h.fetches[2]/n, "fetches/origin")
	h.report(b, start)
	b.ReportMetric(delta("go_memstats_heap_objects")/n, "objects/origin")
	if _, ok := after["process_cpu_seconds_total"]; ok {
		b.ReportMetric(delta("process_cpu_seconds_total")*1000/n, "cpu-ms/origin")
	}
	b.ReportMetric(wall.Seconds(), "wall-s")
	b.Logf("%d origins, %d clients: %s; heap_objects %v -> %v; goroutines %v -> %v; open fds %v -> %v; pace schedules %v; robots.txt requests for other hosts %d",
		b.N, originsClients, h.describe(start),
		start["go_memstats_heap_objects"], after["go_memstats_heap_objects"],
		start["go_goroutines"], after["go_goroutines"], start["process_open_fds"], after["process_open_fds"], after["robotsgate_pace_schedules"], others.Load())

	if np := notProxied.Load(); np > 0 {
		b.Fatalf("the upstream proxy received %d requests not in absolute form", np)
	}
	var wrong []string
	for i := range counts {
		if got := counts[i].Load(); got != 1 {
			if len(wrong) < 5 {
				wrong = append(wrong, cachetest.Host(i)+": "+strconv.Itoa(int(got)))
			} else {
				wrong = append(wrong, "…")
				break
			}
		}
	}
	if len(wrong) > 0 {
		b.Fatalf("with a cache budget of %d bytes that holds them all, %d origins saw %v robots.txt fetches (%s; %v evicted), want exactly one each; first that differ: %v",
			budget, b.N, h.fetches[2], h.fetchCounts(), after["robotsgate_robots_cache_evictions_total"], wrong)
	}
}

// serveUpstream starts an HTTP server on 127.0.0.1 for robotsgate's
// ROBOTSGATE_UPSTREAM_PROXY, answering with handler, and returns its
// address.
func serveUpstream(b *testing.B, handler http.HandlerFunc) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatalf("the upstream proxy: %v", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: requestTimeout}
	b.Cleanup(func() { srv.Close() })
	go srv.Serve(ln)
	return ln.Addr().String()
}
