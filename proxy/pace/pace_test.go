package pace

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"robotsgate/robots"
)

const origin = "https://example.com"

var gptbot = Identity{Token: "GPTBot"}

func delay(d time.Duration) Delay { return Delay{Interval: d, Source: SourceCrawlDelay} }

func TestPolicyDelay(t *testing.T) {
	crawl := func(d time.Duration, line int) robots.Pace {
		return robots.Pace{Interval: d, Directive: robots.DirectiveCrawlDelay, Line: line, Value: "x"}
	}
	rate := robots.Pace{Interval: 5 * time.Second, Directive: robots.DirectiveRequestRate, Line: 3, Value: "1/5"}
	for _, c := range []struct {
		name   string
		policy Policy
		asked  robots.Pace
		ok     bool
		want   time.Duration
		source Source
	}{
		{"nothing asked, no default", Policy{Max: time.Minute}, robots.Pace{}, false, 0, SourceNone},
		{"nothing asked, default", Policy{Default: 2 * time.Second, Max: time.Minute}, robots.Pace{}, false, 2 * time.Second, SourceDefault},
		{"crawl-delay", Policy{Default: 2 * time.Second, Max: time.Minute}, crawl(10*time.Second, 4), true, 10 * time.Second, SourceCrawlDelay},
		{"explicit zero beats the default", Policy{Default: 2 * time.Second}, crawl(0, 4), true, 0, SourceCrawlDelay},
		{"request-rate", Policy{Max: time.Minute}, rate, true, 5 * time.Second, SourceRequestRate},
		{"capped", Policy{Max: time.Minute}, crawl(24*time.Hour, 2), true, time.Minute, SourceCap},
		{"at the cap", Policy{Max: time.Minute}, crawl(time.Minute, 2), true, time.Minute, SourceCrawlDelay},
		{"no cap", Policy{}, crawl(24*time.Hour, 2), true, 24 * time.Hour, SourceCrawlDelay},
		{"floor where nothing is asked", Policy{Min: time.Second}, robots.Pace{}, false, time.Second, SourceMin},
		{"floor over a shorter default", Policy{Default: time.Second, Min: 3 * time.Second}, robots.Pace{}, false, 3 * time.Second, SourceMin},
		{"floor over an explicit zero", Policy{Min: time.Second}, crawl(0, 4), true, time.Second, SourceMin},
		{"a longer crawl-delay stands over the floor", Policy{Min: time.Second}, crawl(10*time.Second, 4), true, 10 * time.Second, SourceCrawlDelay},
		{"the cap stands over the floor", Policy{Min: time.Second, Max: time.Minute}, crawl(time.Hour, 4), true, time.Minute, SourceCap},
	} {
		d := c.policy.Delay(c.asked, c.ok)
		if d.Interval != c.want || d.Source != c.source {
			t.Errorf("%s: %v from %q, want %v from %q", c.name, d.Interval, d.Source, c.want, c.source)
		}
		if c.ok && d.Asked != c.asked {
			t.Errorf("%s: the line asked is lost: %+v", c.name, d.Asked)
		}
	}
}

// TestEnforceSchedule: a burst gets one request through; the others learn
// exactly when to come back, and take nothing from the schedule; the slot
// opens at exactly one interval after the last start.
func TestEnforceSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeEnforce})
		ctx := context.Background()
		d := delay(time.Second)
		if a := p.Admit(ctx, origin, origin, gptbot, d); a.Outcome != OnTime || !a.Allowed() {
			t.Fatalf("first request: %v", a.Outcome)
		}
		for range 5 {
			a := p.Admit(ctx, origin, origin, gptbot, d)
			if a.Outcome != TooEarly || a.Allowed() || a.RetryAfter != time.Second {
				t.Fatalf("burst: %v, retry after %v; want too early, 1s", a.Outcome, a.RetryAfter)
			}
		}
		time.Sleep(999 * time.Millisecond)
		if a := p.Admit(ctx, origin, origin, gptbot, d); a.Outcome != TooEarly || a.RetryAfter != time.Millisecond {
			t.Fatalf("1ms early: %v, retry after %v", a.Outcome, a.RetryAfter)
		}
		time.Sleep(time.Millisecond)
		if a := p.Admit(ctx, origin, origin, gptbot, d); a.Outcome != OnTime {
			t.Fatalf("on the boundary: %v", a.Outcome)
		}
		// Late by 300ms: the next slot counts from this start, not from
		// the one it could have had.
		time.Sleep(1300 * time.Millisecond)
		if a := p.Admit(ctx, origin, origin, gptbot, d); a.Outcome != OnTime {
			t.Fatalf("late: %v", a.Outcome)
		}
		time.Sleep(999 * time.Millisecond)
		if a := p.Admit(ctx, origin, origin, gptbot, d); a.Outcome != TooEarly {
			t.Fatalf("999ms after a late start: %v", a.Outcome)
		}
	})
}

