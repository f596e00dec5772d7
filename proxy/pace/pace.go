// Package pace holds crawlers to the pace robots.txt asks of them:
// Crawl-delay and Request-rate, one schedule per (origin, identity), and
// the operator's bound on requests in flight to one origin.
//
// A schedule is one number, the earliest time the next request may start
// (GCRA with no burst, as go-redis/redis_rate and throttled keep it): a
// request at or after it is on time and moves it one interval past its own
// start; an earlier one is too early and changes nothing. A schedule whose
// time has passed says nothing a missing one would not, so schedules live
// only while they hold a request back, and are swept as the table grows.
// Each is charged to the client whose request created it, and one client
// holds at most its share of the table: a client that names itself anew
// on every request fills its own share, not the table.
// With Options.Shared, the schedules are a fleet's, kept where every
// instance finds them. Each instance still keeps the starts it handed out
// itself, as a lower bound: it paces by them while the shared schedules
// fail, and they hold when the shared ones come back having lost theirs.
package pace

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"robotsgate/robots"
)

// Mode says what happens to a request that comes too early, or when its
// origin has as many requests in flight as allowed.
type Mode string

const (
	// ModeEnforce answers 429 with Retry-After.
	ModeEnforce Mode = "enforce"
	// ModeWait holds the request until its slot, within Options.MaxWait
	// and the client's patience; beyond, 429.
	ModeWait Mode = "wait"
	// ModeAudit forwards the request and records what would have happened.
	ModeAudit Mode = "audit"
	// ModeOff paces nothing.
	ModeOff Mode = "off"
)

// UnmarshalText accepts enforce, wait, audit and off, in any case.
func (m *Mode) UnmarshalText(text []byte) error {
	switch v := Mode(strings.ToLower(string(text))); v {
	case ModeEnforce, ModeWait, ModeAudit, ModeOff:
		*m = v
		return nil
	}
	return fmt.Errorf("%q is not valid; use %q, %q, %q or %q", text, ModeEnforce, ModeWait, ModeAudit, ModeOff)
}

// Source says where a delay came from.
type Source uint8

const (
	SourceNone        Source = iota // no delay applies
	SourceCrawlDelay                // a Crawl-delay line
	SourceRequestRate               // a Request-rate line
	SourceDefault                   // robots.txt says nothing: the operator's default
	SourceCap                       // a line asked for more than the operator's cap
)

// String returns the name the audit log and check -json use: "",
// "crawl-delay", "request-rate", "default" or "cap".
func (s Source) String() string {
	switch s {
	case SourceCrawlDelay:
		return "crawl-delay"
	case SourceRequestRate:
		return "request-rate"
	case SourceDefault:
		return "default"
	case SourceCap:
		return "cap"
	}
	return ""
}

// Delay is the interval in force between two requests of one identity to
// one origin, and where it came from.
type Delay struct {
	Interval time.Duration
	Source   Source
	// Asked is the robots.txt line behind it (Line 0 for the default and
	// for none): what it asked, before the cap.
	Asked robots.Pace
}

// Policy turns what robots.txt asks into the delay in force.
type Policy struct {
	// Default applies when robots.txt asks nothing of the token; 0 means
	// no delay.
	Default time.Duration
	// Max caps what robots.txt asks; 0 means no cap.
	Max time.Duration
}

// Delay is the delay in force when robots.txt asks asked (ok false: it asks
// nothing, or could not be read).
func (p Policy) Delay(asked robots.Pace, ok bool) Delay {
	if !ok {
		if p.Default > 0 {
			return Delay{Interval: p.Default, Source: SourceDefault}
		}
		return Delay{}
	}
	d := Delay{Interval: asked.Interval, Source: SourceCrawlDelay, Asked: asked}
	if asked.Directive == robots.DirectiveRequestRate {
		d.Source = SourceRequestRate
	}
	if p.Max > 0 && d.Interval > p.Max {
		d.Interval, d.Source = p.Max, SourceCap
	}
	return d
}

// Outcome is what pacing did to a request.
type Outcome uint8

const (
	OnTime   Outcome = iota // on time and under the connection bound
	Waited                  // held until its slot (ModeWait)
	TooEarly                // before its slot: refused, or forwarded and recorded (ModeAudit)
	Busy                    // its origin had every connection in use: refused, or forwarded and recorded
	Gone                    // the client went away while held
	Full                    // a new identity while the schedule table, or its client's share of it, is full: refused, or forwarded and recorded
)

