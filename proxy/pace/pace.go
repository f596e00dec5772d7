// Package pace holds crawlers to the pace robots.txt asks of them:
// Crawl-delay and Request-rate, one schedule per (origin, identity), and
// the operator's bounds on requests in flight to one origin, all
// identities together and each identity alone; and to what
// the origin itself says while it is crawled: its Retry-After, a backoff
// after its failures, its response time. An origin may share all of it
// with the hosts of its domain or its address (Grouper).
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
//
// pace.go turns robots.txt into a Delay and admits a request; the
// schedules' keys are made in keys.go, the Pacer's own schedules kept in
// schedules.go, a fleet's in shared.go; conns.go bounds the requests in
// flight to one origin, and each identity's to one; metrics.go
// reports them all.
package pace

import (
	"context"
	"fmt"
	"hash/maphash"
	"robotsgate/robots"
	"strings"
	"sync/atomic"
	"time"
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
	SourceMin                       // the operator's floor (Policy.Min) is longer than what applies
	SourceFactor                    // Options.DelayFactor times the last response time is longer
	SourcePolicy                    // the operator's policy file asks a longer delay of this crawler (its min_delay)
)

// String returns the name the audit log and check -json use: "",
// "crawl-delay", "request-rate", "default", "cap", "min-delay",
// "delay-factor" or "policy".
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
	case SourceMin:
		return "min-delay"
	case SourceFactor:
		return "delay-factor"
	case SourcePolicy:
		return "policy"
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

// AtLeast is d with a floor: min, from src, when it is longer than d's
// interval; otherwise d as it is. Asked is kept either way: the line
// robots.txt had, under the floor.
func (d Delay) AtLeast(min time.Duration, src Source) Delay {
	if min > d.Interval {
		d.Interval, d.Source = min, src
	}
	return d
}

// Policy turns what robots.txt asks into the delay in force.
type Policy struct {
	// Default applies when robots.txt asks nothing of the token; 0 means
	// no delay.
	Default time.Duration
	// Max caps what robots.txt asks; 0 means no cap.
	Max time.Duration
	// Min is a floor under every delay: what applies when it is shorter,
	// robots.txt's or the default; 0 means none.
	Min time.Duration
}

// Delay is the delay in force when robots.txt asks asked (ok false: it asks
// nothing, or could not be read).
func (p Policy) Delay(asked robots.Pace, ok bool) Delay {
	var d Delay
	switch {
	case ok:
		d = Delay{Interval: asked.Interval, Source: SourceCrawlDelay, Asked: asked}
		if asked.Directive == robots.DirectiveRequestRate {
			d.Source = SourceRequestRate
		}
		if p.Max > 0 && d.Interval > p.Max {
			d.Interval, d.Source = p.Max, SourceCap
		}
	case p.Default > 0:
		d = Delay{Interval: p.Default, Source: SourceDefault}
	}
	return d.AtLeast(p.Min, SourceMin)
}

// Outcome is what pacing did to a request.
type Outcome uint8

const (
	OnTime    Outcome = iota // on time and under the connection bound
	Waited                   // held until its slot (ModeWait)
	TooEarly                 // before its slot: refused, or forwarded and recorded (ModeAudit)
	Busy                     // its origin, or its identity there (Admission.IdentityBusy), had every connection in use: refused, or forwarded and recorded
	Gone                     // the client went away while held
	Full                     // a new identity while the schedule table, or its client's share of it, is full: refused, or forwarded and recorded
	Held                     // its origin's group is held by the origin's Retry-After: refused, or forwarded and recorded
	BackedOff                // its origin's group is paused after a run of failures: refused, or forwarded and recorded
)

// String returns the name the audit log uses: "", "waited", "too_early",
// "busy", "gone", "full", "held" or "backoff".
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
	case Held:
		return "held"
	case BackedOff:
		return "backoff"
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

	// MaxBackoff caps every hold of an origin's group, by its Retry-After
	// or by a backoff pause; 0 means origins' answers hold nothing.
	MaxBackoff time.Duration
	// BackoffBase is the first pause of a run of failures; 0 means
	// DefaultBackoffBase.
	BackoffBase time.Duration
	// MaxHolds bounds the groups whose hold is kept; 0 means
	// DefaultMaxHolds. Past it a new group's hold is not kept (counted).
	MaxHolds int
	// SharedHolds keeps the holds where every Pacer of a fleet finds
	// them; nil keeps them in this process. Each Pacer checks requests
	// against its own table, which ApplySharedHold keeps in step.
	SharedHolds SharedHolds

	// DelayFactor, when above 0, keeps an identity's next start to a group
	// at least DelayFactor times the last response time after its last
	// start (Observe), within MinDelay and MaxDelay.
	DelayFactor        float64
	MinDelay, MaxDelay time.Duration
}

