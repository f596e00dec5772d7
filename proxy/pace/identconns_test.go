package pace

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// acme is a crawler with a bound of its own: two requests in flight to
// one group.
var acme = Identity{Token: "acme", MaxConns: 2}

// counted is how many keys p counts requests in flight under, in both
// tables: none once every request has ended.
func counted(p *Pacer) (origins, identities int) {
	for i := range shardCount {
		p.conns[i].mu.Lock()
		origins += len(p.conns[i].inFlight)
		p.conns[i].mu.Unlock()
		p.idConns[i].mu.Lock()
		identities += len(p.idConns[i].inFlight)
		p.idConns[i].mu.Unlock()
	}
	return origins, identities
}

// noneCounted fails t unless nothing is counted in flight.
func noneCounted(t *testing.T, p *Pacer) {
	t.Helper()
	if o, i := counted(p); o != 0 || i != 0 {
		t.Errorf("%d origins and %d identities still counted once every request ended", o, i)
	}
}

// TestIdentityBound: a crawler at its own bound of 2, with 2 in flight,
// is refused (enforce), held until one of its own requests ends (wait) or
// counted and let through (audit), Busy with IdentityBusy; another
// crawler's request to the same group goes through at once; with the
// origin bound unset or set, as long as it is not what is met.
func TestIdentityBound(t *testing.T) {
	for _, mode := range []Mode{ModeEnforce, ModeWait, ModeAudit} {
		for _, perOrigin := range []int{0, 10} {
			t.Run(string(mode)+"/origin bound "+itoa(perOrigin), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					p := New(Options{Mode: mode, MaxWait: 5 * time.Second, MaxConnsPerOrigin: perOrigin})
					ctx := context.Background()
					first := p.Admit(ctx, origin, origin, acme, Delay{})
					second := p.Admit(ctx, origin, origin, Identity{Token: "ACME", MaxConns: 2}, Delay{})
					if first.Outcome != OnTime || second.Outcome != OnTime {
						t.Fatalf("under the bound: %v, %v", first.Outcome, second.Outcome)
					}
					third := make(chan Admission, 1)
					go func() { third <- p.Admit(ctx, origin, origin, acme, Delay{}) }()
					synctest.Wait()

					other := p.Admit(ctx, origin, origin, Identity{Token: "bingbot", MaxConns: 2}, Delay{})
					if other.Outcome != OnTime || other.Waited != 0 {
						t.Fatalf("another crawler, while acme is at its bound: %v after %v", other.Outcome, other.Waited)
					}
					elsewhere := p.Admit(ctx, "https://elsewhere.example", "https://elsewhere.example", acme, Delay{})
					if elsewhere.Outcome != OnTime {
						t.Fatalf("acme at another group: %v", elsewhere.Outcome)
					}
					other.Done()
					elsewhere.Done()

					var a Admission
					switch mode {
					case ModeEnforce:
						a = <-third
						if a.Outcome != Busy || !a.IdentityBusy || a.Allowed() || a.RetryAfter != time.Second {
							t.Fatalf("past its bound: %v identity %v allowed %v retry %v", a.Outcome, a.IdentityBusy, a.Allowed(), a.RetryAfter)
						}
					case ModeWait:
						select {
						case a = <-third:
							t.Fatalf("went on while its crawler was at its bound: %v", a.Outcome)
						default:
						}
						time.Sleep(2 * time.Second)
						first.Done()
						a = <-third
						if a.Outcome != Waited || !a.IdentityBusy || a.Waited != 2*time.Second || !a.Allowed() {
							t.Fatalf("held: %v identity %v after %v", a.Outcome, a.IdentityBusy, a.Waited)
						}
					case ModeAudit:
						a = <-third
						if a.Outcome != Busy || !a.IdentityBusy || !a.Allowed() {
							t.Fatalf("audit past its bound: %v identity %v allowed %v", a.Outcome, a.IdentityBusy, a.Allowed())
						}
						first.Done()
						// Still 2 in flight: the one recorded busy counts.
						b := p.Admit(ctx, origin, origin, acme, Delay{})
						if b.Outcome != Busy || !b.IdentityBusy {
							t.Errorf("audit: the request recorded busy is not counted: %v", b.Outcome)
						}
						b.Done()
					}
					first.Done()
					second.Done()
					a.Done()
					noneCounted(t, p)
				})
			})
		}
	}
}

