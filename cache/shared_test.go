package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

const (
	// claimTTL is the SecondLevel.ClaimTTL of the tests: a fetch timeout
	// plus a margin.
	claimTTL = 10 * time.Second
	// storeBound is how long a failing memStore call takes: the bound a
	// real Store puts on its calls.
	storeBound = 100 * time.Millisecond
)

var errStoreDown = errors.New("store down")

// memStore is a Store in memory that honours the contract: entries dropped
// after their keep, claims that expire, release of one's own claim only.
// It counts calls by method and fails the methods it is told to.
type memStore struct {
	mu      sync.Mutex
	entries map[string]memEntry
	claims  map[string]memClaim
	claimID int
	calls   map[string]int // by method: Get, Claim, Put, release
	// failing is by method (Get, Claim, Put) the number of its first
	// call to fail, and every one after; 0 for none.
	failing map[string]int
	// heldElsewhere makes every Claim find the key claimed by yet
	// another process.
	heldElsewhere bool
	// cancelled counts calls made with an ended context.
	cancelled int
}

type memEntry struct {
	e     SharedEntry
	until time.Time
}

type memClaim struct {
	id    int
	until time.Time
}

func newMemStore() *memStore {
	return &memStore{
		entries: make(map[string]memEntry),
		claims:  make(map[string]memClaim),
		calls:   make(map[string]int),
		failing: make(map[string]int),
	}
}

// begin counts a call and returns its error, if the method is failing,
// after storeBound. It is called with s.mu held.
func (s *memStore) begin(ctx context.Context, method string) error {
	s.calls[method]++
	if ctx.Err() != nil {
		s.cancelled++
	}
	if first := s.failing[method]; first == 0 || s.calls[method] < first {
		return nil
	}
	s.mu.Unlock()
	time.Sleep(storeBound)
	s.mu.Lock()
	return fmt.Errorf("%s: %w", method, errStoreDown)
}

func (s *memStore) Get(ctx context.Context, key string) (SharedEntry, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, "Get"); err != nil {
		return SharedEntry{}, false, err
	}
	me, ok := s.entries[key]
	if !ok || !time.Now().Before(me.until) {
		return SharedEntry{}, false, nil
	}
	e := me.e
	e.Value = bytes.Clone(e.Value)
	return e, true, nil
}

func (s *memStore) Claim(ctx context.Context, key string, ttl time.Duration) (func(), bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, "Claim"); err != nil {
		return nil, false, err
	}
	if cl, ok := s.claims[key]; s.heldElsewhere || ok && time.Now().Before(cl.until) {
		return nil, false, nil
	}
	s.claimID++
	id := s.claimID
	s.claims[key] = memClaim{id: id, until: time.Now().Add(ttl)}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calls["release"]++
		if s.claims[key].id == id {
			delete(s.claims, key)
		}
	}, true, nil
}

func (s *memStore) Put(ctx context.Context, key string, e SharedEntry, keep time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, "Put"); err != nil {
		return err
	}
	e.Value = bytes.Clone(e.Value)
	s.entries[key] = memEntry{e: e, until: time.Now().Add(keep)}
	return nil
}

