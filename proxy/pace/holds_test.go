package pace

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const s = int64(time.Second / time.Microsecond) // one second in the holds' unit

// TestHoldStateFail steps the state machine through a run of failures and
// back, as the pacing manual says it goes.
func TestHoldStateFail(t *testing.T) {
	base, limit := 1*s, 8*s
	var st holdState
	now := 100 * s
	fail := func(sent int64, retryAfter int64) {
		st = st.fail(failure{now: now, sent: sent, status: 500, retryAfter: retryAfter}, base, limit, false)
	}
	fail(now-1, -1)
	if st.step != 1 || st.pause != base || st.until != now+base || st.retryAfter {
		t.Fatalf("first failure: %+v", st)
	}
	// Requests already on their way when it failed renew the hold only.
	raised := st.raised
	now += s / 2
	fail(raised-1, -1)
	if st.step != 1 || st.pause != base || st.until != now+base {
		t.Fatalf("a failure sent before the raise raised it: %+v", st)
	}
	for i, want := range []int64{2 * s, 4 * s, 8 * s, 8 * s} {
		now = st.until // as the hold ends: within the quiet period
		fail(now-1, -1)
		if st.pause != want || st.step != int32(i+2) || st.until != now+want {
			t.Fatalf("failure %d: pause %d, step %d, until %d; want pause %d", i+2, st.pause, st.step, st.until-now, want)
		}
	}
	// A success sent before the last raise says nothing; after it, halves.
	if got := st.succeed(now+1, st.raised-1, base); got != st {
		t.Fatalf("a success sent before the raise changed the state: %+v", got)
	}
	now = st.until + 1
	st = st.succeed(now, now-1, base)
	if st.pause != 4*s || st.step != 4 || st.forget != now+4*s {
		t.Fatalf("one success: %+v", st)
	}
	for range 3 {
		st = st.succeed(now, now-1, base)
	}
	if st.pause != 0 || st.step != 0 {
		t.Fatalf("four successes leave a pause: %+v", st)
	}
	if st = st.succeed(st.forget, st.forget, base); st != (holdState{}) {
		t.Fatalf("not forgotten: %+v", st)
	}
}

func TestHoldStateRetryAfter(t *testing.T) {
	base, limit := 1*s, 3600*s
	now := 1000 * s
	st := holdState{}.fail(failure{now: now, sent: now, status: 503, retryAfter: 30 * s}, base, limit, true)
	if st.until != now+30*s || !st.retryAfter || st.status != 503 || st.at != now {
		t.Fatalf("Retry-After: 30: %+v", st)
	}
	// A shorter word later never shortens the hold in force.
	short := st.fail(failure{now: now + s, sent: now + s, status: 429, retryAfter: 2 * s}, base, limit, true)
	if short.until != st.until || short.status != 503 {
		t.Fatalf("a shorter Retry-After shortened the hold: %+v", short)
	}
	// Capped.
	long := holdState{}.fail(failure{now: now, sent: now, status: 429, retryAfter: 86400 * s}, base, limit, true)
	if long.until != now+limit {
		t.Fatalf("Retry-After: 86400 is not capped: %d", long.until-now)
	}
	// The quiet period after the hold is the pause, two seconds at least:
	// a client obeying a whole-second Retry-After comes back within it.
	if st.pause != s || st.forget != st.until+2*s {
		t.Fatalf("pause %d, forget at %d, want %d", st.pause, st.forget, st.until+2*s)
	}
	if got := st.fail(failure{now: st.until + s, sent: st.until + s, status: 500, retryAfter: -1, client: 2}, base, limit, true); got.step != 2 {
		t.Fatalf("a failure a second after the hold starts a new run: step %d", got.step)
	}
	if got := st.fail(failure{now: st.forget, sent: st.forget, status: 500, retryAfter: -1, client: 2}, base, limit, true); got.step != 1 {
		t.Fatalf("a failure after the quiet period continues the old run: step %d", got.step)
	}
}

func TestHoldStateJitter(t *testing.T) {
	now := 50 * s
	st := holdState{pause: 4 * s, step: 3, raised: now - 10*s, forget: now + s}
	got := st.fail(failure{now: now, sent: now, status: 502, retryAfter: -1, jitter: 0.999}, s, 3600*s, false)
	if hold := got.until - now; hold < 8*s || hold > 10*s {
		t.Fatalf("held %d µs for a pause of 8s: not within a quarter more", hold)
	}
	// The jitter never takes a hold past the cap.
	capped := st.fail(failure{now: now, sent: now, status: 502, retryAfter: -1, jitter: 0.999}, s, 8*s, false)
	if hold := capped.until - now; hold != 8*s {
		t.Fatalf("held %d µs with a cap of 8s", hold)
	}
}

