package pace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var errUnavailable = errors.New("shared schedules unavailable")

// memSchedules is SharedSchedules as its contract asks, in memory: one
// GCRA step per Take, atomic under a lock, on the clock now (time.Now in a
// synctest bubble). It logs every call and fails them all while failing
// is set: a test double of a fleet's store.
type memSchedules struct {
	now func() time.Time

	mu      sync.Mutex
	next    map[string]int64 // earliest start of the key's next request, in ns
	calls   []sharedCall
	failing bool
	// slow, when set, holds the reply of the next Take, made already,
	// until it is closed: a reply that comes late.
	slow chan struct{}
}

// sharedCall is one call a memSchedules received.
type sharedCall struct {
	op                string // "take", "give back" or "extend"
	key               string
	interval, maxWait time.Duration
	slot              int64
	ctxDone           bool // its context had ended
}

func newMemSchedules() *memSchedules {
	return &memSchedules{now: time.Now, next: make(map[string]int64)}
}

func (m *memSchedules) Take(ctx context.Context, key string, interval, maxWait time.Duration) (int64, time.Duration, bool, error) {
	m.mu.Lock()
	slow := m.slow
	m.slow = nil
	m.mu.Unlock()
	if slow != nil {
		defer func() { <-slow }() // after the unlock: defers run last first
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, sharedCall{op: "take", key: key, interval: interval, maxWait: maxWait, ctxDone: ctx.Err() != nil})
	if m.failing {
		return 0, 0, false, errUnavailable
	}
	now, next := m.now().UnixNano(), m.next[key]
	if next <= now {
		m.next[key] = now + int64(interval)
		return now, 0, true, nil
	}
	early := time.Duration(next - now)
	if early > maxWait {
		return 0, early, false, nil
	}
	m.next[key] = next + int64(interval)
	return next, early, true, nil
}

func (m *memSchedules) GiveBack(ctx context.Context, key string, slot int64, interval time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, sharedCall{op: "give back", key: key, interval: interval, slot: slot, ctxDone: ctx.Err() != nil})
	if m.failing {
		return errUnavailable
	}
	if m.next[key] == slot+int64(interval) {
		m.next[key] = slot
	}
	return nil
}

func (m *memSchedules) Extend(ctx context.Context, key string, slot int64, by time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, sharedCall{op: "extend", key: key, interval: by, slot: slot, ctxDone: ctx.Err() != nil})
	if m.failing {
		return errUnavailable
	}
	m.next[key] = max(m.next[key], slot+int64(by))
	return nil
}

// log returns the calls received so far.
func (m *memSchedules) log() []sharedCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

func (m *memSchedules) setFailing(failing bool) {
	m.mu.Lock()
	m.failing = failing
	m.mu.Unlock()
}

// slowNext makes the next Take's reply wait until reply is closed.
func (m *memSchedules) slowNext(reply chan struct{}) {
	m.mu.Lock()
	m.slow = reply
	m.mu.Unlock()
}

// forget drops every schedule, as a restarted Redis does.
func (m *memSchedules) forget() {
	m.mu.Lock()
	clear(m.next)
	m.mu.Unlock()
}