// put stores e for key as another process would, kept a day.
func (s *memStore) put(t *testing.T, key string, e SharedEntry) {
	t.Helper()
	if err := s.Put(context.Background(), key, e, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["Put"]-- // not the cache's
}

// entry returns key's entry and how long it is kept from now.
func (s *memStore) entry(key string) (SharedEntry, time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	me, ok := s.entries[key]
	return me.e, time.Until(me.until), ok && time.Now().Before(me.until)
}

func (s *memStore) count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

func (s *memStore) fail(method string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing[method] = 0
	if on {
		s.failing[method] = s.calls[method] + 1
	}
}

// failFrom makes method fail from its call number first (1 for the first)
// on.
func (s *memStore) failFrom(method string, first int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing[method] = first
}

func (s *memStore) claimed(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cl, ok := s.claims[key]
	return ok && time.Now().Before(cl.until)
}

// encode and decodeValue are the tests' encoding of a string for the
// Store; decodeValue panics on "boom", as a buggy decoder might.
func encode(v string) []byte { return []byte("v:" + v) }

func decodeValue(_ string, data []byte) (string, int64, error) {
	if string(data) == "boom" {
		panic("decoder bug")
	}
	v, ok := strings.CutPrefix(string(data), "v:")
	if !ok {
		return "", 0, fmt.Errorf("not an encoded value: %q", data)
	}
	return v, int64(len(v)), nil
}

// sharing is a LoadFunc that loads from o, sharing the result, after
// taking delay (as a fetch does).
func sharing(o *origin, delay time.Duration) LoadFunc[string] {
	return func(ctx context.Context, key string) Result[string] {
		time.Sleep(delay)
		r := o.load(ctx, key)
		r.Shared = encode(r.Value)
		return r
	}
}

// newProcess returns a Cache sharing store, standing for one process of a
// fleet.
func newProcess(t *testing.T, opts Options, load LoadFunc[string], store Store) *Cache[string] {
	t.Helper()
	c, err := NewShared(opts, load, SecondLevel[string]{Store: store, Decode: decodeValue, ClaimTTL: claimTTL})
	if err != nil {
		t.Fatalf("NewShared: %v", err)
	}
	return c
}

// sameInfo reports whether two Infos are equal, comparing times as
// instants (shared entries carry no monotonic clock reading).
func sameInfo(a, b Info) bool {
	return a.Source == b.Source && a.Outcome == b.Outcome && a.LastOutcome == b.LastOutcome &&
		a.Failed == b.Failed && a.Failures == b.Failures &&
		a.LoadedAt.Equal(b.LoadedAt) && a.ExpiresAt.Equal(b.ExpiresAt)
}

func TestNewSharedValidates(t *testing.T) {
	load := newOrigin(Result[string]{}).load
	valid := SecondLevel[string]{Store: newMemStore(), Decode: decodeValue, ClaimTTL: claimTTL}
	tests := []struct {
		name string
		mod  func(*SecondLevel[string])
		opts Options
		want []string // substrings of the error; none: valid
	}{
		{"valid", func(*SecondLevel[string]) {}, DefaultOptions(), nil},
		{"nil Store", func(s *SecondLevel[string]) { s.Store = nil }, DefaultOptions(), []string{"cache: invalid second level: Store is nil"}},
		{"nil Decode", func(s *SecondLevel[string]) { s.Decode = nil }, DefaultOptions(), []string{"Decode is nil"}},
		{"zero ClaimTTL", func(s *SecondLevel[string]) { s.ClaimTTL = 0 }, DefaultOptions(), []string{"ClaimTTL must be positive, got 0s"}},
		{"negative ClaimTTL", func(s *SecondLevel[string]) { s.ClaimTTL = -time.Second }, DefaultOptions(), []string{"ClaimTTL must be positive, got -1s"}},
		{"every error reported", func(s *SecondLevel[string]) { *s = SecondLevel[string]{} }, DefaultOptions(), []string{"Store", "Decode", "ClaimTTL"}},
		{"invalid Options", func(*SecondLevel[string]) {}, Options{}, []string{"cache: invalid options", "MaxBytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			second := valid
			tt.mod(&second)
			c, err := NewShared(tt.opts, load, second)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("NewShared: %v", err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("NewShared succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestSharedOneLoadForManyGets: many concurrent Gets of a cold key, in two
// processes, make one load: the second process waits for the first's.
func TestSharedOneLoadForManyGets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, o := newMemStore(), newOrigin(Result[string]{MaxAge: time.Hour})
		load := sharing(o, time.Second)
		a := newProcess(t, DefaultOptions(), load, store)
		defer a.Close()
		b := newProcess(t, DefaultOptions(), load, store)
		defer b.Close()
		const key, n = "https://example.com:443", 50

		var wg sync.WaitGroup
		sources := make(map[*Cache[string]][]Source)
		var mu sync.Mutex
		gets := func(c *Cache[string]) {
			for range n {
				wg.Go(func() {
					v, info, err := c.Get(context.Background(), key)
					if err != nil || v != key+"#1" {
						t.Errorf("Get = %q, %v", v, err)
					}
					mu.Lock()
					sources[c] = append(sources[c], info.Source)
					mu.Unlock()
				})
			}
		}
		start := time.Now()
		gets(a)
		synctest.Wait() // a claimed the key and is loading
		gets(b)
		wg.Wait()

		if calls := o.count(key); calls != 1 {
			t.Errorf("%d loads, want 1", calls)
		}
		for c, want := range map[*Cache[string]]Source{a: SourceLoaded, b: SourceShared} {
			for _, src := range sources[c] {
				if src != want {
					t.Fatalf("a Get returned %v, want %v", src, want)
				}
			}
		}
		if sa, sb := a.Stats(), b.Stats(); sa.Shared != (SharedStats{Loaded: 1}) || sb.Shared != (SharedStats{Waited: 1}) ||
			sa.Misses != n || sb.SharedHits != n {
			t.Errorf("Stats: a %+v, b %+v", sa, sb)
		}
		// b noticed a's entry within one poll interval of the load's end.
		if waited := time.Since(start); waited < time.Second || waited > time.Second+maxPollInterval {
			t.Errorf("b waited %s for a 1s load", waited)
		}
		// One flight per process: b asked once before it polled, and
		// a looked again once it had the claim.
		if claims := store.count("Claim"); claims < 2 || claims != store.count("Get")-2 {
			t.Errorf("%d Claims and %d Gets: want one Claim per Get after b's first and a's second", claims, store.count("Get"))
		}
		if store.cancelled != 0 {
			t.Errorf("%d store calls with an ended context", store.cancelled)
		}
		get(t, b, key, key+"#1", SourceHit)
	})
}

// TestSharedWaitOutlivesCaller: a Get that gives up while its process waits
// for another's load gets its context's error; the wait goes on, on a
// context that does not end, and leaves the entry in memory.
func TestSharedWaitOutlivesCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, o := newMemStore(), newOrigin(Result[string]{})
		c := newProcess(t, DefaultOptions(), sharing(o, 0), store)
		defer c.Close()
		const key = "https://example.com:443"
		if _, claimed, _ := store.Claim(context.Background(), key, claimTTL); !claimed {
			t.Fatal("claim refused")
		}
		go func() {
			time.Sleep(3 * time.Second)
			store.put(t, key, SharedEntry{Value: encode("elsewhere"), Outcome: "ok", LastOutcome: "ok",
				LoadedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), GoodAt: time.Now()})
		}()

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, _, err := c.Get(ctx, key); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Get = %v, want context.DeadlineExceeded", err)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		get(t, c, key, "elsewhere", SourceHit)
		if s := c.Stats(); s.Shared != (SharedStats{Waited: 1}) || o.count(key) != 0 || store.cancelled != 0 {
			t.Errorf("Stats %+v, %d loads, %d store calls with an ended context", s, o.count(key), store.cancelled)
		}
	})
}