// TestHoldStateSharedRaise: a state every client meets is raised only by
// another client than the one that raised it last; that one's failures
// hold it again at the same pause.
func TestHoldStateSharedRaise(t *testing.T) {
	base, limit := 1*s, 3600*s
	var st holdState
	now := 10 * s
	fail := func(client uint64) {
		now = max(now, st.until) + 1
		st = st.fail(failure{now: now, sent: now, status: 500, retryAfter: -1, client: client}, base, limit, true)
	}
	for range 5 {
		fail(1)
	}
	if st.step != 1 || st.pause != base || st.until != now+base {
		t.Fatalf("one client failing five times: step %d pause %d held %d", st.step, st.pause, st.until-now)
	}
	for i, client := range []uint64{2, 1, 2} {
		fail(client)
		if st.step != int32(i+2) || st.pause != base<<(i+1) {
			t.Fatalf("client %d: step %d pause %d", client, st.step, st.pause)
		}
	}
	// A client's own state doubles on each of its failures.
	var own holdState
	for i := range 4 {
		now = max(now, own.until) + 1
		own = own.fail(failure{now: now, sent: now, status: 500, retryAfter: -1, client: 1}, base, limit, false)
		if own.pause != base<<i {
			t.Fatalf("own failure %d: pause %d", i+1, own.pause)
		}
	}
}

// TestHoldStateClamp: a state read from a fleet's store is bounded by this
// instance's cap, whatever was written.
func TestHoldStateClamp(t *testing.T) {
	now, limit := 1000*s, 3600*s
	hostile := holdState{until: math.MaxInt64, pause: math.MaxInt64, raised: math.MaxInt64, forget: math.MaxInt64,
		at: math.MaxInt64, step: math.MaxInt32}
	c := hostile.clamp(now, limit)
	if c.until != now+limit || c.pause != limit || c.raised != now || c.at != now || c.step != maxSteps || c.forget != now+limit+quiet(limit) {
		t.Fatalf("clamped: %+v", c)
	}
	// Stepping it overflows nothing.
	next := c.fail(failure{now: now, sent: now, status: 500, retryAfter: -1, client: 9}, s, limit, true)
	if next.pause != limit || next.until > now+limit || next.until < now {
		t.Fatalf("stepped: %+v", next)
	}
}