// counter is the value of the Pacer's counter name, and whether it exports
// one.
func counter(t *testing.T, p *Pacer, name string) (float64, bool) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// TestSharedOneSchedule: two Pacers sharing their schedules pace an
// identity as one Pacer would, each keeping only the starts it handed out.
func TestSharedOneSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemSchedules()
		first, second := New(Options{Shared: store}), New(Options{Shared: store})
		ctx := context.Background()
		d := delay(time.Second)
		if a := first.Admit(ctx, origin, origin, gptbot, d); a.Outcome != OnTime || !a.Allowed() {
			t.Fatalf("first request: %v", a.Outcome)
		}
		if a := second.Admit(ctx, origin, origin, Identity{Token: "gptbot"}, d); a.Outcome != TooEarly || a.Allowed() || a.RetryAfter != time.Second {
			t.Fatalf("the other instance right after: %v, retry after %v; want too early, 1s", a.Outcome, a.RetryAfter)
		}
		time.Sleep(400 * time.Millisecond)
		if a := second.Admit(ctx, origin, origin, gptbot, d); a.Outcome != TooEarly || a.RetryAfter != 600*time.Millisecond {
			t.Fatalf("400ms later: %v, retry after %v; want too early, 600ms", a.Outcome, a.RetryAfter)
		}
		time.Sleep(600 * time.Millisecond)
		if a := second.Admit(ctx, origin, origin, gptbot, d); a.Outcome != OnTime {
			t.Fatalf("at the slot: %v", a.Outcome)
		}
		if a := first.Admit(ctx, origin, origin, gptbot, d); a.Outcome != TooEarly || a.RetryAfter != time.Second {
			t.Fatalf("the first instance after the other's start: %v, retry after %v", a.Outcome, a.RetryAfter)
		}
		if a := first.Admit(ctx, origin, origin, Identity{Token: "bingbot"}, d); a.Outcome != OnTime {
			t.Fatalf("another identity: %v", a.Outcome)
		}
		// The first's bingbot, the second's gptbot: each until 2s.
		if n, m := first.Schedules(), second.Schedules(); n != 1 || m != 1 {
			t.Errorf("%d and %d schedules kept locally, want 1 each", n, m)
		}
		for _, c := range store.log() {
			if c.op != "take" || c.interval != time.Second || c.maxWait != 0 {
				t.Errorf("call %+v, want takes of 1s intervals with no wait", c)
			}
		}
		for _, p := range []*Pacer{first, second} {
			if n, ok := counter(t, p, "robotsgate_pace_shared_takes_total"); !ok || n != 3 {
				t.Errorf("shared takes %v (exported %v), want 3", n, ok)
			}
		}
	})
}

// TestSharedWait: a burst spread over two Pacers in wait mode goes out one
// interval apart, each request held exactly until the slot the shared
// schedule gave it, until the wait would pass MaxWait.
func TestSharedWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemSchedules()
		opts := Options{Mode: ModeWait, MaxWait: 2500 * time.Millisecond, Shared: store}
		pacers := []*Pacer{New(opts), New(opts)}
		ctx := context.Background()
		start := time.Now()
		var mu sync.Mutex
		var starts []time.Duration
		var refused []Admission
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				a := pacers[i%2].Admit(ctx, origin, origin, gptbot, delay(time.Second))
				mu.Lock()
				defer mu.Unlock()
				if !a.Allowed() {
					refused = append(refused, a)
					return
				}
				starts = append(starts, time.Since(start))
				if want := time.Duration(len(starts)-1) * time.Second; a.Waited != want {
					t.Errorf("request %d waited %v, want %v", i, a.Waited, want)
				}
			})
			synctest.Wait() // in order
		}
		if n := pacers[0].waiting.Load() + pacers[1].waiting.Load(); n != 2 {
			t.Errorf("%d requests held, want 2", n)
		}
		wg.Wait()
		want := []time.Duration{0, time.Second, 2 * time.Second}
		if fmt.Sprint(starts) != fmt.Sprint(want) {
			t.Errorf("starts %v, want %v", starts, want)
		}
		if len(refused) != 1 || refused[0].Outcome != TooEarly || refused[0].RetryAfter != 3*time.Second {
			t.Errorf("the fourth, 3s away with a 2.5s bound: %+v", refused)
		}
		for _, c := range store.log() {
			if c.maxWait != opts.MaxWait {
				t.Errorf("call %+v, want MaxWait %v", c, opts.MaxWait)
			}
		}
	})
}

// TestSharedGone: a client that hangs up while held gives its shared slot
// back, on a context that has not ended, so that a request through the
// other instance may have it.
func TestSharedGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemSchedules()
		opts := Options{Mode: ModeWait, MaxWait: time.Minute, Shared: store}
		first, second := New(opts), New(opts)
		d := delay(time.Second)
		start := time.Now()
		first.Admit(context.Background(), origin, origin, gptbot, d) // next slot at 1s

		ctx, hangUp := context.WithCancel(context.Background())
		gone := make(chan Admission)
		go func() { gone <- second.Admit(ctx, origin, origin, gptbot, d) }()
		synctest.Wait()
		time.Sleep(500 * time.Millisecond)
		hangUp()
		if a := <-gone; a.Outcome != Gone || a.Allowed() {
			t.Fatalf("hung up: %v allowed %v", a.Outcome, a.Allowed())
		}
		calls := store.log()
		giveBack := calls[len(calls)-1]
		if giveBack.op != "give back" || giveBack.key != sharedKey(origin, gptbot) || giveBack.slot != start.Add(time.Second).UnixNano() ||
			giveBack.interval != time.Second || giveBack.ctxDone {
			t.Fatalf("last call %+v, want the 1s slot given back on a live context", giveBack)
		}
		a := first.Admit(context.Background(), origin, origin, gptbot, d)
		if a.Outcome != Waited || a.Waited != 500*time.Millisecond {
			t.Fatalf("after the hang-up: %v after %v; want the freed 1s slot, 500ms away", a.Outcome, a.Waited)
		}
	})
}