// TestIdentityBoundWaitsForItsOwn: a request held at its crawler's bound
// goes on when one of that crawler's requests ends, not another's; past
// MaxWait it is Busy, its own bound named.
func TestIdentityBoundWaitsForItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeWait, MaxWait: 5 * time.Second, MaxConnsPerOrigin: 10})
		ctx := context.Background()
		one := Identity{Token: "acme", MaxConns: 1}
		first := p.Admit(ctx, origin, origin, one, Delay{})
		held := make(chan Admission, 1)
		go func() { held <- p.Admit(ctx, origin, origin, one, Delay{}) }()
		synctest.Wait()
		for range 3 {
			o := p.Admit(ctx, origin, origin, gptbot, Delay{})
			o.Done()
		}
		synctest.Wait()
		select {
		case a := <-held:
			t.Fatalf("another crawler's requests ending let it through: %v", a.Outcome)
		default:
		}
		time.Sleep(time.Second)
		first.Done()
		a := <-held
		if a.Outcome != Waited || !a.IdentityBusy || a.Waited != time.Second {
			t.Fatalf("its own request ended: %v (at its own bound %v) after %v", a.Outcome, a.IdentityBusy, a.Waited)
		}

		go func() { held <- p.Admit(ctx, origin, origin, one, Delay{}) }()
		b := <-held
		if b.Outcome != Busy || !b.IdentityBusy || b.Waited != 5*time.Second || b.Allowed() {
			t.Fatalf("past MaxWait: %v identity %v after %v", b.Outcome, b.IdentityBusy, b.Waited)
		}
		a.Done()
		noneCounted(t, p)
	})
}

// TestIdentityBoundHoldsNoOriginConn: a crawler held at its own bound
// holds none of the origin's connections meanwhile: one that frees goes
// to another crawler at once.
func TestIdentityBoundHoldsNoOriginConn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeWait, MaxWait: 5 * time.Second, MaxConnsPerOrigin: 3})
		ctx := context.Background()
		bing := Identity{Token: "bingbot"}
		a1 := p.Admit(ctx, origin, origin, acme, Delay{})
		a2 := p.Admit(ctx, origin, origin, acme, Delay{})
		b1 := p.Admit(ctx, origin, origin, bing, Delay{}) // the origin is full
		held := make(chan Admission, 1)
		go func() { held <- p.Admit(ctx, origin, origin, acme, Delay{}) }()
		synctest.Wait()
		b1.Done()
		synctest.Wait() // acme's request, were it waiting for the origin, would have b1's
		b2 := p.Admit(ctx, origin, origin, bing, Delay{})
		if b2.Outcome != OnTime || b2.Waited != 0 {
			t.Fatalf("another crawler with a connection free: %v after %v", b2.Outcome, b2.Waited)
		}
		// bingbot, under a bound of its own, held at the origin's.
		heldB := make(chan Admission, 1)
		go func() { heldB <- p.Admit(ctx, origin, origin, Identity{Token: "bingbot", MaxConns: 5}, Delay{}) }()
		synctest.Wait()
		time.Sleep(time.Second)
		b2.Done()
		if b := <-heldB; b.Outcome != Waited || b.IdentityBusy || b.Waited != time.Second {
			t.Fatalf("held at the origin's bound: %v (at its own bound %v) after %v", b.Outcome, b.IdentityBusy, b.Waited)
		} else {
			b2 = b
		}
		time.Sleep(time.Second)
		a1.Done() // frees one of acme's, and one of the origin's
		a3 := <-held
		if a3.Outcome != Waited || a3.Waited != 2*time.Second {
			t.Fatalf("its own request ended: %v after %v", a3.Outcome, a3.Waited)
		}
		for _, a := range []*Admission{&a2, &a3, &b2} {
			a.Done()
		}
		noneCounted(t, p)
	})
}

// TestIdentityBoundWithinMaxWait: a request held for its slot, then at its
// crawler's bound, is held within the one MaxWait, not a MaxWait for each.
func TestIdentityBoundWithinMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeWait, MaxWait: 5 * time.Second})
		ctx := context.Background()
		one := Identity{Token: "acme", MaxConns: 1}
		d := delay(2 * time.Second)
		first := p.Admit(ctx, origin, origin, one, d)
		a := p.Admit(ctx, origin, origin, one, d) // its slot 2s away, then its bound
		if a.Outcome != Busy || !a.IdentityBusy || a.Waited != 5*time.Second {
			t.Fatalf("held for its slot, then at its bound: %v identity %v after %v", a.Outcome, a.IdentityBusy, a.Waited)
		}
		first.Done()
		// Refused, it gave its slot (at 2s, now past) back: the next is on
		// time.
		if b := p.Admit(ctx, origin, origin, one, d); b.Outcome != OnTime {
			t.Fatalf("after the refusal: %v", b.Outcome)
		} else {
			b.Done()
		}
		noneCounted(t, p)
	})
}

