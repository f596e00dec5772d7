package cache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dgraph-io/ristretto/v2"
)

// origin is a LoadFunc for tests: it returns the Result set with answer
// (its Value, when empty, becomes "<key>#<call number>" so a test can tell
// which load produced a value) and counts calls per key.
type origin struct {
	mu     sync.Mutex
	calls  map[string]int
	result Result[string]
}

func newOrigin(r Result[string]) *origin {
	return &origin{calls: make(map[string]int), result: r}
}

func (o *origin) load(_ context.Context, key string) Result[string] {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls[key]++
	r := o.result
	if r.Value == "" {
		r.Value = fmt.Sprintf("%s#%d", key, o.calls[key])
	}
	return r
}

func (o *origin) answer(r Result[string]) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.result = r
}

func (o *origin) count(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.calls[key]
}

// withOptions returns DefaultOptions changed by mod.
func withOptions(mod func(*Options)) Options {
	o := DefaultOptions()
	mod(&o)
	return o
}

func newCache(t *testing.T, opts Options, load LoadFunc[string]) *Cache[string] {
	t.Helper()
	c, err := New(opts, load)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// get calls c.Get and fails the test on error or on a value or source other
// than wanted (an empty wantValue is not checked).
func get(t *testing.T, c *Cache[string], key, wantValue string, wantSource Source) Info {
	t.Helper()
	v, info, err := c.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if wantValue != "" && v != wantValue {
		t.Errorf("Get(%q) = %q, want %q", key, v, wantValue)
	}
	if info.Source != wantSource {
		t.Errorf("Get(%q) source = %v, want %v", key, info.Source, wantSource)
	}
	return info
}

// logBuffer collects JSON log lines written from any goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the decoded log records whose message is msg.
func (b *logBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(b.buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

func TestNewValidatesOptions(t *testing.T) {
	load := newOrigin(Result[string]{}).load
	tests := []struct {
		name string
		mod  func(*Options)
		want []string // substrings of the error
	}{
		{"zero MaxBytes", func(o *Options) { o.MaxBytes = 0 }, []string{"MaxBytes must be at least 1048576 (1 MiB), got 0"}},
		{"negative MaxBytes", func(o *Options) { o.MaxBytes = -1 }, []string{"MaxBytes must be at least 1048576 (1 MiB), got -1"}},
		{"tiny MaxBytes", func(o *Options) { o.MaxBytes = MinMaxBytes - 1 }, []string{"MaxBytes must be at least", "got 1048575"}},
		{"zero MaxAge", func(o *Options) { o.MaxAge, o.MinAge = 0, 0 }, []string{"MaxAge must be positive, got 0"}},
		{"zero RetryAfter", func(o *Options) { o.RetryAfter = 0 }, []string{"RetryAfter must be positive, got 0"}},
		{"zero MaxRetryAfter", func(o *Options) { o.MaxRetryAfter = 0 }, []string{"MaxRetryAfter must be positive, got 0"}},
		{"negative MaxAge", func(o *Options) { o.MaxAge = -time.Second }, []string{"MaxAge must not be negative, got -1s"}},
		{"negative MinAge", func(o *Options) { o.MinAge = -time.Second }, []string{"MinAge must not be negative"}},
		{"negative RetryAfter", func(o *Options) { o.RetryAfter = -time.Second }, []string{"RetryAfter must not be negative"}},
		{"negative MaxRetryAfter", func(o *Options) { o.MaxRetryAfter = -time.Second }, []string{"MaxRetryAfter must not be negative"}},
		{"negative MaxStale", func(o *Options) { o.MaxStale = -time.Second }, []string{"MaxStale must not be negative"}},
		{"negative LargestCost", func(o *Options) { o.LargestCost = -1 }, []string{"LargestCost must not be negative, got -1"}},
		{"MinAge above MaxAge", func(o *Options) { o.MinAge, o.MaxAge = 2*time.Hour, time.Hour }, []string{"MinAge (2h0m0s) must not exceed MaxAge (1h0m0s)"}},
		{"RetryAfter above MaxRetryAfter", func(o *Options) { o.RetryAfter = 20 * time.Minute }, []string{"RetryAfter (20m0s) must not exceed MaxRetryAfter (15m0s)"}},
		{"empty MetricsPrefix", func(o *Options) { o.MetricsPrefix = "" }, []string{`MetricsPrefix "" does not make valid metric names`}},
		{"MetricsPrefix with a dash", func(o *Options) { o.MetricsPrefix = "robots-cache" }, []string{`MetricsPrefix "robots-cache"`}},
		{"MetricsPrefix starting with a digit", func(o *Options) { o.MetricsPrefix = "1cache" }, []string{`MetricsPrefix "1cache"`}},
		{"every error reported", func(o *Options) { o.MaxBytes, o.MaxAge, o.MaxStale = 1, -1, -1 }, []string{"MaxBytes", "MaxAge", "MaxStale"}},
		{"zero Options", func(o *Options) { *o = Options{} }, []string{"MaxBytes", "MaxAge", "RetryAfter must", "MaxRetryAfter", "MetricsPrefix"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(withOptions(tt.mod), load)
			if err == nil {
				c.Close()
				t.Fatal("New succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	t.Run("nil LoadFunc", func(t *testing.T) {
		if _, err := New[string](DefaultOptions(), nil); err == nil || !strings.Contains(err.Error(), "nil LoadFunc") {
			t.Errorf("New(nil LoadFunc) error = %v", err)
		}
	})
}

func TestDefaultOptions(t *testing.T) {
	want := Options{
		MaxBytes:      64 << 20,
		MaxAge:        24 * time.Hour,
		MinAge:        time.Minute,
		RetryAfter:    time.Minute,
		MaxRetryAfter: 15 * time.Minute,
		MaxStale:      720 * time.Hour,
		MetricsPrefix: "cache",
	}
	if got := DefaultOptions(); got != want {
		t.Errorf("DefaultOptions() = %+v, want %+v", got, want)
	}
	c := newCache(t, DefaultOptions(), newOrigin(Result[string]{}).load)
	defer c.Close()
	if got := c.Options(); got != want {
		t.Errorf("Options() = %+v, want %+v", got, want)
	}
}

// TestNewKeepsZeroes: New uses the zero values it accepts as given.
func TestNewKeepsZeroes(t *testing.T) {
	want := withOptions(func(o *Options) { o.MinAge, o.MaxStale = 0, 0 })
	c := newCache(t, want, newOrigin(Result[string]{}).load)
	defer c.Close()
	if got := c.Options(); got != want {
		t.Errorf("Options() = %+v, want %+v", got, want)
	}
}

// TestZeroMeansZero: a zero MinAge or MaxStale takes effect, rather than
// standing for a default.
func TestZeroMeansZero(t *testing.T) {
	const key = "https://example.com:443"
	failing := Result[string]{Value: "disallow all", Failed: true, Outcome: "unreachable"}
	tests := []struct {
		name string
		mod  func(*Options)
		run  func(t *testing.T, c *Cache[string], o *origin)
	}{
		{
			name: "MaxStale 0 serves no stale value",
			mod:  func(o *Options) { o.MaxStale = 0 },
			run: func(t *testing.T, c *Cache[string], o *origin) {
				o.answer(Result[string]{MaxAge: time.Hour})
				get(t, c, key, key+"#1", SourceLoaded)
				time.Sleep(time.Hour)
				o.answer(failing)
				info := get(t, c, key, "disallow all", SourceLoaded)
				if !info.Failed || info.Failures != 1 || info.Outcome != "unreachable" {
					t.Errorf("Info = %+v, want the Failed value", info)
				}
				get(t, c, key, "disallow all", SourceHit) // until the retry
				if s := c.Stats(); s.StaleServes != 0 {
					t.Errorf("%d stale serves, want 0", s.StaleServes)
				}
			},
		},
		{
			name: "MaxStale 0 still backs off retries",
			mod:  func(o *Options) { o.MaxStale = 0 },
			run: func(t *testing.T, c *Cache[string], o *origin) {
				o.answer(Result[string]{MaxAge: time.Hour})
				get(t, c, key, key+"#1", SourceLoaded)
				time.Sleep(time.Hour)
				o.answer(failing)
				get(t, c, key, "disallow all", SourceLoaded)
				time.Sleep(DefaultRetryAfter)
				if info := get(t, c, key, "disallow all", SourceLoaded); info.Failures != 2 || info.ExpiresAt.Sub(info.LoadedAt) != 2*DefaultRetryAfter {
					t.Errorf("second failure: Info = %+v, want the backoff doubled", info)
				}
			},
		},
		{
			name: "MinAge 0 refetches a no-store answer on the next Get",
			mod:  func(o *Options) { o.MinAge = 0 },
			run: func(t *testing.T, c *Cache[string], o *origin) {
				o.answer(Result[string]{NoStore: true})
				for i := 1; i <= 3; i++ {
					info := get(t, c, key, fmt.Sprintf("%s#%d", key, i), SourceLoaded)
					if !info.ExpiresAt.Equal(info.LoadedAt) {
						t.Errorf("load %d fresh until %s after it, want not at all", i, info.ExpiresAt.Sub(info.LoadedAt))
					}
				}
			},
		},
		{
			name: "MinAge 0 lets a short max-age through",
			mod:  func(o *Options) { o.MinAge = 0 },
			run: func(t *testing.T, c *Cache[string], o *origin) {
				o.answer(Result[string]{MaxAge: time.Second})
				get(t, c, key, key+"#1", SourceLoaded)
				time.Sleep(time.Second)
				get(t, c, key, key+"#2", SourceLoaded)
			},
		},
		{
			name: "MinAge 0 still serves a no-store value stale while loads fail",
			mod:  func(o *Options) { o.MinAge = 0 },
			run: func(t *testing.T, c *Cache[string], o *origin) {
				o.answer(Result[string]{NoStore: true})
				get(t, c, key, key+"#1", SourceLoaded)
				o.answer(failing)
				get(t, c, key, key+"#1", SourceStale)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := newOrigin(Result[string]{})
				c := newCache(t, withOptions(tt.mod), o.load)
				defer c.Close()
				tt.run(t, c, o)
			})
		})
	}
}

// TestEveryGetCountedOnce: each Get is counted once, under the Source it
// returned (an error counts as a miss), so the counts add up to the Gets.
func TestEveryGetCountedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newOrigin(Result[string]{MaxAge: time.Hour})
		c := newCache(t, DefaultOptions(), o.load)
		defer c.Close()
		gets := 0
		expect := func(key string, want Source) {
			t.Helper()
			gets++
			get(t, c, key, "", want)
		}
		expect("a", SourceLoaded)
		expect("a", SourceHit)
		expect("a", SourceHit)
		expect("b", SourceLoaded)
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		gets++
		if _, _, err := c.Get(ended, "c"); err == nil {
			t.Fatal("Get with an ended context succeeded")
		}

		time.Sleep(time.Hour)
		o.answer(Result[string]{Value: "disallow all", Failed: true})
		expect("a", SourceStale) // right after a failed load
		expect("a", SourceStale) // from memory, until the retry
		expect("b", SourceStale)
		expect("d", SourceLoaded) // no good value: the Failed one
		expect("d", SourceHit)

		s := c.Stats()
		if s.Hits != 3 || s.Misses != 4 || s.StaleServes != 3 {
			t.Errorf("Stats = %+v, want 3 hits, 4 misses (one an error), 3 stale serves", s)
		}
		if sum := s.Hits + s.Misses + s.StaleServes; sum != uint64(gets) {
			t.Errorf("hits+misses+stale = %d, want %d, the number of Gets", sum, gets)
		}
	})
}

func TestGetLoadsOnceThenServesFromMemory(t *testing.T) {
	o := newOrigin(Result[string]{Cost: 100})
	c := newCache(t, DefaultOptions(), o.load)
	defer c.Close()

	info := get(t, c, "https://a.example:443", "https://a.example:443#1", SourceLoaded)
	if info.Outcome != "ok" || info.LastOutcome != "ok" || info.Failed || info.Failures != 0 {
		t.Errorf("Info = %+v", info)
	}
	for range 3 {
		get(t, c, "https://a.example:443", "https://a.example:443#1", SourceHit)
	}
	get(t, c, "https://b.example:443", "https://b.example:443#1", SourceLoaded)

	if n := o.count("https://a.example:443"); n != 1 {
		t.Errorf("a loaded %d times, want 1", n)
	}
	s := c.Stats()
	if s.Hits != 3 || s.Misses != 2 || s.Loads["ok"] != 2 || len(s.Loads) != 1 {
		t.Errorf("Stats = %+v, want 3 hits, 2 misses, 2 ok loads", s)
	}
	if want := int64(2 * (100 + entryOverhead)); entryBytes(s) != want {
		t.Errorf("CostBytes = %d, want %d", s.CostBytes, want)
	}
}

// TestConcurrentColdGetsShareOneLoad: 1,000 Gets of a cold key wait for one
// load; the first caller, whose context the load inherits, gives up while
// it runs, gets its context error at once, and does not cancel the load.
func TestConcurrentColdGetsShareOneLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type ctxKey struct{}
		release := make(chan struct{})
		var calls atomic.Int32
		var loadCtxErr error
		var loadCtxValue any
		c := newCache(t, DefaultOptions(), func(ctx context.Context, key string) Result[string] {
			calls.Add(1)
			<-release
			loadCtxErr, loadCtxValue = ctx.Err(), ctx.Value(ctxKey{})
			return Result[string]{Value: "rules for " + key}
		})
		defer c.Close()
		const key = "https://example.com:443"

		impatient, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "first"))
		impatientErr := make(chan error, 1)
		go func() {
			_, _, err := c.Get(impatient, key)
			impatientErr <- err
		}()
		synctest.Wait() // the first caller started the load

		const n = 1000
		values := make([]string, n)
		infos := make([]Info, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { values[i], infos[i], errs[i] = c.Get(context.Background(), key) })
		}
		synctest.Wait() // every caller is waiting on the load

		cancel()
		if err := <-impatientErr; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled caller got %v, want context.Canceled", err)
		}
		synctest.Wait()
		if got := calls.Load(); got != 1 {
			t.Fatalf("%d loads while waiting, want 1", got)
		}

		close(release)
		wg.Wait()
		for i := range n {
			if errs[i] != nil || values[i] != "rules for "+key || infos[i].Source != SourceLoaded {
				t.Fatalf("caller %d: %q, %v, %v", i, values[i], infos[i].Source, errs[i])
			}
		}
		if got := calls.Load(); got != 1 {
			t.Errorf("%d loads, want 1", got)
		}
		if loadCtxErr != nil {
			t.Errorf("load context ended (%v) when the first caller gave up", loadCtxErr)
		}
		if loadCtxValue != "first" {
			t.Errorf("load context value = %v, want the first caller's", loadCtxValue)
		}
		get(t, c, key, "rules for "+key, SourceHit)
		if s := c.Stats(); s.Misses != n+1 || s.Hits != 1 || s.Loads["ok"] != 1 {
			t.Errorf("Stats = %+v", s)
		}
	})
}