// String returns the name the audit log uses: "", "waited", "too_early",
// "busy", "gone" or "full".
func (o Outcome) String() string {
	switch o {
	case Waited:
		return "waited"
	case TooEarly:
		return "too_early"
	case Busy:
		return "busy"
	case Gone:
		return "gone"
	case Full:
		return "full"
	}
	return ""
}

// Options configure a Pacer.
type Options struct {
	Mode Mode // "" means ModeEnforce
	// MaxWait bounds how long ModeWait holds a request.
	MaxWait time.Duration
	// MaxConnsPerOrigin bounds the requests in flight to one origin, all
	// identities together; 0 means no bound. It counts this Pacer's
	// requests only, Shared or not: a fleet of n instances may have n
	// times as many in flight.
	MaxConnsPerOrigin int
	// MaxSchedules bounds the schedules kept at once; 0 means
	// DefaultMaxSchedules. Past it a new identity is Full until schedules
	// run out. It bounds this Pacer's own table, not the Shared one:
	// with Shared, a full table refuses only while the Shared schedules
	// fail, and otherwise just leaves a start unrecorded.
	MaxSchedules int
	// MaxSchedulesPerClient bounds the schedules charged to one client
	// (Identity.Client) at once; 0 means MaxSchedules/16, and more than
	// MaxSchedules means MaxSchedules. Past it that client's new
	// identities are Full (Admission.ClientShare) while other clients'
	// are not. It is counted per sixty-fourth of the table, where a
	// schedule's hash puts it: a client holds at most
	// MaxSchedulesPerClient rounded down to a multiple of
	// MinSchedulesPerClient (at least that), and may be refused a little
	// before, when one sixty-fourth of its share is full. As MaxSchedules,
	// it bounds the Pacer's own table only.
	MaxSchedulesPerClient int
	// Shared keeps the schedules where every Pacer of a fleet finds them;
	// nil keeps them in this process. The Pacer keeps its own starts as
	// well, and paces by them alone while Shared fails.
	Shared SharedSchedules
}

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
}

// DefaultMaxSchedules is the default bound on schedules: at about
// ScheduleBytes each, 24 MiB.
const DefaultMaxSchedules = 1 << 20

// ScheduleBytes is what one schedule costs in memory, about: a map slot of
// a 64-bit key, a 64-bit time and the 64-bit hash of the client charged,
// with the map's spare room (53.5 bytes measured at a million). Each
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

// busyRetry is the Retry-After of a request refused at the connection
// bound: a request in flight usually ends within it.
const busyRetry = time.Second

const shardCount = 64

// Pacer keeps the schedules. It is safe for concurrent use.
type Pacer struct {
	opts     Options
	seed     maphash.Seed
	base     time.Time // schedules count nanoseconds from it, monotonic
	perShard int
	// perClient is a client's share of each shard.
	perClient int
	shards    [shardCount]shard
	conns     [shardCount]connShard
	waiting   atomic.Int64
	full      atomic.Int64 // new identities turned away at MaxSchedules
	// shareFull counts new identities turned away at their client's share.
	shareFull atomic.Int64
	// sharedTakes counts the requests paced by the Shared schedules;
	// fallbacks those paced here because the Shared schedules failed.
	sharedTakes, fallbacks atomic.Int64
}

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
	next   int64  // earliest start of the key's next request
	client uint64 // the hash of the client charged for it
}

// fullness says why a new schedule does not fit.
type fullness uint8

const (
	roomy     fullness = iota
	tableFull          // the shard holds perShard schedules
	shareFull          // the client holds perClient of them
)

type connShard struct {
	mu       sync.Mutex
	inFlight map[uint64]conns
}

type conns struct {
	n, waiters int32
	// released is closed when a request ends while others wait; made
	// only when someone waits.
	released chan struct{}
}

// minSweep is the smallest map size that is swept.
const minSweep = 64

// New makes a Pacer.
func New(opts Options) *Pacer {
	if opts.Mode == "" {
		opts.Mode = ModeEnforce
	}
	if opts.MaxSchedules <= 0 {
		opts.MaxSchedules = DefaultMaxSchedules
	}
	if opts.MaxSchedulesPerClient <= 0 {
		opts.MaxSchedulesPerClient = opts.MaxSchedules / 16
	}
	opts.MaxSchedulesPerClient = min(opts.MaxSchedulesPerClient, opts.MaxSchedules)
	p := &Pacer{opts: opts, seed: maphash.MakeSeed(), base: time.Now()}
	p.perShard = max(1, opts.MaxSchedules/shardCount)
	p.perClient = max(1, opts.MaxSchedulesPerClient/shardCount)
	for i := range p.shards {
		s := &p.shards[i]
		s.next = make(map[uint64]schedule)
		s.held = make(map[uint64]int32)
		s.sweepAt = minSweep
		s.sweptAt = -int64(shareSweep)
	}
	for i := range p.conns {
		p.conns[i].inFlight = make(map[uint64]conns)
	}
	return p
}

