package integration

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkOriginsRSS measures the resident memory of the robotsgate
// binary, running as its own process, per cached origin: b.N origins,
// each on its own loopback port, serve originsSource (a real 2,143-byte
// robots.txt of 77 rules) and a page it allows. originsClients keep-alive
// clients ask through the proxy for that page on every origin of the
// first half, one round, then two more (crawlHalves), then on the second
// half likewise, then once more on all of them.
//
//   - budget-holds-all: ROBOTSGATE_CACHE_MAX_BYTES=originsBudget holds
//     every file, so each origin must see exactly one robots.txt fetch in
//     all those rounds, the last included (the second half did not evict
//     the first); the benchmark fails otherwise;
//   - default-budget: the default 64 MiB holds a few thousand of them, and
//     the rest are evicted and fetched again, as designed (informative).
//
// It reads the proxy's /metrics after a warm-up request (start), after
// the first half's rounds (half) and after the second's (after), each
// time once the proxy's goroutine count has settled, and reports: the
// robots.txt fetches per origin, counted at the origins (fetches/origin);
// the resident set at those three points (rss-MiB-start, rss-MiB-half,
// rss-MiB-after); per origin from start to after, the resident growth
// (rss-B/origin), the heap in use and heap objects grown
// (heap-B/origin, objects/origin), the bytes charged to the cache, its
// index (charged from the start) left out (cache-B/origin), and the
// resident growth less twice the cache's charge (not-cache-B/origin: with
// GOGC=100 the heap is about twice what is live); the slopes, the growth
// from half to after per origin of the second half (rss-slope-B/origin,
// heap-slope-B/origin, cache-slope-B/origin); the proxy's goroutines
// after (goroutines); and the file descriptors it opened beyond start
// (fds-added: idle connections to origins, at most
// ROBOTSGATE_UPSTREAM_IDLE_CONNS for pages plus the robots.txt fetcher's
// own few, and the crawler's connections).
//
// The slope is the figure per origin: the growth from start also holds
// costs that do not grow with the origins, bounded and reached within
// the first half once it has more origins than idle connections are kept
// (originsUpstreamIdle: from about 2,200 origins in all) (up to ROBOTSGATE_UPSTREAM_IDLE_CONNS idle
// connections to origins with two goroutines and their buffers each, the
// fetcher's, the crawler's connections, stacks, the collector's first
// cycles), so rss-B/origin at N origins is the slope plus about that
// fixed cost ÷ N. Both halves run the same three rounds, so the garbage
// each leaves behind is alike.
//
// No GC is forced in the proxy, so the heap includes garbage, as it does
// in service. GOGC and GOMEMLIMIT, when set in the benchmark's
// environment, reach the proxy (cleanEnv keeps them). ns/op is the time
// of the two halves' rounds per origin.
//
// b.N is the number of origins; the figures are for 10,000 and
// 15,000:
//
//	go test ./integration -run '^$' -bench '^BenchmarkOriginsRSS$' -benchtime 15000x -timeout 60m
func BenchmarkOriginsRSS(b *testing.B) {
	body, err := os.ReadFile(originsSource)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("budget-holds-all", func(b *testing.B) { benchOriginsRSS(b, body, true) })
	b.Run("default-budget", func(b *testing.B) { benchOriginsRSS(b, body, false) })
}

const (
	// originsSource is the robots.txt every origin serves, the size and
	// rule count of the (2.2 KB, 82 rules); it allows originsPath
	// to every crawler robotsgate's tests use.
	originsSource = "../robots/testdata/corpus/stackoverflow.com.txt"
	originsPath   = "/page"
	// originsClients is how many keep-alive crawlers ask at once.
	originsClients = 8
	// originsRounds is how many times the crawl goes through each half.
	originsRounds = 3
	// originsBudget is a cache budget that holds every origin's file at
	// the sizes asked for (about 10 KB charged per origin at the base).
	originsBudget = "1GiB"
	// originsUpstreamIdle is robotsgate's default
	// ROBOTSGATE_UPSTREAM_IDLE_CONNS, plus the robots.txt fetcher's own
	// idle connections (64): the connections to origins each process may
	// keep open at once.
	originsUpstreamIdle = 1024 + 64
)