// TestSharedClaimEndsWithoutEntry: when the process holding the claim
// never puts an entry, the waiting process claims the key itself once the
// claim ends, and loads.
func TestSharedClaimEndsWithoutEntry(t *testing.T) {
	tests := []struct {
		name string
		// end ends the other process's claim, given its release.
		end      func(release func())
		wantWait time.Duration // at least; at most one poll interval more
	}{
		{"claim expires", func(func()) {}, claimTTL},
		{"claim released", func(release func()) { time.Sleep(2 * time.Second); release() }, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store, o := newMemStore(), newOrigin(Result[string]{})
				c := newProcess(t, DefaultOptions(), sharing(o, 0), store)
				defer c.Close()
				const key = "https://example.com:443"
				release, claimed, _ := store.Claim(context.Background(), key, claimTTL)
				if !claimed {
					t.Fatal("claim refused")
				}
				go tt.end(release)
				start := time.Now()
				get(t, c, key, key+"#1", SourceLoaded)
				if waited := time.Since(start); waited < tt.wantWait || waited > tt.wantWait+maxPollInterval {
					t.Errorf("waited %s, want %s to %s", waited, tt.wantWait, tt.wantWait+maxPollInterval)
				}
				if s := c.Stats(); s.Shared != (SharedStats{Takeovers: 1}) {
					t.Errorf("Shared = %+v, want one takeover", s.Shared)
				}
				if e, _, ok := store.entry(key); !ok || string(e.Value) != "v:"+key+"#1" {
					t.Errorf("store holds %+v, %v; want the loaded value", e, ok)
				}
				if store.claimed(key) {
					t.Error("claim not released after the load")
				}
			})
		})
	}
}

// TestSharedWaitIsBounded: when other processes keep the key claimed, the
// wait ends after ClaimTTL plus one poll interval, with a load of its own.
func TestSharedWaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logBuffer
		store, o := newMemStore(), newOrigin(Result[string]{})
		store.heldElsewhere = true
		c := newProcess(t, withOptions(func(o *Options) { o.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) }),
			sharing(o, 0), store)
		defer c.Close()
		const key = "https://example.com:443"
		start := time.Now()
		get(t, c, key, key+"#1", SourceLoaded)
		if waited := time.Since(start); waited != claimTTL+maxPollInterval {
			t.Errorf("waited %s, want %s", waited, claimTTL+maxPollInterval)
		}
		if s := c.Stats(); s.Shared != (SharedStats{Timeouts: 1}) {
			t.Errorf("Shared = %+v, want one timeout", s.Shared)
		}
		if _, _, ok := store.entry(key); !ok {
			t.Error("the value loaded without a claim was not put")
		}
		if recs := logs.records(t, "cache: waited in vain for another process's load, loading without a claim"); len(recs) != 1 {
			t.Errorf("%d warnings, want 1", len(recs))
		}
	})
}