// Mode is the pacer's mode.
func (p *Pacer) Mode() Mode { return p.opts.Mode }

// MaxConnsPerOrigin is the bound on requests in flight to one origin, 0
// for none.
func (p *Pacer) MaxConnsPerOrigin() int { return p.opts.MaxConnsPerOrigin }

// MaxSchedulesPerClient is the bound on the schedules charged to one
// client (Options.MaxSchedulesPerClient, its default filled in).
func (p *Pacer) MaxSchedulesPerClient() int { return p.opts.MaxSchedulesPerClient }

// Identity is who a request comes from. Its Credential's name, or else its
// product Token (compared case-insensitively, as robots.txt compares it),
// names the schedule it shares. Client names who is charged for a
// schedule the request creates (a credential's name, an address: the
// caller's choice), and has nothing to do with which schedule that is:
// two clients of one identity share one.
type Identity struct {
	Credential string
	Token      string
	Client     string
}

// Admission is a request's passage through pacing. Done must be called
// once the request is over (it frees its connection), or Undo when the
// request never went to the origin after all.
type Admission struct {
	Outcome Outcome
	// ClientShare says, for Full, that what is full is the client's share
	// of the table (Options.MaxSchedulesPerClient), not the table.
	ClientShare bool
	holdsConn   bool
	// Waited is how long the request was held.
	Waited time.Duration
	// RetryAfter is when to come back, for TooEarly, Busy and Full.
	RetryAfter time.Duration

	p        *Pacer
	key      uint64
	slot     int64 // the start this request took in the Pacer's own schedule; -1 for none
	interval int64
	origin   uint64
	// sharedKey names the Shared schedule sharedSlot was taken on; "" for
	// none.
	sharedKey  string
	sharedSlot int64
}

// Allowed reports whether the request may go on to the origin: on time,
// held until it was, or in ModeAudit whatever happened.
func (a *Admission) Allowed() bool {
	switch a.Outcome {
	case OnTime, Waited:
		return true
	case TooEarly, Busy, Full:
		return a.p != nil && a.p.opts.Mode == ModeAudit
	}
	return false
}

// Admit paces one request of who to origin with delay d. In ModeWait it
// may hold the request, until ctx ends at the latest.
func (p *Pacer) Admit(ctx context.Context, origin string, who Identity, d Delay) Admission {
	a := Admission{p: p, slot: -1}
	if p == nil || p.opts.Mode == ModeOff {
		return a
	}
	var deadline time.Time
	if p.opts.Mode == ModeWait {
		deadline = time.Now().Add(p.opts.MaxWait)
	}
	if d.Interval > 0 {
		a.interval = int64(d.Interval)
		var goOn bool
		if p.opts.Shared != nil {
			goOn = p.takeSharedSlot(ctx, &a, origin, who)
		} else {
			a.key = p.scheduleKey(origin, &who)
			goOn = p.takeSlot(ctx, &a, who.Client)
		}
		if !goOn {
			return a
		}
	}
	if p.opts.MaxConnsPerOrigin > 0 {
		a.origin = maphash.String(p.seed, origin)
		p.takeConn(ctx, &a, deadline)
	}
	return a
}

// now is the monotonic time in the schedules' unit.
func (p *Pacer) now() int64 { return int64(time.Since(p.base)) }

// schedule is the name who's schedules go by and its kind: 'c' for a
// credential's name, 't' for a product token, which is compared in lower
// case.
func (who Identity) schedule() (name string, kind byte) {
	if who.Credential != "" {
		return who.Credential, 'c'
	}
	return who.Token, 't'
}

// scheduleKey is the key of who's schedule at origin: the hash of origin,
// a zero byte, the kind and the name, a token in lower case. A key that
// fits on the stack is hashed there in one call, which costs the on-time
// path less than a maphash.Hash; who is a pointer for the same reason.
func (p *Pacer) scheduleKey(origin string, who *Identity) uint64 {
	name, kind := who.schedule()
	var buf [128]byte
	if n := len(origin) + 2 + len(name); n <= len(buf) {
		copy(buf[:], origin)
		buf[len(origin)], buf[len(origin)+1] = 0, kind
		lowered(buf[len(origin)+2:n], name, kind)
		return maphash.Bytes(p.seed, buf[:n])
	}
	var h maphash.Hash
	h.SetSeed(p.seed)
	h.WriteString(origin)
	h.WriteByte(0)
	h.WriteByte(kind)
	for len(name) > 0 {
		n := min(len(name), len(buf))
		lowered(buf[:n], name[:n], kind)
		h.Write(buf[:n])
		name = name[n:]
	}
	return h.Sum64()
}