func TestHoldEncoding(t *testing.T) {
	st := holdState{until: 1 << 50, pause: 3 * s, raised: 1 << 49, forget: 1<<50 + 3*s, at: 1 << 48,
		step: 2, status: 503, retryAfter: true, failure: "connection refused", origin: "https://example.com", raiser: 1<<64 - 1}
	enc := st.encode()
	got, err := decodeHold(enc)
	if err != nil || got != st {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range [][]byte{nil, {}, {2}, {holdFormat}, {holdFormat, 0x80}, enc[:len(enc)-1], append(enc[:len(enc):len(enc)], 'x')} {
		if _, err := decodeHold(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

func FuzzDecodeHold(f *testing.F) {
	f.Add(holdState{until: 5, pause: 1, step: 1, status: 500, failure: "x"}.encode())
	f.Add([]byte{holdFormat, 1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeHold(b)
		if err != nil {
			return
		}
		again, err := decodeHold(st.encode())
		if err != nil || again != st {
			t.Fatalf("%q: decoded %+v, which does not round-trip: %+v, %v", b, st, again, err)
		}
		// Whatever a fleet's store sends, a request is held no longer
		// than this instance's cap.
		p := New(Options{Mode: ModeEnforce, MaxBackoff: time.Hour})
		p.ApplySharedHold(origin, b)
		if a := p.Admit(context.Background(), origin, origin, gptbot, Delay{}); a.RetryAfter > time.Hour {
			t.Fatalf("%q: held %v past the cap", b, a.RetryAfter)
		}
	})
}

func failWith(status int, sent time.Time) Answer {
	return Answer{Status: status, Sent: sent, Took: time.Millisecond}
}

// TestHeldEveryMode: a 503 with Retry-After holds every identity's
// requests to the origin, as the mode says, and no longer.
func TestHeldEveryMode(t *testing.T) {
	for _, mode := range []Mode{ModeEnforce, ModeWait, ModeAudit} {
		t.Run(string(mode), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := New(Options{Mode: mode, MaxWait: 10 * time.Second, MaxBackoff: time.Hour})
				ctx := context.Background()
				a := p.Admit(ctx, origin, origin, gptbot, Delay{})
				a.Observe(ctx, Answer{Status: 503, RetryAfter: 3 * time.Second, HasRetryAfter: true, Sent: time.Now()})
				a.Done()
				start := time.Now()
				b := p.Admit(ctx, origin, origin, Identity{Token: "bingbot"}, Delay{})
				defer b.Done()
				if b.Hold == nil || !b.Hold.RetryAfter || b.Hold.Status != 503 || !b.Hold.Until.Equal(start.Add(3*time.Second)) {
					t.Fatalf("the hold met: %+v", b.Hold)
				}
				switch mode {
				case ModeEnforce:
					if b.Outcome != Held || b.Allowed() || b.RetryAfter != 3*time.Second {
						t.Fatalf("enforce: %v, allowed %v, retry after %v", b.Outcome, b.Allowed(), b.RetryAfter)
					}
				case ModeWait:
					// Up to a quarter more, so that the requests held do not come
					// back together.
					if took := time.Since(start); b.Outcome != Waited || !b.Allowed() || took < 3*time.Second || took > 3750*time.Millisecond || b.Waited != took {
						t.Fatalf("wait: %v after %v (waited %v)", b.Outcome, time.Since(start), b.Waited)
					}
				case ModeAudit:
					if b.Outcome != Held || !b.Allowed() {
						t.Fatalf("audit: %v, allowed %v", b.Outcome, b.Allowed())
					}
				}
				time.Sleep(max(3*time.Second-time.Since(start), 0))
				if c := p.Admit(ctx, origin, origin, gptbot, Delay{}); c.Outcome != OnTime || c.Hold != nil {
					t.Fatalf("after the hold: %v %+v", c.Outcome, c.Hold)
				}
				if other := p.Admit(ctx, "https://other.example", "https://other.example", gptbot, Delay{}); other.Outcome != OnTime {
					t.Fatalf("another origin: %v", other.Outcome)
				}
			})
		})
	}
}

// TestWaitBeyondMaxWait: a hold longer than ROBOTSGATE_MAX_WAIT is
// answered at once in ModeWait too.
func TestWaitBeyondMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeWait, MaxWait: time.Second, MaxBackoff: time.Hour})
		ctx := context.Background()
		a := p.Admit(ctx, origin, origin, gptbot, Delay{})
		a.Observe(ctx, Answer{Status: 429, RetryAfter: time.Minute, HasRetryAfter: true, Sent: time.Now()})
		start := time.Now()
		b := p.Admit(ctx, origin, origin, gptbot, Delay{})
		if b.Outcome != Held || b.RetryAfter != time.Minute || time.Since(start) != 0 {
			t.Fatalf("%v, retry after %v, after %v", b.Outcome, b.RetryAfter, time.Since(start))
		}
	})
}

// TestBackoffGrowsAndRecovers: consecutive 500s without a header double
// the pause, with at most a quarter more; successes shorten it again.
func TestBackoffGrowsAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeEnforce, MaxBackoff: 4 * time.Second, BackoffBase: 500 * time.Millisecond})
		ctx := context.Background()
		for i, pause := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
			a := p.Admit(ctx, origin, origin, gptbot, Delay{})
			if a.Outcome != OnTime {
				t.Fatalf("failure %d: the request after the pause is %v", i+1, a.Outcome)
			}
			a.Observe(ctx, failWith(500, time.Now()))
			a.Done()
			b := p.Admit(ctx, origin, origin, gptbot, Delay{})
			if b.Outcome != BackedOff || b.Hold.Step != i+1 || b.Hold.RetryAfter || b.Hold.Status != 500 {
				t.Fatalf("failure %d: %v %+v", i+1, b.Outcome, b.Hold)
			}
			if b.RetryAfter < pause || b.RetryAfter > pause+pause/4 {
				t.Fatalf("failure %d: held %v, want %v to %v", i+1, b.RetryAfter, pause, pause+pause/4)
			}
			time.Sleep(b.RetryAfter)
		}
		own := p.clientHoldKey(origin, "")
		for i, pause := range []time.Duration{2 * time.Second, time.Second, 500 * time.Millisecond, 0} {
			a := p.Admit(ctx, origin, origin, gptbot, Delay{})
			a.Observe(ctx, Answer{Status: 200, Sent: time.Now()})
			a.Done()
			if st := p.holdOf(own); st.pause != pause.Microseconds() || (pause == 0) != (st.step == 0) {
				t.Fatalf("success %d: pause %dµs step %d, want %v", i+1, st.pause, st.step, pause)
			}
		}
		if p.Holds() != 0 || p.holdOf(p.holdKey(origin)).step != 0 {
			t.Fatalf("recovered, yet %d holds, group %+v", p.Holds(), p.holdOf(p.holdKey(origin)))
		}
		a := p.Admit(ctx, origin, origin, gptbot, Delay{})
		a.Observe(ctx, failWith(500, time.Now()))
		if b := p.Admit(ctx, origin, origin, gptbot, Delay{}); b.Hold == nil || b.Hold.Step != 1 {
			t.Fatalf("a failure after recovery starts a new run: %+v", b.Hold)
		}
	})
}

