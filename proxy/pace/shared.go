package pace

import (
	"context"
	"time"
)

// SharedSchedules keeps schedules where several Pacers, in several
// processes, share them (package cache/fleet keeps them in Redis). Every
// method must return within a short bound; an error means it is
// unavailable, and the Pacer keeps the schedule itself.
type SharedSchedules interface {
	// Take runs one GCRA step on key's schedule, atomically and on the
	// store's own clock: when the schedule's time has passed, the request
	// starts now and the next one an interval later (early 0, taken);
	// when it is early by no more than maxWait, it takes the next start,
	// early from now, and pushes the schedule one interval on (taken);
	// otherwise nothing changes and early says how long until the next
	// start (taken false). slot names the start taken, for GiveBack.
	Take(ctx context.Context, key string, interval, maxWait time.Duration) (slot int64, early time.Duration, taken bool, err error)
	// GiveBack undoes the Take of slot whose request never reached the
	// origin, unless a later Take followed it.
	GiveBack(ctx context.Context, key string, slot int64, interval time.Duration) error
	// Extend moves key's schedule to at least slot+by, unless it is later
	// already (Options.DelayFactor).
	Extend(ctx context.Context, key string, slot int64, by time.Duration) error
}

// takeSharedSlot is takeSlot on the Shared schedule of who at origin,
// bounded below by the Pacer's own: a request its own schedule refuses is
// refused without asking, and one the Shared schedule lets start before
// its own next start (they lost the starts this Pacer handed out) is held
// until then. In ModeWait it holds the request until deadline at the
// latest. When the Shared schedules fail, this request is paced by the
// Pacer's own schedule alone; when its client went away meanwhile, it goes
// no further.
//
// A refusal by the Pacer's own schedule is by the factor
// (Admission.ByFactor) when extend set its start. One by the Shared
// schedule never is: the Pacer's own starts, taken or pushed, are no
// earlier than those it set there, so the start refused for is another
// instance's, of a cause this Pacer does not know.
func (p *Pacer) takeSharedSlot(ctx context.Context, a *Admission, origin string, who Identity, deadline time.Time) bool {
	a.key = p.scheduleKey(origin, &who)
	s := &p.shards[a.key%shardCount]
	s.mu.Lock()
	own := s.next[a.key]
	s.mu.Unlock()
	var maxWait time.Duration
	if p.opts.Mode == ModeWait {
		maxWait = max(time.Until(deadline), 0)
	}
	if early := time.Duration(own.next - p.now()); early > 0 && (p.opts.Mode != ModeWait || early > maxWait) {
		p.tooEarly(a, early, own.byFactor())
		return p.opts.Mode == ModeAudit
	}
	key := sharedKey(origin, who)
	slot, early, taken, err := p.opts.Shared.Take(ctx, key, time.Duration(a.interval), maxWait)
	if err != nil {
		if ctx.Err() != nil {
			a.Outcome = Gone
			return false
		}
		p.fallbacks.Add(1)
		return p.takeSlot(ctx, a, who.Client, deadline)
	}
	p.sharedTakes.Add(1)
	if !taken {
		// As for a local schedule: nothing is reserved, even in ModeAudit.
		p.tooEarly(a, early, false)
		return p.opts.Mode == ModeAudit
	}
	a.sharedKey, a.sharedSlot = key, slot
	if early = p.keepStart(a, own, early, who.Client); early <= 0 {
		return true
	}
	return p.hold(ctx, a, early)
}

// keepStart records in the Pacer's own schedule the start a took on the
// Shared one, early from now, or own's if later: the Pacer's own next
// start before it asked. It returns how long until that start. A schedule
// it creates is client's; a full table, or client's full share, leaves the
// start unrecorded: they bound the Pacer's own schedules only, and refuse
// nobody the Shared ones admit. As in takeSlot, the start recorded clears
// the factor's mark, and a.client keeps the mark of own's start when a
// took it.
func (p *Pacer) keepStart(a *Admission, own schedule, early time.Duration, client string) time.Duration {
	s := &p.shards[a.key%shardCount]
	s.mu.Lock()
	defer s.mu.Unlock()
	now := p.now()
	start := max(own.next, now+int64(early))
	e, known := s.next[a.key]
	// A later start recorded meanwhile, by a request that asked after this
	// one, stays.
	if start+a.interval <= e.next {
		return time.Duration(start - now)
	}
	if !known {
		e.owner = p.clientHash(client)
		if s.claim(now, e.owner, p) != roomy {
			return time.Duration(start - now)
		}
	}
	a.slot, a.client = start, e.client()
	if start == own.next {
		a.client |= own.owner & factorMark
	}
	s.next[a.key] = schedule{next: start + a.interval, owner: e.client()}
	s.freeAt = min(s.freeAt, start+a.interval)
	return time.Duration(start - now)
}