// lowered copies name into dst, as long, in lower case when it is a
// token (kind 't').
func lowered(dst []byte, name string, kind byte) {
	copy(dst, name)
	if kind != 't' {
		return
	}
	for i, c := range dst {
		if 'A' <= c && c <= 'Z' {
			dst[i] = c + 'a' - 'A'
		}
	}
}

// sharedKey names who's schedule at origin in the Shared schedules:
// origin, a zero byte, the kind and the name, a token in lower case, as
// scheduleKey hashes them but with no seed, so that every process of a
// fleet names it alike. (One writer for both would make scheduleKey's
// hash escape: the local path must not allocate.)
func sharedKey(origin string, who Identity) string {
	name, kind := who.schedule()
	var b strings.Builder
	b.Grow(len(origin) + 2 + len(name))
	b.WriteString(origin)
	b.WriteByte(0)
	b.WriteByte(kind)
	for i := 0; i < len(name); i++ {
		c := name[i]
		if kind == 't' && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// takeSlot takes the next start of a's schedule, created for client when
// there is none, holding the request for it in ModeWait; false when the
// request goes no further (refused, or its client gone), a.Outcome saying
// why.
func (p *Pacer) takeSlot(ctx context.Context, a *Admission, client string) bool {
	s := &p.shards[a.key%shardCount]
	s.mu.Lock()
	now := p.now()
	e, known := s.next[a.key]
	if e.next <= now {
		// One that has passed but is not swept yet stays charged to the
		// client that created it, whoever starts it again: no client is
		// hashed on the common path.
		if !known {
			e.client = maphash.String(p.seed, client)
			if why := s.claim(now, e.client, p); why != roomy {
				s.mu.Unlock()
				p.refuseFull(a, why)
				return p.opts.Mode == ModeAudit
			}
		}
		a.slot = now
		s.next[a.key] = schedule{next: now + a.interval, client: e.client}
		s.freeAt = min(s.freeAt, now+a.interval)
		s.mu.Unlock()
		return true
	}
	early := time.Duration(e.next - now)
	if p.opts.Mode != ModeWait || early > p.opts.MaxWait {
		s.mu.Unlock()
		a.Outcome, a.RetryAfter = TooEarly, early
		return p.opts.Mode == ModeAudit
	}
	a.slot = e.next
	s.next[a.key] = schedule{next: e.next + a.interval, client: e.client}
	s.mu.Unlock()
	return p.hold(ctx, a, early)
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
		a.Outcome, a.RetryAfter = TooEarly, early
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
		a.Outcome, a.RetryAfter = TooEarly, early
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
	a.slot = start
	s.next[a.key] = schedule{next: start + a.interval, client: e.client}
	s.freeAt = min(s.freeAt, start+a.interval)
	return time.Duration(start - now)
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
		a.Outcome, a.Waited = Waited, early
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
			s.forget(k, e.client)
		} else {
			first = min(first, e.next)
		}
	}
	s.sweepAt = max(minSweep, 2*len(s.next))
	s.freeAt = first
	s.sweptAt = now
}

// giveBack frees a's slot, on the Shared schedule and in the Pacer's own,
// when nobody took a later one: the next request may have it. Otherwise
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
			s.forget(a.key, e.client)
		} else {
			s.next[a.key] = schedule{next: a.slot, client: e.client}
			s.freeAt = min(s.freeAt, a.slot)
		}
	}
	s.mu.Unlock()
	a.slot = -1
}

