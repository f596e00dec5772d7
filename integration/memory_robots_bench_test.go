package integration

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkRobotsMemory measures the memory the robotsgate binary, running
// as its own process, holds while crawlers reach b.N origins that each
// serve a large robots.txt, sent with a Content-Length as a static file
// server sends it. robotsClients clients ask for one page of every origin
// through the proxy, so robotsgate fetches and parses every file, up to
// robotsClients at a time; the cache's default 64 MiB budget holds a few
// dozen of them and evicts the rest.
//
//   - real: the first 500 KiB (the default parse limit) of docs.oracle.com's
//     real robots.txt, about 19,000 Disallow lines of 27 bytes;
//   - short-rules: 500 KiB of short distinct "Allow: /<n>/index.htm" lines,
//     which a site may legally serve and which cost the parser several
//     times more per byte (each is a rule, and an implied one);
//   - names: 500 KiB of distinct "User-agent: a<n>" lines after a group
//     for every crawler, the costliest file per byte robotsgate keeps (see
//     robots.MaxRetainedPerByte);
//
// and
//
//   - denied: the page is disallowed, robotsgate answers 403 itself and
//     opens no connection to the origin beyond the robots.txt fetch;
//   - allowed: the page is forwarded, and the origin connections
//     robotsgate keeps idle afterwards count too.
//
// It reads the proxy's /metrics before (after a warm-up request to a
// small origin), every robotsSample during the crawl for the peaks, and
// once the crawl is over and the proxy's goroutine count has settled, and
// reports: the bytes charged to the cache (cache-MiB), the heap in use and
// the resident set at their peaks and after (heap-MiB-peak,
// heap-MiB-after, rss-MiB-peak, rss-MiB-after), the heap size that
// triggers the next collection after (gc-goal-MiB: about twice the heap
// live at the last collection with GOGC=100), the peak resident set per
// byte charged to the cache (rss/cache), and the proxy's CPU time per
// origin and garbage collections during the crawl (cpu-ms/origin, gcs).
// No GC is forced in the proxy, so the heap includes garbage, as it does
// in service; GOMEMLIMIT, when set, reaches the proxy. ns/op is the time
// per origin.
//
// b.N is the number of origins, so give it as a count:
//
//	go test ./integration -run '^$' -bench '^BenchmarkRobotsMemory$' -benchtime 1000x
func BenchmarkRobotsMemory(b *testing.B) {
	oracle, short, names := realRobotsTxt(b), shortRulesRobotsTxt(), namesRobotsTxt()
	for _, bc := range []struct {
		name string
		body []byte
		path string
		want int
	}{
		{"real/denied", oracle, "/cds/page", http.StatusForbidden},
		{"real/allowed", oracle, "/page", http.StatusOK},
		{"short-rules/denied", short, "/private/page", http.StatusForbidden},
		{"names/denied", names, "/private/page", http.StatusForbidden},
	} {
		b.Run(bc.name, func(b *testing.B) { benchRobotsMemory(b, bc.body, bc.path, bc.want) })
	}
}

// BenchmarkStalledRobotsMemory measures the memory the robotsgate binary
// holds while b.N robots.txt fetches are under way at once, each from an
// origin that announces a body of the default parse limit (500 KiB) and
// then stops sending until robotsgate gives up (ROBOTSGATE_FETCH_TIMEOUT,
// stalledTimeout here). One client per origin asks for a page, all at
// once.
//
//   - announced: the origin sends 1 KiB of the body, then stalls;
//   - sent: it sends all of it but the last 1 KiB, then stalls.
//
// It reports the heap in use and the resident set at their peaks
// (heap-MiB-peak, rss-MiB-peak) and their growth per stalled fetch
// (heap-KiB/fetch, rss-KiB/fetch). ns/op is the time per origin, mostly
// the fetch timeout.
//
// b.N is the number of stalled origins, at most the proxy's concurrent
// fetches (256) to measure them all held at once:
//
//	go test ./integration -run '^$' -bench '^BenchmarkStalledRobotsMemory$' -benchtime 256x
func BenchmarkStalledRobotsMemory(b *testing.B) {
	b.Run("announced", func(b *testing.B) { benchStalledRobots(b, 1<<10) })
	b.Run("sent", func(b *testing.B) { benchStalledRobots(b, robotsBytes-1<<10) })
}