// TestBurstRaisesOnce: requests already sent when the first failure came
// renew the hold, not double it.
func TestBurstRaisesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeAudit, MaxBackoff: time.Hour})
		ctx := context.Background()
		sent := time.Now()
		var in []Admission
		for range 8 {
			in = append(in, p.Admit(ctx, origin, origin, gptbot, Delay{}))
		}
		time.Sleep(10 * time.Millisecond)
		for i := range in {
			in[i].Observe(ctx, failWith(503, sent))
		}
		if st := p.holdOf(p.holdKey(origin)); st.step != 1 || st.pause != DefaultBackoffBase.Microseconds() {
			t.Fatalf("eight failures of one burst: step %d, pause %dµs", st.step, st.pause)
		}
	})
}

// TestQuietForgets: a run of failures is forgotten once the hold is over
// and as long again has passed without a failure.
func TestQuietForgets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeEnforce, MaxBackoff: time.Hour})
		ctx := context.Background()
		for range 3 {
			a := p.Admit(ctx, origin, origin, gptbot, Delay{})
			a.Observe(ctx, Answer{Status: 0, Failure: "connection refused", Sent: time.Now()})
			b := p.Admit(ctx, origin, origin, gptbot, Delay{})
			if b.Hold == nil || b.Hold.Failure != "connection refused" || b.Hold.Status != 0 {
				t.Fatalf("no answer: %+v", b.Hold)
			}
			time.Sleep(b.RetryAfter)
		}
		own := p.clientHoldKey(origin, "")
		st := p.holdOf(own)
		if st.step != 3 {
			t.Fatalf("three failures: step %d", st.step)
		}
		time.Sleep(time.Duration(st.forget-unixMicros(time.Now())-1) * time.Microsecond)
		if p.holdOf(own).step != 3 {
			t.Fatal("forgotten before the quiet period is over")
		}
		time.Sleep(time.Microsecond)
		a := p.Admit(ctx, origin, origin, gptbot, Delay{})
		a.Observe(ctx, failWith(500, time.Now()))
		if st := p.holdOf(own); st.step != 1 {
			t.Fatalf("after the quiet period: step %d", st.step)
		}
	})
}

func TestCounted(t *testing.T) {
	for status, want := range map[int]bool{0: true, 200: false, 304: false, 404: false, 429: true, 500: true,
		501: false, 502: true, 503: true, 504: true, 599: true, 600: false} {
		if Counted(status) != want {
			t.Errorf("Counted(%d) = %v", status, !want)
		}
	}
}

// TestRetryAfterOnlyOn429And503: a Retry-After on another status is no
// hold of its own, only a backoff step.
func TestRetryAfterOnlyOn429And503(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeEnforce, MaxBackoff: time.Hour})
		ctx := context.Background()
		a := p.Admit(ctx, origin, origin, gptbot, Delay{})
		a.Observe(ctx, Answer{Status: 500, RetryAfter: time.Hour, HasRetryAfter: true, Sent: time.Now()})
		b := p.Admit(ctx, origin, origin, gptbot, Delay{})
		if b.Outcome != BackedOff || b.RetryAfter > 2*time.Second {
			t.Fatalf("%v for %v", b.Outcome, b.RetryAfter)
		}
	})
}

