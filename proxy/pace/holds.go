package pace

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/fnv"
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
	// DefaultMaxHolds bounds the holds kept (groups', origins', clients'
	// own): about 18 MiB at the 292 bytes a hold took, its origin's name
	// included, measured at the bound.
	DefaultMaxHolds = 1 << 16
)

// A hold is an origin's own word on the pace. A 429 or 503 with
// Retry-After holds its group (every crawler: the site is overloaded, not
// one bot) until then. A run of failures without one (429, 5xx but 501, no
// answer) holds for a pause that doubles from Options.BackoffBase to
// Options.MaxBackoff, plus up to a quarter at random, so that successive
// pauses drift apart. Two pauses run side by side, so that one client
// behind a shared gate cannot hold a site for the others: the client's
// own, raised by each of its failures, and the group's, which every
// crawler meets, raised only by a failure of another client than the one
// that raised it last; one client's failures hold the others for the
// group's first pause each time at most, and slow it ever more. Only a
// failure of a request sent after a pause was last raised raises it
// again: the requests already on their way when the origin first failed
// say nothing new. A success of a request sent after the raise halves a
// pause, and a state is forgotten once its hold is over and as long again
// as the pause (two seconds at least) has passed without a failure.
//
// The state machine is holdState's fail and succeed, on wall-clock
// microseconds so that a fleet's instances, whose clocks agree to well
// under a pause, share one state: with Options.SharedHolds it is read,
// stepped and stored back (compare-and-set) there, and every instance
// mirrors what is stored. A request is checked against this process's
// table only.

// holdState is one group's, origin's or client's hold and backoff.
type holdState struct {
	until  int64 // no request before (unix µs)
	pause  int64 // the backoff pause (µs); 0: no run of failures
	raised int64 // when the pause was last raised (unix µs)
	forget int64 // the state is forgotten from then on (unix µs)
	at     int64 // when the answer that set until came (unix µs)
	step   int32 // times the pause was raised in this run
	status int32 // that answer's status; 0 for no answer
	// retryAfter: until is the origin's Retry-After, not a pause.
	retryAfter bool
	// failure says why no answer came, for status 0; origin is the origin
	// that answered, or failed to.
	failure, origin string
	// raiser names the client whose failure last raised the pause
	// (clientID).
	raiser uint64
}

// failure is one counted failure of the origin.
type failure struct {
	now, sent int64 // when it came, when its request was sent (unix µs)
	status    int   // 0 for no answer
	// retryAfter is the origin's Retry-After (µs), -1 when it gave none.
	retryAfter  int64
	why, origin string
	client      uint64  // clientID of the client whose request failed
	jitter      float64 // in [0, 1): the share of a quarter of the pause added
}