// TestWhoSharesASchedule: one schedule per origin and identity; a token
// in any case is one identity, a credential another even with the same
// name.
func TestWhoSharesASchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{})
		ctx := context.Background()
		d := delay(time.Minute)
		p.Admit(ctx, origin, origin, gptbot, d)
		for _, c := range []struct {
			origin string
			who    Identity
			shared bool
		}{
			{origin, Identity{Token: "gptbot"}, true},
			{origin, Identity{Token: "GPTBOT"}, true},
			{origin, Identity{Token: "bingbot"}, false},
			{origin, Identity{Token: ""}, false},
			{origin, Identity{Credential: "GPTBot", Token: "GPTBot"}, false},
			{"https://example.com:8443", gptbot, false},
			{"http://example.com", gptbot, false},
		} {
			a := p.Admit(ctx, c.origin, c.origin, c.who, d)
			if shared := a.Outcome == TooEarly; shared != c.shared {
				t.Errorf("%s %+v: %v; want shared %v", c.origin, c.who, a.Outcome, c.shared)
			}
		}
		// Two requests of one credential share it, whatever token it has.
		cred := Identity{Credential: "crawler-7", Token: "a"}
		p.Admit(ctx, origin, origin, cred, d)
		if a := p.Admit(ctx, origin, origin, Identity{Credential: "crawler-7", Token: "b"}, d); a.Outcome != TooEarly {
			t.Errorf("the credential's second request: %v", a.Outcome)
		}
		if a := p.Admit(ctx, origin, origin, Identity{Credential: "Crawler-7"}, d); a.Outcome != OnTime {
			t.Errorf("credential names are exact: %v", a.Outcome)
		}
	})
}

// TestLongKeys: an origin and name too long to be hashed on the stack
// name one schedule as a short one does: a token in any case, a
// credential exactly, and a name differing in its last byte another.
func TestLongKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{})
		ctx := context.Background()
		d := delay(time.Minute)
		long := "https://" + strings.Repeat("a", 200) + ".example"
		token := strings.Repeat("GPTBot", 50)
		for _, c := range []struct {
			origin string
			first  Identity
			same   []Identity
			other  []Identity
		}{
			{long, gptbot, []Identity{{Token: "gptbot"}}, []Identity{{Token: "GPTBo"}}},
			{origin, Identity{Token: token}, []Identity{{Token: strings.ToLower(token)}, {Token: strings.ToUpper(token)}},
				[]Identity{{Token: token + "x"}, {Token: token[:len(token)-1]}}},
			{origin, Identity{Credential: token}, nil, []Identity{{Credential: strings.ToLower(token)}, {Credential: token + "x"}}},
		} {
			if a := p.Admit(ctx, c.origin, c.origin, c.first, d); a.Outcome != OnTime {
				t.Fatalf("%.20s… at %.30s…: %v", c.first.Token+c.first.Credential, c.origin, a.Outcome)
			}
			for _, who := range c.same {
				if a := p.Admit(ctx, c.origin, c.origin, who, d); a.Outcome != TooEarly {
					t.Errorf("%.20s… at %.30s…: %v, want the schedule of %.20s…", who.Token+who.Credential, c.origin, a.Outcome, c.first.Token+c.first.Credential)
				}
			}
			for _, who := range c.other {
				if a := p.Admit(ctx, c.origin, c.origin, who, d); a.Outcome != OnTime {
					t.Errorf("%.20s… at %.30s…: %v, want a schedule of its own", who.Token+who.Credential, c.origin, a.Outcome)
				}
			}
		}
	})
}