// TestSharedStoreUnavailable: a Store failing at any step makes the refresh
// load alone, as without a Store: no error, no further Store call, and no
// longer than the failing call's own bound.
func TestSharedStoreUnavailable(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the store; it may fail a method later on.
		setup func(t *testing.T, store *memStore, key string)
		// wantCalls are the store's call counts after the Get.
		wantCalls map[string]int
		wantTook  time.Duration
	}{
		{
			name:      "Get fails",
			setup:     func(_ *testing.T, store *memStore, _ string) { store.fail("Get", true) },
			wantCalls: map[string]int{"Get": 1},
			wantTook:  storeBound,
		},
		{
			name:      "Claim fails",
			setup:     func(_ *testing.T, store *memStore, _ string) { store.fail("Claim", true) },
			wantCalls: map[string]int{"Get": 1, "Claim": 1},
			wantTook:  storeBound,
		},
		{
			// The claim is released all the same, in the background: the
			// Store may have failed for this process alone.
			name:  "Put fails",
			setup: func(_ *testing.T, store *memStore, _ string) { store.fail("Put", true) },
			// Get: the first look, and the one after the claim.
			wantCalls: map[string]int{"Get": 2, "Claim": 1, "Put": 1, "release": 1},
			wantTook:  storeBound,
		},
		{
			name:      "Get fails under the claim",
			setup:     func(_ *testing.T, store *memStore, _ string) { store.failFrom("Get", 2) },
			wantCalls: map[string]int{"Get": 2, "Claim": 1, "release": 1},
			wantTook:  storeBound,
		},
		{
			name: "Get fails while waiting",
			setup: func(t *testing.T, store *memStore, key string) {
				if _, claimed, _ := store.Claim(context.Background(), key, claimTTL); !claimed {
					t.Fatal("claim refused")
				}
				go func() {
					time.Sleep(time.Second)
					store.fail("Get", true)
				}()
			},
			// Claim: the test's, the first one and one per poll (10, 20,
			// 40, 80, 160, 200, 200, 200 ms: 910 ms); then a Get fails.
			wantCalls: map[string]int{"Get": 10, "Claim": 10},
			wantTook:  910*time.Millisecond + 200*time.Millisecond + storeBound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store, o := newMemStore(), newOrigin(Result[string]{})
				c := newProcess(t, DefaultOptions(), sharing(o, 0), store)
				defer c.Close()
				const key = "https://example.com:443"
				tt.setup(t, store, key)
				start := time.Now()
				get(t, c, key, key+"#1", SourceLoaded)
				if took := time.Since(start); took != tt.wantTook {
					t.Errorf("Get took %s, want %s", took, tt.wantTook)
				}
				synctest.Wait() // for a release in the background
				for _, m := range []string{"Get", "Claim", "Put", "release"} {
					if got := store.count(m); got != tt.wantCalls[m] {
						t.Errorf("%d %s calls, want %d", got, m, tt.wantCalls[m])
					}
				}
				if s := c.Stats(); s.Shared != (SharedStats{Unavailable: 1}) || s.Misses != 1 {
					t.Errorf("Stats = %+v, want one miss, unavailable", s)
				}
				get(t, c, key, key+"#1", SourceHit) // stored in memory all the same
				if n := o.count(key); n != 1 {
					t.Errorf("%d loads, want 1", n)
				}
			})
		})
	}
}

// TestSharedFreshness: a process takes the shared entry's expiry with its
// value, and loads again when it ends; the other process then takes that.
func TestSharedFreshness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, o := newMemStore(), newOrigin(Result[string]{MaxAge: 10 * time.Minute})
		a := newProcess(t, DefaultOptions(), sharing(o, 0), store)
		defer a.Close()
		b := newProcess(t, DefaultOptions(), sharing(o, 0), store)
		defer b.Close()
		const key = "https://example.com:443"
		loaded := get(t, a, key, key+"#1", SourceLoaded)

		time.Sleep(5 * time.Minute)
		want := loaded
		want.Source = SourceShared
		if info := get(t, b, key, key+"#1", SourceShared); !sameInfo(info, want) {
			t.Errorf("b's Info = %+v\nwant %+v", info, want)
		}
		time.Sleep(5*time.Minute - time.Nanosecond)
		get(t, b, key, key+"#1", SourceHit)
		time.Sleep(time.Nanosecond)
		get(t, b, key, key+"#2", SourceLoaded)
		get(t, a, key, key+"#2", SourceShared)
		if n := o.count(key); n != 2 {
			t.Errorf("%d loads, want 2", n)
		}
		e, keep, _ := store.entry(key)
		wantEntry := SharedEntry{Value: encode(key + "#2"), Outcome: "ok", LastOutcome: "ok",
			LoadedAt: time.Now(), ExpiresAt: time.Now().Add(10 * time.Minute), GoodAt: time.Now()}
		if !sameShared(e, wantEntry) {
			t.Errorf("store holds %+v\nwant %+v", e, wantEntry)
		}
		if wantKeep := DefaultMaxStale + DefaultMaxRetryAfter; keep != wantKeep {
			t.Errorf("kept %s, want %s (MaxStale plus MaxRetryAfter)", keep, wantKeep)
		}
	})
}

func sameShared(a, b SharedEntry) bool {
	return bytes.Equal(a.Value, b.Value) && a.Outcome == b.Outcome && a.LastOutcome == b.LastOutcome &&
		a.Failed == b.Failed && a.Stale == b.Stale && a.Failures == b.Failures &&
		a.LoadedAt.Equal(b.LoadedAt) && a.ExpiresAt.Equal(b.ExpiresAt) && a.GoodAt.Equal(b.GoodAt)
}

// TestSharedStaleIfUnreachable: once loads fail, a process that never held
// the value serves the good value another process loaded, stale.
func TestSharedStaleIfUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, o := newMemStore(), newOrigin(Result[string]{MaxAge: time.Hour})
		a := newProcess(t, DefaultOptions(), sharing(o, 0), store)
		defer a.Close()
		const key = "https://example.com:443"
		good := get(t, a, key, key+"#1", SourceLoaded)

		time.Sleep(time.Hour)
		o.answer(Result[string]{Value: "disallow all", Failed: true, Outcome: "unreachable"})
		stale := get(t, a, key, key+"#1", SourceStale)
		want := Info{Source: SourceStale, Outcome: "ok", LastOutcome: "unreachable", Failures: 1,
			LoadedAt: good.LoadedAt, ExpiresAt: time.Now().Add(DefaultRetryAfter)}
		if !sameInfo(stale, want) {
			t.Errorf("a's Info = %+v\nwant %+v", stale, want)
		}
		if e, _, _ := store.entry(key); !e.Stale || string(e.Value) != "v:"+key+"#1" || !e.GoodAt.Equal(good.LoadedAt) {
			t.Errorf("store holds %+v, want the good value, stale", e)
		}

		b := newProcess(t, DefaultOptions(), sharing(o, 0), store)
		defer b.Close()
		if info := get(t, b, key, key+"#1", SourceStale); !sameInfo(info, want) {
			t.Errorf("b's Info = %+v\nwant %+v", info, want)
		}
		if n := o.count(key); n != 2 {
			t.Errorf("%d loads, want 2", n)
		}
		if s := b.Stats(); s.StaleServes != 1 || s.Shared != (SharedStats{Found: 1}) {
			t.Errorf("b's Stats = %+v", s)
		}
	})
}

