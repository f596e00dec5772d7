package fetch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"robotsgate/cache"
)

// ClientContext is a context that names the client a fetch made on it is
// for: the fetch takes its slot from that client's share (see
// [Options.MaxPerClient]). It carries Context's deadline, cancellation and
// values. The client is the cache's caller (the value of cache.CallerKey):
// a Get made on a ClientContext passes it to the load it starts (see
// cache.LoadFunc), and a load discarded for want of a slot goes to that
// client's Gets alone (see cache.Result.Discard).
//
// It is a struct rather than a function that wraps a context so that a
// caller that already holds a struct per request can embed it there: a
// context.WithValue would cost an allocation on every request, most of
// which find robots.txt cached and never fetch.
type ClientContext struct {
	context.Context
	// Client is the key of the client's share: any string, the same for
	// every fetch of one client. Fetches whose context names no client
	// share the share of "".
	Client string
}

// Value returns Client for cache.CallerKey, and Context's value for any
// other key.
func (c *ClientContext) Value(key any) any {
	if key == (cache.CallerKey{}) {
		return c.Client
	}
	return c.Context.Value(key)
}

// clientOf returns the client ctx names ("" for none).
func clientOf(ctx context.Context) string {
	client, _ := ctx.Value(cache.CallerKey{}).(string)
	return client
}

// SlotError is Result.Err of a fetch that found no free fetch slot within
// its Timeout: a limit of this instance's, which says nothing of the
// origin. [Fetcher.Load] keeps such a result out of every cache.
type SlotError struct {
	// Origin is the origin whose robots.txt was not fetched.
	Origin string
	// Held is how many fetches the client had under way when the wait
	// ended, and PerClient its share (Options.MaxPerClient): Held ≥
	// PerClient means its own fetches filled its share; otherwise the
	// MaxConcurrent slots were all in use.
	Held, PerClient, MaxConcurrent int
	// Waited is how long the fetch waited: about Timeout, unless its
	// context ended first.
	Waited time.Duration
	// Timeout is the Fetcher's Timeout, within which every slot held now
	// is free again.
	Timeout time.Duration
}

func (e *SlotError) Error() string {
	if e.Held >= e.PerClient {
		return fmt.Sprintf("robots.txt fetch of %s: no free fetch slot within %s: the client has its share of fetches under way (%d)",
			e.Origin, e.Waited.Round(time.Millisecond), e.Held)
	}
	return fmt.Sprintf("robots.txt fetch of %s: no free fetch slot within %s: all %d are in use",
		e.Origin, e.Waited.Round(time.Millisecond), e.MaxConcurrent)
}

// slots shares the fetches under way among clients: at most max at once,
// at most perClient for one client. A slot that frees goes to the waiting
// client that holds the fewest, the one waiting longest among equals, so
// that a client holding none is never stuck behind one holding many.
//
// Invariant, under mu: while a slot is free, no waiter may take it (each
// is at its client's share). So a newcomer that may take a free slot
// passes no one, and a slot that frees is given to at most one waiter:
// freeing one slot lets at most one more in.
type slots struct {
	max, perClient int

	mu      sync.Mutex
	used    int
	held    map[string]int // per client with fetches under way; no zeros
	waiting []*slotWaiter  // in order of arrival
}

// slotWaiter is a fetch waiting for a slot.
type slotWaiter struct {
	client  string
	granted chan struct{} // closed once the slot is the waiter's
}

func newSlots(max, perClient int) *slots {
	return &slots{max: max, perClient: perClient, held: make(map[string]int)}
}

// take waits until client may start a fetch, for at most wait or until
// ctx ends, and reports whether it may, and how many fetches the client
// had under way when it gave up. A slot that can be taken at once is
// taken even when ctx has ended, so that the fetch reports why it ends.
// queued, unless nil, is told when the fetch joins the line: how many
// fetches the client has under way, and how many wait, itself included.
// Each slot taken is given back with put.
func (s *slots) take(ctx context.Context, client string, wait time.Duration, queued func(held, waiting int)) (held int, ok bool) {
	s.mu.Lock()
	if s.used < s.max && s.held[client] < s.perClient {
		s.grant(client)
		s.mu.Unlock()
		return 0, true
	}
	w := &slotWaiter{client: client, granted: make(chan struct{})}
	s.waiting = append(s.waiting, w)
	held, waiting := s.held[client], len(s.waiting)
	s.mu.Unlock()
	if queued != nil {
		queued(held, waiting)
	}

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.granted:
		return 0, true
	case <-timer.C:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.granted: // given as the wait ended: the fetch can still run
		return 0, true
	default:
	}
	for i, other := range s.waiting {
		if other == w {
			s.waiting = slices.Delete(s.waiting, i, i+1)
			break
		}
	}
	return s.held[client], false
}

// put gives back a slot client took, to the waiter next in line.
func (s *slots) put(client string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used--
	if s.held[client]--; s.held[client] <= 0 {
		delete(s.held, client)
	}
	next := -1
	for i, w := range s.waiting {
		n := s.held[w.client]
		if n < s.perClient && (next < 0 || n < s.held[s.waiting[next].client]) {
			next = i
		}
	}
	if next < 0 {
		return
	}
	w := s.waiting[next]
	s.waiting = slices.Delete(s.waiting, next, next+1)
	s.grant(w.client)
	close(w.granted)
}

// grant counts a slot taken by client; s.mu is held.
func (s *slots) grant(client string) {
	s.used++
	s.held[client]++
}
