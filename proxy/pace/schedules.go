package pace

import (
	"context"
	"hash/maphash"
	"math"
	"sync"
	"time"
)

// DefaultMaxSchedules is the default bound on schedules: at about
// ScheduleBytes each, 56 MiB.
const DefaultMaxSchedules = 1 << 20

// ScheduleBytes is what one schedule costs in memory, about: a map slot of
// a 64-bit key, a 64-bit time and the 64-bit hash of the client charged
// (its top bit the factor's mark), with the map's spare room (53.5 bytes measured at a million). Each
// client's count, kept per sixty-fourth of the table, adds about 36 bytes
// where it holds schedules: next to nothing, unless every schedule is
// another client's.
const ScheduleBytes = 56

// MinSchedulesPerClient is the least Options.MaxSchedulesPerClient: one
// schedule in each sixty-fourth of the table.
const MinSchedulesPerClient = shardCount

// shareSweep is how often, at most, a shard is swept for a client at its
// share: sweeping costs the shard's size, and a client that keeps asking
// at its share must not make the Pacer sweep on each request. Its
// schedules that have passed count until swept; a Full answer's
// Retry-After is as long.
const shareSweep = busyRetry

type shard struct {
	mu   sync.Mutex
	next map[uint64]schedule
	// held counts the schedules charged to each client, by the hash of
	// its name.
	held map[uint64]int32
	// sweepAt is the size at which the map is next swept of schedules
	// whose time has passed; freeAt is no later than when the first
	// schedule passes: no sweep can free one before. sweptAt is when the
	// last sweep was.
	sweepAt int
	freeAt  int64
	sweptAt int64
	_       [16]byte // keeps shards' locks off each other's cache lines
}

// schedule is one (origin, identity)'s.
type schedule struct {
	next int64 // earliest start of the key's next request
	// owner is the hash of the client charged for it (clientHash), and
	// factorMark when extend, not a take, set next: what
	// Admission.ByFactor reports of a request refused for next.
	owner uint64
}

// factorMark is the bit of schedule.owner that says extend set next. A
// client's hash (clientHash) leaves it clear.
const factorMark = 1 << 63

// client is the hash of the client charged for e.
func (e schedule) client() uint64 { return e.owner &^ factorMark }

// byFactor says whether extend set e.next.
func (e schedule) byFactor() bool { return e.owner&factorMark != 0 }

// clientHash is the hash of client's name, factorMark clear.
func (p *Pacer) clientHash(client string) uint64 {
	return maphash.String(p.seed, client) &^ factorMark
}

// fullness says why a new schedule does not fit.
type fullness uint8

const (
	roomy     fullness = iota
	tableFull          // the shard holds perShard schedules
	shareFull          // the client holds perClient of them
)

// minSweep is the smallest map size that is swept.
const minSweep = 64

// takeSlot takes the next start of a's schedule, created for client when
// there is none, holding the request for it in ModeWait until deadline at
// the latest; false when the request goes no further (refused, or its
// client gone), a.Outcome saying why. A take sets the next start one
// interval on, the factor's mark cleared. a.client keeps the mark of the
// start taken, for giveBack to restore.
func (p *Pacer) takeSlot(ctx context.Context, a *Admission, client string, deadline time.Time) bool {
	s := &p.shards[a.key%shardCount]
	s.mu.Lock()
	now := p.now()
	e, known := s.next[a.key]
	if e.next <= now {
		// One that has passed but is not swept yet stays charged to the
		// client that created it, whoever starts it again: no client is
		// hashed on the common path.
		if !known {
			e.owner = p.clientHash(client)
			if why := s.claim(now, e.owner, p); why != roomy {
				s.mu.Unlock()
				p.refuseFull(a, why)
				return p.opts.Mode == ModeAudit
			}
		}
		// Now, not a start extend set: nothing to restore.
		a.slot, a.client = now, e.client()
		s.next[a.key] = schedule{next: now + a.interval, owner: e.client()}
		s.freeAt = min(s.freeAt, now+a.interval)
		s.mu.Unlock()
		return true
	}
	early := time.Duration(e.next - now)
	if p.opts.Mode != ModeWait || early > time.Until(deadline) {
		s.mu.Unlock()
		p.tooEarly(a, early, e.byFactor())
		return p.opts.Mode == ModeAudit
	}
	a.slot, a.client = e.next, e.owner
	s.next[a.key] = schedule{next: e.next + a.interval, owner: e.client()}
	s.mu.Unlock()
	return p.hold(ctx, a, early)
}

// tooEarly turns a away, early before its start; byFactor says extend set
// that start.
func (p *Pacer) tooEarly(a *Admission, early time.Duration, byFactor bool) {
	a.Outcome, a.RetryAfter, a.ByFactor = TooEarly, early, byFactor
}