// TestSharedFailuresCount: each process's failed load continues the count
// of consecutive failures, and so the backoff, where the other's left it,
// whether the process holds no entry or an older one of its own.
func TestSharedFailuresCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, o := newMemStore(), newOrigin(Result[string]{Value: "disallow all", Failed: true, Outcome: "unreachable"})
		opts := withOptions(func(o *Options) { o.RetryAfter, o.MaxRetryAfter = time.Minute, 5*time.Minute })
		a := newProcess(t, opts, sharing(o, 0), store)
		defer a.Close()
		b := newProcess(t, opts, sharing(o, 0), store)
		defer b.Close()
		const key = "https://down.example:443"
		for i, wait := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute} {
			loader := a
			if i%2 == 1 {
				loader = b
			}
			info := get(t, loader, key, "disallow all", SourceLoaded)
			if !info.Failed || info.Failures != i+1 || info.ExpiresAt.Sub(info.LoadedAt) != wait {
				t.Errorf("failure %d: Info = %+v, want retry after %s", i+1, info, wait)
			}
			time.Sleep(wait)
		}
		if info := get(t, a, key, "disallow all", SourceLoaded); info.Failures != 5 {
			t.Errorf("failure 5: Info = %+v", info)
		}
		if info := get(t, b, key, "disallow all", SourceShared); info.Failures != 5 {
			t.Errorf("the other process's Info = %+v, want failure 5", info)
		}
		if n := o.count(key); n != 5 {
			t.Errorf("%d loads, want 5", n)
		}
	})
}

// TestSharedResultNotShared: a Result without Shared stays in the process
// that loaded it; its claim is released, so the next process loads at once.
func TestSharedResultNotShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, o := newMemStore(), newOrigin(Result[string]{})
		a := newProcess(t, DefaultOptions(), o.load, store)
		defer a.Close()
		b := newProcess(t, DefaultOptions(), o.load, store)
		defer b.Close()
		const key = "https://example.com:443"
		get(t, a, key, key+"#1", SourceLoaded)
		if n := store.count("Put"); n != 0 {
			t.Errorf("%d Puts, want none", n)
		}
		if store.claimed(key) || store.count("release") != 1 {
			t.Error("claim not released")
		}
		start := time.Now()
		get(t, b, key, key+"#2", SourceLoaded)
		if time.Since(start) != 0 {
			t.Errorf("b waited %s", time.Since(start))
		}
		if sa, sb := a.Stats(), b.Stats(); sa.Shared != (SharedStats{Loaded: 1}) || sb.Shared != (SharedStats{Loaded: 1}) {
			t.Errorf("Shared: a %+v, b %+v", sa.Shared, sb.Shared)
		}
	})
}

// TestSharedUndecodableEntry: an entry whose value does not decode, or
// makes the decoder panic, counts as absent: the key is loaded and the
// entry replaced.
func TestSharedUndecodableEntry(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		wantLog string
	}{
		{"not decodable", "garbage", "cache: shared entry does not decode, loading it again"},
		{"decoder panics", "boom", "cache: decode panicked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs logBuffer
				store, o := newMemStore(), newOrigin(Result[string]{})
				c := newProcess(t, withOptions(func(o *Options) { o.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) }),
					sharing(o, 0), store)
				defer c.Close()
				const key = "https://example.com:443"
				store.put(t, key, SharedEntry{Value: []byte(tt.value), Outcome: "ok", LastOutcome: "ok",
					LoadedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), GoodAt: time.Now()})
				get(t, c, key, key+"#1", SourceLoaded)
				if e, _, _ := store.entry(key); string(e.Value) != "v:"+key+"#1" {
					t.Errorf("store holds %q, want the loaded value", e.Value)
				}
				if recs := logs.records(t, tt.wantLog); len(recs) != 1 || recs[0]["key"] != key {
					t.Errorf("%q records: %v", tt.wantLog, recs)
				}
			})
		})
	}
}

