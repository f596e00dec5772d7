package fetch

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"unsafe"

	"robotsgate/cache"
	"robotsgate/robots"
)

// originCost is what n distinct origins cost once fetched and cached.
type originCost struct {
	// heap and objects are the live heap bytes and objects per origin,
	// after two collections.
	heap, objects float64
	// charged is Stats.CostBytes per origin: what the budget is charged.
	charged float64
	// rules is Robots.RetainedBytes of one origin's rules, result the rest
	// of Result.RetainedBytes.
	rules, result int64
}

// measureOrigins loads n distinct origins ("http://127.A.B.C"), each
// serving body, through a real Fetcher and a real cache with a budget
// large enough for all, as the proxy does (cache.New(opts, f.Load)); one
// local server answers them all as the Fetcher's upstream proxy. What the
// cache and Fetcher hold before the first origin (ristretto's sketch,
// connections) is not counted.
func measureOrigins(t *testing.T, body []byte, n int) originCost {
	t.Helper()
	srv := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	})
	proxyURL, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	f := New(Options{UpstreamProxy: proxyURL})
	defer f.Close()
	opts := cache.DefaultOptions()
	opts.MaxBytes = 8 << 30
	c, err := cache.New(opts, f.Load)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	origin := func(i int) string { return fmt.Sprintf("http://127.%d.%d.%d", i>>16&255, i>>8&255, i&255) }
	get := func(i int) *Result {
		res, _, err := c.Get(context.Background(), origin(i))
		if err != nil || res.Outcome != robots.OutcomeOK {
			t.Fatalf("%s: %v, %v", origin(i), res.Outcome, err)
		}
		return res
	}
	// The first fetch opens the connection and fills the pools.
	const warm = 64
	for i := range warm {
		get(i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	costBefore := c.Stats().CostBytes
	for i := warm; i < warm+n; i++ {
		get(i)
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if path := os.Getenv("ROBOTSGATE_HEAP_PROFILE"); path != "" {
		writeHeapProfile(t, path)
	}
	s := c.Stats()
	if s.Evictions != 0 || s.Rejections != 0 {
		t.Fatalf("entries left the cache: %+v", s)
	}
	res := get(warm) // still held: a hit
	rules := res.Robots.RetainedBytes()
	return originCost{
		heap:    float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n),
		objects: float64(int64(after.HeapObjects)-int64(before.HeapObjects)) / float64(n),
		charged: float64(s.CostBytes-costBefore) / float64(n),
		rules:   rules,
		result:  res.RetainedBytes() - rules,
	}
}

// TestCacheChargesWhatOriginsCost: what the cache charges an origin
// against its budget, Result.RetainedBytes plus its own overhead, is
// within 15% of the live heap the origin really holds, fetched and cached
// as the proxy does, for typical robots.txt files.
func TestCacheChargesWhatOriginsCost(t *testing.T) {
	for _, file := range []string{"www.ebay.com.txt", "stackoverflow.com.txt"} {
		t.Run(file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("..", "testdata", "corpus", file))
			if err != nil {
				t.Fatal(err)
			}
			m := measureOrigins(t, body, 5000)
			t.Logf("%d bytes: %.0f B live heap and %.1f objects per origin, %.0f B charged (rules %d, rest of the result %d)",
				len(body), m.heap, m.objects, m.charged, m.rules, m.result)
			if ratio := m.charged / m.heap; ratio < 0.85 || ratio > 1.15 {
				t.Errorf("charged %.0f B per origin for %.0f B of live heap (%.2f), want within 15%%", m.charged, m.heap, ratio)
			}
		})
	}
}

// TestResultSize: what a cache keeps of every origin beside its rules
// stays in the 112-byte size class: what only Load uses is a Timing, kept
// beside the Result.
func TestResultSize(t *testing.T) {
	if size := unsafe.Sizeof(Result{}); allocSize(int(size)) > 112 {
		t.Errorf("Result is %d bytes, in the %d-byte size class; want 112 at most", size, allocSize(int(size)))
	}
}

// writeHeapProfile writes a heap profile to path, for
// "go tool pprof -sample_index=inuse_space" to say where the bytes of the
// origins measured go (set ROBOTSGATE_HEAP_PROFILE to get one).
func writeHeapProfile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Fatal(err)
	}
}