func benchOriginsRSS(b *testing.B, body []byte, holdsAll bool) {
	// This process: a listener per origin, its ends of the connections
	// robotsgate keeps to origins and of those under way, and the
	// crawler's. robotsgate: the connections it keeps and has under way.
	need := uint64(b.N + originsUpstreamIdle + 4*originsClients + fdMargin)
	proxyNeed := uint64(originsUpstreamIdle + 4*originsClients + fdMargin)
	if limit, err := raiseFileLimit(); err != nil {
		b.Fatal(err)
	} else if limit < need {
		b.Fatalf("%d origins need about %d file descriptors in this process (one listener per origin plus %d for connections) but it may open %d: raise the hard RLIMIT_NOFILE (ulimit -Hn %d, or LimitNOFILE / nofile in limits.conf) or ask for fewer origins (-benchtime %dx)",
			b.N, need, need-uint64(b.N), limit, need, limit-(need-uint64(b.N)))
	}

	// Fetches are counted per origin, by the port the request came in on.
	// Only robotsgate's own count: the ports are the machine's, and another
	// process may ask one of them for a robots.txt (a robotsgate of another
	// test refetching for an origin that had the port before, say).
	fetchUA := "robotsgate-origins-bench/" + strconv.Itoa(os.Getpid()) + "." + strconv.FormatInt(time.Now().UnixNano(), 36)
	served := time.Now()
	var fetches, strays atomic.Int64
	var perOrigin sync.Map // local address -> *originFetches
	length := strconv.Itoa(len(body))
	addrs := serveOrigins(b, b.N, func(w http.ResponseWriter, r *http.Request) {
		ours := r.UserAgent() == fetchUA
		if ours {
			fetches.Add(1)
		} else {
			strays.Add(1)
		}
		if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			f, _ := perOrigin.LoadOrStore(addr.String(), new(originFetches))
			f.(*originFetches).add(ours, fmt.Sprintf("%q from %s at +%v", r.UserAgent(), r.RemoteAddr, time.Since(served).Round(time.Millisecond)))
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", length)
		w.Write(body)
	})

	env := []string{"ROBOTSGATE_FETCH_USER_AGENT=" + fetchUA}
	if holdsAll {
		env = append(env, "ROBOTSGATE_CACHE_MAX_BYTES="+originsBudget)
	}
	p, crawler, metricsClient, start := startMeasured(b, originsClients, proxyNeed, env...)
	b.Logf("robotsgate runs with %s, %s (unset: the runtime's defaults)", childEnv(p, "GOGC"), childEnv(p, "GOMEMLIMIT"))

	h := crawlHalves(b, p, crawler, metricsClient, addrs, fetches.Load)
	after := h.after
	n := float64(b.N)
	delta := func(name string) float64 { return after[name] - start[name] }
	// The cache's index is charged from the start: what the origins add.
	cache := delta("robotsgate_robots_cache_bytes")
	b.ReportMetric(h.fetches[2]/n, "fetches/origin")
	h.report(b, start)
	b.ReportMetric(delta("go_memstats_heap_objects")/n, "objects/origin")
	b.ReportMetric((delta("process_resident_memory_bytes")-2*cache)/n, "not-cache-B/origin")
	b.ReportMetric(after["go_goroutines"], "goroutines")
	b.ReportMetric(delta("process_open_fds"), "fds-added")
	b.Logf("%d origins of %d bytes, %d clients: %s; heap_objects %v -> %v; goroutines %v -> %v; open fds %v -> %v; pace schedules %v; robots.txt requests from other processes %d",
		b.N, len(body), originsClients, h.describe(start),
		start["go_memstats_heap_objects"], after["go_memstats_heap_objects"],
		start["go_goroutines"], after["go_goroutines"], start["process_open_fds"], after["process_open_fds"], after["robotsgate_pace_schedules"], strays.Load())

	if !holdsAll {
		return
	}
	var wrong []string
	for _, addr := range addrs {
		var f *originFetches
		if v, ok := perOrigin.Load(addr); ok {
			f = v.(*originFetches)
		}
		if got := f.count(); got != 1 {
			wrong = append(wrong, fmt.Sprintf("%s: %d (%s)", addr, got, f))
		}
	}
	if total := fetches.Load(); total != int64(b.N) || len(wrong) > 0 {
		b.Fatalf("with a cache budget of %s that holds them all, %d origins saw %d robots.txt fetches (%s; cache %.1f MiB charged, %v evicted), want exactly one each; %d origins differ, first: %s",
			originsBudget, b.N, total, h.fetchCounts(), mib(cache), after["robotsgate_robots_cache_evictions_total"], len(wrong), strings.Join(wrong[:min(len(wrong), 5)], "; "))
	}
}

// halves is what crawlHalves saw.
type halves struct {
	n, second  int                // origins in all, in the second half
	mid, after map[string]float64 // the proxy's settled metrics after each half
	took       [2]time.Duration   // each half's rounds
	// fetches are the robots.txt fetches counted after each half and
	// after the last round over all origins.
	fetches [3]float64
}