// TestSharedEntryNotTrusted: a shared entry with impossible fields (put by
// a process with other options, or corrupt) is bounded as this process's
// own entries are.
func TestSharedEntryNotTrusted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, o := newMemStore(), newOrigin(Result[string]{Value: "disallow all", Failed: true})
		c := newProcess(t, DefaultOptions(), sharing(o, 0), store)
		defer c.Close()
		now := time.Now()
		far := now.Add(100 * 365 * 24 * time.Hour)
		tests := []struct {
			key   string
			entry SharedEntry
			want  Info // just after the put
			// wantNext is the Source of a Get MaxRetryAfter later, with
			// every load failing.
			wantNext Source
		}{
			{"fresh for a century", SharedEntry{Value: encode("v"), LoadedAt: now, ExpiresAt: far, GoodAt: now},
				Info{Source: SourceShared, LoadedAt: now, ExpiresAt: now.Add(DefaultMaxAge)}, SourceHit},
			{"loaded in the future", SharedEntry{Value: encode("v"), LoadedAt: far, ExpiresAt: far, GoodAt: far},
				Info{Source: SourceShared, LoadedAt: far, ExpiresAt: now.Add(DefaultMaxAge)}, SourceHit},
			{"failed, with a good value", SharedEntry{Value: encode("v"), Failed: true, Stale: true, Failures: 2, LoadedAt: now, ExpiresAt: far, GoodAt: now},
				Info{Source: SourceShared, Failed: true, Failures: 2, LoadedAt: now, ExpiresAt: now.Add(DefaultMaxRetryAfter)}, SourceLoaded},
			{"stale, negative failures", SharedEntry{Value: encode("v"), Stale: true, Failures: -5, LoadedAt: now, ExpiresAt: far, GoodAt: now},
				Info{Source: SourceStale, LoadedAt: now, ExpiresAt: now.Add(DefaultMaxRetryAfter)}, SourceStale},
			{"stale past MaxStale", SharedEntry{Value: encode("v"), Stale: true, Failures: 9, LoadedAt: now.Add(-DefaultMaxStale), ExpiresAt: far, GoodAt: now.Add(-DefaultMaxStale)},
				Info{Source: SourceLoaded, Outcome: "failed", LastOutcome: "failed", Failed: true, Failures: 10, LoadedAt: now, ExpiresAt: now.Add(DefaultMaxRetryAfter)}, SourceLoaded},
			{"stale without a good value", SharedEntry{Value: encode("v"), Stale: true, Failures: 1, LoadedAt: now, ExpiresAt: far},
				Info{Source: SourceLoaded, Outcome: "failed", LastOutcome: "failed", Failed: true, Failures: 2, LoadedAt: now, ExpiresAt: now.Add(2 * DefaultRetryAfter)}, SourceLoaded},
		}
		for _, tt := range tests {
			store.put(t, tt.key, tt.entry)
			if _, info, err := c.Get(context.Background(), tt.key); err != nil || !sameInfo(info, tt.want) {
				t.Errorf("%s: Info = %+v, %v\nwant %+v", tt.key, info, err, tt.want)
			}
		}
		time.Sleep(DefaultMaxRetryAfter)
		for _, tt := range tests {
			if _, info, _ := c.Get(context.Background(), tt.key); info.Source != tt.wantNext {
				t.Errorf("%s: later %v, want %v", tt.key, info.Source, tt.wantNext)
			}
		}
	})
}

// TestSharedNeverForgetsOwnGoodValue: a process whose own good value is
// newer than the shared entry's (loaded while the Store was unavailable)
// keeps serving it, stale, when the shared entry holds a failure or an
// older good value; a good shared entry, or an own value past MaxStale,
// gives way.
func TestSharedNeverForgetsOwnGoodValue(t *testing.T) {
	const key = "https://example.com:443"
	tests := []struct {
		name string
		// shared is the entry another process puts, given when this
		// process loaded its own value; it is needed 5 minutes later.
		shared     func(ownAt time.Time) SharedEntry
		age        time.Duration // of this process's own value when it is next needed
		wantValue  string
		wantSource Source
	}{
		{
			name: "failure",
			shared: func(time.Time) SharedEntry {
				return SharedEntry{Value: encode("disallow all"), Outcome: "unreachable", LastOutcome: "unreachable",
					Failed: true, Failures: 3, LoadedAt: time.Now(), ExpiresAt: time.Now().Add(10 * time.Minute)}
			},
			age:        2 * time.Hour,
			wantValue:  key + "#1",
			wantSource: SourceStale,
		},
		{
			name: "older good value, stale",
			shared: func(ownAt time.Time) SharedEntry {
				old := ownAt.Add(-time.Hour)
				return SharedEntry{Value: encode("older"), Outcome: "ok", LastOutcome: "unreachable",
					Stale: true, Failures: 3, LoadedAt: old, ExpiresAt: time.Now().Add(10 * time.Minute), GoodAt: old}
			},
			age:        2 * time.Hour,
			wantValue:  key + "#1",
			wantSource: SourceStale,
		},
		{
			name: "own value past MaxStale",
			shared: func(time.Time) SharedEntry {
				return SharedEntry{Value: encode("disallow all"), Outcome: "unreachable", LastOutcome: "unreachable",
					Failed: true, Failures: 3, LoadedAt: time.Now(), ExpiresAt: time.Now().Add(10 * time.Minute)}
			},
			age:        DefaultMaxStale,
			wantValue:  "disallow all",
			wantSource: SourceShared,
		},
		{
			name: "older good value, fresh",
			shared: func(ownAt time.Time) SharedEntry {
				old := ownAt.Add(-time.Hour)
				return SharedEntry{Value: encode("older"), Outcome: "ok", LastOutcome: "ok",
					LoadedAt: old, ExpiresAt: time.Now().Add(10 * time.Minute), GoodAt: old}
			},
			age:        2 * time.Hour,
			wantValue:  "older",
			wantSource: SourceShared,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store, o := newMemStore(), newOrigin(Result[string]{MaxAge: time.Hour})
				c := newProcess(t, DefaultOptions(), sharing(o, 0), store)
				defer c.Close()
				store.fail("Put", true)
				own := get(t, c, key, key+"#1", SourceLoaded)
				store.fail("Put", false)

				time.Sleep(tt.age - 5*time.Minute)
				shared := tt.shared(own.LoadedAt)
				store.put(t, key, shared)
				time.Sleep(5 * time.Minute)
				info := get(t, c, key, tt.wantValue, tt.wantSource)
				if n := o.count(key); n != 1 {
					t.Errorf("%d loads, want 1: the shared entry is fresh", n)
				}
				if info.Failures != shared.Failures || !info.ExpiresAt.Equal(shared.ExpiresAt) {
					t.Errorf("Info = %+v, want the shared entry's failures and retry", info)
				}
				if tt.wantSource == SourceStale && !info.LoadedAt.Equal(own.LoadedAt) {
					t.Errorf("LoadedAt = %v, want the own value's, %v", info.LoadedAt, own.LoadedAt)
				}
			})
		})
	}
}