// TestBothBoundsEnforce: with both bounds set, each refusal names the
// bound it met: the crawler's own first, the origin's for a crawler under
// its own; a crawler refused at the origin's bound keeps no connection of
// its own.
func TestBothBoundsEnforce(t *testing.T) {
	p := New(Options{MaxConnsPerOrigin: 3})
	ctx := context.Background()
	a1 := p.Admit(ctx, origin, origin, acme, Delay{})
	a2 := p.Admit(ctx, origin, origin, acme, Delay{})
	b1 := p.Admit(ctx, origin, origin, gptbot, Delay{})
	for _, c := range []struct {
		who      Identity
		identity bool
	}{{acme, true}, {gptbot, false}, {Identity{Token: "other", MaxConns: 5}, false}} {
		a := p.Admit(ctx, origin, origin, c.who, Delay{})
		if a.Outcome != Busy || a.IdentityBusy != c.identity {
			t.Errorf("%s: %v, identity %v; want busy, identity %v", c.who.Token, a.Outcome, a.IdentityBusy, c.identity)
		}
		a.Done()
	}
	a2.Done()
	b2 := p.Admit(ctx, origin, origin, gptbot, Delay{}) // the origin full again
	if x := p.Admit(ctx, origin, origin, acme, Delay{}); x.Outcome != Busy || x.IdentityBusy {
		t.Errorf("acme under its bound, the origin at its: %v, identity %v", x.Outcome, x.IdentityBusy)
	}
	b2.Done()
	// acme has a1 alone in flight: the refused request gave its back.
	y := p.Admit(ctx, origin, origin, acme, Delay{})
	if y.Outcome != OnTime {
		t.Errorf("acme with one in flight, the origin with room: %v, identity %v", y.Outcome, y.IdentityBusy)
	}
	for _, a := range []*Admission{&a1, &b1, &y} {
		a.Done()
	}
	noneCounted(t, p)
}

// TestIdentityBoundSlotGivenBack: a request refused at, or gone from, its
// crawler's bound gives its slot back; Undo frees the crawler's
// connection.
func TestIdentityBoundSlotGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		one := Identity{Token: "acme", MaxConns: 1}
		d := delay(time.Minute)

		enforce := New(Options{})
		first := enforce.Admit(ctx, origin, origin, one, Delay{})
		if a := enforce.Admit(ctx, origin, origin, one, d); a.Outcome != Busy || !a.IdentityBusy {
			t.Fatalf("past its bound: %v", a.Outcome)
		}
		first.Done()
		second := enforce.Admit(ctx, origin, origin, one, d)
		if second.Outcome != OnTime {
			t.Fatalf("after Done, the slot given back: %v", second.Outcome)
		}
		second.Undo()
		third := enforce.Admit(ctx, origin, origin, one, d)
		if third.Outcome != OnTime {
			t.Fatalf("after Undo, slot and connection given back: %v", third.Outcome)
		}
		third.Done()
		noneCounted(t, enforce)

		wait := New(Options{Mode: ModeWait, MaxWait: time.Minute})
		first = wait.Admit(ctx, origin, origin, one, Delay{})
		cctx, hangUp := context.WithCancel(ctx)
		gone := make(chan Admission, 1)
		go func() { gone <- wait.Admit(cctx, origin, origin, one, d) }()
		synctest.Wait()
		hangUp()
		if a := <-gone; a.Outcome != Gone || a.Allowed() {
			t.Fatalf("hung up while held at its bound: %v", a.Outcome)
		}
		first.Done()
		if a := wait.Admit(ctx, origin, origin, one, d); a.Outcome != OnTime {
			t.Fatalf("after the hang-up, the slot given back: %v", a.Outcome)
		} else {
			a.Done()
		}
		noneCounted(t, wait)
	})
}