// fail steps s for f, with a pause from base to limit (µs). A shared
// state is one every client's requests meet: its pause is raised only by
// another client than the one that raised it last, and otherwise held
// again as it is.
func (s holdState) fail(f failure, base, limit int64, shared bool) holdState {
	if s.forget <= f.now {
		s = holdState{}
	}
	if s.step == 0 || (f.sent >= s.raised && (!shared || f.client != s.raiser)) {
		s.step++
		if s.pause == 0 {
			s.pause = min(base, limit)
		} else {
			s.pause = min(2*s.pause, limit)
		}
		s.raised, s.raiser = f.now, f.client
	}
	until := f.now + min(s.pause+int64(float64(s.pause)/4*f.jitter), limit)
	if f.retryAfter >= 0 {
		until = f.now + min(f.retryAfter, limit)
	}
	if until > s.until {
		s.until, s.at, s.status, s.failure, s.origin = until, f.now, int32(f.status), f.why, f.origin
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

// heldAtLeast returns s holding at least as long as o does.
func (s holdState) heldAtLeast(o holdState) holdState {
	if o.until > s.until {
		s.until, s.at, s.status, s.failure, s.origin, s.retryAfter = o.until, o.at, o.status, o.failure, o.origin, o.retryAfter
		s.forget = max(s.forget, s.until+quiet(s.pause))
	}
	return s
}

// clamp bounds a state another process stored to what limit (µs) allows
// now: whoever can write to a fleet's store may write anything, and an
// instance configured with a longer ROBOTSGATE_MAX_BACKOFF must not hold
// this one's crawlers longer than its own.
func (s holdState) clamp(now, limit int64) holdState {
	s.until = min(s.until, now+limit)
	s.at, s.raised = min(s.at, now), min(s.raised, now)
	s.pause = min(max(s.pause, 0), limit)
	s.step = min(max(s.step, 0), maxSteps)
	s.forget = min(s.forget, max(s.until, now)+quiet(limit))
	return s
}

// maxSteps bounds a run's steps as read: doubling from a microsecond, 64
// steps pass any cap.
const maxSteps = 64

// holdFormat starts an encoded holdState; another format reads as none.
const holdFormat = 1

// maxFailureWords bounds the failure kept in a state; maxOriginBytes the
// origin (robots.OriginOf bounds a host by DNS's 253 bytes).
const (
	maxFailureWords = 128
	maxOriginBytes  = 512
)

// encode writes s for the fleet's store.
func (s holdState) encode() []byte {
	b := make([]byte, 0, 80+len(s.failure)+len(s.origin))
	b = append(b, holdFormat)
	for _, v := range [...]int64{s.until, s.pause, s.raised, s.forget, s.at, int64(s.step), int64(s.status), int64(len(s.failure)), int64(len(s.origin))} {
		b = binary.AppendVarint(b, v)
	}
	b = binary.BigEndian.AppendUint64(b, s.raiser)
	if s.retryAfter {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = append(b, s.failure...)
	return append(b, s.origin...)
}

var errBadHold = errors.New("not a hold state")

// decodeHold reads what encode wrote; anything else is an error.
func decodeHold(b []byte) (holdState, error) {
	if len(b) == 0 || b[0] != holdFormat {
		return holdState{}, errBadHold
	}
	b = b[1:]
	var v [9]int64
	for i := range v {
		n, k := binary.Varint(b)
		if k <= 0 {
			return holdState{}, errBadHold
		}
		v[i], b = n, b[k:]
	}
	failureLen, originLen := v[7], v[8]
	if len(b) < 9 || b[8] > 1 || v[1] < 0 || v[5] < 0 || v[5] > math.MaxInt32 || v[6] < 0 || v[6] > 999 ||
		failureLen < 0 || failureLen > maxFailureWords || originLen < 0 || originLen > maxOriginBytes ||
		int64(len(b)-9) != failureLen+originLen {
		return holdState{}, errBadHold
	}
	words := b[9:]
	return holdState{until: v[0], pause: v[1], raised: v[2], forget: v[3], at: v[4],
		step: int32(v[5]), status: int32(v[6]), raiser: binary.BigEndian.Uint64(b), retryAfter: b[8] == 1,
		failure: string(words[:failureLen]), origin: string(words[failureLen:])}, nil
}

// SharedHolds keeps the hold states where a fleet shares them (package
// cache/fleet keeps them in Redis), as bytes the Pacer encodes, each under
// a name: a group, an origin, or a group and a client. Every method must
// return within a short bound; an error means it is unavailable, and the
// Pacer keeps the state itself.
type SharedHolds interface {
	// Load returns name's state and its version; nil and 0 for none.
	Load(ctx context.Context, name string) (state []byte, version int64, err error)
	// Store sets name's state when its version is still version, kept
	// for keep, and sends it to every Pacer's ApplySharedHold; stored is
	// false when another stored first.
	Store(ctx context.Context, name string, state []byte, version int64, keep time.Duration) (stored bool, err error)
}

// holdShard keeps the holds whose key's hash puts them in it.
type holdShard struct {
	mu    sync.Mutex
	holds map[uint64]holdEntry
	// held counts the holds charged to each client, by clientID.
	held map[uint64]int32
	_    [32]byte // keeps shards' locks off each other's cache lines
}

// holdEntry is a state kept, and the client charged for it.
type holdEntry struct {
	holdState
	charged uint64
}

// holds is the Pacer's table of holds.
type holds struct {
	shards              [shardCount]holdShard
	perShard, perClient int
	// kept counts the states kept, so that a Pacer with none skips the
	// lookup on every request.
	kept                     atomic.Int64
	dropped, sharedFallbacks atomic.Int64
	failures                 [failureKinds]atomic.Int64
	// holds every crawler meets raised by a Retry-After, by a pause; a
	// client's own pauses raised
	raisedByAnswer, raisedOff, raisedClient atomic.Int64
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

// holdShareOfTable is the share of the table one client's holds may take.
const holdShareOfTable = 16

func (h *holds) init(maxHolds int) {
	if maxHolds <= 0 {
		maxHolds = DefaultMaxHolds
	}
	h.perShard = max(1, maxHolds/shardCount)
	h.perClient = max(1, h.perShard/holdShareOfTable)
	for i := range h.shards {
		h.shards[i].holds = make(map[uint64]holdEntry)
		h.shards[i].held = make(map[uint64]int32)
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

// clientID names a client in a state, alike in every process of a fleet.
func clientID(client string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(client))
	return h.Sum64()
}

// Hold is the hold a request met.
type Hold struct {
	// Until is when it ends; At when the origin's answer that set it came.
	Until, At time.Time
	// Origin is the origin that answered so: with a group of hosts (see
	// Grouper), maybe another than the request's.
	Origin string
	// Status is that answer's status; 0 when none came, and Failure says
	// why.
	Status  int
	Failure string
	// RetryAfter: the origin asked for it with Retry-After; otherwise it
	// is a backoff pause, raised Step times in a row.
	RetryAfter bool
	Step       int
	// Client: the pause is the client's own, after its own requests
	// failed; otherwise every crawler's.
	Client bool
}

func (s holdState) hold(client bool) *Hold {
	return &Hold{Until: time.UnixMicro(s.until), At: time.UnixMicro(s.at), Origin: s.origin, Status: int(s.status),
		Failure: s.failure, RetryAfter: s.retryAfter, Step: int(s.step), Client: client}
}

// holdKey hashes a hold's name.
func (p *Pacer) holdKey(name string) uint64 { return maphash.String(p.seed, name) }

// clientHoldKey hashes the name of client's own hold at group, as
// clientHoldName spells it, without making the string.
func (p *Pacer) clientHoldKey(group, client string) uint64 {
	var h maphash.Hash
	h.SetSeed(p.seed)
	h.WriteString(group)
	h.WriteString("\x00client\x00")
	h.WriteString(client)
	return h.Sum64()
}

func clientHoldName(group, client string) string { return group + "\x00client\x00" + client }

// holdOf returns key's state in this process's table; one forgotten is
// deleted on the way.
func (p *Pacer) holdOf(key uint64) holdState {
	s := &p.holds.shards[key%shardCount]
	s.mu.Lock()
	defer s.mu.Unlock()
	e, known := s.holds[key]
	if known && e.forget <= unixMicros(time.Now()) {
		s.drop(key, e.charged, &p.holds)
		return holdState{}
	}
	return e.holdState
}

// drop deletes key's state, charged to charged.
func (s *holdShard) drop(key, charged uint64, h *holds) {
	delete(s.holds, key)
	if n := s.held[charged] - 1; n > 0 {
		s.held[charged] = n
	} else {
		delete(s.held, charged)
	}
	h.kept.Add(-1)
}

// put keeps st as key's state, a new one charged to charge: a state
// forgotten is deleted, and a new one that finds the shard, or its client's
// share of it, full once forgotten states are swept is dropped. It
// reports whether st is kept.
func (s *holdShard) put(key, charge uint64, st holdState, now int64, h *holds) bool {
	e, known := s.holds[key]
	if st.forget <= now {
		if known {
			s.drop(key, e.charged, h)
		}
		return false
	}
	if !known {
		if len(s.holds) >= h.perShard || int(s.held[charge]) >= h.perClient {
			for k, old := range s.holds {
				if old.forget <= now {
					s.drop(k, old.charged, h)
				}
			}
		}
		if len(s.holds) >= h.perShard || int(s.held[charge]) >= h.perClient {
			h.dropped.Add(1)
			return false
		}
		e.charged = charge
		s.held[charge]++
		h.kept.Add(1)
	}
	e.holdState = st
	s.holds[key] = e
	return true
}

// keepHold puts st as key's state, holding at least as long as the one
// kept: a hold is never shortened by another's view of it.
func (p *Pacer) keepHold(key uint64, st holdState) {
	s := &p.holds.shards[key%shardCount]
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, known := s.holds[key]; known {
		st = st.heldAtLeast(e.holdState)
	}
	s.put(key, st.raiser, st, unixMicros(time.Now()), &p.holds)
}

// stepLocal steps key's state in this process's table, under its lock.
func (p *Pacer) stepLocal(key uint64, step func(holdState) holdState) (before, after holdState) {
	s := &p.holds.shards[key%shardCount]
	s.mu.Lock()
	defer s.mu.Unlock()
	before = s.holds[key].holdState
	after = step(before)
	s.put(key, after.raiser, after, unixMicros(time.Now()), &p.holds)
	return before, after
}

// ApplySharedHold mirrors a state a fleet's store sent (SharedHolds.Store,
// by any instance), bounded by this Pacer's own cap; one that does not
// read is ignored.
func (p *Pacer) ApplySharedHold(name string, state []byte) {
	if p.opts.MaxBackoff <= 0 {
		return
	}
	st, err := decodeHold(state)
	if err != nil {
		return
	}
	p.keepHold(p.holdKey(name), st.clamp(unixMicros(time.Now()), p.opts.MaxBackoff.Microseconds()))
}

// obeyHold holds a back while its group, its origin or its client's own
// backoff holds it: in ModeWait until the hold ends, when it ends before
// deadline, and a little more at random (a quarter of the wait, a second
// at most), so that requests held together do not reach the origin
// together; otherwise a.Outcome is Held or BackedOff. It returns whether
// the request goes on to its schedule.
func (p *Pacer) obeyHold(ctx context.Context, a *Admission, deadline time.Time) bool {
	for {
		st, client := p.holdOf(p.holdKey(a.group)), false
		if a.originName != a.group {
			st = st.heldAtLeast(p.holdOf(p.holdKey(a.originName)))
		}
		if own := p.holdOf(p.clientHoldKey(a.group, a.clientName)); own.until > st.until {
			st, client = own, true
		}
		now := time.Now()
		wait := time.Duration(st.until-unixMicros(now)) * time.Microsecond
		if wait <= 0 {
			return true
		}
		a.Hold = st.hold(client)
		if p.opts.Mode != ModeWait || now.Add(wait).After(deadline) {
			a.Outcome, a.RetryAfter = BackedOff, wait
			if st.retryAfter {
				a.Outcome = Held
			}
			return false
		}
		spread := rand.N(min(wait/4, time.Second, deadline.Sub(now)-wait) + 1)
		if !p.hold(ctx, a, wait+spread) {
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
	// ForGroup says the answer speaks for the origin's whole group: by
	// address, it came from the group's address (a name may resolve to
	// another when dialled). A failure that does not holds its origin,
	// not its group.
	ForGroup bool
}

// Observe tells the Pacer how the origin answered a's request: a counted
// failure (Counted) raises the holds of its group, its origin and its
// client's own; a success shortens those in backoff; and with
// Options.DelayFactor the identity's next start moves to at least
// DelayFactor times Took after this one's.
func (a *Admission) Observe(ctx context.Context, ans Answer) {
	p := a.p
	if p == nil || p.opts.Mode == ModeOff || a.group == "" {
		return
	}
	if p.opts.MaxBackoff > 0 {
		if Counted(ans.Status) {
			p.holds.failures[kindOf(ans.Status)].Add(1)
			f := failure{now: unixMicros(time.Now()), sent: unixMicros(ans.Sent), status: ans.Status, retryAfter: -1,
				why: truncate(ans.Failure, maxFailureWords), origin: truncate(a.originName, maxOriginBytes),
				client: clientID(a.clientName), jitter: rand.Float64()}
			if ans.HasRetryAfter && (ans.Status == 429 || ans.Status == 503) {
				f.retryAfter = max(0, ans.RetryAfter.Microseconds())
			}
			base, limit := p.backoffBase(), p.opts.MaxBackoff.Microseconds()
			every := func(s holdState) holdState { return s.fail(f, base, limit, true) }
			groupToo := a.originName == a.group || ans.ForGroup
			if groupToo {
				p.stepHold(ctx, a.group, p.holdKey(a.group), every, countEvery)
			}
			if a.originName != a.group {
				// Counted once per failure: as the group's when it is stepped.
				counted := countEvery
				if groupToo {
					counted = countNone
				}
				p.stepHold(ctx, a.originName, p.holdKey(a.originName), every, counted)
			}
			p.stepHold(ctx, clientHoldName(a.group, a.clientName), p.clientHoldKey(a.group, a.clientName),
				func(s holdState) holdState { return s.fail(f, base, limit, false) }, countClient)
		} else if p.holds.kept.Load() > 0 {
			now, sent, base := unixMicros(time.Now()), unixMicros(ans.Sent), p.backoffBase()
			succeed := func(s holdState) holdState { return s.succeed(now, sent, base) }
			names := []string{a.group, a.originName}
			if a.originName == a.group {
				names = names[:1] // one state, halved once
			}
			for _, name := range names {
				if key := p.holdKey(name); p.inBackoff(key, sent) {
					p.stepHold(ctx, name, key, succeed, countNone)
				}
			}
			if key := p.clientHoldKey(a.group, a.clientName); p.inBackoff(key, sent) {
				p.stepHold(ctx, clientHoldName(a.group, a.clientName), key, succeed, countNone)
			}
		}
	}
	if p.opts.DelayFactor > 0 && ans.Status != 0 {
		p.extend(ctx, a, ans.Took)
	}
}

// inBackoff reports whether a success of a request sent at sent shortens
// key's pause.
func (p *Pacer) inBackoff(key uint64, sent int64) bool {
	st := p.holdOf(key)
	return st.step > 0 && sent >= st.raised
}

func (p *Pacer) backoffBase() int64 {
	if p.opts.BackoffBase > 0 {
		return p.opts.BackoffBase.Microseconds()
	}
	return DefaultBackoffBase.Microseconds()
}

// stepHold steps the state of name (key its hash): in the fleet's store
// when there is one (read, step, store if nobody stored meanwhile, three
// tries), else, or when the store fails, in this process's table. The
// client's leaving does not stop it: the origin's answer stands.
func (p *Pacer) stepHold(ctx context.Context, name string, key uint64, step func(holdState) holdState, counted raiseCount) {
	if shared := p.opts.SharedHolds; shared != nil {
		ctx := context.WithoutCancel(ctx)
		own := p.holdOf(key)
		limit := p.opts.MaxBackoff.Microseconds()
		for range 3 {
			raw, version, err := shared.Load(ctx, name)
			if err != nil {
				break
			}
			now := unixMicros(time.Now())
			st, err := decodeHold(raw)
			if err != nil {
				st = holdState{}
			}
			// What this process held while the store failed still holds.
			st = st.clamp(now, limit).heldAtLeast(own)
			next := step(st)
			if raw != nil && next == st {
				p.keepHold(key, next) // nothing new to tell the fleet
				return
			}
			keep := time.Duration(max(next.forget-now, 0)+1e6) * time.Microsecond
			stored, err := shared.Store(ctx, name, next.encode(), version, keep)
			if err != nil {
				break
			}
			if stored {
				p.noteRaise(st, next, counted)
				p.keepHold(key, next)
				return
			}
		}
		p.holds.sharedFallbacks.Add(1)
	}
	before, after := p.stepLocal(key, step)
	p.noteRaise(before, after, counted)
}

// raiseCount says which count a raised hold goes to.
type raiseCount uint8

const (
	countNone   raiseCount = iota
	countEvery             // a hold every crawler meets: by Retry-After or backoff
	countClient            // a client's own backoff
)

// noteRaise counts a hold that next moves later than before.
func (p *Pacer) noteRaise(before, next holdState, counted raiseCount) {
	if next.until <= before.until {
		return
	}
	switch {
	case counted == countClient && !next.retryAfter:
		p.holds.raisedClient.Add(1)
	case counted == countEvery && next.retryAfter:
		p.holds.raisedByAnswer.Add(1)
	case counted == countEvery:
		p.holds.raisedOff.Add(1)
	}
}

// Holds counts the holds in force now, of groups, origins and clients;
// the states forgotten are swept on the way.
func (p *Pacer) Holds() int {
	if p.holds.kept.Load() == 0 {
		return 0
	}
	now := unixMicros(time.Now())
	n := 0
	for i := range p.holds.shards {
		s := &p.holds.shards[i]
		s.mu.Lock()
		for k, e := range s.holds {
			switch {
			case e.forget <= now:
				s.drop(k, e.charged, &p.holds)
			case e.until > now:
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