// TestIntervalFollowsRobots: a new robots.txt applies to the next request;
// the schedule keeps only when the last one started.
func TestIntervalFollowsRobots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{})
		ctx := context.Background()
		p.Admit(ctx, origin, origin, gptbot, delay(10*time.Second))
		time.Sleep(2 * time.Second)
		if a := p.Admit(ctx, origin, origin, gptbot, delay(time.Second)); a.Outcome != TooEarly || a.RetryAfter != 8*time.Second {
			t.Errorf("after the delay shrank: %v, retry after %v; want the start already promised", a.Outcome, a.RetryAfter)
		}
		if a := p.Admit(ctx, origin, origin, gptbot, Delay{}); a.Outcome != OnTime {
			t.Errorf("no delay: %v", a.Outcome)
		}
	})
}

func TestAuditForwardsAndRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeAudit})
		ctx := context.Background()
		d := delay(time.Second)
		p.Admit(ctx, origin, origin, gptbot, d)
		time.Sleep(400 * time.Millisecond)
		a := p.Admit(ctx, origin, origin, gptbot, d)
		if a.Outcome != TooEarly || !a.Allowed() || a.RetryAfter != 600*time.Millisecond {
			t.Fatalf("audit: %v allowed %v retry %v", a.Outcome, a.Allowed(), a.RetryAfter)
		}
		// What enforcement would have done: the early request took no slot.
		time.Sleep(600 * time.Millisecond)
		if a := p.Admit(ctx, origin, origin, gptbot, d); a.Outcome != OnTime {
			t.Errorf("at the slot: %v", a.Outcome)
		}
	})
}

// TestWaitQueues: a burst in wait mode goes out one interval apart, each
// request held exactly until its slot, until the wait would pass MaxWait.
func TestWaitQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeWait, MaxWait: 2500 * time.Millisecond})
		ctx := context.Background()
		start := time.Now()
		var mu sync.Mutex
		var starts []time.Duration
		var refused []Admission
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				a := p.Admit(ctx, origin, origin, gptbot, delay(time.Second))
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
		wg.Wait()
		want := []time.Duration{0, time.Second, 2 * time.Second}
		if fmt.Sprint(starts) != fmt.Sprint(want) {
			t.Errorf("starts %v, want %v", starts, want)
		}
		if len(refused) != 1 || refused[0].Outcome != TooEarly || refused[0].RetryAfter != 3*time.Second {
			t.Errorf("the fourth, 3s away with a 2.5s bound: %+v", refused)
		}
	})
}

// TestCancelledWaiter: a client that hangs up while held frees its slot
// for the next request when nobody queued behind it; those behind it keep
// their starts.
func TestCancelledWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeWait, MaxWait: time.Minute})
		d := delay(time.Second)
		p.Admit(context.Background(), origin, origin, gptbot, d) // t=0, next slot at 1s

		ctx, hangUp := context.WithCancel(context.Background())
		gone := make(chan Admission)
		go func() { gone <- p.Admit(ctx, origin, origin, gptbot, d) }()
		synctest.Wait()
		time.Sleep(500 * time.Millisecond)
		hangUp()
		if a := <-gone; a.Outcome != Gone || a.Allowed() {
			t.Fatalf("hung up: %v allowed %v", a.Outcome, a.Allowed())
		}
		start := time.Now()
		a := p.Admit(context.Background(), origin, origin, gptbot, d)
		if a.Outcome != Waited || time.Since(start) != 500*time.Millisecond {
			t.Fatalf("after the hang-up: %v after %v; want the freed 1s slot, 500ms away", a.Outcome, time.Since(start))
		}

		// Now at 1s; slots at 2s and 3s queued, the first then hangs up.
		ctx, hangUp = context.WithCancel(context.Background())
		go func() { gone <- p.Admit(ctx, origin, origin, gptbot, d) }()
		synctest.Wait()
		third := make(chan time.Time)
		go func() { p.Admit(context.Background(), origin, origin, gptbot, d); third <- time.Now() }()
		synctest.Wait()
		hangUp()
		<-gone
		if at := (<-third).Sub(start); at != 2500*time.Millisecond {
			t.Errorf("the one queued behind started at %v, want its own 2.5s", at)
		}
	})
}