func TestBackoffOff(t *testing.T) {
	p := New(Options{Mode: ModeEnforce})
	a := p.Admit(context.Background(), origin, origin, gptbot, Delay{})
	a.Observe(context.Background(), Answer{Status: 503, RetryAfter: time.Hour, HasRetryAfter: true, Sent: time.Now()})
	if b := p.Admit(context.Background(), origin, origin, gptbot, Delay{}); b.Outcome != OnTime || p.Holds() != 0 {
		t.Fatalf("MaxBackoff 0 holds: %v", b.Outcome)
	}
}

// TestMaxHolds: past the bound a new hold is dropped and counted; those
// kept still hold, and forgotten ones are swept for new ones.
func TestMaxHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeEnforce, MaxBackoff: time.Hour, MaxHolds: 4 * shardCount})
		ctx := context.Background()
		groups := 16 * shardCount
		for i := range groups {
			who := Identity{Token: "GPTBot", Client: "10.0.0." + itoa(i)} // each its own client: no share is full
			a := p.Admit(ctx, "https://h"+itoa(i), "https://h"+itoa(i), who, Delay{})
			a.Observe(ctx, Answer{Status: 429, RetryAfter: time.Minute, HasRetryAfter: true, Sent: time.Now()})
		}
		kept := p.holds.kept.Load()
		if kept > 4*shardCount || p.holds.dropped.Load() != 2*int64(groups)-kept {
			t.Fatalf("kept %d, dropped %d", kept, p.holds.dropped.Load())
		}
		if p.Holds() == 0 {
			t.Fatal("nothing held")
		}
		time.Sleep(time.Minute + 3*time.Second)
		a := p.Admit(ctx, "https://new", "https://new", gptbot, Delay{})
		a.Observe(ctx, Answer{Status: 429, RetryAfter: time.Minute, HasRetryAfter: true, Sent: time.Now()})
		if b := p.Admit(ctx, "https://new", "https://new", gptbot, Delay{}); b.Outcome != Held {
			t.Fatalf("forgotten holds are not swept for a new one: %v", b.Outcome)
		}
	})
}

// TestHoldShareOfClient: one client's failures fill its share of the
// table, not the table: another client's holds are still kept.
func TestHoldShareOfClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeEnforce, MaxBackoff: time.Hour, MaxHolds: 64 * shardCount})
		ctx := context.Background()
		flooder := Identity{Token: "badbot", Client: "10.0.0.66"}
		for i := range 64 * shardCount {
			g := "https://w" + itoa(i) + ".attacker.example"
			a := p.Admit(ctx, g, g, flooder, Delay{})
			a.Observe(ctx, Answer{Status: 503, RetryAfter: time.Hour, HasRetryAfter: true, Sent: time.Now()})
		}
		if kept := p.holds.kept.Load(); kept > 4*shardCount {
			t.Fatalf("one client holds %d of the table's %d", kept, 64*shardCount)
		}
		for i := range 8 {
			g := "https://site" + itoa(i) + ".example"
			a := p.Admit(ctx, g, g, Identity{Token: "GPTBot", Client: "10.0.0.7"}, Delay{})
			a.Observe(ctx, Answer{Status: 503, RetryAfter: time.Minute, HasRetryAfter: true, Sent: time.Now()})
			if b := p.Admit(ctx, g, g, gptbot, Delay{}); b.Outcome != Held {
				t.Fatalf("another client's hold at %s was not kept: %v", g, b.Outcome)
			}
		}
	})
}

func itoa(i int) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		if i /= 10; i == 0 {
			return string(b)
		}
	}
}

// memHolds is SharedHolds as its contract asks, in memory, sending every
// state stored to the Pacers watching, as a fleet's store does.
type memHolds struct {
	mu       sync.Mutex
	states   map[string][]byte
	versions map[string]int64
	watchers []*Pacer
	failing  bool
	loads    int
}

func newMemHolds() *memHolds {
	return &memHolds{states: map[string][]byte{}, versions: map[string]int64{}}
}

var errHoldsDown = errors.New("holds unavailable")

func (m *memHolds) Load(ctx context.Context, group string) ([]byte, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loads++
	if m.failing {
		return nil, 0, errHoldsDown
	}
	return m.states[group], m.versions[group], nil
}

func (m *memHolds) Store(ctx context.Context, group string, state []byte, version int64, keep time.Duration) (bool, error) {
	m.mu.Lock()
	if m.failing {
		m.mu.Unlock()
		return false, errHoldsDown
	}
	if m.versions[group] != version {
		m.mu.Unlock()
		return false, nil
	}
	m.states[group], m.versions[group] = state, version+1
	watchers := m.watchers
	m.mu.Unlock()
	for _, p := range watchers {
		p.ApplySharedHold(group, state)
	}
	return true, nil
}