// TestSharedUndo: a request that never reached the origin, undone or
// refused at the connection bound, gives its shared slot back, once.
func TestSharedUndo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemSchedules()
		first, second := New(Options{Shared: store}), New(Options{Shared: store, MaxConnsPerOrigin: 1})
		ctx := context.Background()
		d := delay(time.Minute)
		a := first.Admit(ctx, origin, origin, gptbot, d)
		a.Undo()
		a.Undo() // twice is harmless
		if n := len(store.log()); n != 2 {
			t.Errorf("%d calls, want a take and one give back: %+v", n, store.log())
		}
		if b := second.Admit(ctx, origin, origin, gptbot, d); b.Outcome != OnTime {
			t.Fatalf("after Undo: %v", b.Outcome)
		}
		// The connection bound: the request takes a slot, then finds no
		// connection, and gives the slot back.
		other := Identity{Token: "bingbot"}
		busy := second.Admit(ctx, origin, origin, other, d)
		if busy.Outcome != Busy {
			t.Fatalf("past the connection bound: %v", busy.Outcome)
		}
		if b := first.Admit(ctx, origin, origin, other, d); b.Outcome != OnTime {
			t.Errorf("the slot of the busy request: %v, want it given back", b.Outcome)
		}
	})
}

// TestSharedAudit: audit mode forwards a request that came too early,
// counting its connection, and reserves nothing for it.
func TestSharedAudit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemSchedules()
		first, second := New(Options{Mode: ModeAudit, Shared: store}), New(Options{Mode: ModeAudit, Shared: store, MaxConnsPerOrigin: 1})
		ctx := context.Background()
		d := delay(time.Second)
		first.Admit(ctx, origin, origin, gptbot, d)
		time.Sleep(400 * time.Millisecond)
		a := second.Admit(ctx, origin, origin, gptbot, d)
		if a.Outcome != TooEarly || !a.Allowed() || a.RetryAfter != 600*time.Millisecond {
			t.Fatalf("audit: %v allowed %v retry %v", a.Outcome, a.Allowed(), a.RetryAfter)
		}
		if b := second.Admit(ctx, origin, origin, Identity{Token: "bingbot"}, Delay{}); b.Outcome != Busy || !b.Allowed() {
			t.Errorf("audit, beside the early request in flight: %v, want busy: it holds the connection", b.Outcome)
		}
		a.Done()
		time.Sleep(600 * time.Millisecond)
		if a := first.Admit(ctx, origin, origin, gptbot, d); a.Outcome != OnTime {
			t.Errorf("at the slot: %v, want on time: the early request reserved nothing", a.Outcome)
		}
	})
}

// TestSharedFallback: while the shared schedules fail, each request is
// paced by the Pacer's own schedule, and counted; once they work again,
// they pace again. A client gone while they failed goes no further. A
// request the Pacer's own schedule refuses is refused without asking.
func TestSharedFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemSchedules()
		store.setFailing(true)
		p := New(Options{Shared: store})
		ctx := context.Background()
		d := delay(time.Second)
		if a := p.Admit(ctx, origin, origin, gptbot, d); a.Outcome != OnTime {
			t.Fatalf("first request, store failing: %v", a.Outcome)
		}
		time.Sleep(time.Second)
		if a := p.Admit(ctx, origin, origin, gptbot, d); a.Outcome != OnTime {
			t.Fatalf("a second later, store failing: %v", a.Outcome)
		}
		if a := p.Admit(ctx, origin, origin, gptbot, d); a.Outcome != TooEarly || a.RetryAfter != time.Second {
			t.Fatalf("right after, store failing: %v, retry after %v; want the local schedule's too early, 1s", a.Outcome, a.RetryAfter)
		}
		if n := len(store.log()); n != 2 {
			t.Errorf("%d calls, want 2: the early request is refused without asking", n)
		}
		if n := p.Schedules(); n != 1 {
			t.Errorf("%d local schedules, want 1", n)
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if a := p.Admit(cancelled, origin, origin, Identity{Token: "bingbot"}, d); a.Outcome != Gone || a.Allowed() {
			t.Errorf("client gone while the store failed: %v", a.Outcome)
		}
		if n, ok := counter(t, p, "robotsgate_pace_shared_fallbacks_total"); !ok || n != 2 {
			t.Errorf("fallbacks %v (exported %v), want 2", n, ok)
		}
		store.setFailing(false)
		if a := p.Admit(ctx, origin, origin, Identity{Token: "bingbot"}, d); a.Outcome != OnTime {
			t.Fatalf("store back: %v", a.Outcome)
		}
		if a := p.Admit(ctx, origin, origin, Identity{Token: "bingbot"}, d); a.Outcome != TooEarly {
			t.Fatalf("store back, second request: %v", a.Outcome)
		}
		if n := p.Schedules(); n != 2 {
			t.Errorf("%d local schedules once the store is back, want 2: gptbot's of before and bingbot's", n)
		}
		if n, _ := counter(t, p, "robotsgate_pace_shared_fallbacks_total"); n != 2 {
			t.Errorf("fallbacks %v once the store is back, want still 2", n)
		}
		if n, _ := counter(t, p, "robotsgate_pace_shared_takes_total"); n != 1 {
			t.Errorf("shared takes %v, want 1", n)
		}
	})
}

