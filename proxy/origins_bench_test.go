package proxy

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"robotsgate/cache"
	"robotsgate/cache/cachetest"
	"robotsgate/proxy/destination"
	"robotsgate/proxy/pace"
	"robotsgate/robots/fetch"
)

// originsHeapProfile, when set, is where BenchmarkProxyBytesPerOrigin
// writes the heap profile of each run once its origins are done, as
// heap-<sub-benchmark>-<origins>.pprof.
var originsHeapProfile = flag.String("origins.heapprofile", "", "directory for BenchmarkProxyBytesPerOrigin's heap profiles (heap-<sub>-<N>.pprof)")

// Bounds of BenchmarkProxyBytesPerOrigin.
const (
	// originsMin is the fewest origins a run visits: the calibration runs
	// of the default -benchtime would say little.
	originsMin = 1000
	// originsClients crawl at once, each over one keep-alive connection.
	originsClients = 4
	// originsBudget holds every origin at 100,000 and more.
	originsBudget = 8 << 30
	// originsRobots is the corpus file nearest issue 29's 2.2 KB of 82
	// rules (2,143 bytes, 77 rules), the one robots/fetch's
	// BenchmarkBytesPerOrigin picks for its 2.2KB-82rules.
	originsRobots = "../robots/testdata/corpus/stackoverflow.com.txt"
	// originsPage is what the upstream answers for any page.
	originsPage = "page\n"
)

// originsURL is the i-th origin's page: "http://127.A.B.C/page", never
// resolved.
func originsURL(i int) string { return "http://" + cachetest.Host(i) + "/page" }

// BenchmarkProxyBytesPerOrigin measures the whole proxy's memory per
// origin: a Server whose upstream proxy (which its robots.txt fetcher goes
// through too) is one local server answering robots.txt with
// stackoverflow.com.txt and any page with a few bytes, and originsClients
// crawlers (GPTBot, keep-alive) asking for one page on each of b.N
// distinct origins (at least originsMin; use -benchtime 10000x). After two
// GCs it reports per origin the live heap grown (heap-B/origin), split by
// owner from the heap profile (<owner>-B/origin: rules, fetch, cache,
// pace, verdicts, conns, proxy, other; see heapOwner), the goroutine
// stacks grown (stacks-B/origin), the heap objects, what the rules cache
// charged, and the resident memory grown before the GCs (rss-B/origin,
// Linux). The owners are estimates from the sampled profile: run with
// -test.memprofilerate=4096 for 1,000 origins.
//
// cached holds every robots.txt (an 8 GiB budget), as the proxy does
// while its budget holds them; paced also keeps a pace schedule per
// origin (a default crawl delay of 1s, which stackoverflow.com.txt does
// not ask); default-budget runs with the default 64 MiB budget, which
// evicts: what grows past it is what the budget does not bound.
func BenchmarkProxyBytesPerOrigin(b *testing.B) {
	robotsTxt, err := os.ReadFile(originsRobots)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		budget int64
		policy pace.Policy
	}{
		{"cached", originsBudget, pace.Policy{Max: time.Minute}},
		{"paced", originsBudget, pace.Policy{Default: time.Second, Max: time.Minute}},
		{"default-budget", cache.DefaultMaxBytes, pace.Policy{Max: time.Minute}},
	} {
		b.Run(c.name, func(b *testing.B) { benchmarkProxyOrigins(b, c.name, robotsTxt, c.budget, c.policy) })
	}
}