// TestSharedHolds: two Pacers on one store hold one origin together and
// grow one run of failures; while the store fails each holds on what it
// saw, and what it held then survives the store's later states.
func TestSharedHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemHolds()
		opts := Options{Mode: ModeEnforce, MaxBackoff: time.Hour, SharedHolds: store}
		a, b := New(opts), New(opts)
		store.watchers = []*Pacer{a, b}
		ctx := context.Background()

		x := a.Admit(ctx, origin, origin, gptbot, Delay{})
		x.Observe(ctx, Answer{Status: 503, RetryAfter: 3 * time.Second, HasRetryAfter: true, Sent: time.Now()})
		if y := b.Admit(ctx, origin, origin, Identity{Token: "bingbot"}, Delay{}); y.Outcome != Held || y.RetryAfter != 3*time.Second {
			t.Fatalf("the other instance: %v for %v", y.Outcome, y.RetryAfter)
		}
		time.Sleep(3 * time.Second)
		y := b.Admit(ctx, origin, origin, gptbot, Delay{})
		y.Observe(ctx, failWith(500, time.Now()))
		if z := a.Admit(ctx, origin, origin, gptbot, Delay{}); z.Outcome != BackedOff || z.Hold.Step != 2 {
			t.Fatalf("one run across instances: %v %+v", z.Outcome, z.Hold)
		}

		store.failing = true
		time.Sleep(10 * time.Second)
		w := a.Admit(ctx, origin, origin, gptbot, Delay{})
		w.Observe(ctx, Answer{Status: 429, RetryAfter: time.Minute, HasRetryAfter: true, Sent: time.Now()})
		if v := a.Admit(ctx, origin, origin, gptbot, Delay{}); v.Outcome != Held {
			t.Fatalf("store down: the instance that saw the 429 does not hold: %v", v.Outcome)
		}
		if a.holds.sharedFallbacks.Load() != 2 { // the group's and the client's own
			t.Fatalf("fallbacks %d", a.holds.sharedFallbacks.Load())
		}
		store.failing = false
		u := b.Admit(ctx, origin, origin, gptbot, Delay{})
		u.Observe(ctx, failWith(500, time.Now()))
		if v := a.Admit(ctx, origin, origin, gptbot, Delay{}); v.Outcome != Held || v.RetryAfter < 59*time.Second {
			t.Fatalf("the store's later state shortened this instance's own hold: %v for %v", v.Outcome, v.RetryAfter)
		}
		// A success on a healthy group asks the store nothing.
		time.Sleep(time.Hour)
		loads := store.loads
		for range 10 {
			h := b.Admit(ctx, "https://healthy.example", "https://healthy.example", gptbot, Delay{})
			h.Observe(ctx, Answer{Status: 200, Sent: time.Now()})
		}
		if store.loads != loads {
			t.Fatalf("successes of a healthy group loaded %d states", store.loads-loads)
		}
	})
}

// TestDelayFactor: the next start of an identity is at least the factor
// times the last response time after its last, within the floor and cap;
// other identities are not slowed.
func TestDelayFactor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeEnforce, DelayFactor: 2, MinDelay: 100 * time.Millisecond, MaxDelay: 10 * time.Second})
		ctx := context.Background()
		a := p.Admit(ctx, origin, origin, gptbot, Delay{})
		start := time.Now()
		time.Sleep(time.Second)
		a.Observe(ctx, Answer{Status: 200, Sent: start, Took: time.Second})
		a.Done()
		b := p.Admit(ctx, origin, origin, gptbot, Delay{})
		if b.Outcome != TooEarly || b.RetryAfter != time.Second || !b.ByFactor {
			t.Fatalf("after a 1s answer with factor 2: %v in %v, by factor %v", b.Outcome, b.RetryAfter, b.ByFactor)
		}
		if c := p.Admit(ctx, origin, origin, Identity{Token: "bingbot"}, Delay{}); c.Outcome != OnTime {
			t.Fatalf("another identity: %v", c.Outcome)
		}
		time.Sleep(time.Second)
		c := p.Admit(ctx, origin, origin, gptbot, Delay{})
		c.Observe(ctx, Answer{Status: 200, Sent: time.Now(), Took: time.Millisecond})
		if d := p.Admit(ctx, origin, origin, gptbot, Delay{}); d.Outcome != TooEarly || d.RetryAfter != 100*time.Millisecond {
			t.Fatalf("the floor: %v in %v", d.Outcome, d.RetryAfter)
		}
		time.Sleep(100 * time.Millisecond)
		e := p.Admit(ctx, origin, origin, gptbot, Delay{})
		e.Observe(ctx, Answer{Status: 200, Sent: time.Now(), Took: time.Hour})
		if f := p.Admit(ctx, origin, origin, gptbot, Delay{}); f.RetryAfter != 10*time.Second {
			t.Fatalf("the cap: %v in %v", f.Outcome, f.RetryAfter)
		}
		// Robots.txt's longer delay stands.
		time.Sleep(10 * time.Second)
		g := p.Admit(ctx, origin, origin, gptbot, delay(5*time.Second))
		g.Observe(ctx, Answer{Status: 200, Sent: time.Now(), Took: time.Millisecond})
		if h := p.Admit(ctx, origin, origin, gptbot, delay(5*time.Second)); h.RetryAfter != 5*time.Second || h.ByFactor {
			t.Fatalf("crawl-delay 5s: %v in %v by factor %v", h.Outcome, h.RetryAfter, h.ByFactor)
		}
	})
}