// TestIdentityBoundWho: the bound is the schedule's identity's: a token in
// any case is one crawler, a credential of the same name another; each
// group counts apart.
func TestIdentityBoundWho(t *testing.T) {
	p := New(Options{})
	ctx := context.Background()
	held := p.Admit(ctx, origin, origin, Identity{Token: "AcMe", MaxConns: 1, Client: "192.0.2.1:1"}, Delay{})
	for _, c := range []struct {
		origin string
		who    Identity
		busy   bool
	}{
		{origin, Identity{Token: "acme", MaxConns: 1, Client: "192.0.2.2:1"}, true},
		{origin, Identity{Token: "ACME", MaxConns: 3}, false}, // its own bound is higher
		{origin, Identity{Credential: "acme", Token: "acme", MaxConns: 1}, false},
		{origin, Identity{Token: "acme2", MaxConns: 1}, false},
		{"https://example.com:8443", Identity{Token: "acme", MaxConns: 1}, false},
	} {
		a := p.Admit(ctx, c.origin, c.origin, c.who, Delay{})
		if busy := a.Outcome == Busy; busy != c.busy {
			t.Errorf("%s %+v: %v; want busy %v", c.origin, c.who, a.Outcome, c.busy)
		}
		a.Done()
	}
	held.Done()
	noneCounted(t, p)
}

// TestIdentityBoundConcurrent: many requests of one crawler at once, in
// ModeWait, never have more than its bound in flight, and all get
// through.
func TestIdentityBoundConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeWait, MaxWait: time.Minute, MaxConnsPerOrigin: 4})
		who := Identity{Token: "acme", MaxConns: 3}
		var inFlight, most, through atomic.Int32
		var wg sync.WaitGroup
		for range 30 {
			wg.Go(func() {
				a := p.Admit(context.Background(), origin, origin, who, Delay{})
				if !a.Allowed() {
					t.Errorf("refused: %v", a.Outcome)
					return
				}
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(100 * time.Millisecond)
				inFlight.Add(-1)
				through.Add(1)
				a.Done()
			})
		}
		wg.Wait()
		if most.Load() != 3 || through.Load() != 30 {
			t.Errorf("%d in flight at most, %d through; want 3, 30", most.Load(), through.Load())
		}
		noneCounted(t, p)
	})
}

// TestDelayAtLeast: a floor applies when longer, named by its source, and
// keeps the line robots.txt asked; a shorter one changes nothing.
func TestDelayAtLeast(t *testing.T) {
	asked := delay(5 * time.Second)
	asked.Asked.Line = 3
	for _, c := range []struct {
		name   string
		d      Delay
		min    time.Duration
		want   time.Duration
		source Source
	}{
		{"longer floor", asked, 10 * time.Second, 10 * time.Second, SourcePolicy},
		{"shorter floor", asked, time.Second, 5 * time.Second, SourceCrawlDelay},
		{"equal floor", asked, 5 * time.Second, 5 * time.Second, SourceCrawlDelay},
		{"no floor", asked, 0, 5 * time.Second, SourceCrawlDelay},
		{"floor over none", Delay{}, 2 * time.Second, 2 * time.Second, SourcePolicy},
	} {
		got := c.d.AtLeast(c.min, SourcePolicy)
		if got.Interval != c.want || got.Source != c.source || got.Asked != c.d.Asked {
			t.Errorf("%s: %v from %q (asked %+v), want %v from %q", c.name, got.Interval, got.Source, got.Asked, c.want, c.source)
		}
	}
	if s := SourcePolicy.String(); s != "policy" {
		t.Errorf("SourcePolicy is %q", s)
	}
}

// TestIdentityBoundDoesNotAllocate: a crawler's bound, with a delay or
// none, costs the on-time path no allocation.
func TestIdentityBoundDoesNotAllocate(t *testing.T) {
	p := New(Options{MaxConnsPerOrigin: 4})
	ctx := context.Background()
	who := Identity{Token: "GPTBot", Client: "192.0.2.1:", MaxConns: 2}
	for _, d := range []Delay{{}, delay(time.Nanosecond)} {
		allocs := testing.AllocsPerRun(1000, func() {
			a := p.Admit(ctx, origin, origin, who, d)
			a.Done()
		})
		if allocs != 0 {
			t.Errorf("delay %v: Admit allocates %v times", d.Interval, allocs)
		}
	}
}

// BenchmarkAdmitIdentityBound is BenchmarkAdmit for a crawler with a
// bound of its own: what counting it in flight adds.
func BenchmarkAdmitIdentityBound(b *testing.B) {
	p := New(Options{})
	d := delay(time.Nanosecond)
	ctx := context.Background()
	who := Identity{Token: "GPTBot", Client: "192.0.2.1:", MaxConns: 2}
	b.ReportAllocs()
	for b.Loop() {
		a := p.Admit(ctx, "https://www.example.com", "https://www.example.com", who, d)
		a.Done()
	}
}
