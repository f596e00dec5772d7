package pace

import (
	"context"
	"sync"
	"time"
)

// busyRetry is the Retry-After of a request refused at the connection
// bound: a request in flight usually ends within it.
const busyRetry = time.Second

// connShard counts the requests in flight to the origins whose hash puts
// them in it.
type connShard struct {
	mu       sync.Mutex
	inFlight map[uint64]conns
}

// conns is one origin's requests in flight and those waiting for one to
// end.
type conns struct {
	n, waiters int32
	// released is closed when a request ends while others wait; made
	// only when someone waits.
	released chan struct{}
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
