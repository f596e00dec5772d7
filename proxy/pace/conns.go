package pace

import (
	"context"
	"math"
	"sync"
	"time"
)

// busyRetry is the Retry-After of a request refused at a connection
// bound: a request in flight usually ends within it.
const busyRetry = time.Second

// connShard counts the requests in flight under the keys whose hash puts
// them in it: origins' groups in Pacer.conns, (group, identity) pairs in
// Pacer.idConns.
type connShard struct {
	mu       sync.Mutex
	inFlight map[uint64]conns
}

// conns is one key's requests in flight and those waiting for one to end.
type conns struct {
	n, waiters int32
	// released is closed when a request ends while others wait; made
	// only when someone waits.
	released chan struct{}
}

// takeConn counts a in its origin's requests in flight, bounded by
// MaxConnsPerOrigin; false when a goes no further.
func (p *Pacer) takeConn(ctx context.Context, a *Admission, deadline time.Time) bool {
	a.holdsConn = p.take(ctx, a, &p.conns[a.origin%shardCount], a.origin, p.opts.MaxConnsPerOrigin, false, deadline)
	return a.holdsConn
}

// takeIdentConn counts a in its identity's requests in flight to its
// group (keyed as its schedule, a.key), bounded by maxConns; false when a
// goes no further. Only the identity's own requests ending free one.
func (p *Pacer) takeIdentConn(ctx context.Context, a *Admission, maxConns int, deadline time.Time) bool {
	a.holdsIdent = p.take(ctx, a, &p.idConns[a.key%shardCount], a.key, maxConns, true, deadline)
	return a.holdsIdent
}

// take counts a under key in c, bounded by limit, holding it in ModeWait
// for a request under key to end until deadline; it reports whether a
// holds one now (in ModeAudit, always). A request refused here gives its
// slot back: it did not reach the origin. ident says the bound is the
// identity's own (Admission.IdentityBusy).
func (p *Pacer) take(ctx context.Context, a *Admission, c *connShard, key uint64, limit int, ident bool, deadline time.Time) bool {
	bound := int32(min(limit, math.MaxInt32))
	var timer *time.Timer
	c.mu.Lock()
	for {
		e := c.inFlight[key]
		if e.n < bound || p.opts.Mode == ModeAudit {
			if e.n >= bound && a.Outcome == OnTime {
				p.busy(a, ident)
			}
			e.n++
			c.inFlight[key] = e
			c.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return true
		}
		left := time.Until(deadline)
		if p.opts.Mode != ModeWait || left <= 0 {
			c.mu.Unlock()
			p.giveBack(ctx, a)
			p.busy(a, ident)
			return false
		}
		if e.released == nil {
			e.released = make(chan struct{})
		}
		e.waiters++
		c.inFlight[key] = e
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
		e = c.inFlight[key]
		e.waiters--
		c.put(key, e)
		if gone {
			c.mu.Unlock()
			p.giveBack(ctx, a)
			a.Outcome = Gone
			return false
		}
		a.Outcome = Waited
		a.IdentityBusy = a.IdentityBusy || ident
	}
}

// busy marks a as past a connection bound, its identity's own if ident.
func (p *Pacer) busy(a *Admission, ident bool) {
	a.Outcome, a.RetryAfter, a.IdentityBusy = Busy, busyRetry, ident
}

// put stores e, or forgets it once nothing is in flight or waiting.
func (c *connShard) put(key uint64, e conns) {
	if e.n == 0 && e.waiters == 0 {
		delete(c.inFlight, key)
		return
	}
	c.inFlight[key] = e
}

// release ends one request counted under key, waking those waiting.
func (c *connShard) release(key uint64) {
	c.mu.Lock()
	e := c.inFlight[key]
	e.n--
	if e.released != nil {
		close(e.released)
		e.released = nil
	}
	c.put(key, e)
	c.mu.Unlock()
}

// Done ends a's request: its connections, the origin's and its
// identity's, are free for the next ones. Calling it again does nothing.
func (a *Admission) Done() {
	if a.holdsConn {
		a.holdsConn = false
		a.p.conns[a.origin%shardCount].release(a.origin)
	}
	if a.holdsIdent {
		a.holdsIdent = false
		a.p.idConns[a.key%shardCount].release(a.key)
	}
}