// TestSharedFailsAfterTake: a Pacer keeps the starts it took on the shared
// schedules, and goes on from them when the shared schedules fail: the
// identity that just had its start is not let through again at once.
func TestSharedFailsAfterTake(t *testing.T) {
	for _, c := range []struct {
		opts    Options
		outcome Outcome
		retry   time.Duration // RetryAfter for TooEarly, Waited for Waited
	}{
		{Options{}, TooEarly, 990 * time.Millisecond},
		{Options{Mode: ModeAudit}, TooEarly, 990 * time.Millisecond},
		{Options{Mode: ModeWait, MaxWait: 500 * time.Millisecond}, TooEarly, 990 * time.Millisecond},
		{Options{Mode: ModeWait, MaxWait: time.Minute}, Waited, 990 * time.Millisecond},
	} {
		t.Run(fmt.Sprint(c.opts.Mode, c.opts.MaxWait), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newMemSchedules()
				c.opts.Shared = store
				p := New(c.opts)
				ctx := context.Background()
				d := delay(time.Second)
				if a := p.Admit(ctx, origin, origin, gptbot, d); a.Outcome != OnTime {
					t.Fatalf("first request: %v", a.Outcome)
				}
				time.Sleep(10 * time.Millisecond)
				store.setFailing(true)
				a := p.Admit(ctx, origin, origin, gptbot, d)
				got := a.RetryAfter
				if a.Outcome == Waited {
					got = a.Waited
				}
				if a.Outcome != c.outcome || got != c.retry {
					t.Fatalf("10ms later, store failing: %v after %v; want %v after %v", a.Outcome, got, c.outcome, c.retry)
				}
				if a.Allowed() != (c.outcome == Waited || c.opts.Mode == ModeAudit) {
					t.Errorf("allowed %v", a.Allowed())
				}
			})
		})
	}
}

