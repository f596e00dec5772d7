package cache

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// discarded is the Result of a load that could not be made.
var discarded = Result[string]{Value: "not loaded", Discard: true, Outcome: "no_slot"}

// TestDiscardedIsStoredNowhere: a discarded result is returned to its Get
// and kept nowhere: not as a value, not as a failure (no backoff, no
// failure count), so the next Get loads again at once.
func TestDiscardedIsStoredNowhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newOrigin(discarded)
		c := newCache(t, DefaultOptions(), o.load)
		defer c.Close()
		const key = "https://example.com:443"
		for i := range 2 {
			info := get(t, c, key, "not loaded", SourceLoaded)
			want := Info{Source: SourceLoaded, Outcome: "no_slot", LastOutcome: "no_slot", LoadedAt: time.Now(), ExpiresAt: time.Now()}
			if info != want {
				t.Errorf("Get %d: Info = %+v\nwant %+v", i+1, info, want)
			}
		}
		if n := o.count(key); n != 2 {
			t.Errorf("%d loads, want 2: a discarded result was kept", n)
		}
		o.answer(Result[string]{MaxAge: time.Hour})
		if info := get(t, c, key, key+"#3", SourceLoaded); info.Failures != 0 || info.Failed {
			t.Errorf("Info after the discards = %+v, want no failure", info)
		}
		if s := c.Stats(); s.FailedLoads != 0 || s.Loads["no_slot"] != 2 || s.Loads["ok"] != 1 || s.Misses != 3 {
			t.Errorf("Stats = %+v, want 2 no_slot loads, none failed", s)
		}

		// Discard wins over Failed; its default outcome says so.
		o.answer(Result[string]{Discard: true, Failed: true})
		time.Sleep(time.Hour)
		if info := get(t, c, key, "", SourceStale); info.LastOutcome != "discarded" || info.Failures != 0 {
			t.Errorf("a discarded Failed result: Info = %+v, want outcome discarded, no failure", info)
		}
		if s := c.Stats(); s.FailedLoads != 0 {
			t.Errorf("%d failed loads, want none", s.FailedLoads)
		}
	})
}

// TestDiscardedKeepsGoodValue: a discarded load neither replaces nor hides
// a good value: it is served stale (within MaxStale), the entry stays as it
// was, and the next Get loads again, with no backoff.
func TestDiscardedKeepsGoodValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newOrigin(Result[string]{MaxAge: time.Hour})
		c := newCache(t, DefaultOptions(), o.load)
		defer c.Close()
		const key = "https://example.com:443"
		good := get(t, c, key, key+"#1", SourceLoaded)

		time.Sleep(time.Hour)
		o.answer(discarded)
		for i := range 2 {
			info := get(t, c, key, key+"#1", SourceStale)
			want := Info{Source: SourceStale, Outcome: "ok", LastOutcome: "no_slot", LoadedAt: good.LoadedAt, ExpiresAt: time.Now()}
			if info != want {
				t.Errorf("Get %d: Info = %+v\nwant %+v", i+1, info, want)
			}
		}
		o.answer(Result[string]{Value: "disallow all", Failed: true, Outcome: "unreachable"})
		if info := get(t, c, key, key+"#1", SourceStale); info.Failures != 1 {
			t.Errorf("a real failure after the discards: Info = %+v, want failure 1", info)
		}
		if n := o.count(key); n != 4 {
			t.Errorf("%d loads, want 4", n)
		}

		// Past MaxStale the discarded result itself is served, and the
		// failure count of the real failures before it is kept.
		time.Sleep(DefaultMaxStale - time.Hour) // MaxStale after the good load
		o.answer(discarded)
		if info := get(t, c, key, "not loaded", SourceLoaded); info.Failed || info.Failures != 1 || info.Outcome != "no_slot" {
			t.Errorf("discarded past MaxStale: Info = %+v", info)
		}
	})
}