// TestDelayFactorShared: the fleet's schedule is pushed too.
func TestDelayFactorShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := newMemSchedules()
		p := New(Options{Mode: ModeEnforce, DelayFactor: 3, Shared: shared})
		ctx := context.Background()
		a := p.Admit(ctx, origin, origin, gptbot, Delay{})
		a.Observe(ctx, Answer{Status: 200, Sent: time.Now(), Took: time.Second})
		var extended bool
		for _, c := range shared.log() {
			if c.op == "extend" && c.interval == 3*time.Second {
				extended = true
			}
		}
		if !extended {
			t.Fatalf("calls: %+v", shared.log())
		}
		if b := p.Admit(ctx, origin, origin, gptbot, Delay{}); b.Outcome != TooEarly || b.RetryAfter != 3*time.Second {
			t.Fatalf("%v in %v", b.Outcome, b.RetryAfter)
		}
	})
}

// TestHoldMetrics: the holds' metrics count what happened.
func TestHoldMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeEnforce, MaxBackoff: time.Hour})
		ctx := context.Background()
		a := p.Admit(ctx, origin, origin, gptbot, Delay{})
		a.Observe(ctx, Answer{Status: 503, RetryAfter: time.Minute, HasRetryAfter: true, Sent: time.Now()})
		b := p.Admit(ctx, "https://other.example", "https://other.example", gptbot, Delay{})
		b.Observe(ctx, Answer{Failure: "connection refused", Sent: time.Now()})
		reg := prometheus.NewRegistry()
		reg.MustRegister(p)
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				name := f.GetName()
				for _, l := range m.GetLabel() {
					name += "/" + l.GetValue()
				}
				got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		for name, want := range map[string]float64{
			"robotsgate_pace_holds":                             4, // each origin's and its client's
			"robotsgate_pace_origin_failures_total/503":         1,
			"robotsgate_pace_origin_failures_total/no_answer":   1,
			"robotsgate_pace_origin_failures_total/429":         0,
			"robotsgate_pace_holds_raised_total/retry-after":    1,
			"robotsgate_pace_holds_raised_total/backoff":        1,
			"robotsgate_pace_holds_raised_total/client-backoff": 1,
			"robotsgate_pace_holds_dropped_total":               0,
		} {
			if v, ok := got[name]; !ok || v != want {
				t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
			}
		}
	})
}