func benchmarkProxyOrigins(b *testing.B, name string, robotsTxt []byte, budget int64, policy pace.Policy) {
	n := max(b.N, originsMin)
	var robotsFetches atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if r.URL.Path == "/robots.txt" {
			robotsFetches.Add(1)
			w.Write(robotsTxt)
			return
		}
		io.WriteString(w, originsPage)
	}))
	defer upstream.Close()
	upstreamURL, err := url.Parse(upstream.URL)
	if err != nil {
		b.Fatal(err)
	}
	p := newTestServer(b, proxyConfig{
		upstream: upstreamURL,
		// The binary's default ROBOTSGATE_DENY_DESTINATIONS, which lets
		// 127.0.0.0/8 through.
		destinations: destination.New([]netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10"),
			netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("::/128")}),
		audit:      io.Discard, // a buffer would grow by a record per origin
		pacer:      pace.New(pace.Options{MaxWait: time.Minute, MaxSchedulesPerClient: 65536}),
		pacePolicy: policy,
		paceGroups: pace.NewGrouper(pace.GrouperOptions{}),
	})
	if budget != cache.DefaultMaxBytes {
		// The rules cache newTestServer made has the default budget: this
		// one, over a fetcher like its own, replaces it before any request.
		f := fetch.New(fetch.Options{UserAgent: "robotsgate-test", Timeout: testTimeout, ConnectTimeout: testTimeout, UpstreamProxy: upstreamURL,
			DialControl: p.srv.opts.Destinations.Control})
		b.Cleanup(f.Close)
		opts := cache.DefaultOptions()
		opts.MaxBytes, opts.MetricsPrefix = budget, RulesMetricsPrefix
		rules, err := cache.New(opts, f.Load)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(rules.Close)
		p.rules, p.srv.opts.Rules = rules, rules
	}
	serveOrigins(b, p)

	clients := make([]*http.Client, originsClients)
	for i := range clients {
		tr := &http.Transport{Proxy: http.ProxyURL(p.url), DisableCompression: true}
		b.Cleanup(tr.CloseIdleConnections)
		clients[i] = &http.Client{Transport: tr, Timeout: testTimeout}
		// Each client's connection, and the proxy's to the upstream, is
		// open before the count starts: on origins outside the range.
		if _, err := originsGet(clients[i], "http://127.255.255."+strconv.Itoa(254-i)+"/page"); err != nil {
			b.Fatal(err)
		}
	}
	fetchesBefore := robotsFetches.Load()
	// The cache's index is charged from the start: only what the
	// origins add counts.
	costBefore := p.rules.Stats().CostBytes
	before := takeOriginsMemory()

	b.ResetTimer()
	start := time.Now()
	var statuses sync.Map // status → *atomic.Int64
	err = cachetest.Each(len(clients), n, func(w, i int) error {
		status, err := originsGet(clients[w], originsURL(i))
		if err != nil {
			return err
		}
		count, _ := statuses.LoadOrStore(status, new(atomic.Int64))
		count.(*atomic.Int64).Add(1)
		return nil
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	rssAfter, rssOK := cachetest.ResidentBytes()
	after := takeOriginsMemory()
	if *originsHeapProfile != "" {
		cachetest.WriteHeapProfile(b, *originsHeapProfile, "proxy-"+name, n)
	}

	var answered []string
	statuses.Range(func(k, v any) bool {
		answered = append(answered, fmt.Sprintf("%d: %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	if fetches := robotsFetches.Load() - fetchesBefore; fetches != int64(n) {
		b.Fatalf("%d robots.txt fetches for %d origins (answers %v); want one each", fetches, n, answered)
	}
	s := p.rules.Stats()
	if budget != cache.DefaultMaxBytes && (s.Evictions != 0 || s.Uncacheable != 0) {
		b.Fatalf("%d evicted, %d uncacheable; want every origin kept", s.Evictions, s.Uncacheable)
	}
	runtime.KeepAlive(p)

	per := func(v float64) float64 { return v / float64(n) }
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(per(float64(int64(after.stats.HeapAlloc)-int64(before.stats.HeapAlloc))), "heap-B/origin")
	b.ReportMetric(per(float64(int64(after.stats.HeapObjects)-int64(before.stats.HeapObjects))), "objects/origin")
	b.ReportMetric(per(float64(int64(after.stats.StackInuse)-int64(before.stats.StackInuse))), "stacks-B/origin")
	b.ReportMetric(per(float64(s.CostBytes-costBefore)), "charged-B/origin")
	b.ReportMetric(float64(len(robotsTxt)), "file-B")
	if rssOK {
		b.ReportMetric(per(float64(rssAfter-before.rss)), "rss-B/origin")
	}
	if after.owners != nil {
		for _, o := range heapOwnerNames {
			b.ReportMetric(per(after.owners[o]-before.owners[o]), o+"-B/origin")
		}
	}
	b.Logf("%d origins: answers %v; %d goroutines grown; %d bytes of the proxy's log", n, answered, after.goroutines-before.goroutines, len(p.logs.String()))
	if testing.Verbose() {
		b.Logf("largest growth of other, by allocating function:\n%s", topOtherGrowth(before.other, after.other, n))
	}
}

// serveOrigins serves p on a 127.0.0.1 port, as startProxy does once the
// Server is built.
func serveOrigins(b *testing.B, p *testProxy) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	p.ln = newNotifyListener(ln)
	p.addr = ln.Addr().String()
	p.url = &url.URL{Scheme: "http", Host: p.addr}
	go func() { p.served <- p.srv.Serve(p.ln) }()
	b.Cleanup(func() { p.shutdown(context.Background()) })
}

// originsGet asks for target through c and reads the answer: the page
// (200) or the proxy's refusal (403); anything else is an error.
func originsGet(c *http.Client, target string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", gptbotUA)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("GET %s: reading the body: %w", target, err)
	}
	if resp.StatusCode == http.StatusOK && string(body) != originsPage || resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusForbidden {
		return 0, fmt.Errorf("GET %s: %d %q; want the page or a 403", target, resp.StatusCode, body)
	}
	return resp.StatusCode, nil
}

// originsMemory is the process's memory at one moment, after two GCs.
type originsMemory struct {
	stats      runtime.MemStats
	rss        int64
	goroutines int
	// owners is the live heap by owner (see heapOwner), other the part of
	// "other" by allocating function; nil while the heap is not profiled.
	owners, other map[string]float64
}

// takeOriginsMemory collects garbage twice, so that the heap holds only
// what is live and its profile says so, then reads it.
func takeOriginsMemory() originsMemory {
	runtime.GC()
	runtime.GC()
	var m originsMemory
	runtime.ReadMemStats(&m.stats)
	m.rss, _ = cachetest.ResidentBytes()
	m.goroutines = runtime.NumGoroutine()
	m.owners, m.other = heapByOwner()
	return m
}

// heapOwnerNames are the owners heapOwner names, in the order reported.
var heapOwnerNames = []string{"rules", "fetch", "cache", "pace", "verdicts", "mitm", "conns", "proxy", "other"}

// heapOwner names who keeps an allocation, from the first function of its
// stack, leaf first, outside the runtime and the standard library's
// generic helpers:
//   - rules: the parsed robots.txt (robotsgate/robots, robots/usage);
//   - fetch: fetch.Result and what the fetcher keeps (robots/fetch);
//   - cache: the cache entry and index (robotsgate/cache, ristretto,
//     singleflight);
//   - pace: pace schedules and groups (proxy/pace);
//   - verdicts: destination and egress verdicts (proxy/destination,
//     proxy/egress);
//   - mitm: leaf certificates (proxy/mitm);
//   - conns: connections and their buffers (net, net/http, bufio, x/net;
//     not net/url nor net/netip, whose values belong to their caller);
//   - proxy: the rest of robotsgate's proxy and goproxy;
//   - other: anything else.
func heapOwner(stack []uintptr) (owner, function string) {
	frames := runtime.CallersFrames(stack)
	for {
		f, more := frames.Next()
		pkg := packageOf(f.Function)
		switch {
		case pkg == "robotsgate/robots" || pkg == "robotsgate/robots/usage":
			return "rules", f.Function
		case pkg == "robotsgate/robots/fetch":
			return "fetch", f.Function
		case pkg == "robotsgate/cache" || strings.HasPrefix(pkg, "robotsgate/cache/") ||
			strings.HasPrefix(pkg, "github.com/dgraph-io/ristretto") || pkg == "golang.org/x/sync/singleflight":
			return "cache", f.Function
		case pkg == "robotsgate/proxy/pace":
			return "pace", f.Function
		case pkg == "robotsgate/proxy/destination" || pkg == "robotsgate/proxy/egress":
			return "verdicts", f.Function
		case pkg == "robotsgate/proxy/mitm":
			return "mitm", f.Function
		case pkg == "net" || strings.HasPrefix(pkg, "net/http") || pkg == "net/textproto" || pkg == "bufio" ||
			strings.Contains(pkg, "golang.org/x/net/"):
			return "conns", f.Function
		case strings.HasPrefix(pkg, "robotsgate/proxy") || strings.HasPrefix(pkg, "github.com/elazarl/goproxy"):
			return "proxy", f.Function
		case pkg != "" && !transparentPackage(pkg):
			return "other", f.Function
		}
		if !more {
			return "other", f.Function
		}
	}
}

// transparentPackage reports a package whose allocations belong to its
// caller: the runtime and generic helpers.
func transparentPackage(pkg string) bool {
	switch pkg {
	case "runtime", "strings", "bytes", "slices", "maps", "sync", "sync/atomic", "strconv", "sort", "errors",
		"fmt", "reflect", "time", "context", "unique", "weak", "io", "iter", "hash/maphash", "encoding/binary",
		"net/url", "net/netip":
		return true
	}
	return strings.HasPrefix(pkg, "internal/") || strings.HasPrefix(pkg, "runtime/") ||
		strings.HasPrefix(pkg, "unicode") || strings.HasPrefix(pkg, "math") || strings.HasPrefix(pkg, "crypto/")
}

// packageOf is the import path of a function's name as the runtime gives
// it ("robotsgate/robots.(*builder).finish" → "robotsgate/robots").
func packageOf(function string) string {
	name := function
	if i := strings.IndexAny(name, "[("); i >= 0 {
		name = name[:i] // type arguments and receivers may hold slashes and dots
	}
	slash := strings.LastIndexByte(name, '/')
	if dot := strings.IndexByte(name[slash+1:], '.'); dot >= 0 {
		return function[:slash+1+dot]
	}
	return name
}

// heapByOwner groups the live heap of the last GC's profile by owner, and
// the "other" part by allocating function, each sample scaled back to an
// estimate of all it stands for, as pprof does. nil, nil when the heap is
// not profiled.
func heapByOwner() (owners, other map[string]float64) {
	rate := float64(runtime.MemProfileRate)
	if rate <= 0 {
		return nil, nil
	}
	var records []runtime.MemProfileRecord
	for n, ok := runtime.MemProfile(nil, false); !ok; {
		records = make([]runtime.MemProfileRecord, n+n/4+16)
		n, ok = runtime.MemProfile(records, false)
		records = records[:n]
	}
	owners, other = make(map[string]float64), make(map[string]float64)
	for _, r := range records {
		inuse := float64(r.InUseBytes())
		if inuse <= 0 || r.AllocObjects == 0 {
			continue
		}
		avg := float64(r.AllocBytes) / float64(r.AllocObjects)
		bytes := inuse / (1 - math.Exp(-avg/rate))
		owner, function := heapOwner(r.Stack())
		owners[owner] += bytes
		if owner == "other" {
			other[function] += bytes
		}
	}
	return owners, other
}

// topOtherGrowth lists the functions whose "other" heap grew most, per
// origin.
func topOtherGrowth(before, after map[string]float64, n int) string {
	type growth struct {
		function  string
		perOrigin float64
	}
	var gs []growth
	for f, v := range after {
		gs = append(gs, growth{f, (v - before[f]) / float64(n)})
	}
	slices.SortFunc(gs, func(a, b growth) int { return cmp.Compare(b.perOrigin, a.perOrigin) })
	var out strings.Builder
	for _, g := range gs[:min(len(gs), 10)] {
		fmt.Fprintf(&out, "%10.1f B/origin  %s\n", g.perOrigin, g.function)
	}
	return out.String()
}

// TestHeapOwner: allocations are charged to the first owner on their
// stack, leaf first, past the runtime and generic helpers.
func TestHeapOwner(t *testing.T) {
	for _, c := range []struct{ function, pkg string }{
		{"robotsgate/robots.(*builder).finish", "robotsgate/robots"},
		{"robotsgate/robots/fetch.(*Fetcher).Load", "robotsgate/robots/fetch"},
		{"github.com/dgraph-io/ristretto/v2.newCmRow", "github.com/dgraph-io/ristretto/v2"},
		{"robotsgate/cache.(*Cache[go.shape.*uint8]).store", "robotsgate/cache"},
		{"net/http.(*Transport).dialConn", "net/http"},
		{"net/url.(*URL).String", "net/url"},
		{"runtime.malg", "runtime"},
		{"main.main.func1", "main"},
	} {
		if got := packageOf(c.function); got != c.pkg {
			t.Errorf("packageOf(%q) = %q, want %q", c.function, got, c.pkg)
		}
	}
	// This test's own stack, from this function up: package proxy.
	var stack [32]uintptr
	n := runtime.Callers(1, stack[:])
	if owner, function := heapOwner(stack[:n]); owner != "proxy" || !strings.HasSuffix(function, "TestHeapOwner") {
		t.Errorf("heapOwner of a stack in package proxy = %s, %s; want proxy, TestHeapOwner", owner, function)
	}
	if owner, _ := heapOwner(nil); owner != "other" {
		t.Errorf("heapOwner of no stack = %s, want other", owner)
	}
	if got := originsURL(0x10203 - 1); got != "http://127.1.2.3/page" {
		t.Errorf("originsURL(0x10202) = %s, want http://127.1.2.3/page", got)
	}
}