// TestSharedLost: when the shared schedules lose what they held (Redis
// restarted, or the key expired), the starts this Pacer handed out still
// hold. Enforce and audit refuse by them without asking; wait asks, so
// that the shared schedule has the start, and holds the request until the
// later of the two.
func TestSharedLost(t *testing.T) {
	t.Run("enforce and audit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := newMemSchedules()
			enforce, audit := New(Options{Shared: store}), New(Options{Mode: ModeAudit, Shared: store})
			ctx := context.Background()
			d := delay(time.Second)
			enforce.Admit(ctx, origin, origin, gptbot, d)
			audit.Admit(ctx, origin, origin, Identity{Token: "bingbot"}, d)
			store.forget()
			time.Sleep(100 * time.Millisecond)
			calls := len(store.log())
			if a := enforce.Admit(ctx, origin, origin, gptbot, d); a.Outcome != TooEarly || a.RetryAfter != 900*time.Millisecond {
				t.Errorf("enforce: %v, retry after %v; want too early, 900ms", a.Outcome, a.RetryAfter)
			}
			if a := audit.Admit(ctx, origin, origin, Identity{Token: "bingbot"}, d); a.Outcome != TooEarly || !a.Allowed() || a.RetryAfter != 900*time.Millisecond {
				t.Errorf("audit: %v allowed %v, retry after %v; want too early, forwarded, 900ms", a.Outcome, a.Allowed(), a.RetryAfter)
			}
			if n := len(store.log()) - calls; n != 0 {
				t.Errorf("%d calls, want the early requests refused without asking", n)
			}
		})
	})
	for _, c := range []struct {
		name string
		// other takes a start on the forgotten shared schedule first: with
		// a 500ms interval, the shared one lets the next start at 500ms.
		other bool
	}{
		{"empty", false},
		{"earlier", true},
	} {
		t.Run("wait/"+c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newMemSchedules()
				opts := Options{Mode: ModeWait, MaxWait: time.Minute, Shared: store}
				p := New(opts)
				ctx := context.Background()
				d := delay(time.Second)
				p.Admit(ctx, origin, origin, gptbot, d)
				store.forget()
				if c.other {
					New(opts).Admit(ctx, origin, origin, gptbot, delay(500*time.Millisecond))
				}
				time.Sleep(100 * time.Millisecond)
				if a := p.Admit(ctx, origin, origin, gptbot, d); a.Outcome != Waited || a.Waited != 900*time.Millisecond {
					t.Fatalf("after the store forgot: %v after %v; want held until the local 1s start", a.Outcome, a.Waited)
				}
				// The start at 1s is recorded: the next one is at 2s.
				store.setFailing(true)
				if a := p.Admit(ctx, origin, origin, gptbot, d); a.Outcome != Waited || a.Waited != time.Second {
					t.Errorf("at 1s, store failing: %v after %v; want held until 2s", a.Outcome, a.Waited)
				}
			})
		})
	}
}

// TestSharedGiveBackOwn: a request that never reached the origin gives its
// start back to the Pacer's own schedule too, so that the request after it
// may have it there as well when the shared schedules fail.
func TestSharedGiveBackOwn(t *testing.T) {
	t.Run("undo and busy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := newMemSchedules()
			p := New(Options{Shared: store, MaxConnsPerOrigin: 1})
			ctx := context.Background()
			d := delay(time.Second)
			a := p.Admit(ctx, origin, origin, gptbot, d)
			a.Undo()
			other := Identity{Token: "bingbot"}
			held := p.Admit(ctx, origin, origin, other, d)
			if busy := p.Admit(ctx, origin, origin, Identity{Token: "ccbot"}, d); busy.Outcome != Busy {
				t.Fatalf("past the connection bound: %v", busy.Outcome)
			}
			held.Done()
			if n := p.Schedules(); n != 1 {
				t.Errorf("%d local schedules, want bingbot's only", n)
			}
			store.setFailing(true)
			for _, who := range []Identity{gptbot, {Token: "ccbot"}} {
				b := p.Admit(ctx, origin, origin, who, d)
				if b.Outcome != OnTime {
					t.Errorf("%s, store failing: %v, want its start given back", who.Token, b.Outcome)
				}
				b.Done()
			}
		})
	})
	t.Run("gone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := newMemSchedules()
			opts := Options{Mode: ModeWait, MaxWait: time.Minute, Shared: store}
			p := New(opts)
			d := delay(time.Second)
			p.Admit(context.Background(), origin, origin, gptbot, d)
			ctx, hangUp := context.WithCancel(context.Background())
			gone := make(chan Admission)
			go func() { gone <- p.Admit(ctx, origin, origin, gptbot, d) }() // held for the start at 1s
			synctest.Wait()
			hangUp()
			if a := <-gone; a.Outcome != Gone {
				t.Fatalf("hung up: %v", a.Outcome)
			}
			store.setFailing(true)
			if a := p.Admit(context.Background(), origin, origin, gptbot, d); a.Outcome != Waited || a.Waited != time.Second {
				t.Errorf("store failing: %v after %v; want the start at 1s given back and taken", a.Outcome, a.Waited)
			}
		})
	})
}