// TestOneClientCannotHoldOthers: a client whose requests keep failing
// slows itself ever more, while it holds every other crawler of the
// origin for the first pause at most each time; failures of two clients
// back the origin off as one.
func TestOneClientCannotHoldOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := time.Second
		p := New(Options{Mode: ModeEnforce, MaxBackoff: time.Hour, BackoffBase: base})
		ctx := context.Background()
		bad := Identity{Token: "badbot", Client: "10.0.0.66"}
		good := Identity{Token: "GPTBot", Client: "10.0.0.7"}
		for i := range 6 {
			a := p.Admit(ctx, origin, origin, bad, Delay{})
			if a.Outcome != OnTime {
				t.Fatalf("failure %d: %v", i+1, a.Outcome)
			}
			a.Observe(ctx, failWith(500, time.Now()))
			own := p.Admit(ctx, origin, origin, bad, Delay{})
			// At the first step the client's own pause and the origin's are
			// one; then its own is longer.
			if want := base << i; own.RetryAfter < want || (i > 0 && !own.Hold.Client) || own.Hold.Step != i+1 {
				t.Fatalf("failure %d: the failing client is held %v (own %v, step %d), want %v", i+1, own.RetryAfter, own.Hold.Client, own.Hold.Step, want)
			}
			other := p.Admit(ctx, origin, origin, good, Delay{})
			if other.Outcome != BackedOff || other.RetryAfter > base+base/4 || other.Hold.Client {
				t.Fatalf("failure %d: another client is held %v (%v)", i+1, other.RetryAfter, other.Outcome)
			}
			time.Sleep(own.RetryAfter)
		}
		// Two other clients' failures in turn: the origin's pause grows for
		// everyone.
		one, two := Identity{Token: "bingbot", Client: "10.0.0.8"}, Identity{Token: "yandex", Client: "10.0.0.9"}
		for i, who := range []Identity{one, two, one, two} {
			a := p.Admit(ctx, origin, origin, who, Delay{})
			if a.Outcome != OnTime {
				t.Fatalf("shared failure %d: %v %v", i+1, a.Outcome, a.RetryAfter)
			}
			a.Observe(ctx, failWith(503, time.Now()))
			b := p.Admit(ctx, origin, origin, good, Delay{})
			if want := base << i; b.RetryAfter < want || b.Hold.Client {
				t.Fatalf("shared failure %d: a third client is held %v (own %v), want %v or more", i+1, b.RetryAfter, b.Hold.Client, want)
			}
			time.Sleep(b.RetryAfter)
		}
	})
}

// TestGroupHeldOnlyByItsOwnAnswers: with a group of hosts, a failure
// holds its origin, and its group only when the answer speaks for it.
func TestGroupHeldOnlyByItsOwnAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeEnforce, MaxBackoff: time.Hour})
		ctx := context.Background()
		const group, sibling = "address:192.0.2.1", "https://sibling.example"
		bingbot := Identity{Token: "bingbot", Client: "10.0.0.8"}
		a := p.Admit(ctx, origin, group, gptbot, Delay{})
		a.Observe(ctx, Answer{Status: 503, RetryAfter: time.Minute, HasRetryAfter: true, Sent: time.Now()}) // not from the group's address
		if b := p.Admit(ctx, origin, group, bingbot, Delay{}); b.Outcome != Held {
			t.Fatalf("the origin that answered: %v", b.Outcome)
		}
		if b := p.Admit(ctx, sibling, group, bingbot, Delay{}); b.Outcome != OnTime {
			t.Fatalf("its group, from an answer that did not come from the group's address: %v", b.Outcome)
		}
		c := p.Admit(ctx, origin, group, gptbot, Delay{})
		c.Observe(ctx, Answer{Status: 503, RetryAfter: 2 * time.Minute, HasRetryAfter: true, Sent: time.Now(), ForGroup: true})
		b := p.Admit(ctx, sibling, group, bingbot, Delay{})
		if b.Outcome != Held || b.Hold.Origin != origin {
			t.Fatalf("the group, from its own address: %v, set by %q", b.Outcome, b.Hold.Origin)
		}
	})
}

// TestSuccessHalvesOnce: one success halves the origin's pause once, the
// origin being its own group.
func TestSuccessHalvesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Mode: ModeEnforce, MaxBackoff: time.Hour})
		ctx := context.Background()
		for i, client := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} {
			a := p.Admit(ctx, origin, origin, Identity{Token: "bot", Client: client}, Delay{})
			if a.Outcome != OnTime {
				t.Fatalf("failure %d: %v", i+1, a.Outcome)
			}
			a.Observe(ctx, failWith(503, time.Now()))
			time.Sleep(p.Admit(ctx, origin, origin, Identity{Token: "bot", Client: "10.0.0.9"}, Delay{}).RetryAfter)
		}
		if st := p.holdOf(p.holdKey(origin)); st.pause != 4*s {
			t.Fatalf("three clients' failures: pause %d", st.pause)
		}
		a := p.Admit(ctx, origin, origin, Identity{Token: "bot", Client: "10.0.0.4"}, Delay{})
		a.Observe(ctx, Answer{Status: 200, Sent: time.Now()})
		if st := p.holdOf(p.holdKey(origin)); st.pause != 2*s || st.step != 2 {
			t.Fatalf("one success: pause %d step %d, want 2s, step 2", st.pause, st.step)
		}
	})
}