func TestGetWithEndedContext(t *testing.T) {
	o := newOrigin(Result[string]{})
	c := newCache(t, DefaultOptions(), o.load)
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	if _, _, err := c.Get(ctx, "cold"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get of a cold key with an ended context: %v, want context.Canceled", err)
	}
	if n := o.count("cold"); n != 0 {
		t.Errorf("cold key loaded %d times for a caller already gone, want 0", n)
	}

	get(t, c, "warm", "warm#1", SourceLoaded)
	// A value in memory is available at once: the ended context does not matter.
	if v, info, err := c.Get(ctx, "warm"); err != nil || v != "warm#1" || info.Source != SourceHit {
		t.Errorf("Get of a cached key with an ended context = %q, %v, %v", v, info.Source, err)
	}
}

func TestFreshness(t *testing.T) {
	tests := []struct {
		name   string
		result Result[string]
		want   time.Duration
	}{
		{"no preference keeps MaxAge", Result[string]{}, 24 * time.Hour},
		{"max-age within bounds", Result[string]{MaxAge: time.Hour}, time.Hour},
		{"max-age above MaxAge", Result[string]{MaxAge: 48 * time.Hour}, 24 * time.Hour},
		{"max-age below MinAge", Result[string]{MaxAge: 10 * time.Second}, time.Minute},
		{"no-store keeps MinAge", Result[string]{NoStore: true, MaxAge: time.Hour}, time.Minute},
		{"negative max-age keeps MinAge", Result[string]{MaxAge: -time.Second}, time.Minute},
		{"unavailable is cached like a success", Result[string]{Outcome: "unavailable"}, 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := newOrigin(tt.result)
				c := newCache(t, DefaultOptions(), o.load)
				defer c.Close()
				const key = "https://example.com:443"

				info := get(t, c, key, "", SourceLoaded)
				if got := info.ExpiresAt.Sub(info.LoadedAt); got != tt.want {
					t.Errorf("freshness %s, want %s", got, tt.want)
				}
				if !info.LoadedAt.Equal(time.Now()) || info.Failed {
					t.Errorf("Info = %+v", info)
				}
				time.Sleep(tt.want - time.Nanosecond)
				get(t, c, key, key+"#1", SourceHit)
				time.Sleep(time.Nanosecond)
				get(t, c, key, key+"#2", SourceLoaded)
				if n := o.count(key); n != 2 {
					t.Errorf("%d loads, want 2", n)
				}
				outcome := cmpOr(tt.result.Outcome, "ok")
				if s := c.Stats(); s.Loads[outcome] != 2 || s.FailedLoads != 0 {
					t.Errorf("Stats = %+v, want 2 %q loads", s, outcome)
				}
			})
		})
	}
}