// TestSchedulesExpire: a schedule lasts as long as it holds requests
// back, and the table never holds more than its bound. (One client, whose
// share is the whole table: TestClientShare tells clients apart.)
func TestSchedulesExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{MaxSchedules: 2 * shardCount, MaxSchedulesPerClient: 2 * shardCount})
		ctx := context.Background()
		p.Admit(ctx, origin, origin, gptbot, delay(time.Second))
		if n := p.Schedules(); n != 1 {
			t.Fatalf("%d schedules, want 1", n)
		}
		time.Sleep(time.Second)
		if n := p.Schedules(); n != 0 {
			t.Fatalf("%d schedules once its time passed, want 0", n)
		}
		busy := 0
		for i := range 1000 {
			a := p.Admit(ctx, origin, origin, Identity{Token: fmt.Sprint("bot", i)}, delay(time.Second))
			switch a.Outcome {
			case OnTime:
			case Full:
				busy++
				if a.RetryAfter != time.Second {
					t.Errorf("busy, retry after %v", a.RetryAfter)
				}
			default:
				t.Fatalf("identity %d: %v", i, a.Outcome)
			}
		}
		if n := p.Schedules(); n > 2*shardCount || busy < 1000-2*shardCount {
			t.Errorf("%d schedules, %d busy: the bound is %d", n, busy, 2*shardCount)
		}
		time.Sleep(time.Second)
		for i := range 1000 {
			if a := p.Admit(ctx, origin, origin, Identity{Token: fmt.Sprint("later", i)}, delay(time.Millisecond)); a.Outcome != OnTime && a.Outcome != Full {
				t.Fatalf("later %d: %v", i, a.Outcome)
			}
			time.Sleep(time.Millisecond) // each schedule passes before the next
		}
		if n := p.Schedules(); n > 1 {
			t.Errorf("%d schedules left, want at most the last one", n)
		}
		if a := p.Admit(ctx, origin, origin, Identity{Token: "new"}, delay(time.Second)); a.Outcome != OnTime {
			t.Errorf("a new identity once the old schedules passed: %v", a.Outcome)
		}
	})
}

// TestConnectionBound: enforce refuses past the bound and gives the slot
// back; wait holds until a request ends or MaxWait; audit counts and lets
// through; a hang-up leaves.
func TestConnectionBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		enforce := New(Options{MaxConnsPerOrigin: 1})
		first := enforce.Admit(ctx, origin, origin, gptbot, Delay{})
		other := Identity{Token: "bingbot"}
		a := enforce.Admit(ctx, origin, origin, other, delay(time.Minute))
		if a.Outcome != Busy || a.Allowed() || a.RetryAfter != time.Second {
			t.Fatalf("enforce past the bound: %v %v", a.Outcome, a.RetryAfter)
		}
		if a := enforce.Admit(ctx, "https://elsewhere.example", "https://elsewhere.example", other, Delay{}); a.Outcome != OnTime {
			t.Fatalf("another origin: %v", a.Outcome)
		}
		first.Done()
		second := enforce.Admit(ctx, origin, origin, other, delay(time.Minute))
		if second.Outcome != OnTime {
			t.Fatalf("after Done, with the slot given back: %v", second.Outcome)
		}
		second.Done()
		second.Done() // twice is harmless

		wait := New(Options{Mode: ModeWait, MaxWait: 5 * time.Second, MaxConnsPerOrigin: 1})
		first = wait.Admit(ctx, origin, origin, gptbot, Delay{})
		held := make(chan Admission)
		go func() { held <- wait.Admit(ctx, origin, origin, other, Delay{}) }()
		time.Sleep(2 * time.Second)
		first.Done()
		a = <-held
		if a.Outcome != Waited || a.Waited != 2*time.Second {
			t.Fatalf("wait: %v after %v", a.Outcome, a.Waited)
		}
		go func() { held <- wait.Admit(ctx, origin, origin, gptbot, Delay{}) }()
		if b := <-held; b.Outcome != Busy || b.Waited != 5*time.Second {
			t.Fatalf("wait past MaxWait: %v after %v", b.Outcome, b.Waited)
		}
		cctx, hangUp := context.WithCancel(ctx)
		go func() { held <- wait.Admit(cctx, origin, origin, gptbot, Delay{}) }()
		synctest.Wait()
		hangUp()
		if b := <-held; b.Outcome != Gone {
			t.Fatalf("hung up while held: %v", b.Outcome)
		}
		a.Done()
		if n := len(wait.conns[a.origin%shardCount].inFlight); n != 0 {
			t.Errorf("%d origins still counted once everything ended", n)
		}

		audit := New(Options{Mode: ModeAudit, MaxConnsPerOrigin: 1})
		x := audit.Admit(ctx, origin, origin, gptbot, Delay{})
		y := audit.Admit(ctx, origin, origin, other, Delay{})
		if y.Outcome != Busy || !y.Allowed() {
			t.Fatalf("audit past the bound: %v allowed %v", y.Outcome, y.Allowed())
		}
		x.Done()
		if z := audit.Admit(ctx, origin, origin, gptbot, Delay{}); z.Outcome != Busy {
			t.Errorf("audit: the request recorded busy is still in flight: %v", z.Outcome)
		}
	})
}