const (
	// robotsClients is how many crawlers ask at once.
	robotsClients = 32
	// robotsSample is how often /metrics is read during the crawl.
	robotsSample = 50 * time.Millisecond
	// robotsSource is the large real robots.txt the origins serve the
	// beginning of.
	robotsSource = "../robots/testdata/corpus/docs.oracle.com.txt"
	// robotsBytes is how much of it they serve: the default parse limit.
	robotsBytes = 500 << 10
	// stalledTimeout is the fetch timeout while origins stall.
	stalledTimeout = 2 * time.Second
)

// realRobotsTxt is the first robotsBytes of robotsSource, cut after its
// last whole line.
func realRobotsTxt(b *testing.B) []byte {
	data, err := os.ReadFile(robotsSource)
	if err != nil {
		b.Fatal(err)
	}
	if len(data) < robotsBytes {
		b.Fatalf("%s has %d bytes, want at least %d", robotsSource, len(data), robotsBytes)
	}
	data = data[:robotsBytes]
	return data[:bytes.LastIndexByte(data, '\n')+1]
}

// shortRulesRobotsTxt is a robots.txt of about robotsBytes whose group for
// every crawler disallows /private/ and allows robotsBytes' worth of
// distinct short index pages.
func shortRulesRobotsTxt() []byte {
	body := []byte("User-agent: *\nDisallow: /private/\n")
	for i := 0; ; i++ {
		line := "Allow: /" + strconv.FormatInt(int64(i), 36) + "/index.htm\n"
		if len(body)+len(line) > robotsBytes {
			return body
		}
		body = append(body, line...)
	}
}

// namesRobotsTxt is a robots.txt of about robotsBytes whose group for
// every crawler disallows /private/, followed by distinct user-agent lines
// that name no rules: each name keeps a rule set of its own.
func namesRobotsTxt() []byte {
	body := []byte("User-agent: *\nDisallow: /private/\n")
	for i := 0; ; i++ {
		line := "User-agent: a" + strconv.FormatInt(int64(i), 36) + "\n"
		if len(body)+len(line) > robotsBytes {
			return body
		}
		body = append(body, line...)
	}
}

// memoryPeaks are the metrics whose largest value during the crawl is
// reported.
var memoryPeaks = []string{"go_memstats_heap_inuse_bytes", "process_resident_memory_bytes", "robotsgate_robots_cache_bytes"}