// TestSharedRepliesOutOfOrder: when two requests' shared starts come back
// in the other order, the later start stays the Pacer's own.
func TestSharedRepliesOutOfOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemSchedules()
		p := New(Options{Mode: ModeWait, MaxWait: time.Minute, Shared: store})
		ctx := context.Background()
		d := delay(time.Second)
		p.Admit(ctx, origin, origin, gptbot, d)
		slow := make(chan struct{})
		store.slowNext(slow)
		first, second := make(chan Admission), make(chan Admission)
		go func() { first <- p.Admit(ctx, origin, origin, gptbot, d) }() // the start at 1s, its reply late
		synctest.Wait()
		go func() { second <- p.Admit(ctx, origin, origin, gptbot, d) }() // the start at 2s
		synctest.Wait()
		close(slow)
		if a := <-first; a.Outcome != Waited || a.Waited != time.Second {
			t.Errorf("first: %v after %v, want held 1s", a.Outcome, a.Waited)
		}
		if a := <-second; a.Outcome != Waited || a.Waited != 2*time.Second {
			t.Errorf("second: %v after %v, want held 2s", a.Outcome, a.Waited)
		}
		store.setFailing(true)
		if a := p.Admit(ctx, origin, origin, gptbot, d); a.Outcome != Waited || a.Waited != time.Second {
			t.Errorf("at 2s, store failing: %v after %v; want held until 3s", a.Outcome, a.Waited)
		}
	})
}

// TestSharedNotFull: MaxSchedules bounds the local table only; shared
// schedules never make an identity Full.
func TestSharedNotFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Shared: newMemSchedules(), MaxSchedules: shardCount})
		for i := range 1000 {
			if a := p.Admit(context.Background(), origin, origin, Identity{Token: fmt.Sprint("bot", i)}, delay(time.Second)); a.Outcome != OnTime {
				t.Fatalf("identity %d: %v", i, a.Outcome)
			}
		}
	})
}

// TestSharedKeys: a schedule's shared key is the same in every process (no
// seed), a token's in any case; a credential is another identity than a
// token of the same name, and its name is exact.
func TestSharedKeys(t *testing.T) {
	for _, c := range []struct {
		origin string
		who    Identity
		key    string
	}{
		{origin, Identity{Token: "GPTBot"}, "https://example.com\x00tgptbot"},
		{origin, Identity{Token: "gptbot"}, "https://example.com\x00tgptbot"},
		{origin, Identity{Token: ""}, "https://example.com\x00t"},
		{origin, Identity{Credential: "GPTBot", Token: "GPTBot"}, "https://example.com\x00cGPTBot"},
		{origin, Identity{Credential: "crawler-7", Token: "a"}, "https://example.com\x00ccrawler-7"},
		{"http://example.com:8080", Identity{Token: "Bing-Bot_2"}, "http://example.com:8080\x00tbing-bot_2"},
	} {
		if got := sharedKey(c.origin, c.who); got != c.key {
			t.Errorf("sharedKey(%q, %+v) = %q, want %q", c.origin, c.who, got, c.key)
		}
	}
	// Two Pacers, each with its own seed, name a schedule alike.
	store := newMemSchedules()
	New(Options{Shared: store}).Admit(context.Background(), origin, origin, Identity{Token: "GPTBot"}, delay(time.Second))
	New(Options{Shared: store}).Admit(context.Background(), origin, origin, Identity{Token: "gptBOT"}, delay(time.Second))
	if calls := store.log(); len(calls) != 2 || calls[0].key != calls[1].key {
		t.Errorf("two pacers' calls %+v, want one key", calls)
	}
}

// TestNoSharedMetricsAlone: a Pacer without Shared schedules exports none
// of their metrics.
func TestNoSharedMetricsAlone(t *testing.T) {
	for _, name := range []string{"robotsgate_pace_shared_takes_total", "robotsgate_pace_shared_fallbacks_total"} {
		if _, ok := counter(t, New(Options{}), name); ok {
			t.Errorf("%s exported without Shared schedules", name)
		}
	}
}