// TestSharedPutKeepsEncodedGoodValues: a failed load leaves in the Store
// the newest good value whose encoding the Store gave; a good value only
// this process holds is served here and not put, the failure is.
func TestSharedPutKeepsEncodedGoodValues(t *testing.T) {
	const key = "https://example.com:443"
	tests := []struct {
		name string
		// shared is the expired entry the Store holds when the load
		// fails, given when this process loaded its own value (zero: it
		// holds none).
		shared    func(ownAt time.Time) SharedEntry
		ownValue  bool
		wantValue string // served
		wantPut   SharedEntry
	}{
		{
			name: "own good value only",
			shared: func(time.Time) SharedEntry {
				return SharedEntry{Value: encode("disallow all"), Outcome: "unreachable", LastOutcome: "unreachable",
					Failed: true, Failures: 2, LoadedAt: time.Now().Add(-time.Minute), ExpiresAt: time.Now()}
			},
			ownValue:  true,
			wantValue: key + "#1",
			wantPut: SharedEntry{Value: encode("disallow all"), Outcome: "unreachable", LastOutcome: "unreachable",
				Failed: true, Failures: 3},
		},
		{
			name: "own good value newer than the shared one",
			shared: func(ownAt time.Time) SharedEntry {
				old := ownAt.Add(-time.Hour)
				return SharedEntry{Value: encode("older"), Outcome: "ok", LastOutcome: "unreachable",
					Stale: true, Failures: 2, LoadedAt: old, ExpiresAt: time.Now(), GoodAt: old}
			},
			ownValue:  true,
			wantValue: key + "#1",
			wantPut: SharedEntry{Value: encode("older"), Outcome: "ok", LastOutcome: "unreachable",
				Stale: true, Failures: 3},
		},
		{
			name: "shared good value only",
			shared: func(time.Time) SharedEntry {
				old := time.Now().Add(-2 * time.Hour)
				return SharedEntry{Value: encode("shared"), Outcome: "ok", LastOutcome: "ok",
					LoadedAt: old, ExpiresAt: time.Now(), GoodAt: old}
			},
			wantValue: "shared",
			wantPut: SharedEntry{Value: encode("shared"), Outcome: "ok", LastOutcome: "unreachable",
				Stale: true, Failures: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store, o := newMemStore(), newOrigin(Result[string]{MaxAge: time.Hour})
				c := newProcess(t, DefaultOptions(), sharing(o, 0), store)
				defer c.Close()
				var ownAt time.Time
				if tt.ownValue {
					store.fail("Put", true)
					ownAt = get(t, c, key, key+"#1", SourceLoaded).LoadedAt
					store.fail("Put", false)
				}
				time.Sleep(3 * time.Hour)
				shared := tt.shared(ownAt)
				store.put(t, key, shared)
				o.answer(Result[string]{Value: "disallow all", Failed: true, Outcome: "unreachable"})
				info := get(t, c, key, tt.wantValue, SourceStale)
				if info.Failures != tt.wantPut.Failures {
					t.Errorf("Failures = %d, want %d", info.Failures, tt.wantPut.Failures)
				}
				got, keep, _ := store.entry(key)
				want := tt.wantPut
				want.ExpiresAt = time.Now().Add(DefaultRetryAfter << (want.Failures - 1))
				if want.Failed {
					want.LoadedAt = time.Now()
				} else {
					want.LoadedAt, want.GoodAt = shared.GoodAt, shared.GoodAt
				}
				if !sameShared(got, want) {
					t.Errorf("store holds %+v\nwant %+v", got, want)
				}
				wantKeep := want.ExpiresAt.Sub(time.Now())
				if !want.Failed {
					wantKeep = want.GoodAt.Add(DefaultMaxStale).Sub(time.Now())
				}
				if keep != wantKeep+DefaultMaxRetryAfter {
					t.Errorf("kept %s, want %s", keep, wantKeep+DefaultMaxRetryAfter)
				}
			})
		})
	}
}