func cmpOr(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// TestStaleIfFailed: once loads fail, the last good value keeps being
// served, reported stale, with retries backing off, until a load succeeds.
func TestStaleIfFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logBuffer
		o := newOrigin(Result[string]{MaxAge: time.Hour})
		c := newCache(t, withOptions(func(o *Options) { o.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) }), o.load)
		defer c.Close()
		const key = "https://example.com:443"
		good := get(t, c, key, key+"#1", SourceLoaded)

		time.Sleep(time.Hour)
		o.answer(Result[string]{Value: "disallow all", Failed: true, Outcome: "unreachable"})
		for i, retry := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute} {
			info := get(t, c, key, key+"#1", SourceStale)
			want := Info{
				Source: SourceStale, Outcome: "ok", LastOutcome: "unreachable", Failures: i + 1,
				LoadedAt: good.LoadedAt, ExpiresAt: time.Now().Add(retry),
			}
			if info != want {
				t.Errorf("failure %d: Info = %+v\nwant %+v", i+1, info, want)
			}
			time.Sleep(retry - time.Nanosecond)
			get(t, c, key, key+"#1", SourceStale) // no load before the retry time
			time.Sleep(time.Nanosecond)
		}
		if n := o.count(key); n != 4 {
			t.Errorf("%d loads, want 4", n)
		}

		o.answer(Result[string]{MaxAge: time.Hour})
		info := get(t, c, key, key+"#5", SourceLoaded)
		if info.Failures != 0 || info.LastOutcome != "ok" || info.ExpiresAt.Sub(info.LoadedAt) != time.Hour {
			t.Errorf("after recovery Info = %+v", info)
		}

		s := c.Stats()
		if s.StaleServes != 6 || s.FailedLoads != 3 || s.Loads["ok"] != 2 || s.Loads["unreachable"] != 3 {
			t.Errorf("Stats = %+v, want 6 stale serves, 3 failed loads", s)
		}
		recs := logs.records(t, "cache: load failed, serving stale value")
		if len(recs) != 3 {
			t.Fatalf("%d stale-serve warnings, want one per failed load (3)", len(recs))
		}
		for _, r := range recs {
			if r["level"] != "WARN" || r["key"] != key || r["outcome"] != "unreachable" {
				t.Errorf("log record %v", r)
			}
		}
	})
}