// TestSharedByFactor: with Shared schedules, a request refused by the
// Pacer's own schedule is ByFactor when the start it was refused for was
// set by the delay factor; one refused by the Shared schedule never is,
// its start being another instance's. The Crawl-delay is 10s, the factor 2.
func TestSharedByFactor(t *testing.T) {
	d := delay(10 * time.Second)
	for _, tc := range []struct {
		name    string
		mode    Mode
		maxWait time.Duration
		// refused runs the requests before on first and second, those held
		// in wg, and returns the one refused.
		refused      func(t *testing.T, first, second *Pacer, wg *sync.WaitGroup) Admission
		wantRetry    time.Duration
		wantByFactor bool
	}{{
		name: "wait queue", mode: ModeWait, maxWait: 15 * time.Second,
		refused: func(t *testing.T, first, _ *Pacer, wg *sync.WaitGroup) Admission {
			first.Admit(context.Background(), origin, origin, gptbot, d)
			wg.Go(func() { first.Admit(context.Background(), origin, origin, gptbot, d) })
			synctest.Wait()
			return first.Admit(context.Background(), origin, origin, gptbot, d)
		},
		wantRetry: 20 * time.Second,
	}, {
		name: "push within one interval", mode: ModeEnforce,
		refused: func(t *testing.T, first, _ *Pacer, _ *sync.WaitGroup) Admission {
			answered(t, first, gptbot, d, 6*time.Second)
			return first.Admit(context.Background(), origin, origin, gptbot, d)
		},
		wantRetry: 6 * time.Second, wantByFactor: true,
	}, {
		// The request held for the pushed 12s start hangs up: the start
		// is free again, the factor's still.
		name: "a start given back keeps its mark", mode: ModeWait, maxWait: 15 * time.Second,
		refused: func(t *testing.T, first, _ *Pacer, wg *sync.WaitGroup) Admission {
			answered(t, first, gptbot, d, 6*time.Second)
			hangUpWhileHeld(t, first, gptbot, d, wg)
			return takeBy(first, gptbot, d, time.Now()) // no time left to wait
		},
		wantRetry: 6 * time.Second, wantByFactor: true,
	}, {
		// first's own start, at 12s, was the factor's; at 12s second
		// takes it, and first is refused for second's next, at 22s.
		name: "another instance's take after a push", mode: ModeEnforce,
		refused: func(t *testing.T, first, second *Pacer, _ *sync.WaitGroup) Admission {
			answered(t, first, gptbot, d, 6*time.Second)
			time.Sleep(6 * time.Second)
			if a := second.Admit(context.Background(), origin, origin, gptbot, d); a.Outcome != OnTime {
				t.Fatalf("the other instance at the pushed start: %v", a.Outcome)
			}
			return first.Admit(context.Background(), origin, origin, gptbot, d)
		},
		wantRetry: 10 * time.Second,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newMemSchedules()
				opts := Options{Mode: tc.mode, MaxWait: tc.maxWait, DelayFactor: 2, MaxDelay: time.Minute, Shared: store}
				var wg sync.WaitGroup
				a := tc.refused(t, New(opts), New(opts), &wg)
				wg.Wait()
				if a.Outcome != TooEarly || a.RetryAfter != tc.wantRetry || a.ByFactor != tc.wantByFactor {
					t.Errorf("%v in %v, by factor %v; want too early in %v, by factor %v",
						a.Outcome, a.RetryAfter, a.ByFactor, tc.wantRetry, tc.wantByFactor)
				}
			})
		})
	}
}

// TestSharedWaitWithinDeadline: in ModeWait the Shared schedule is asked
// for a start within what is left of the request's MaxWait, and the
// Pacer's own schedule refuses one beyond it without asking.
func TestSharedWaitWithinDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemSchedules()
		opts := Options{Mode: ModeWait, MaxWait: 10 * time.Second, Shared: store}
		first, second := New(opts), New(opts)
		d := delay(5 * time.Second)
		second.Admit(context.Background(), origin, origin, gptbot, d) // the next start 5s away
		calls := len(store.log())
		a := takeBy(first, gptbot, d, time.Now().Add(4*time.Second))
		if a.Outcome != TooEarly || a.RetryAfter != 5*time.Second {
			t.Fatalf("the Shared start beyond what is left: %v in %v", a.Outcome, a.RetryAfter)
		}
		if log := store.log()[calls:]; len(log) != 1 || log[0].op != "take" || log[0].maxWait != 4*time.Second {
			t.Fatalf("calls %+v, want a take within the 4s left", log)
		}

		calls = len(store.log())
		a = takeBy(second, gptbot, d, time.Now().Add(4*time.Second))
		if a.Outcome != TooEarly || a.RetryAfter != 5*time.Second {
			t.Fatalf("its own start beyond what is left: %v in %v", a.Outcome, a.RetryAfter)
		}
		if log := store.log()[calls:]; len(log) != 0 {
			t.Fatalf("calls %+v, want none", log)
		}

		start := time.Now()
		if a := takeBy(first, gptbot, d, start.Add(5*time.Second)); a.Outcome != Waited || time.Since(start) != 5*time.Second {
			t.Fatalf("the Shared start within what is left: %v after %v", a.Outcome, time.Since(start))
		}
	})
}
