package pace

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for the zero values of the holds' Options.
const (
	// DefaultBackoffBase is the first pause of a run of failures.
	DefaultBackoffBase = time.Second
	// DefaultMaxHolds bounds the groups whose hold or backoff is kept:
	// about 12 MiB at the 178 bytes a hold took, measured at the bound.
	DefaultMaxHolds = 1 << 16
)

// A hold is an origin group's own word on the pace, for every crawler at
// once: a 429 or 503 with Retry-After holds the group until then, and a
// run of failures without one (429, 5xx but 501, no answer) doubles a
// pause from Options.BackoffBase to Options.MaxBackoff, holding the group
// for the pause and up to a quarter more, at random so that a fleet's
// requests do not all come back at once. Only a failure of a request sent
// after the pause was last raised raises it again: the requests already on
// their way when the origin first failed say nothing new. A success of a
// request sent after the raise halves the pause, and the state is
// forgotten once the hold is over and as long again as the pause has
// passed without a failure (two seconds at least).
//
// The state machine is holdState's fail and succeed, on wall-clock
// microseconds so that a fleet's instances, whose clocks agree to well
// under a pause, share one state: with Options.SharedHolds it is read,
// stepped and stored back (compare-and-set) there, and every instance
// mirrors what is stored. A request is checked against this process's
// table only.

// holdState is one group's hold and backoff.
type holdState struct {
	until  int64 // no request before (unix µs)
	pause  int64 // the backoff pause (µs); 0: no run of failures
	raised int64 // when the pause was last raised (unix µs)
	forget int64 // the state is forgotten from then on (unix µs)
	at     int64 // when the answer that set until came (unix µs)
	step   int32 // failures in a row that raised the pause
	status int32 // that answer's status; 0 for no answer
	// retryAfter: until is the origin's Retry-After, not a pause.
	retryAfter bool
	// failure says why no answer came, for status 0.
	failure string
}

// failure is one counted failure of the origin.
type failure struct {
	now, sent int64 // when it came, when its request was sent (unix µs)
	status    int   // 0 for no answer
	// retryAfter is the origin's Retry-After (µs), -1 when it gave none.
	retryAfter int64
	why        string
	jitter     float64 // in [0, 1): the share of a quarter of the pause added
}

// fail steps s for f, with a pause from base to limit (µs).
func (s holdState) fail(f failure, base, limit int64) holdState {
	if s.forget <= f.now {
		s = holdState{}
	}
	if s.step == 0 || f.sent >= s.raised {
		s.step++
		if s.pause == 0 {
			s.pause = min(base, limit)
		} else {
			s.pause = min(2*s.pause, limit)
		}
		s.raised = f.now
	}
	until := f.now + s.pause + int64(float64(s.pause)/4*f.jitter)
	if f.retryAfter >= 0 {
		until = f.now + min(f.retryAfter, limit)
	}
	if until > s.until {
		s.until, s.at, s.status, s.failure = until, f.now, int32(f.status), f.why
		s.retryAfter = f.retryAfter >= 0
	}
	s.forget = s.until + quiet(s.pause)
	return s
}

// minQuiet is the least quiet period that forgets a run of failures: a
// client that obeys a Retry-After, which counts whole seconds rounded up,
// comes back up to a second after the hold ends, and its failure must
// still continue the run.
const minQuiet = 2_000_000

// quiet is how long after its hold a run with pause is forgotten when no
// failure comes.
func quiet(pause int64) int64 { return max(pause, minQuiet) }

// succeed steps s for a success at now of a request sent at sent: the
// pause halves, below base it is gone; a hold in force stays.
func (s holdState) succeed(now, sent, base int64) holdState {
	if s.forget <= now {
		return holdState{}
	}
	if s.step == 0 || sent < s.raised {
		return s
	}
	s.step--
	s.pause /= 2
	if s.step == 0 || s.pause < base {
		s.step, s.pause = 0, 0
		s.forget = max(s.until, now)
		return s
	}
	s.forget = max(s.until, now) + quiet(s.pause)
	return s
}

