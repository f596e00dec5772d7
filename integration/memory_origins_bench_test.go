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
// clients ask through the proxy for that page on every origin, one round,
// then two more.
//
//   - budget-holds-all: ROBOTSGATE_CACHE_MAX_BYTES=originsBudget holds
//     every file, so each origin must see exactly one robots.txt fetch in
//     the three rounds; the benchmark fails otherwise;
//   - default-budget: the default 64 MiB holds a few thousand of them, and
//     the rest are evicted and fetched again, as designed (informative).
//
// It reads the proxy's /metrics after a warm-up request (start), after
// round 1 and after round 3, each time once the proxy's goroutine count
// has settled, and reports: the robots.txt fetches per origin, counted at
// the origins (fetches/origin); the resident set at those three points
// (rss-MiB-start, rss-MiB-round1, rss-MiB-after) and its growth per
// origin from start to after (rss-B/origin); the growth of the heap in
// use and of the heap objects per origin (heap-B/origin,
// objects/origin); the bytes charged to the cache per origin, its index
// (charged from the start) left out
// (cache-B/origin); the growth not explained by the cache, the resident
// growth less twice the cache's charge (with GOGC=100 the heap is about
// twice what is live), per origin (not-cache-B/origin); the proxy's
// goroutines after (goroutines); and the file descriptors it opened
// beyond start (fds-added: idle connections to origins, at most
// ROBOTSGATE_UPSTREAM_IDLE_CONNS for pages plus the robots.txt fetcher's
// own few, and the crawler's connections). No GC is forced in the proxy,
// so the heap includes garbage, as it does in service. GOGC and
// GOMEMLIMIT, when set in the benchmark's environment, reach the proxy
// (cleanEnv keeps them). ns/op is the time of the three rounds per origin.
//
// b.N is the number of origins; the figures are for 10,000 and
// 15,000:
//
//	go test ./integration -run '^$' -bench '^BenchmarkOriginsRSS$' -benchtime 10000x -timeout 60m
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
	// originsRounds is how many times the crawl goes through all origins.
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
	allowed := func(status int) bool { return status == http.StatusOK }

	began := time.Now()
	b.ResetTimer()
	if err := crawl(crawler, addrs, originsPath, allowed, originsClients); err != nil {
		b.Fatalf("round 1: %v", err)
	}
	b.StopTimer()
	round1Took := time.Since(began)
	round1, err := settledMetrics(metricsClient, p, 0)
	if err != nil {
		b.Fatal(err)
	}
	round1Fetches := fetches.Load()

	began = time.Now()
	b.StartTimer()
	for round := 2; round <= originsRounds; round++ {
		if err := crawl(crawler, addrs, originsPath, allowed, originsClients); err != nil {
			b.Fatalf("round %d: %v", round, err)
		}
	}
	b.StopTimer()
	laterTook := time.Since(began)
	after, err := settledMetrics(metricsClient, p, 0)
	if err != nil {
		b.Fatal(err)
	}

	n := float64(b.N)
	total := fetches.Load()
	delta := func(name string) float64 { return after[name] - start[name] }
	// The cache's index is charged from the start: what the origins add.
	cache := delta("robotsgate_robots_cache_bytes")
	rssGrowth := delta("process_resident_memory_bytes")
	b.ReportMetric(float64(total)/n, "fetches/origin")
	b.ReportMetric(mib(start["process_resident_memory_bytes"]), "rss-MiB-start")
	b.ReportMetric(mib(round1["process_resident_memory_bytes"]), "rss-MiB-round1")
	b.ReportMetric(mib(after["process_resident_memory_bytes"]), "rss-MiB-after")
	b.ReportMetric(rssGrowth/n, "rss-B/origin")
	b.ReportMetric(delta("go_memstats_heap_inuse_bytes")/n, "heap-B/origin")
	b.ReportMetric(delta("go_memstats_heap_objects")/n, "objects/origin")
	b.ReportMetric(cache/n, "cache-B/origin")
	b.ReportMetric((rssGrowth-2*cache)/n, "not-cache-B/origin")
	b.ReportMetric(after["go_goroutines"], "goroutines")
	b.ReportMetric(delta("process_open_fds"), "fds-added")
	b.Logf("%d origins of %d bytes, %d clients: round 1 took %v (%d fetches), rounds 2-%d %v (%d fetches); cache %.1f MiB of %.0f MiB (%v evicted); "+
		"rss %.1f -> %.1f -> %.1f MiB; heap_inuse %.1f -> %.1f -> %.1f MiB; heap_alloc %.1f MiB; heap_objects %v -> %v; next GC at %.1f MiB; heap_idle %.1f MiB, heap_released %.1f MiB; stack_inuse %.1f MiB; sys %.1f MiB; gcs %v; "+
		"goroutines %v -> %v; open fds %v -> %v; pace schedules %v; robots.txt requests from other processes %d",
		b.N, len(body), originsClients, round1Took.Round(time.Millisecond), round1Fetches, originsRounds, laterTook.Round(time.Millisecond), total-round1Fetches,
		mib(cache), mib(after["robotsgate_robots_cache_budget_bytes"]), after["robotsgate_robots_cache_evictions_total"],
		mib(start["process_resident_memory_bytes"]), mib(round1["process_resident_memory_bytes"]), mib(after["process_resident_memory_bytes"]),
		mib(start["go_memstats_heap_inuse_bytes"]), mib(round1["go_memstats_heap_inuse_bytes"]), mib(after["go_memstats_heap_inuse_bytes"]),
		mib(after["go_memstats_heap_alloc_bytes"]), start["go_memstats_heap_objects"], after["go_memstats_heap_objects"],
		mib(after["go_memstats_next_gc_bytes"]), mib(after["go_memstats_heap_idle_bytes"]), mib(after["go_memstats_heap_released_bytes"]),
		mib(after["go_memstats_stack_inuse_bytes"]), mib(after["go_memstats_sys_bytes"]),
		after["go_gc_duration_seconds_count"]-start["go_gc_duration_seconds_count"],
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
	if total != int64(b.N) || len(wrong) > 0 {
		b.Fatalf("with a cache budget of %s that holds them all, %d origins saw %d robots.txt fetches in %d rounds (%d in round 1; cache %.1f MiB charged, %v evicted), want exactly one each; %d origins differ, first: %s",
			originsBudget, b.N, total, originsRounds, round1Fetches, mib(cache), after["robotsgate_robots_cache_evictions_total"], len(wrong), strings.Join(wrong[:min(len(wrong), 5)], "; "))
	}
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