// TestSharedEveryGetCountedOnce: with a second level too, each Get is
// counted once, so hits+misses+stale+shared is the number of Gets.
func TestSharedEveryGetCountedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, o := newMemStore(), newOrigin(Result[string]{MaxAge: time.Hour})
		a := newProcess(t, DefaultOptions(), sharing(o, 0), store)
		defer a.Close()
		b := newProcess(t, DefaultOptions(), sharing(o, 0), store)
		defer b.Close()
		gets := 0
		expect := func(c *Cache[string], key string, want Source) {
			t.Helper()
			gets++
			get(t, c, key, "", want)
		}
		expect(a, "x", SourceLoaded)
		expect(b, "x", SourceShared)
		expect(b, "x", SourceHit)
		expect(b, "y", SourceLoaded)
		time.Sleep(time.Hour)
		o.answer(Result[string]{Failed: true})
		expect(b, "x", SourceStale)
		expect(b, "x", SourceStale)
		expect(b, "y", SourceStale)
		s := b.Stats()
		if s.Hits != 1 || s.Misses != 1 || s.StaleServes != 3 || s.SharedHits != 1 {
			t.Errorf("Stats = %+v", s)
		}
		if sum := s.Hits + s.Misses + s.StaleServes + s.SharedHits; sum != uint64(gets-1) {
			t.Errorf("hits+misses+stale+shared = %d, want %d, the number of b's Gets", sum, gets-1)
		}
	})
}

// racedStore is a Store in which another process acts, by race, between
// a caller's first look and its first claim.
type racedStore struct {
	*memStore
	race func(ctx context.Context, key string) error
}

func (s racedStore) Claim(ctx context.Context, key string, ttl time.Duration) (func(), bool, error) {
	if s.memStore.count("Claim") == 0 {
		if err := s.race(ctx, key); err != nil {
			return nil, false, err
		}
	}
	return s.memStore.Claim(ctx, key, ttl)
}

// TestSharedLooksAgainUnderClaim: a process that wins the claim right
// after another released it, entry put, takes that entry: a fleet
// starting cold loads once.
func TestSharedLooksAgainUnderClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, o := newMemStore(), newOrigin(Result[string]{MaxAge: time.Hour})
		other := newProcess(t, DefaultOptions(), sharing(o, 0), store)
		defer other.Close()
		// The other process loads key, puts its entry and releases its
		// claim.
		c := newProcess(t, DefaultOptions(), sharing(o, 0), racedStore{store, func(ctx context.Context, key string) error {
			_, _, err := other.Get(ctx, key)
			return err
		}})
		defer c.Close()
		const key = "https://example.com:443"
		get(t, c, key, key+"#1", SourceShared)
		if n := o.count(key); n != 1 {
			t.Errorf("%d loads, want 1", n)
		}
		if store.claimed(key) {
			t.Error("the claim taken after the other's load is still held")
		}
		if s := c.Stats().Shared; s != (SharedStats{Found: 1}) {
			t.Errorf("Stats().Shared = %+v, want one entry found", s)
		}
	})
}

// TestSharedLooksAgainUnderClaimAtRetry: a stale entry another process
// puts between this process's look and its claim is a new one, though it
// keeps the LoadedAt of the entry seen (its good value's): this process
// takes it rather than retry at once and put the failure count it saw
// over the fleet's.
func TestSharedLooksAgainUnderClaimAtRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore()
		o := newOrigin(Result[string]{Value: "disallow all", Failed: true, Outcome: "unreachable"})
		const key = "https://example.com:443"
		goodAt := time.Now().Add(-time.Hour)
		seen := SharedEntry{Value: encode(key + "#1"), Outcome: "ok", LastOutcome: "unreachable",
			Stale: true, Failures: 2, LoadedAt: goodAt, ExpiresAt: time.Now(), GoodAt: goodAt}
		store.put(t, key, seen)
		retried := seen
		retried.Failures, retried.ExpiresAt = 3, time.Now().Add(4*time.Minute)
		c := newProcess(t, DefaultOptions(), sharing(o, 0), racedStore{store, func(ctx context.Context, key string) error {
			return store.Put(ctx, key, retried, 24*time.Hour)
		}})
		defer c.Close()

		info := get(t, c, key, key+"#1", SourceStale)
		want := Info{Source: SourceStale, Outcome: "ok", LastOutcome: "unreachable", Failures: 3,
			LoadedAt: goodAt, ExpiresAt: retried.ExpiresAt}
		if !sameInfo(info, want) {
			t.Errorf("Info = %+v\nwant %+v", info, want)
		}
		if n := o.count(key); n != 0 {
			t.Errorf("%d loads, want none", n)
		}
		if e, _, _ := store.entry(key); !sameShared(e, retried) {
			t.Errorf("store holds %+v\nwant the other process's %+v", e, retried)
		}
		if n := store.count("Put"); n != 1 {
			t.Errorf("%d Puts, want the other process's only", n)
		}
		if store.claimed(key) {
			t.Error("the claim is still held")
		}
		if s := c.Stats().Shared; s != (SharedStats{Found: 1}) {
			t.Errorf("Stats().Shared = %+v, want one entry found", s)
		}
	})
}