// shardCount is how many parts the schedules, and the counts of requests
// in flight, are split into, each behind its own lock.
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
	// idConns counts the requests in flight of each identity with a
	// bound (Identity.MaxConns) to each group, by schedule key.
	idConns [shardCount]connShard
	waiting atomic.Int64
	full    atomic.Int64 // new identities turned away at MaxSchedules
	// shareFull counts new identities turned away at their client's share.
	shareFull atomic.Int64
	holds     holds
	// sharedTakes counts the requests paced by the Shared schedules;
	// fallbacks those paced here because the Shared schedules failed.
	sharedTakes, fallbacks atomic.Int64
}

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
		p.idConns[i].inFlight = make(map[uint64]conns)
	}
	p.holds.init(opts.MaxHolds)
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
	// MaxConns bounds this identity's requests in flight to one group
	// (the one Admit is given), counted apart from every other
	// identity's; 0 means no bound. It is the operator's choice per
	// crawler (its policy's max_concurrency) and, as MaxConnsPerOrigin,
	// counts this Pacer's requests only.
	MaxConns int
}

// Admission is a request's passage through pacing. Done must be called
// once the request is over (it frees its connections), or Undo when the
// request never went to the origin after all.
type Admission struct {
	Outcome Outcome
	// ClientShare says, for Full, that what is full is the client's share
	// of the table (Options.MaxSchedulesPerClient), not the table.
	ClientShare bool
	// ByFactor says, for TooEarly, that Options.DelayFactor pushed the
	// start beyond the delay.
	ByFactor bool
	// IdentityBusy says, for Busy, that the bound met is the identity's
	// own (Identity.MaxConns), not the origin's (MaxConnsPerOrigin); for
	// Waited, that the request was held at it, for part of Waited at
	// least.
	IdentityBusy bool
	// holdsConn and holdsIdent say a holds a connection of its origin,
	// of its identity to its group: Done frees them.
	holdsConn, holdsIdent bool
	// Waited is how long the request was held.
	Waited time.Duration
	// RetryAfter is when to come back, for TooEarly, Busy, Full, Held
	// and BackedOff.
	RetryAfter time.Duration
	// Hold is the hold of the origin's group the request met, for Held
	// and BackedOff, and for Waited when it waited one out; nil for none.
	Hold *Hold

	p *Pacer
	// group is the pace group (see Grouper) the request went to,
	// originName its own origin, clientName who sent it (Identity.Client).
	group, originName, clientName string
	key                           uint64
	client                        uint64 // the client charged for key's schedule, with the mark of the start taken (schedule.owner)
	slot                          int64  // the start this request took in the Pacer's own schedule; -1 for none
	interval                      int64
	origin                        uint64
	// sharedKey names the Shared schedule sharedSlot was taken on; "" for
	// none.
	sharedKey  string
	sharedSlot int64
}

// Group is the pace group the request went to: its origin, or the group
// of hosts it is paced with; "" when it was not paced.
func (a *Admission) Group() string { return a.group }

// Allowed reports whether the request may go on to the origin: on time,
// held until it was, or in ModeAudit whatever happened.
func (a *Admission) Allowed() bool {
	switch a.Outcome {
	case OnTime, Waited:
		return true
	case TooEarly, Busy, Full, Held, BackedOff:
		return a.p != nil && a.p.opts.Mode == ModeAudit
	}
	return false
}

// Admit paces one request of who to origin with delay d, origin sharing
// its pace with group: itself, or the group of hosts it is paced with
// (see Grouper). In ModeWait it may hold the request, until ctx ends at
// the latest.
func (p *Pacer) Admit(ctx context.Context, origin, group string, who Identity, d Delay) Admission {
	a := Admission{p: p, slot: -1}
	if p == nil || p.opts.Mode == ModeOff {
		return a
	}
	a.group, a.originName, a.clientName = group, origin, who.Client
	var deadline time.Time
	if p.opts.Mode == ModeWait {
		deadline = time.Now().Add(p.opts.MaxWait)
	}
	if p.holds.kept.Load() > 0 && !p.obeyHold(ctx, &a, deadline) {
		return a
	}
	paced := d.Interval > 0 || p.opts.DelayFactor > 0
	if paced {
		// With a delay factor every request takes a start, one nanosecond
		// long when no delay applies, for Observe to push.
		a.interval = max(int64(d.Interval), 1)
		var goOn bool
		if p.opts.Shared != nil {
			goOn = p.takeSharedSlot(ctx, &a, group, who, deadline)
		} else {
			a.key = p.scheduleKey(group, &who)
			goOn = p.takeSlot(ctx, &a, who.Client, deadline)
		}
		if !goOn {
			return a
		}
	}
	// The identity's own bound first: a crawler held at it holds none of
	// the origin's connections, which other crawlers need.
	if who.MaxConns > 0 {
		if !paced {
			a.key = p.scheduleKey(group, &who)
		}
		if !p.takeIdentConn(ctx, &a, who.MaxConns, deadline) {
			return a
		}
	}
	if p.opts.MaxConnsPerOrigin > 0 {
		a.origin = maphash.String(p.seed, group)
		if !p.takeConn(ctx, &a, deadline) {
			a.Done() // its identity's connection, unused
		}
	}
	return a
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

// now is the monotonic time in the schedules' unit.
func (p *Pacer) now() int64 { return int64(time.Since(p.base)) }