// TestStaleEndsAtMaxStale: a good value is served stale until MaxStale after
// its load; then the Failed value is served.
func TestStaleEndsAtMaxStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logBuffer
		o := newOrigin(Result[string]{MaxAge: time.Hour})
		c := newCache(t, withOptions(func(o *Options) {
			o.MaxStale, o.RetryAfter, o.MaxRetryAfter = 2*time.Hour, 7*time.Minute, 7*time.Minute
			o.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		}), o.load)
		defer c.Close()
		const key = "https://example.com:443"
		start := time.Now()
		get(t, c, key, key+"#1", SourceLoaded)

		time.Sleep(time.Hour)
		o.answer(Result[string]{Value: "disallow all", Failed: true, Outcome: "unreachable"})
		var (
			v    string
			info Info
		)
		for loads := 1; ; loads++ {
			if loads > 100 {
				t.Fatal("never stopped serving stale")
			}
			v, info, _ = c.Get(context.Background(), key)
			if info.Source != SourceStale {
				break
			}
			if time.Since(start) >= 2*time.Hour {
				t.Fatalf("stale value served %s after its load", time.Since(start))
			}
			// The last retry is brought forward to the end of MaxStale.
			want := time.Now().Add(7 * time.Minute)
			if end := start.Add(2 * time.Hour); end.Before(want) {
				want = end
			}
			if !info.ExpiresAt.Equal(want) {
				t.Fatalf("stale ExpiresAt %s, want %s", info.ExpiresAt.Sub(start), want.Sub(start))
			}
			time.Sleep(time.Until(info.ExpiresAt))
		}
		if time.Since(start) != 2*time.Hour {
			t.Errorf("stale serving ended %s after the load, want 2h", time.Since(start))
		}
		if v != "disallow all" || !info.Failed || info.Source != SourceLoaded || info.Outcome != "unreachable" {
			t.Errorf("past MaxStale: %q, %+v; want the Failed value", v, info)
		}
		if info.Failures != 10 { // 1h→2h in 7-minute steps: 9 stale, then this one
			t.Errorf("Failures = %d, want 10", info.Failures)
		}
		recs := logs.records(t, "cache: load failed, no usable stale value")
		if len(recs) != 1 || recs[0]["key"] != key || recs[0]["stale_value_loaded_at"] == nil {
			t.Errorf("warnings: %v", recs)
		}
	})
}