func benchRobotsMemory(b *testing.B, body []byte, path string, want int) {
	// Per origin: its listener, and in each process one end of a
	// robots.txt connection and of a forwarded page's connection.
	need := uint64(3*b.N + robotsClients + fdMargin)
	if limit, err := raiseFileLimit(); err != nil {
		b.Fatal(err)
	} else if limit < need {
		b.Fatalf("%d origins need about %d file descriptors but this process may open %d (the hard RLIMIT_NOFILE); raise it (ulimit -Hn) or ask for fewer", b.N, need, limit)
	}
	length := strconv.Itoa(len(body))
	addrs := serveOrigins(b, b.N, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", length)
		w.Write(body)
	})
	p, crawler, metricsClient, before := startMeasured(b, robotsClients, need)

	peaks := make(map[string]float64)
	stop := samplePeaks(metricsClient, p, peaks)
	b.ResetTimer()
	err := crawl(crawler, addrs, path, func(status int) bool { return status == want }, robotsClients)
	b.StopTimer()
	if serr := stop(); serr != nil {
		b.Fatal(serr)
	}
	if err != nil {
		b.Fatal(err)
	}

	after, err := settledMetrics(metricsClient, p, 0)
	if err != nil {
		b.Fatal(err)
	}
	for name, v := range after {
		peaks[name] = max(peaks[name], v)
	}
	cache := after["robotsgate_robots_cache_bytes"]
	b.ReportMetric(mib(cache), "cache-MiB")
	b.ReportMetric(mib(peaks["go_memstats_heap_inuse_bytes"]), "heap-MiB-peak")
	b.ReportMetric(mib(after["go_memstats_heap_inuse_bytes"]), "heap-MiB-after")
	b.ReportMetric(mib(after["go_memstats_next_gc_bytes"]), "gc-goal-MiB")
	b.ReportMetric(mib(peaks["process_resident_memory_bytes"]), "rss-MiB-peak")
	b.ReportMetric(mib(after["process_resident_memory_bytes"]), "rss-MiB-after")
	if cache > 0 {
		b.ReportMetric(peaks["process_resident_memory_bytes"]/cache, "rss/cache")
	}
	b.ReportMetric((after["process_cpu_seconds_total"]-before["process_cpu_seconds_total"])*1000/float64(b.N), "cpu-ms/origin")
	b.ReportMetric(after["go_gc_duration_seconds_count"]-before["go_gc_duration_seconds_count"], "gcs")
	b.Logf("%d origins of %d bytes: cache %.1f MiB (peak %.1f, %v evicted); heap_inuse %.1f -> peak %.1f -> %.1f MiB; heap_alloc %.1f MiB, next GC at %.1f MiB; heap_released %.1f MiB; rss %.1f -> peak %.1f -> %.1f MiB; goroutines %v -> %v; open fds %v -> %v",
		b.N, len(body), mib(cache), mib(peaks["robotsgate_robots_cache_bytes"]), after["robotsgate_robots_cache_evictions_total"],
		mib(before["go_memstats_heap_inuse_bytes"]), mib(peaks["go_memstats_heap_inuse_bytes"]), mib(after["go_memstats_heap_inuse_bytes"]),
		mib(after["go_memstats_heap_alloc_bytes"]), mib(after["go_memstats_next_gc_bytes"]), mib(after["go_memstats_heap_released_bytes"]),
		mib(before["process_resident_memory_bytes"]), mib(peaks["process_resident_memory_bytes"]), mib(after["process_resident_memory_bytes"]),
		before["go_goroutines"], after["go_goroutines"], before["process_open_fds"], after["process_open_fds"])
}

func benchStalledRobots(b *testing.B, sent int) {
	need := uint64(3*b.N + fdMargin)
	if limit, err := raiseFileLimit(); err != nil {
		b.Fatal(err)
	} else if limit < need {
		b.Fatalf("%d origins need about %d file descriptors but this process may open %d (the hard RLIMIT_NOFILE); raise it (ulimit -Hn) or ask for fewer", b.N, need, limit)
	}
	part := bytes.Repeat([]byte("Disallow: /x\n"), sent/13+1)[:sent]
	length := strconv.Itoa(robotsBytes)
	addrs := serveOrigins(b, b.N, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", length)
		w.Write(part)
		http.NewResponseController(w).Flush()
		<-r.Context().Done() // robotsgate gave up, or the benchmark ended
	})
	p, crawler, metricsClient, before := startMeasured(b, b.N, need, "ROBOTSGATE_FETCH_TIMEOUT="+stalledTimeout.String())

	peaks := make(map[string]float64)
	stop := samplePeaks(metricsClient, p, peaks)
	b.ResetTimer()
	// An unreachable robots.txt disallows everything; whatever robotsgate
	// answers, the page must not be forwarded.
	err := crawl(crawler, addrs, "/page", refused, b.N)
	b.StopTimer()
	if serr := stop(); serr != nil {
		b.Fatal(serr)
	}
	if err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	delta := func(name string) float64 { return peaks[name] - before[name] }
	b.ReportMetric(mib(peaks["go_memstats_heap_inuse_bytes"]), "heap-MiB-peak")
	b.ReportMetric(mib(peaks["process_resident_memory_bytes"]), "rss-MiB-peak")
	b.ReportMetric(delta("go_memstats_heap_inuse_bytes")/n/(1<<10), "heap-KiB/fetch")
	b.ReportMetric(delta("process_resident_memory_bytes")/n/(1<<10), "rss-KiB/fetch")
	b.Logf("%d stalled fetches, %d of %d bytes sent: heap_inuse %.1f -> peak %.1f MiB; rss %.1f -> peak %.1f MiB",
		b.N, sent, robotsBytes,
		mib(before["go_memstats_heap_inuse_bytes"]), mib(peaks["go_memstats_heap_inuse_bytes"]),
		mib(before["process_resident_memory_bytes"]), mib(peaks["process_resident_memory_bytes"]))
}