// TestDiscardedGoesToItsCallerOnly: a load discarded for its caller (see
// CallerKey) goes to that caller's Gets only; the Gets of other callers
// that joined it load again, one load per caller.
func TestDiscardedGoesToItsCallerOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var mu sync.Mutex
		var loads []string
		load := func(ctx context.Context, key string) Result[string] {
			caller := callerOf(ctx)
			mu.Lock()
			loads = append(loads, caller)
			mu.Unlock()
			if caller == "hostile" {
				<-release
				return discarded
			}
			return Result[string]{Value: "rules of " + caller, MaxAge: time.Hour}
		}
		c := newCache(t, DefaultOptions(), load)
		defer c.Close()
		const key = "https://example.com:443"
		type got struct{ caller, value string }
		var gets []got
		var wg sync.WaitGroup
		for _, caller := range []string{"hostile", "hostile", "healthy", "healthy", "other"} {
			wg.Go(func() {
				v, _, err := c.Get(context.WithValue(context.Background(), CallerKey{}, caller), key)
				if err != nil {
					t.Errorf("%s: %v", caller, err)
				}
				mu.Lock()
				gets = append(gets, got{caller, v})
				mu.Unlock()
			})
			synctest.Wait() // hostile's load has started; the others have joined it
		}
		close(release)
		wg.Wait()
		for _, g := range gets {
			// A caller's own load, or the entry another's just stored.
			if ok := strings.HasPrefix(g.value, "rules of "); ok == (g.caller == "hostile") {
				t.Errorf("%s got %q", g.caller, g.value)
			}
		}
		perCaller := map[string]int{}
		for _, caller := range loads {
			perCaller[caller]++
		}
		if loads[0] != "hostile" || perCaller["hostile"] != 1 || perCaller["healthy"] > 1 || perCaller["other"] > 1 || len(loads) < 2 {
			t.Errorf("loads on the contexts of %v, want hostile's, then at most one for each other caller", loads)
		}
		if v, info, _ := c.Get(context.Background(), key); info.Source != SourceHit || !strings.HasPrefix(v, "rules of ") {
			t.Errorf("after the loads: %q from %v, want a hit", v, info.Source)
		}
	})
}

// TestSharedDiscardedNotPut: in a fleet, a discarded result is not put in
// the Store and the claim is released, so another process loads at once;
// a good value from the Store is served stale instead of it.
func TestSharedDiscardedNotPut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, o := newMemStore(), newOrigin(discarded)
		a := newProcess(t, DefaultOptions(), sharing(o, 0), store)
		defer a.Close()
		const key = "https://example.com:443"
		get(t, a, key, "not loaded", SourceLoaded)
		if n := store.count("Put"); n != 0 {
			t.Errorf("%d Puts of a discarded result, want none", n)
		}
		if store.claimed(key) {
			t.Error("claim not released")
		}

		o.answer(Result[string]{MaxAge: time.Hour})
		b := newProcess(t, DefaultOptions(), sharing(o, 0), store)
		defer b.Close()
		good := get(t, b, key, key+"#2", SourceLoaded)
		time.Sleep(time.Hour)
		o.answer(discarded)
		info := get(t, a, key, key+"#2", SourceStale)
		if info.LastOutcome != "no_slot" || !info.LoadedAt.Equal(good.LoadedAt) || info.Failures != 0 {
			t.Errorf("Info = %+v, want the Store's good value, stale", info)
		}
		if e, _, _ := store.entry(key); e.LastOutcome != "ok" || e.Stale {
			t.Errorf("store holds %+v, want the good entry untouched", e)
		}
	})
}

// TestConcurrentStoresKeepTheEntry: two flights that store one key at once
// (as the Gets of two callers do after a discarded load) leave it held.
func TestConcurrentStoresKeepTheEntry(t *testing.T) {
	for range 100 { // before stores were one at a time, a few in a hundred lost it
		synctest.Test(t, func(t *testing.T) {
			o := newOrigin(Result[string]{MaxAge: time.Hour})
			c := newCache(t, DefaultOptions(), o.load)
			defer c.Close()
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() { c.refresh(context.Background(), "k") })
			}
			wg.Wait()
			if e, _ := c.lookup("k", c.clock()); e == nil {
				t.Fatalf("after %d loads the key is not held", o.count("k"))
			}
		})
	}
}
