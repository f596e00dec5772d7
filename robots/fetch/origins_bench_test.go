package fetch

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"robotsgate/cache"
	"robotsgate/cache/cachetest"
)

// originsHeapProfile, when set, is where BenchmarkBytesPerOrigin writes
// the heap profile of each run once its origins are loaded, as
// heap-<sub-benchmark>-<origins>.pprof. Run with -test.memprofilerate=4096
// for a profile that sees the small allocations of 1,000 origins too.
var originsHeapProfile = flag.String("origins.heapprofile", "", "directory for BenchmarkBytesPerOrigin's heap profiles (heap-<sub>-<N>.pprof)")

// Bounds of BenchmarkBytesPerOrigin.
const (
	// originsMin is the fewest origins a run loads: the calibration runs
	// of the default -benchtime (b.N of 1, 100, …) would say little.
	originsMin = 1000
	// originsBudget holds every origin of the corpus at 100,000 origins.
	originsBudget = 8 << 30
	// originsWorkers load origins at once, a few per core.
	originsWorkers = 8
	// originsIssueBytes and originsIssueRules are the file issue 29 measured with.
	originsIssueBytes, originsIssueRules = 2200, 82
)

// originsLikeIssue is the corpus file nearest the issue's 2.2 KB of 82
// rules: the least sum of relative distances in size and in rules.
func originsLikeIssue(files []cachetest.File) cachetest.File {
	distance := func(f cachetest.File) float64 {
		d := func(v, want int) float64 { return math.Abs(float64(v-want)) / float64(want) }
		return d(len(f.Body), originsIssueBytes) + d(f.Rules, originsIssueRules)
	}
	return slices.MinFunc(files, func(a, b cachetest.File) int {
		switch da, db := distance(a), distance(b); {
		case da < db:
			return -1
		case da > db:
			return 1
		}
		return 0
	})
}

// originsURL is the i-th origin: "http://127.A.B.C", never resolved
// (see BenchmarkBytesPerOrigin).
func originsURL(i int) string { return "http://" + cachetest.Host(i) }

// BenchmarkBytesPerOrigin measures what one cached origin keeps: a real
// Fetcher and a real cache.Cache whose budget holds them all load b.N
// distinct origins (at least originsMin; use -benchtime 20000x), then,
// after two GCs, it reports per origin the live heap grown
// (heap-B/origin), the heap objects (objects/origin), what the cache
// charged (charged-B/origin), the resident memory grown before the GCs
// (rss-B/origin, Linux), and the robots.txt size (file-B, at most the
// parse limit) and heap-B/origin ÷ file-B (heap/file). The origins are
// names no one resolves, "http://127.A.B.C", all reached through
// Options.UpstreamProxy: one local server answering every request, so
// that no origin costs a listener or a file descriptor.
//
// median serves the corpus file of median size to every origin;
// 2.2KB-82rules the one nearest the issue's file (stackoverflow.com.txt,
// 2,143 bytes of 77 rules); corpus every file in turn, reporting means.
func BenchmarkBytesPerOrigin(b *testing.B) {
	files, err := cachetest.Corpus(filepath.Join("..", "testdata", "corpus"))
	if err != nil {
		b.Fatal(err)
	}
	median, like := cachetest.Median(files), originsLikeIssue(files)
	b.Logf("median: %s (%d B, %d rules); 2.2KB-82rules: %s (%d B, %d rules); corpus: %d files",
		filepath.Base(median.Path), len(median.Body), median.Rules, filepath.Base(like.Path), len(like.Body), like.Rules, len(files))
	for _, c := range []struct {
		name  string
		files []cachetest.File
	}{
		{"median", []cachetest.File{median}},
		{"2.2KB-82rules", []cachetest.File{like}},
		{"corpus", files},
	} {
		b.Run(c.name, func(b *testing.B) { benchmarkOrigins(b, c.name, c.files) })
	}
}

// benchmarkOrigins loads max(b.N, originsMin) origins, origin i served
// files[i%len(files)], and reports what they keep.
func benchmarkOrigins(b *testing.B, name string, files []cachetest.File) {
	n := max(b.N, originsMin)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := cachetest.Index(r.URL.Hostname())
		if i < 0 || r.URL.Path != "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write(files[i%len(files)].Body)
	}))
	defer upstream.Close()
	proxyURL, err := url.Parse(upstream.URL)
	if err != nil {
		b.Fatal(err)
	}
	f := New(Options{UpstreamProxy: proxyURL, Timeout: 30 * time.Second})
	defer f.Close()
	opts := cache.DefaultOptions()
	opts.MaxBytes = originsBudget
	c, err := cache.New(opts, f.Load)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()

	var fileBytes int64
	for i := range n {
		fileBytes += int64(min(len(files[i%len(files)].Body), f.Options().MaxBytes))
	}
	// The cache's index is charged from the start: only what the
	// origins add counts.
	costBefore := c.Stats().CostBytes
	before := originsMemStats()
	rssBefore, rssOK := cachetest.ResidentBytes()

	b.ResetTimer()
	start := time.Now()
	// The origin is made in the visit, so that whatever keeps it is
	// counted.
	err = cachetest.Each(originsWorkers, n, func(_, i int) error {
		if _, _, err := c.Get(context.Background(), originsURL(i)); err != nil {
			return fmt.Errorf("Get %s: %w", originsURL(i), err)
		}
		return nil
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	rssAfter, _ := cachetest.ResidentBytes()

	after := originsMemStats()
	if *originsHeapProfile != "" {
		cachetest.WriteHeapProfile(b, *originsHeapProfile, name, n)
	}
	// What one collection costs with the origins held: the collector's
	// price for the headroom it is given.
	gcStart := time.Now()
	runtime.GC()
	gcTime := time.Since(gcStart)
	s := c.Stats()
	if s.Loads["ok"] != uint64(n) || s.Evictions != 0 || s.Uncacheable != 0 {
		b.Fatalf("%d origins: loads %v, %d evicted, %d uncacheable; want every one loaded ok and kept", n, s.Loads, s.Evictions, s.Uncacheable)
	}
	runtime.KeepAlive(c)
	runtime.KeepAlive(f)

	per := func(v int64) float64 { return float64(v) / float64(n) }
	heap := per(int64(after.HeapAlloc) - int64(before.HeapAlloc))
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(heap, "heap-B/origin")
	b.ReportMetric(per(int64(after.HeapObjects)-int64(before.HeapObjects)), "objects/origin")
	b.ReportMetric(per(s.CostBytes-costBefore), "charged-B/origin")
	b.ReportMetric(per(fileBytes), "file-B")
	b.ReportMetric(heap/per(fileBytes), "heap/file")
	if rssOK {
		b.ReportMetric(per(rssAfter-rssBefore), "rss-B/origin")
	}
	b.ReportMetric(float64(gcTime.Microseconds())/1000, "gc-ms")
}

// originsMemStats reads the memory statistics after two GCs: the heap
// then holds only what is live, and the heap profile says so.
func originsMemStats() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