func mib(v float64) float64 { return v / (1 << 20) }

// startMeasured starts robotsgate with env, makes a client that asks
// through it with up to conns connections, warms the proxy up with one
// request to a small origin and returns its settled metrics then.
func startMeasured(b *testing.B, conns int, fds uint64, env ...string) (p *proxyProcess, crawler, metricsClient *http.Client, before map[string]float64) {
	small := newOrigin(b, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)})
	p = startProxy(b, env...)
	metricsClient = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: requestTimeout}
	crawler = newClient(b, &http.Transport{Proxy: http.ProxyURL(p.url), MaxIdleConnsPerHost: conns})
	if err := expectStatus(crawler, "http://"+small.addr+"/page", func(status int) bool { return status == http.StatusOK }); err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	before, err := settledMetrics(metricsClient, p, 0)
	if err != nil {
		b.Fatal(err)
	}
	if maxFDs := before["process_max_fds"]; maxFDs < float64(fds) {
		b.Fatalf("about %d file descriptors needed in robotsgate but it may open %v", fds, maxFDs)
	}
	return p, crawler, metricsClient, before
}

// serveOrigins starts n origins on 127.0.0.1, each on its own port (a port
// is an origin), all answering /robots.txt with robots and any other path
// with a short page, and returns their addresses.
func serveOrigins(b *testing.B, n int, robots http.HandlerFunc) []string {
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				robots(w, r)
				return
			}
			io.WriteString(w, "page\n")
		}),
		ReadHeaderTimeout: requestTimeout,
	}
	b.Cleanup(func() { srv.Close() })
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatalf("origin %d of %d: %v", i+1, n, err)
		}
		addrs[i] = ln.Addr().String()
		go srv.Serve(ln)
	}
	return addrs
}

// crawl asks for path on every origin in addrs through client, clients at
// a time, and returns the first answer whose status is not ok.
func crawl(client *http.Client, addrs []string, path string, ok func(status int) bool, clients int) error {
	targets := make(chan string)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for addr := range targets {
				if err := expectStatus(client, "http://"+addr+path, ok); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for _, addr := range addrs {
		select {
		case targets <- addr:
		case err = <-errs:
			break feed
		}
	}
	close(targets)
	wg.Wait()
	if err != nil {
		return err
	}
	select {
	case err = <-errs:
	default:
	}
	return err
}

// expectStatus GETs rawURL as crawlerUA and reads the whole answer, whose
// status must be ok.
func expectStatus(client *http.Client, rawURL string, ok func(status int) bool) error {
	r, err := tryGet(client, rawURL, crawlerUA)
	if err != nil {
		return err
	}
	if !ok(r.status) {
		return fmt.Errorf("GET %s: unexpected status %d; body %q", rawURL, r.status, r.body)
	}
	return nil
}

// refused reports a status of robotsgate's own refusals, 4xx or 5xx.
func refused(status int) bool { return status >= 400 }

// samplePeaks reads the proxy's /metrics every robotsSample, keeping in
// peaks the largest value of each of memoryPeaks, until the function it
// returns is called; that function returns the first failed read.
func samplePeaks(client *http.Client, p *proxyProcess, peaks map[string]float64) (stop func() error) {
	done := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		tick := time.NewTicker(robotsSample)
		defer tick.Stop()
		for {
			m, err := scrapeMetrics(client, p.url.String()+"/metrics")
			if err != nil {
				result <- err
				return
			}
			for _, name := range memoryPeaks {
				peaks[name] = max(peaks[name], m[name])
			}
			select {
			case <-done:
				result <- nil
				return
			case <-tick.C:
			}
		}
	}()
	return func() error {
		close(done)
		return <-result
	}
}