// extend moves a's next start to at least DelayFactor times took after
// its own, within MinDelay and MaxDelay: on the Shared schedule and on
// the Pacer's own, where the start it sets carries factorMark. A schedule
// swept meanwhile is made again, charged to the client it was; a full
// table leaves it unmade.
func (p *Pacer) extend(ctx context.Context, a *Admission, took time.Duration) {
	by := max(time.Duration(p.opts.DelayFactor*float64(took)), p.opts.MinDelay)
	if p.opts.MaxDelay > 0 {
		by = min(by, p.opts.MaxDelay)
	}
	if by <= 0 {
		return
	}
	if a.sharedKey != "" {
		// An error leaves the Pacer's own schedule to keep the gap.
		_ = p.opts.Shared.Extend(context.WithoutCancel(ctx), a.sharedKey, a.sharedSlot, by)
	}
	if a.slot < 0 {
		return
	}
	want := a.slot + int64(by)
	s := &p.shards[a.key%shardCount]
	s.mu.Lock()
	defer s.mu.Unlock()
	e, known := s.next[a.key]
	if e.next >= want {
		return
	}
	if !known {
		e.owner = a.client &^ factorMark
		if s.claim(p.now(), e.owner, p) != roomy {
			return
		}
	}
	s.next[a.key] = schedule{next: want, owner: e.client() | factorMark}
	s.freeAt = min(s.freeAt, want)
}

// refuseFull turns a away for why.
func (p *Pacer) refuseFull(a *Admission, why fullness) {
	if why == shareFull {
		p.shareFull.Add(1)
	} else {
		p.full.Add(1)
	}
	a.Outcome, a.RetryAfter, a.ClientShare = Full, busyRetry, why == shareFull
}

// hold holds a's request for early, until the slot it took; false when its
// client went away first, the slot given back.
func (p *Pacer) hold(ctx context.Context, a *Admission, early time.Duration) bool {
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	timer := time.NewTimer(early)
	defer timer.Stop()
	select {
	case <-timer.C:
		a.Outcome = Waited
		a.Waited += early
		return true
	case <-ctx.Done():
		p.giveBack(ctx, a)
		a.Outcome = Gone
		return false
	}
}

// forget deletes key's schedule and the charge of client, its creator.
func (s *shard) forget(key, client uint64) {
	delete(s.next, key)
	if n := s.held[client] - 1; n > 0 {
		s.held[client] = n
	} else {
		delete(s.held, client)
	}
}

// claim makes room for a new schedule of client, the hash of its name, and
// charges client for it. It returns roomy, or why the schedule does not
// fit: the shard holds perShard schedules, or client perClient of them.
// It sweeps the schedules whose time has passed once the map has doubled
// since the last sweep. A full map is not swept again before one of its
// schedules can have passed: a flood of new identities costs a lookup
// each, not a sweep each; for a client at its share, not more often than
// shareSweep either, since the map need not be full: the client's own
// schedules that have passed wait for a sweep, and may wait that long.
func (s *shard) claim(now int64, client uint64, p *Pacer) fullness {
	grown := len(s.next) >= s.sweepAt
	full := len(s.next) >= p.perShard
	atShare := int(s.held[client]) >= p.perClient
	if !grown && !full && !atShare {
		s.held[client]++
		return roomy
	}
	var sweep bool
	switch {
	case full:
		sweep = now >= s.freeAt
	case grown:
		sweep = true
	default: // at its share only
		sweep = now >= s.freeAt && now-s.sweptAt >= int64(shareSweep)
	}
	if sweep {
		s.sweep(now)
	}
	switch {
	case int(s.held[client]) >= p.perClient:
		return shareFull
	case len(s.next) >= p.perShard:
		return tableFull
	}
	s.held[client]++
	return roomy
}

// sweep deletes the schedules whose time has passed.
func (s *shard) sweep(now int64) {
	first := int64(math.MaxInt64)
	for k, e := range s.next {
		if e.next <= now {
			s.forget(k, e.client())
		} else {
			first = min(first, e.next)
		}
	}
	s.sweepAt = max(minSweep, 2*len(s.next))
	s.freeAt = first
	s.sweptAt = now
}

// giveBack frees a's slot, on the Shared schedule and in the Pacer's own,
// when nobody took a later one: the next request may have it, with the
// factor's mark it had. Otherwise
// the later ones keep their starts, and the origin just sees a longer gap.
// A Shared slot is given back even when ctx, the request's, has ended: its
// client going away is often why.
func (p *Pacer) giveBack(ctx context.Context, a *Admission) {
	if a.sharedKey != "" {
		// An error leaves the slot taken, which costs the origin no more
		// than a longer gap either.
		_ = p.opts.Shared.GiveBack(context.WithoutCancel(ctx), a.sharedKey, a.sharedSlot, time.Duration(a.interval))
		a.sharedKey = ""
	}
	if a.slot < 0 {
		return
	}
	s := &p.shards[a.key%shardCount]
	s.mu.Lock()
	if e, known := s.next[a.key]; known && e.next == a.slot+a.interval {
		if a.slot <= p.now() {
			// Back to a time that has passed: no schedule at all, and its
			// client's charge goes with it.
			s.forget(a.key, e.client())
		} else {
			s.next[a.key] = schedule{next: a.slot, owner: e.client() | a.client&factorMark}
			s.freeAt = min(s.freeAt, a.slot)
		}
	}
	s.mu.Unlock()
	a.slot = -1
}

// Schedules counts the schedules that still hold a request back.
func (p *Pacer) Schedules() int {
	now := p.now()
	n := 0
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for _, e := range s.next {
			if e.next > now {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}