// TestRetryBackoff: without a good value, a Failed result is served until
// the retry time, which doubles per consecutive failure up to MaxRetryAfter.
func TestRetryBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newOrigin(Result[string]{Value: "disallow all", Failed: true, Outcome: "unreachable"})
		c := newCache(t, withOptions(func(o *Options) { o.RetryAfter, o.MaxRetryAfter = time.Minute, 5*time.Minute }), o.load)
		defer c.Close()
		const key = "https://down.example:443"
		waits := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}
		for i, wait := range waits {
			info := get(t, c, key, "disallow all", SourceLoaded)
			if !info.Failed || info.Failures != i+1 || info.ExpiresAt.Sub(info.LoadedAt) != wait {
				t.Errorf("failure %d: Info = %+v, want retry after %s", i+1, info, wait)
			}
			time.Sleep(wait - time.Nanosecond)
			if info := get(t, c, key, "disallow all", SourceHit); !info.Failed {
				t.Errorf("cached failure not marked Failed: %+v", info)
			}
			time.Sleep(time.Nanosecond)
		}
		if n := o.count(key); n != len(waits) {
			t.Errorf("%d loads, want %d", n, len(waits))
		}
		if s := c.Stats(); s.FailedLoads != uint64(len(waits)) || s.StaleServes != 0 {
			t.Errorf("Stats = %+v", s)
		}

		o.answer(Result[string]{})
		if info := get(t, c, key, "", SourceLoaded); info.Failed || info.Failures != 0 {
			t.Errorf("after recovery Info = %+v", info)
		}
	})
}

// TestUnusedEntriesLeaveMemory: ristretto's TTL, on the bubble's clock,
// drops an entry once its stale horizon plus MaxRetryAfter has passed.
func TestUnusedEntriesLeaveMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newOrigin(Result[string]{Cost: 1000, MaxAge: time.Hour})
		c := newCache(t, withOptions(func(o *Options) { o.MaxStale, o.MaxRetryAfter = 2*time.Hour, 15*time.Minute }), o.load)
		defer c.Close()
		const key = "https://example.com:443"
		get(t, c, key, key+"#1", SourceLoaded)

		time.Sleep(2*time.Hour + 15*time.Minute - time.Second)
		if s := c.Stats(); entryBytes(s) != 1000+entryOverhead || s.Expirations != 0 {
			t.Fatalf("before the horizon: %+v", s)
		}
		time.Sleep(time.Second + 10*time.Minute) // past it, and past a cleanup tick
		if s := c.Stats(); entryBytes(s) != 0 || s.Expirations != 1 || s.Evictions != 0 {
			t.Fatalf("after the horizon: %+v, want the entry expired", s)
		}
		o.answer(Result[string]{Value: "disallow all", Failed: true})
		// The good value is gone: no stale serve, the failure count starts over.
		if info := get(t, c, key, "disallow all", SourceLoaded); !info.Failed || info.Failures != 1 || info.Outcome != "failed" {
			t.Errorf("Info = %+v", info)
		}
		if s := c.Stats(); s.Loads["failed"] != 1 || s.StaleServes != 0 {
			t.Errorf("Stats = %+v", s)
		}
	})
}