// TestUndo: a request that never reached the origin gives its slot back.
func TestUndo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{MaxConnsPerOrigin: 1})
		ctx := context.Background()
		a := p.Admit(ctx, origin, origin, gptbot, delay(time.Second))
		a.Undo()
		if b := p.Admit(ctx, origin, origin, gptbot, delay(time.Second)); b.Outcome != OnTime {
			t.Errorf("after Undo: %v", b.Outcome)
		}
	})
}

func TestOffPacesNothing(t *testing.T) {
	p := New(Options{Mode: ModeOff, MaxConnsPerOrigin: 1})
	for range 3 {
		if a := p.Admit(context.Background(), origin, origin, gptbot, delay(time.Hour)); a.Outcome != OnTime {
			t.Fatalf("off: %v", a.Outcome)
		}
	}
	var nilPacer *Pacer
	if a := nilPacer.Admit(context.Background(), origin, origin, gptbot, delay(time.Hour)); !a.Allowed() {
		t.Fatal("a nil pacer refused")
	}
}

// TestAdmitDoesNotAllocate: the on-time path of a known schedule, and of
// a counted connection, costs no allocation.
func TestAdmitDoesNotAllocate(t *testing.T) {
	p := New(Options{MaxConnsPerOrigin: 4})
	d := delay(time.Nanosecond)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		a := p.Admit(ctx, origin, origin, Identity{Token: "GPTBot", Client: "192.0.2.1:"}, d)
		a.Done()
	})
	if allocs != 0 {
		t.Errorf("Admit allocates %v times", allocs)
	}
}

