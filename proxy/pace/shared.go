package pace

import (
	"context"
	"hash/maphash"
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
// until then. When the Shared schedules fail, this request is paced by the
// Pacer's own schedule alone; when its client went away meanwhile, it goes
// no further.
func (p *Pacer) takeSharedSlot(ctx context.Context, a *Admission, origin string, who Identity) bool {
	a.key = p.scheduleKey(origin, &who)
	s := &p.shards[a.key%shardCount]
	s.mu.Lock()
	own := s.next[a.key].next
	s.mu.Unlock()
	if early := time.Duration(own - p.now()); early > 0 && (p.opts.Mode != ModeWait || early > p.opts.MaxWait) {
		p.tooEarly(a, early)
		return p.opts.Mode == ModeAudit
	}
	key := sharedKey(origin, who)
	var maxWait time.Duration
	if p.opts.Mode == ModeWait {
		maxWait = p.opts.MaxWait
	}
	slot, early, taken, err := p.opts.Shared.Take(ctx, key, time.Duration(a.interval), maxWait)
	if err != nil {
		if ctx.Err() != nil {
			a.Outcome = Gone
			return false
		}
		p.fallbacks.Add(1)
		return p.takeSlot(ctx, a, who.Client)
	}
	p.sharedTakes.Add(1)
	if !taken {
		// As for a local schedule: nothing is reserved, even in ModeAudit.
		p.tooEarly(a, early)
		return p.opts.Mode == ModeAudit
	}
	a.sharedKey, a.sharedSlot = key, slot
	if early = p.keepStart(a, own, early, who.Client); early <= 0 {
		return true
	}
	return p.hold(ctx, a, early)
}

// keepStart records in the Pacer's own schedule the start a took on the
// Shared one, early from now, or own if later: the Pacer's own next start
// before it asked. It returns how long until that start. A schedule it
// creates is client's; a full table, or client's full share, leaves the
// start unrecorded: they bound the Pacer's own schedules only, and refuse
// nobody the Shared ones admit.
func (p *Pacer) keepStart(a *Admission, own int64, early time.Duration, client string) time.Duration {
	s := &p.shards[a.key%shardCount]
	s.mu.Lock()
	defer s.mu.Unlock()
	now := p.now()
	start := max(own, now+int64(early))
	e, known := s.next[a.key]
	// A later start recorded meanwhile, by a request that asked after this
	// one, stays.
	if start+a.interval <= e.next {
		return time.Duration(start - now)
	}
	if !known {
		e.client = maphash.String(p.seed, client)
		if s.claim(now, e.client, p) != roomy {
			return time.Duration(start - now)
		}
	}
	a.slot, a.client = start, e.client
	s.next[a.key] = schedule{next: start + a.interval, client: e.client}
	s.freeAt = min(s.freeAt, start+a.interval)
	return time.Duration(start - now)
}