func TestLoadPanicIsAnError(t *testing.T) {
	var calls atomic.Int32
	c := newCache(t, DefaultOptions(), func(_ context.Context, key string) Result[string] {
		if calls.Add(1) == 1 {
			panic("parser bug")
		}
		return Result[string]{Value: "ok"}
	})
	defer c.Close()
	_, _, err := c.Get(context.Background(), "k")
	if !errors.Is(err, ErrLoadPanicked) || !strings.Contains(err.Error(), "parser bug") {
		t.Fatalf("Get = %v, want ErrLoadPanicked", err)
	}
	get(t, c, "k", "ok", SourceLoaded) // nothing was cached
	if s := c.Stats(); s.Loads["panic"] != 1 || s.FailedLoads != 1 || s.Loads["ok"] != 1 {
		t.Errorf("Stats = %+v", s)
	}
}

// TestFlightFindsJustStoredEntry covers the race where a Get misses, the
// running load stores its entry and its flight ends, and only then the Get
// starts a flight of its own: that flight must not load again.
func TestFlightFindsJustStoredEntry(t *testing.T) {
	o := newOrigin(Result[string]{})
	c := newCache(t, DefaultOptions(), o.load)
	defer c.Close()
	get(t, c, "k", "k#1", SourceLoaded)

	f, err := c.refresh(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if f.src != SourceHit || f.e.value != "k#1" {
		t.Errorf("flight = %+v, want the stored entry, not a load", f)
	}
	if n := o.count("k"); n != 1 {
		t.Errorf("%d loads, want 1", n)
	}
}

func TestGetAfterClose(t *testing.T) {
	o := newOrigin(Result[string]{})
	c := newCache(t, DefaultOptions(), o.load)
	get(t, c, "k", "k#1", SourceLoaded)
	c.Close()
	c.Close()
	get(t, c, "k", "k#2", SourceLoaded)
	get(t, c, "k", "k#3", SourceLoaded)
	if s := c.Stats(); s.CostBytes != 0 || s.Evictions != 0 {
		t.Errorf("Stats after Close = %+v", s)
	}
}

// residentCost sums the cost of the entries in memory, from ristretto's
// store and the admission window: an account independent of ristretto's.
func residentCost[V any](c *Cache[V]) int64 {
	var sum int64
	c.main.IterValues(func(e *entry[V]) bool {
		sum += e.cost
		return false
	})
	c.window.mu.Lock()
	for _, e := range c.window.lru.Values() {
		sum += e.cost
	}
	c.window.mu.Unlock()
	return sum
}

// TestBudget loads far more than MaxBytes worth of values, with costs from
// 100 B to 500 KiB, reloads them with new costs, and checks the cost held
// never exceeds MaxBytes.
func TestBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxBytes = 8 << 20
		rng := rand.New(rand.NewPCG(1, 2))
		var costs sync.Map // key → cost of its next load
		c := newCache(t, withOptions(func(o *Options) { o.MaxBytes = maxBytes }), func(_ context.Context, key string) Result[string] {
			cost, _ := costs.Load(key)
			return Result[string]{Value: key, Cost: cost.(int64)}
		})
		defer c.Close()

		var total int64
		check := func(when string) {
			t.Helper()
			s := c.Stats()
			if s.CostBytes > maxBytes {
				t.Fatalf("%s: CostBytes %d > MaxBytes %d", when, s.CostBytes, maxBytes)
			}
			if held := residentCost(c); held > maxBytes {
				t.Fatalf("%s: entries in memory cost %d > MaxBytes %d", when, held, maxBytes)
			}
		}
		keys := make([]string, 300)
		for round := range 2 {
			for i := range keys {
				keys[i] = fmt.Sprintf("https://host-%d.example:443", i)
				cost := 100 + rng.Int64N(500<<10-100)
				costs.Store(keys[i], cost)
				total += cost
				get(t, c, keys[i], keys[i], SourceLoaded)
				check(fmt.Sprintf("round %d, load %d", round, i))
				// Popular keys come back, as a crawler's origins do.
				for range 3 {
					k := keys[rng.IntN(i+1)/4]
					if _, _, err := c.Get(context.Background(), k); err != nil {
						t.Fatal(err)
					}
				}
				check(fmt.Sprintf("round %d, get %d", round, i))
			}
			time.Sleep(24 * time.Hour) // everything reloads, with new costs
		}
		s := c.Stats()
		if total < 10*maxBytes || s.Evictions == 0 {
			t.Errorf("loaded %d bytes for a %d budget with %d evictions: the test did not fill the cache", total, maxBytes, s.Evictions)
		}
		if s.CostBytes < maxBytes/2 {
			t.Errorf("CostBytes %d: the cache holds less than half its budget", s.CostBytes)
		}
		t.Logf("loaded %d MiB into %d MiB: %+v", total>>20, maxBytes>>20, s)
	})
}