func TestModeText(t *testing.T) {
	var m Mode
	for _, ok := range []string{"enforce", "wait", "audit", "off"} {
		if err := m.UnmarshalText([]byte(ok)); err != nil || string(m) != ok {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if err := m.UnmarshalText([]byte("Wait")); err != nil || m != ModeWait {
		t.Errorf("Wait: %v %v", m, err)
	}
	if err := m.UnmarshalText([]byte("hold")); err == nil {
		t.Error("hold accepted")
	}
}

// BenchmarkAdmit is the on-time path of a known schedule: what pacing adds
// to an allowed request with a delay in force.
func BenchmarkAdmit(b *testing.B) {
	p := New(Options{})
	d := delay(time.Nanosecond)
	ctx := context.Background()
	who := Identity{Token: "GPTBot", Client: "192.0.2.1:"}
	b.ReportAllocs()
	for b.Loop() {
		a := p.Admit(ctx, "https://www.example.com", "https://www.example.com", who, d)
		a.Done()
	}
}

// answered admits a request of who, which must be on time, and observes
// its answer, which took took: with a delay factor, the next start moves
// to the factor times took after this one's.
func answered(t *testing.T, p *Pacer, who Identity, d Delay, took time.Duration) {
	t.Helper()
	ctx := context.Background()
	a := p.Admit(ctx, origin, origin, who, d)
	if a.Outcome != OnTime {
		t.Fatalf("the request answered: %v", a.Outcome)
	}
	sent := time.Now()
	time.Sleep(took)
	a.Observe(ctx, Answer{Status: 200, Sent: sent, Took: took})
	a.Done()
}

// takeBy paces a request of who as Admit does, but in ModeWait holds it
// until deadline at the latest: a request that waited out a hold first
// has only the rest of its MaxWait.
func takeBy(p *Pacer, who Identity, d Delay, deadline time.Time) Admission {
	ctx := context.Background()
	a := Admission{p: p, group: origin, slot: -1, interval: int64(d.Interval)}
	if p.opts.Shared != nil {
		p.takeSharedSlot(ctx, &a, origin, who, deadline)
	} else {
		a.key = p.scheduleKey(origin, &who)
		p.takeSlot(ctx, &a, who.Client, deadline)
	}
	return a
}

// hangUpWhileHeld makes a request of who that p holds, and hangs up.
func hangUpWhileHeld(t *testing.T, p *Pacer, who Identity, d Delay, wg *sync.WaitGroup) {
	t.Helper()
	ctx, hangUp := context.WithCancel(context.Background())
	gone := make(chan Admission)
	wg.Go(func() { gone <- p.Admit(ctx, origin, origin, who, d) })
	synctest.Wait()
	hangUp()
	if a := <-gone; a.Outcome != Gone {
		t.Fatalf("hung up: %v", a.Outcome)
	}
}

// TestByFactor: a request refused is ByFactor exactly when the start it
// was refused for was set by the delay factor (extend), not by a take:
// however far away the start is. The Crawl-delay is 10s, the factor 2.
func TestByFactor(t *testing.T) {
	d := delay(10 * time.Second)
	for _, tc := range []struct {
		name    string
		mode    Mode
		maxWait time.Duration
		// refused runs the requests before, those held in wg, and
		// returns the one refused.
		refused      func(t *testing.T, p *Pacer, wg *sync.WaitGroup) Admission
		wantRetry    time.Duration
		wantByFactor bool
	}{{
		// The queue alone puts the third start 20s away, past one
		// interval: no answer was observed.
		name: "wait queue", mode: ModeWait, maxWait: 15 * time.Second,
		refused: func(t *testing.T, p *Pacer, wg *sync.WaitGroup) Admission {
			p.Admit(context.Background(), origin, origin, gptbot, d)
			wg.Go(func() { p.Admit(context.Background(), origin, origin, gptbot, d) })
			synctest.Wait()
			return p.Admit(context.Background(), origin, origin, gptbot, d)
		},
		wantRetry: 20 * time.Second,
	}, {
		// A 6s answer pushes the next start to 12s, within one interval
		// of the 10s one: 6s away at 6s.
		name: "push within one interval", mode: ModeEnforce,
		refused: func(t *testing.T, p *Pacer, wg *sync.WaitGroup) Admission {
			answered(t, p, gptbot, d, 6*time.Second)
			return p.Admit(context.Background(), origin, origin, gptbot, d)
		},
		wantRetry: 6 * time.Second, wantByFactor: true,
	}, {
		name: "push in wait mode beyond MaxWait", mode: ModeWait, maxWait: 5 * time.Second,
		refused: func(t *testing.T, p *Pacer, wg *sync.WaitGroup) Admission {
			answered(t, p, gptbot, d, 6*time.Second)
			return p.Admit(context.Background(), origin, origin, gptbot, d)
		},
		wantRetry: 6 * time.Second, wantByFactor: true,
	}, {
		name: "push in audit mode", mode: ModeAudit,
		refused: func(t *testing.T, p *Pacer, wg *sync.WaitGroup) Admission {
			answered(t, p, gptbot, d, 6*time.Second)
			return p.Admit(context.Background(), origin, origin, gptbot, d)
		},
		wantRetry: 6 * time.Second, wantByFactor: true,
	}, {
		// 2 × 1s is shorter than the Crawl-delay: nothing moves.
		name: "push short of the delay", mode: ModeEnforce,
		refused: func(t *testing.T, p *Pacer, wg *sync.WaitGroup) Admission {
			answered(t, p, gptbot, d, time.Second)
			return p.Admit(context.Background(), origin, origin, gptbot, d)
		},
		wantRetry: 9 * time.Second,
	}, {
		name: "an on-time take clears the mark", mode: ModeEnforce,
		refused: func(t *testing.T, p *Pacer, wg *sync.WaitGroup) Admission {
			answered(t, p, gptbot, d, 6*time.Second)
			time.Sleep(6 * time.Second)
			if a := p.Admit(context.Background(), origin, origin, gptbot, d); a.Outcome != OnTime {
				t.Fatalf("at the pushed start: %v", a.Outcome)
			}
			return p.Admit(context.Background(), origin, origin, gptbot, d)
		},
		wantRetry: 10 * time.Second,
	}, {
		// The request held for the pushed 12s start sets the next, 22s.
		name: "a queued take clears the mark", mode: ModeWait, maxWait: 15 * time.Second,
		refused: func(t *testing.T, p *Pacer, wg *sync.WaitGroup) Admission {
			answered(t, p, gptbot, d, 6*time.Second)
			wg.Go(func() { p.Admit(context.Background(), origin, origin, gptbot, d) })
			synctest.Wait()
			return p.Admit(context.Background(), origin, origin, gptbot, d)
		},
		wantRetry: 16 * time.Second,
	}, {
		// The request held for the pushed 12s start hangs up: the start
		// is free again, the factor's still.
		name: "a start given back keeps its mark", mode: ModeWait, maxWait: 15 * time.Second,
		refused: func(t *testing.T, p *Pacer, wg *sync.WaitGroup) Admission {
			answered(t, p, gptbot, d, 6*time.Second)
			hangUpWhileHeld(t, p, gptbot, d, wg)
			return takeBy(p, gptbot, d, time.Now()) // no time left to wait
		},
		wantRetry: 6 * time.Second, wantByFactor: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := New(Options{Mode: tc.mode, MaxWait: tc.maxWait, DelayFactor: 2, MaxDelay: time.Minute})
				var wg sync.WaitGroup
				a := tc.refused(t, p, &wg)
				wg.Wait()
				if a.Outcome != TooEarly || a.RetryAfter != tc.wantRetry || a.ByFactor != tc.wantByFactor {
					t.Errorf("%v in %v, by factor %v; want too early in %v, by factor %v",
						a.Outcome, a.RetryAfter, a.ByFactor, tc.wantRetry, tc.wantByFactor)
				}
			})
		})
	}
}