// holdFormat starts an encoded holdState; another format reads as none.
const holdFormat = 1

// maxFailureWords bounds the failure kept in a state.
const maxFailureWords = 128

// encode writes s for the fleet's store.
func (s holdState) encode() []byte {
	b := make([]byte, 0, 64+len(s.failure))
	b = append(b, holdFormat)
	for _, v := range [...]int64{s.until, s.pause, s.raised, s.forget, s.at, int64(s.step), int64(s.status)} {
		b = binary.AppendVarint(b, v)
	}
	if s.retryAfter {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return append(b, s.failure...)
}

var errBadHold = errors.New("not a hold state")

// decodeHold reads what encode wrote; anything else is an error.
func decodeHold(b []byte) (holdState, error) {
	if len(b) == 0 || b[0] != holdFormat {
		return holdState{}, errBadHold
	}
	b = b[1:]
	var v [7]int64
	for i := range v {
		n, k := binary.Varint(b)
		if k <= 0 {
			return holdState{}, errBadHold
		}
		v[i], b = n, b[k:]
	}
	if len(b) < 1 || b[0] > 1 || len(b)-1 > maxFailureWords ||
		v[5] < 0 || v[5] > math.MaxInt32 || v[6] < 0 || v[6] > 999 || v[1] < 0 {
		return holdState{}, errBadHold
	}
	return holdState{until: v[0], pause: v[1], raised: v[2], forget: v[3], at: v[4],
		step: int32(v[5]), status: int32(v[6]), retryAfter: b[0] == 1, failure: string(b[1:])}, nil
}

// SharedHolds keeps the groups' hold states where a fleet shares them
// (package cache/fleet keeps them in Redis), as bytes the Pacer encodes.
// Every method must return within a short bound; an error means it is
// unavailable, and the Pacer keeps the state itself.
type SharedHolds interface {
	// Load returns group's state and its version; nil and 0 for none.
	Load(ctx context.Context, group string) (state []byte, version int64, err error)
	// Store sets group's state when its version is still version, kept
	// for keep, and sends it to every Pacer's ApplySharedHold; stored is
	// false when another stored first.
	Store(ctx context.Context, group string, state []byte, version int64, keep time.Duration) (stored bool, err error)
}

// holdShard keeps the holds of the groups whose hash puts them in it.
type holdShard struct {
	mu    sync.Mutex
	holds map[uint64]holdState
	_     [40]byte // keeps shards' locks off each other's cache lines
}

// holds is the Pacer's table of holds.
type holds struct {
	shards   [shardCount]holdShard
	perShard int
	// kept counts the states kept, so that a Pacer with none skips the
	// lookup on every request.
	kept                      atomic.Int64
	dropped, sharedFallbacks  atomic.Int64
	failures                  [failureKinds]atomic.Int64
	raisedByAnswer, raisedOff atomic.Int64 // holds raised by a Retry-After, by a pause
}

// failureKind sorts the counted failures for the metrics.
type failureKind uint8

const (
	failure429 failureKind = iota
	failure503
	failure5xx
	failureNoAnswer
	failureKinds
)

func (k failureKind) String() string {
	return [...]string{"429", "503", "5xx", "no_answer"}[k]
}

func kindOf(status int) failureKind {
	switch {
	case status == 0:
		return failureNoAnswer
	case status == 429:
		return failure429
	case status == 503:
		return failure503
	}
	return failure5xx
}

func (h *holds) init(maxHolds int) {
	if maxHolds <= 0 {
		maxHolds = DefaultMaxHolds
	}
	h.perShard = max(1, maxHolds/shardCount)
	for i := range h.shards {
		h.shards[i].holds = make(map[uint64]holdState)
	}
}

// Counted reports whether an answer with status is a failure a pause
// grows on: 429, and every 5xx but 501 (the method, not the server's
// state); status 0 stands for no answer.
func Counted(status int) bool {
	return status == 0 || status == 429 || (status >= 500 && status <= 599 && status != 501)
}

// unixMicros is the holds' clock.
func unixMicros(t time.Time) int64 { return t.UnixMicro() }

// Hold is the hold a request met.
type Hold struct {
	// Until is when it ends; At when the origin's answer that set it came.
	Until, At time.Time
	// Status is that answer's status; 0 when none came, and Failure says
	// why.
	Status  int
	Failure string
	// RetryAfter: the origin asked for it with Retry-After; otherwise it
	// is a backoff pause, Step failures in a row long.
	RetryAfter bool
	Step       int
}

func (s holdState) hold() *Hold {
	return &Hold{Until: time.UnixMicro(s.until), At: time.UnixMicro(s.at), Status: int(s.status),
		Failure: s.failure, RetryAfter: s.retryAfter, Step: int(s.step)}
}

// holdOf returns group's state in this process's table.
func (p *Pacer) holdOf(group string) (holdState, uint64) {
	key := maphash.String(p.seed, group)
	s := &p.holds.shards[key%shardCount]
	s.mu.Lock()
	st := s.holds[key]
	s.mu.Unlock()
	return st, key
}

// keepHold puts st as key's state: a hold already kept is never
// shortened, a state forgotten is deleted, and a full shard drops a new
// group once the forgotten ones are swept.
func (p *Pacer) keepHold(key uint64, st holdState, now int64) {
	s := &p.holds.shards[key%shardCount]
	s.mu.Lock()
	defer s.mu.Unlock()
	old, known := s.holds[key]
	if known && old.until > st.until {
		st.until, st.at, st.status, st.failure, st.retryAfter = old.until, old.at, old.status, old.failure, old.retryAfter
		st.forget = max(st.forget, st.until+quiet(st.pause))
	}
	if st.forget <= now {
		if known {
			delete(s.holds, key)
			p.holds.kept.Add(-1)
		}
		return
	}
	if !known {
		if len(s.holds) >= p.holds.perShard {
			for k, e := range s.holds {
				if e.forget <= now {
					delete(s.holds, k)
					p.holds.kept.Add(-1)
				}
			}
		}
		if len(s.holds) >= p.holds.perShard {
			p.holds.dropped.Add(1)
			return
		}
		p.holds.kept.Add(1)
	}
	s.holds[key] = st
}

// ApplySharedHold mirrors a state a fleet's store sent (SharedHolds.Store,
// by any instance); one that does not read is ignored.
func (p *Pacer) ApplySharedHold(group string, state []byte) {
	st, err := decodeHold(state)
	if err != nil {
		return
	}
	p.keepHold(maphash.String(p.seed, group), st, unixMicros(time.Now()))
}

// obeyHold holds a back while its group is held: in ModeWait until the
// hold ends, when it ends before deadline; otherwise a.Outcome is Held or
// BackedOff. It returns whether the request goes on to its schedule.
func (p *Pacer) obeyHold(ctx context.Context, a *Admission, deadline time.Time) bool {
	for {
		st, _ := p.holdOf(a.group)
		now := time.Now()
		wait := time.Duration(st.until-unixMicros(now)) * time.Microsecond
		if wait <= 0 {
			return true
		}
		a.Hold = st.hold()
		if p.opts.Mode != ModeWait || now.Add(wait).After(deadline) {
			a.Outcome, a.RetryAfter = BackedOff, wait
			if st.retryAfter {
				a.Outcome = Held
			}
			return false
		}
		if !p.hold(ctx, a, wait) {
			return false
		}
	}
}

// Answer is how an origin answered a request that was sent to it.
type Answer struct {
	// Status is the origin's status; 0 when no answer came, Failure
	// saying why in a few words.
	Status  int
	Failure string
	// RetryAfter is the origin's Retry-After, from now, when HasRetryAfter
	// (only a 429 or 503's counts).
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Sent is when the request was sent; Took how long the answer's
	// header took from then.
	Sent time.Time
	Took time.Duration
}

// Observe tells the Pacer how the origin answered a's request: a counted
// failure (Counted) raises its group's hold, a success of a group in
// backoff shortens it, and with Options.DelayFactor the identity's next
// start moves to at least DelayFactor times Took after this one's.
func (a *Admission) Observe(ctx context.Context, ans Answer) {
	p := a.p
	if p == nil || p.opts.Mode == ModeOff || a.group == "" {
		return
	}
	if p.opts.MaxBackoff > 0 {
		if Counted(ans.Status) {
			p.holds.failures[kindOf(ans.Status)].Add(1)
			f := failure{now: unixMicros(time.Now()), sent: unixMicros(ans.Sent), status: ans.Status,
				retryAfter: -1, why: truncate(ans.Failure, maxFailureWords), jitter: rand.Float64()}
			if ans.HasRetryAfter && (ans.Status == 429 || ans.Status == 503) {
				f.retryAfter = max(0, ans.RetryAfter.Microseconds())
			}
			p.stepHold(ctx, a.group, func(s holdState) holdState { return s.fail(f, p.backoffBase(), p.opts.MaxBackoff.Microseconds()) })
		} else if p.holds.kept.Load() > 0 {
			if st, _ := p.holdOf(a.group); st.step > 0 {
				now, sent := unixMicros(time.Now()), unixMicros(ans.Sent)
				p.stepHold(ctx, a.group, func(s holdState) holdState { return s.succeed(now, sent, p.backoffBase()) })
			}
		}
	}
	if p.opts.DelayFactor > 0 && ans.Status != 0 {
		p.extend(ctx, a, ans.Took)
	}
}

func (p *Pacer) backoffBase() int64 {
	if p.opts.BackoffBase > 0 {
		return p.opts.BackoffBase.Microseconds()
	}
	return DefaultBackoffBase.Microseconds()
}

// stepHold steps group's state: in the fleet's store when there is one
// (read, step, store if nobody stored meanwhile, a few tries), else, or
// when the store fails, in this process's table.
func (p *Pacer) stepHold(ctx context.Context, group string, step func(holdState) holdState) {
	own, key := p.holdOf(group)
	if shared := p.opts.SharedHolds; shared != nil {
		for range 3 {
			raw, version, err := shared.Load(ctx, group)
			if err != nil {
				break
			}
			st, err := decodeHold(raw)
			if err != nil {
				st = holdState{}
			}
			// What this process held while the store failed still holds.
			if own.until > st.until {
				st.until, st.at, st.status, st.failure, st.retryAfter = own.until, own.at, own.status, own.failure, own.retryAfter
				st.forget = max(st.forget, st.until+quiet(st.pause))
			}
			next := step(st)
			now := unixMicros(time.Now())
			keep := time.Duration(max(next.forget-now, 0)+1e6) * time.Microsecond
			stored, err := shared.Store(ctx, group, next.encode(), version, keep)
			if err != nil {
				break
			}
			if stored {
				p.noteRaise(st, next)
				p.keepHold(key, next, now)
				return
			}
		}
		p.holds.sharedFallbacks.Add(1)
	}
	next := step(own)
	p.noteRaise(own, next)
	p.keepHold(key, next, unixMicros(time.Now()))
}

// noteRaise counts a hold that next moves later than before.
func (p *Pacer) noteRaise(before, next holdState) {
	if next.until > before.until {
		if next.retryAfter {
			p.holds.raisedByAnswer.Add(1)
		} else {
			p.holds.raisedOff.Add(1)
		}
	}
}

// Holds counts the groups held now.
func (p *Pacer) Holds() int {
	if p.holds.kept.Load() == 0 {
		return 0
	}
	now := unixMicros(time.Now())
	n := 0
	for i := range p.holds.shards {
		s := &p.holds.shards[i]
		s.mu.Lock()
		for _, st := range s.holds {
			if st.until > now {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Observes reports whether Observe has anything to do with a's answer:
// the Pacer keeps holds or a delay factor, and a went through it.
func (a *Admission) Observes() bool {
	return a.p != nil && a.group != "" && a.p.opts.Mode != ModeOff && (a.p.opts.MaxBackoff > 0 || a.p.opts.DelayFactor > 0)
}

// DelayFactor is Options.DelayFactor.
func (p *Pacer) DelayFactor() float64 { return p.opts.DelayFactor }
