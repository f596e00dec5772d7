package identity

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// How repeated failures from one address are slowed down: from the
// slowAfter-th failure in a row on, every attempt from the address that
// needs verifying waits firstDelay, doubling up to maxDelay, until one
// succeeds or forgetAfter passes without a failure. At most
// trackedAddresses are tracked, the least recently failing forgotten
// first: about 100 bytes each.
const (
	slowAfter        = 3
	firstDelay       = 250 * time.Millisecond
	maxDelay         = 8 * time.Second
	forgetAfter      = 15 * time.Minute
	trackedAddresses = 4096
)

// failureTracker counts recent failures per client address.
type failureTracker struct {
	mu     sync.Mutex
	byAddr *simplelru.LRU[string, addrFailures]
}

type addrFailures struct {
	count int
	last  time.Time
}

func newFailureTracker() *failureTracker {
	byAddr, _ := simplelru.NewLRU[string, addrFailures](trackedAddresses, nil) // size is positive
	return &failureTracker{byAddr: byAddr}
}

// delay is the wait imposed after n failures in a row.
func (t *failureTracker) delay(n int) time.Duration {
	if n < slowAfter {
		return 0
	}
	d := firstDelay
	for i := slowAfter; i < n && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay)
}

// recent returns addr's failures in a row, 0 once forgotten.
func (t *failureTracker) recent(addr string, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.byAddr.Peek(addr)
	if !ok || now.Sub(f.last) > forgetAfter {
		return 0
	}
	return f.count
}

// wait holds an attempt from addr for as long as its failures say, or
// until ctx ends, which it returns.
func (t *failureTracker) wait(ctx context.Context, addr string, now time.Time) error {
	d := t.delay(t.recent(addr, now))
	if d == 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// add counts a failure from addr and returns its failures in a row.
func (t *failureTracker) add(addr string, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.byAddr.Get(addr)
	if !ok || now.Sub(f.last) > forgetAfter {
		f = addrFailures{}
	}
	f.count++
	f.last = now
	t.byAddr.Add(addr, f)
	return f.count
}

// forgive forgets addr's failures after it authenticated.
func (t *failureTracker) forgive(addr string) {
	t.mu.Lock()
	t.byAddr.Remove(addr)
	t.mu.Unlock()
}

// slowed counts the addresses whose attempts wait now.
func (t *failureTracker) slowed(now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, f := range t.byAddr.Values() {
		if f.count >= slowAfter && now.Sub(f.last) <= forgetAfter {
			n++
		}
	}
	return n
}