// TestWaitWithinDeadline: in ModeWait a request is held for its start only
// within what is left of its MaxWait, not a whole MaxWait again.
func TestWaitWithinDeadline(t *testing.T) {
	for _, tc := range []struct {
		name       string
		left       time.Duration // of a 10s MaxWait
		wantResult Outcome
	}{
		{"the start beyond what is left", 4 * time.Second, TooEarly},
		{"the start within what is left", 5 * time.Second, Waited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := New(Options{Mode: ModeWait, MaxWait: 10 * time.Second})
				d := delay(5 * time.Second)
				p.Admit(context.Background(), origin, origin, gptbot, d) // the next start 5s away
				start := time.Now()
				a := takeBy(p, gptbot, d, start.Add(tc.left))
				if a.Outcome != tc.wantResult {
					t.Fatalf("%v left: %v, want %v", tc.left, a.Outcome, tc.wantResult)
				}
				if a.Outcome == TooEarly && (a.RetryAfter != 5*time.Second || time.Since(start) != 0) {
					t.Errorf("refused in %v after %v, want at once, in 5s", a.RetryAfter, time.Since(start))
				}
				if a.Outcome == Waited && time.Since(start) != 5*time.Second {
					t.Errorf("held %v, want 5s", time.Since(start))
				}
			})
		})
	}
}