// crawlHalves asks for originsPath on every origin of the first half of
// addrs, originsRounds times, through crawler, reads the proxy's settled
// metrics, does the same with the second half, then asks once more on
// every origin (after the reading) so that a first half evicted by the
// second shows in the fetch count. The benchmark's timer runs only during
// the halves' rounds. fetches is the robots.txt fetches counted so far.
//
// Both halves go through the same rounds, so the growth from mid to after
// is what the second half's origins add, the costs that do not grow with
// them (reached in the first half) left out.
func crawlHalves(b *testing.B, p *proxyProcess, crawler, metricsClient *http.Client, addrs []string, fetches func() int64) halves {
	allowed := func(status int) bool { return status == http.StatusOK }
	h := halves{n: len(addrs), second: len(addrs) - len(addrs)/2}
	b.ResetTimer()
	for i, half := range [][]string{addrs[:len(addrs)/2], addrs[len(addrs)/2:]} {
		began := time.Now()
		b.StartTimer()
		for round := 1; round <= originsRounds; round++ {
			if err := crawl(crawler, half, originsPath, allowed, originsClients); err != nil {
				b.Fatalf("half %d, round %d: %v", i+1, round, err)
			}
		}
		b.StopTimer()
		h.took[i] = time.Since(began)
		m, err := settledMetrics(metricsClient, p, 0)
		if err != nil {
			b.Fatal(err)
		}
		h.fetches[i] = float64(fetches())
		if i == 0 {
			h.mid = m
		} else {
			h.after = m
		}
	}
	if err := crawl(crawler, addrs, originsPath, allowed, originsClients); err != nil {
		b.Fatalf("the last round over all origins: %v", err)
	}
	h.fetches[2] = float64(fetches())
	return h
}

// report reports the resident set at start, half and after, and per
// origin the growth of the resident set, the heap in use and the cache's
// charge from start (…-B/origin) and from mid to after (…-slope-B/origin).
func (h halves) report(b *testing.B, start map[string]float64) {
	b.ReportMetric(mib(start["process_resident_memory_bytes"]), "rss-MiB-start")
	b.ReportMetric(mib(h.mid["process_resident_memory_bytes"]), "rss-MiB-half")
	b.ReportMetric(mib(h.after["process_resident_memory_bytes"]), "rss-MiB-after")
	for _, m := range []struct{ metric, unit string }{
		{"process_resident_memory_bytes", "rss"},
		{"go_memstats_heap_inuse_bytes", "heap"},
		{"robotsgate_robots_cache_bytes", "cache"},
	} {
		b.ReportMetric((h.after[m.metric]-start[m.metric])/float64(h.n), m.unit+"-B/origin")
		b.ReportMetric((h.after[m.metric]-h.mid[m.metric])/float64(h.second), m.unit+"-slope-B/origin")
	}
}

// describe is the readings at start, half and after, for the log.
func (h halves) describe(start map[string]float64) string {
	at := func(name string) string {
		return fmt.Sprintf("%.1f -> %.1f -> %.1f MiB", mib(start[name]), mib(h.mid[name]), mib(h.after[name]))
	}
	return fmt.Sprintf("halves of %d and %d origins took %v and %v (%s); cache %s of %.0f MiB (%v evicted); rss %s; heap_inuse %s; heap_alloc %s; next GC at %s; stack_inuse %s; heap_released %.1f MiB; sys %.1f MiB; gcs %v and %v",
		h.n-h.second, h.second, h.took[0].Round(time.Millisecond), h.took[1].Round(time.Millisecond), h.fetchCounts(),
		at("robotsgate_robots_cache_bytes"), mib(h.after["robotsgate_robots_cache_budget_bytes"]), h.after["robotsgate_robots_cache_evictions_total"],
		at("process_resident_memory_bytes"), at("go_memstats_heap_inuse_bytes"), at("go_memstats_heap_alloc_bytes"),
		at("go_memstats_next_gc_bytes"), at("go_memstats_stack_inuse_bytes"),
		mib(h.after["go_memstats_heap_released_bytes"]), mib(h.after["go_memstats_sys_bytes"]),
		h.mid["go_gc_duration_seconds_count"]-start["go_gc_duration_seconds_count"], h.after["go_gc_duration_seconds_count"]-h.mid["go_gc_duration_seconds_count"])
}

// fetchCounts is the robots.txt fetches in each part of the crawl.
func (h halves) fetchCounts() string {
	return fmt.Sprintf("robots.txt fetches: %v in the first half, %v in the second, %v in the last round", h.fetches[0], h.fetches[1]-h.fetches[0], h.fetches[2]-h.fetches[1])
}

// originFetches are the robots.txt requests one origin received.
type originFetches struct {
	mu   sync.Mutex
	ours int      // from the robotsgate under test
	seen []string // every request, described
}

func (f *originFetches) add(ours bool, desc string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ours {
		f.ours++
	}
	f.seen = append(f.seen, desc)
}

// count is the fetches from the robotsgate under test; none for a nil f.
func (f *originFetches) count() int {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ours
}

func (f *originFetches) String() string {
	if f == nil {
		return "no request"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.seen, ", ")
}

// childEnv is the last NAME=value robotsgate was started with, or
// "NAME unset".
func childEnv(p *proxyProcess, name string) string {
	for i := len(p.cmd.Env) - 1; i >= 0; i-- {
		if strings.HasPrefix(p.cmd.Env[i], name+"=") {
			return p.cmd.Env[i]
		}
	}
	return name + " unset"
}