// takeConn counts a in its origin's requests in flight, holding it for a
// free connection in ModeWait until deadline. A request refused here gives
// its slot back: it did not reach the origin.
func (p *Pacer) takeConn(ctx context.Context, a *Admission, deadline time.Time) {
	c := &p.conns[a.origin%shardCount]
	max := int32(p.opts.MaxConnsPerOrigin)
	var timer *time.Timer
	c.mu.Lock()
	for {
		e := c.inFlight[a.origin]
		if e.n < max || p.opts.Mode == ModeAudit {
			if e.n >= max && a.Outcome == OnTime {
				a.Outcome, a.RetryAfter = Busy, busyRetry
			}
			e.n++
			c.inFlight[a.origin] = e
			c.mu.Unlock()
			a.holdsConn = true
			if timer != nil {
				timer.Stop()
			}
			return
		}
		left := time.Until(deadline)
		if p.opts.Mode != ModeWait || left <= 0 {
			c.mu.Unlock()
			p.giveBack(ctx, a)
			a.Outcome, a.RetryAfter = Busy, busyRetry
			return
		}
		if e.released == nil {
			e.released = make(chan struct{})
		}
		e.waiters++
		c.inFlight[a.origin] = e
		released := e.released
		c.mu.Unlock()

		if timer == nil {
			timer = time.NewTimer(left)
		}
		start := time.Now()
		p.waiting.Add(1)
		var gone bool
		select {
		case <-released:
		case <-timer.C:
		case <-ctx.Done():
			gone = true
		}
		p.waiting.Add(-1)
		a.Waited += time.Since(start)
		c.mu.Lock()
		e = c.inFlight[a.origin]
		e.waiters--
		c.put(a.origin, e)
		if gone {
			c.mu.Unlock()
			p.giveBack(ctx, a)
			a.Outcome = Gone
			return
		}
		a.Outcome = Waited
	}
}

// put stores e, or forgets it once nothing is in flight or waiting.
func (c *connShard) put(origin uint64, e conns) {
	if e.n == 0 && e.waiters == 0 {
		delete(c.inFlight, origin)
		return
	}
	c.inFlight[origin] = e
}

// Done ends a's request: its connection is free for the next one.
func (a *Admission) Done() {
	if !a.holdsConn {
		return
	}
	a.holdsConn = false
	c := &a.p.conns[a.origin%shardCount]
	c.mu.Lock()
	e := c.inFlight[a.origin]
	e.n--
	if e.released != nil {
		close(e.released)
		e.released = nil
	}
	c.put(a.origin, e)
	c.mu.Unlock()
}

// Undo ends a request that never reached the origin: its slot is given
// back, if nobody took a later one, and its connection freed.
func (a *Admission) Undo() {
	if a.p == nil {
		return
	}
	a.p.giveBack(context.Background(), a)
	a.Done()
}

// Collector metrics: schedules kept, requests held, identities turned away.
var (
	schedulesDesc = prometheus.NewDesc("robotsgate_pace_schedules",
		"Crawl-delay schedules kept, one per (origin, identity) held back now; about "+fmt.Sprint(ScheduleBytes)+" bytes each.", nil, nil)
	waitingDesc = prometheus.NewDesc("robotsgate_pace_waiting",
		"Requests held now for their slot or for a connection (ROBOTSGATE_CRAWL_DELAY=wait).", nil, nil)
	fullDesc = prometheus.NewDesc("robotsgate_pace_schedules_full_total",
		"Requests of a new identity that found the schedule table full.", nil, nil)
	shareFullDesc = prometheus.NewDesc("robotsgate_pace_client_share_full_total",
		"Requests of a new identity whose client holds its share of the schedule table (ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT).", nil, nil)
	sharedTakesDesc = prometheus.NewDesc("robotsgate_pace_shared_takes_total",
		"Requests paced by the schedules the fleet shares.", nil, nil)
	fallbacksDesc = prometheus.NewDesc("robotsgate_pace_shared_fallbacks_total",
		"Requests paced by this instance alone because the schedules the fleet shares failed.", nil, nil)
)

// Describe implements prometheus.Collector. The shared schedules' metrics
// are there only when the Pacer has Shared schedules.
func (p *Pacer) Describe(ch chan<- *prometheus.Desc) {
	ch <- schedulesDesc
	ch <- waitingDesc
	ch <- fullDesc
	ch <- shareFullDesc
	if p.opts.Shared != nil {
		ch <- sharedTakesDesc
		ch <- fallbacksDesc
	}
}

// Collect implements prometheus.Collector.
func (p *Pacer) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(schedulesDesc, prometheus.GaugeValue, float64(p.Schedules()))
	ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(p.waiting.Load()))
	ch <- prometheus.MustNewConstMetric(fullDesc, prometheus.CounterValue, float64(p.full.Load()))
	ch <- prometheus.MustNewConstMetric(shareFullDesc, prometheus.CounterValue, float64(p.shareFull.Load()))
	if p.opts.Shared != nil {
		ch <- prometheus.MustNewConstMetric(sharedTakesDesc, prometheus.CounterValue, float64(p.sharedTakes.Load()))
		ch <- prometheus.MustNewConstMetric(fallbacksDesc, prometheus.CounterValue, float64(p.fallbacks.Load()))
	}
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