// TestJustLoadedIsInMemoryNearBudget: with the cache full of frequently used
// entries, ristretto's admission policy refuses newcomers, yet every value
// just loaded is served from memory by the next Get.
func TestJustLoadedIsInMemoryNearBudget(t *testing.T) {
	const (
		maxBytes = 4 << 20
		cost     = 16 << 10
	)
	o := newOrigin(Result[string]{Cost: cost})
	c := newCache(t, withOptions(func(o *Options) { o.MaxBytes = maxBytes }), o.load)
	defer c.Close()
	ctx := context.Background()

	residents := int((maxBytes - maxBytes/windowDivisor) / (cost + entryOverhead)) // fill ristretto's share
	for i := range residents {
		get(t, c, fmt.Sprintf("https://resident-%d.example:443", i), "", SourceLoaded)
	}
	for range 20 {
		for i := range residents {
			if _, _, err := c.Get(ctx, fmt.Sprintf("https://resident-%d.example:443", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 100 {
		key := fmt.Sprintf("https://new-%d.example:443", i)
		get(t, c, key, key+"#1", SourceLoaded)
		get(t, c, key, key+"#1", SourceHit)
		if n := o.count(key); n != 1 {
			t.Fatalf("%s loaded %d times, want 1", key, n)
		}
	}
	s := c.Stats()
	if s.CostBytes > maxBytes {
		t.Errorf("CostBytes %d > %d", s.CostBytes, maxBytes)
	}
	// Ristretto records accesses through lossy buffers (and under -race its
	// sync.Pool drops nearly all of them), so how many newcomers it refused
	// varies; TestRefusedValueIsServedFromWindow refuses them for sure.
	t.Logf("%+v", s)
}

// TestRefusedValueIsServedFromWindow: when ristretto refuses a just-loaded
// value (here every one: its budget is swapped for one smaller than any
// value), the admission window keeps it for the next Get, within its own
// share of the budget.
func TestRefusedValueIsServedFromWindow(t *testing.T) {
	const maxBytes = 1 << 20
	o := newOrigin(Result[string]{Cost: 10_000})
	c := newCache(t, withOptions(func(o *Options) { o.MaxBytes = maxBytes }), o.load)
	defer c.Close()
	c.main.Close()
	var err error
	if c.main, err = ristretto.NewCache(c.ristrettoConfig(1)); err != nil {
		t.Fatal(err)
	}

	const keys = 20
	for i := range keys {
		key := fmt.Sprintf("https://new-%d.example:443", i)
		get(t, c, key, key+"#1", SourceLoaded)
		get(t, c, key, key+"#1", SourceHit)
		if n := o.count(key); n != 1 {
			t.Fatalf("%s loaded %d times, want 1", key, n)
		}
	}
	s := c.Stats()
	// Held in the window, each costs its node and key too (all keys are
	// of 32 bytes or less).
	perEntry := int64(10_000+entryOverhead+windowNodeBytes) + 32
	fit := maxBytes / windowDivisor / perEntry
	if s.Rejections != keys || s.Evictions != keys-uint64(fit) || entryBytes(s) != fit*perEntry {
		t.Errorf("Stats = %+v; want %d rejections, %d in the window", s, keys, fit)
	}
	// The oldest keys left the window and load again.
	get(t, c, "https://new-0.example:443", "https://new-0.example:443#2", SourceLoaded)
}

// TestWindowRoomForLargestCost: the admission window is 1/16 of the
// budget, or room for a value of LargestCost if that is more, up to half
// the budget; ristretto's index is charged, and its entries hold the rest,
// so the three add up to MaxBytes.
func TestWindowRoomForLargestCost(t *testing.T) {
	const maxBytes = 64 << 20
	for _, tt := range []struct {
		maxBytes, largest, wantWindow int64
	}{
		{maxBytes, 0, maxBytes / 16},
		{maxBytes, 1 << 20, maxBytes / 16},
		{maxBytes, 13 << 20, 13<<20 + windowEntryBytes},
		{maxBytes, maxBytes/2 - windowEntryBytes, maxBytes / 2},
		{maxBytes, maxBytes, maxBytes / 2},
		{MinMaxBytes, 0, MinMaxBytes / 16},
		{MinMaxBytes, 5 << 20, MinMaxBytes / 2},
	} {
		o := withOptions(func(o *Options) { o.MaxBytes, o.LargestCost = tt.maxBytes, tt.largest })
		c := newCache(t, o, newOrigin(Result[string]{}).load)
		window, main := c.window.maxBytes, c.main.MaxCost()
		c.Close()
		if window != tt.wantWindow || window+main+IndexBytes(tt.maxBytes) != tt.maxBytes {
			t.Errorf("MaxBytes %d, LargestCost %d: window %d, ristretto %d; want window %d, the two and the index adding up to MaxBytes",
				tt.maxBytes, tt.largest, window, main, tt.wantWindow)
		}
		if kept := o.LargestKept(); kept != window-windowEntryBytes || (kept < tt.largest) != (tt.largest+windowEntryBytes > tt.maxBytes/2) {
			t.Errorf("MaxBytes %d, LargestCost %d: LargestKept %d", tt.maxBytes, tt.largest, kept)
		}
	}
}

// TestLargestCostIsNotLoadedOnEveryGet: a value of LargestCost that
// ristretto refuses (here every value: its budget is swapped for one
// smaller than any) is kept in the admission window and loaded once;
// without LargestCost a value larger than the usual window was loaded by
// every Get.
func TestLargestCostIsNotLoadedOnEveryGet(t *testing.T) {
	const cost = 6 << 20 // past the usual window of a 64 MiB budget, 4 MiB
	for _, tt := range []struct {
		largest   int64
		wantLoads int
	}{
		{cost, 1},
		{0, 20},
	} {
		o := newOrigin(Result[string]{Cost: cost})
		c := newCache(t, withOptions(func(o *Options) { o.LargestCost = tt.largest }), o.load)
		c.main.Close()
		var err error
		if c.main, err = ristretto.NewCache(c.ristrettoConfig(1)); err != nil {
			t.Fatal(err)
		}
		for range 20 {
			if _, _, err := c.Get(context.Background(), "big"); err != nil {
				t.Fatal(err)
			}
		}
		s := c.Stats()
		c.Close()
		if n := o.count("big"); n != tt.wantLoads || s.CostBytes > s.MaxBytes {
			t.Errorf("LargestCost %d: %d loads, want %d; %+v", tt.largest, n, tt.wantLoads, s)
		}
	}
}

func TestTooLargeValueIsServedNotCached(t *testing.T) {
	var logs logBuffer
	o := newOrigin(Result[string]{Cost: 2 << 20})
	c := newCache(t, withOptions(func(o *Options) {
		o.MaxBytes, o.Logger = 1<<20, slog.New(slog.NewJSONHandler(&logs, nil))
	}), o.load)
	defer c.Close()
	get(t, c, "big", "big#1", SourceLoaded)
	get(t, c, "big", "big#2", SourceLoaded)
	if s := c.Stats(); s.Uncacheable != 2 || entryBytes(s) != 0 {
		t.Errorf("Stats = %+v", s)
	}
	if recs := logs.records(t, "cache: value too large to cache"); len(recs) != 2 || recs[0]["key"] != "big" {
		t.Errorf("warnings: %v", recs)
	}
}

func TestAdmissionWindow(t *testing.T) {
	now := int64(time.Minute) // readings of a cache's clock
	later := now + int64(time.Hour)
	// Keys of up to 16 bytes: mk(n) makes an entry the window holds for n
	// bytes, its node and key included.
	const node = windowNodeBytes + 16
	mk := func(cost int64) *entry[string] { return &entry[string]{cost: cost - node, keepUntil: later} }
	w, err := newAdmissionWindow[string](100)
	if err != nil {
		t.Fatal(err)
	}
	a, b, cc := mk(40), mk(40), mk(40)
	w.put("a", a)
	w.put("b", b)
	if w.get("a", now) != a { // a becomes the most recently used
		t.Fatal("a not found")
	}
	w.put("c", cc) // evicts b, the least recently used
	if w.get("b", now) != nil || w.get("a", now) != a || w.get("c", now) != cc {
		t.Error("wrong entry evicted")
	}
	if w.bytes() != 80 || w.evictions.Load() != 1 {
		t.Errorf("bytes %d, evictions %d", w.bytes(), w.evictions.Load())
	}
	a2 := mk(10)
	w.put("a", a2) // replaces a
	if w.get("a", now) != a2 || w.bytes() != 50 {
		t.Errorf("replacement: bytes %d", w.bytes())
	}
	if w.put("huge", mk(101)) || w.get("huge", now) != nil {
		t.Error("an entry larger than the window was stored")
	}
	if w.get("c", later) != nil || w.expirations.Load() != 1 || w.bytes() != 10 {
		t.Errorf("expired entry served: bytes %d", w.bytes())
	}
	w.remove("a")
	if w.get("a", now) != nil || w.bytes() != 0 {
		t.Error("remove")
	}
}

func TestSourceString(t *testing.T) {
	for s, want := range map[Source]string{SourceHit: "hit", SourceLoaded: "loaded", SourceStale: "stale", SourceShared: "shared", 0: "Source(0)"} {
		if got := s.String(); got != want {
			t.Errorf("Source(%d).String() = %q, want %q", s, got, want)
		}
	}
}

// entryBytes is what the entries held are charged: CostBytes without the
// index, which is charged from the start.
func entryBytes(s Stats) int64 { return s.CostBytes - IndexBytes(s.MaxBytes) }
