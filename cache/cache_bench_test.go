package cache

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkLookupHit measures Get of a cached key from all cores at once.
func BenchmarkLookupHit(b *testing.B) {
	value := make([]byte, 2048)
	c, err := New(DefaultOptions(), func(context.Context, string) Result[[]byte] {
		return Result[[]byte]{Value: value, Cost: int64(len(value))}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const key = "https://www.example.com:443"
	if _, _, err := c.Get(ctx, key); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, info, err := c.Get(ctx, key)
			if err != nil || info.Source != SourceHit {
				b.Errorf("Get = %v, %v; want a hit", info.Source, err)
				return
			}
		}
	})
	b.StopTimer()
	if loads := c.Stats().Loads["ok"]; loads != 1 {
		b.Fatalf("%d loads, want 1", loads)
	}
}

// BenchmarkEntryOverhead measures the heap one cached entry holds beyond its
// Result.Cost (zero here) and reports it as bytes/entry, to check the
// entryOverhead constant charged per entry. Ristretto files entries with a
// TTL in 5-second expiry buckets (small maps), so the figure depends on how
// many entries share a bucket: "shared-bucket" loads everything with the
// same expiry, "own-bucket" gives every entry an expiry 5 s after the
// previous one, the worst case.
func BenchmarkEntryOverhead(b *testing.B) {
	b.Run("shared-bucket", func(b *testing.B) {
		opts := DefaultOptions()
		opts.MaxBytes = 1 << 30
		benchmarkEntryOverhead(b, opts, func(int) time.Duration { return 0 })
	})
	b.Run("own-bucket", func(b *testing.B) {
		opts := DefaultOptions()
		opts.MaxBytes, opts.MaxAge, opts.MaxStale = 1<<30, 24*365*time.Hour, time.Nanosecond
		benchmarkEntryOverhead(b, opts, func(i int) time.Duration { return time.Hour + time.Duration(i)*5*time.Second })
	})
}

func benchmarkEntryOverhead(b *testing.B, opts Options, maxAge func(i int) time.Duration) {
	const entries = 50_000
	keys := make([]string, entries)
	ages := make(map[string]time.Duration, entries)
	for i := range keys {
		keys[i] = fmt.Sprintf("https://host-%06d.example.com:443", i)
		ages[keys[i]] = maxAge(i)
	}
	load := func(_ context.Context, key string) Result[int] {
		return Result[int]{Value: 1, MaxAge: ages[key]}
	}
	ctx := context.Background()
	var perEntry float64
	for range b.N {
		c, err := New(opts, load)
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		// Twice: a closed cache's memory stays reachable from its sync.Pool
		// until the pool's victim cache is dropped by a second collection.
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, k := range keys {
			if _, _, err := c.Get(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if s := c.Stats(); s.Rejections != 0 || s.Evictions != 0 || s.CostBytes != entries*entryOverhead {
			b.Fatalf("entries left ristretto: %+v", s)
		}
		perEntry += float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / entries
		for _, k := range keys[:10] { // the entries must still be there
			if _, info, _ := c.Get(ctx, k); info.Source != SourceHit {
				b.Fatalf("%s: %v, want hit", k, info.Source)
			}
		}
		c.Close()
	}
	runtime.KeepAlive(keys)
	b.ReportMetric(perEntry/float64(b.N), "bytes/entry")
	b.ReportMetric(entryOverhead, "charged-bytes/entry")
}

// BenchmarkAdmissionWindow measures the admission window alone, sized as in
// a default cache and full of typical entries: get of a held key, and put
// of a new key, which evicts the least recently used one.
func BenchmarkAdmissionWindow(b *testing.B) {
	const (
		maxBytes = DefaultMaxBytes / windowDivisor
		cost     = typicalEntryBytes + entryOverhead
		held     = int(maxBytes / cost)
	)
	keys := make([]string, 2*held)
	for i := range keys {
		keys[i] = fmt.Sprintf("https://host-%06d.example.com:443", i)
	}
	now := int64(time.Minute) // a reading of a cache's clock
	e := &entry[int]{cost: cost, keepUntil: now + int64(time.Hour)}
	fill := func(b *testing.B) *admissionWindow[int] {
		w, err := newAdmissionWindow[int](maxBytes)
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range keys[:held] {
			w.put(k, e)
		}
		return w
	}
	b.Run("get", func(b *testing.B) {
		w := fill(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if w.get(keys[i%held], now) == nil {
				b.Fatal("held key not found")
			}
			i++
		}
	})
	b.Run("put-evict", func(b *testing.B) {
		w := fill(b)
		b.ReportAllocs()
		i := held
		for b.Loop() {
			w.put(keys[i%len(keys)], e) // a key evicted held puts ago
			i++
		}
		if w.evictions.Load() == 0 {
			b.Fatal("no put evicted")
		}
	})
}

// BenchmarkSharedHit measures a Get that misses memory and finds a fresh
// entry in the second level: an in-memory Store, so this is the cache's own
// work (a Store Get, decoding, keeping the entry in memory, serving it)
// without the network a real Store adds. Every Get is of a key the cache
// has not held yet.
func BenchmarkSharedHit(b *testing.B) {
	const keys = 1 << 13
	store := newMemStore()
	value := encode(strings.Repeat("x", 2048))
	now := time.Now()
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("https://host-%06d.example.com:443", i)
		store.entries[names[i]] = memEntry{
			e: SharedEntry{Value: value, Outcome: "ok", LastOutcome: "ok",
				LoadedAt: now, ExpiresAt: now.Add(time.Hour), GoodAt: now},
			until: now.Add(time.Hour),
		}
	}
	second := SecondLevel[string]{Store: store, Decode: decodeValue, ClaimTTL: time.Minute}
	fresh := func() *Cache[string] {
		c, err := NewShared(DefaultOptions(), func(context.Context, string) Result[string] {
			b.Error("loaded, want every value from the store")
			return Result[string]{}
		}, second)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	c := fresh()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%keys == 0 && i > 0 { // every key is in memory now
			b.StopTimer()
			c.Close()
			c = fresh()
			b.StartTimer()
		}
		if _, info, err := c.Get(ctx, names[i%keys]); err != nil || info.Source != SourceShared {
			b.Fatalf("Get = %v, %v; want a shared hit", info.Source, err)
		}
	}
	b.StopTimer()
	c.Close()
}

// TestIndexBytes: IndexBytes is the heap a Cache allocates when it is
// made, whatever the budget, within 5% (plus ristretto's small fixed
// structures).
func TestIndexBytes(t *testing.T) {
	for _, maxBytes := range []int64{MinMaxBytes, 64 << 20, 1 << 30} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&before)
		opts := DefaultOptions()
		opts.MaxBytes = maxBytes
		c, err := New(opts, func(context.Context, string) Result[int] { return Result[int]{} })
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		got := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		want := IndexBytes(maxBytes)
		if got < want || float64(got) > 1.05*float64(want)+512<<10 {
			t.Errorf("MaxBytes %d: a new cache holds %d bytes, IndexBytes says %d", maxBytes, got, want)
		}
		t.Logf("MaxBytes %d MiB: %d bytes held, IndexBytes %d (%.1f KiB per MiB)", maxBytes>>20, got, want, float64(want)/1024/float64(maxBytes>>20))
		runtime.KeepAlive(c)
		c.Close()
	}
}
