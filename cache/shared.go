package cache

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// The intervals at which a process waiting for another's load polls the
// Store: short at first, as most loads end quickly, then doubling up to a
// bound that keeps a long wait from costing the Store many requests.
const (
	firstPollInterval = 10 * time.Millisecond
	maxPollInterval   = 200 * time.Millisecond
)

// SecondLevel is what a Cache needs to share its entries with the Caches of
// other processes (see NewShared).
type SecondLevel[V any] struct {
	// Store holds the shared entries.
	Store Store
	// Decode turns a shared entry's value, as Result.Shared encoded it,
	// back into a value.
	Decode DecodeFunc[V]
	// ClaimTTL is how long one process's claim to load a key lasts: set it
	// above the LoadFunc's own time bound, so that a claim outlives any
	// load that still runs. Processes waiting for another's load give up
	// after it (plus one poll interval) and load themselves.
	ClaimTTL time.Duration
}

// validate reports every missing or invalid field of s, each error naming
// its field.
func (s SecondLevel[V]) validate() error {
	var errs []error
	if s.Store == nil {
		errs = append(errs, errors.New("Store is nil"))
	}
	if s.Decode == nil {
		errs = append(errs, errors.New("Decode is nil"))
	}
	if s.ClaimTTL <= 0 {
		errs = append(errs, fmt.Errorf("ClaimTTL must be positive, got %s", s.ClaimTTL))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cache: invalid second level: %w", err)
	}
	return nil
}

// NewShared returns a Cache like New, with a second level shared with the
// Caches of other processes, so that a fleet loads each key about once:
//
//   - A Get that finds no fresh value in memory takes the Store's entry
//     when it is fresh (SourceShared, or SourceStale for a stale value),
//     without calling load.
//   - Otherwise one process claims the key, loads it and puts its result
//     (Result.Shared, which must be set for the result to be shared)
//     in the Store; the others wait for that entry, polling the Store,
//     and load themselves only when the claim ends without one, or after
//     ClaimTTL.
//   - The failure count and the last good value carry over between
//     processes: a process whose load fails serves the newest good value
//     either it or the Store holds, and backs off as the fleet's count of
//     consecutive failures says. A shared entry never makes a process
//     forget a good value of its own: if the Store holds only a failure,
//     or an older good value, the process keeps serving its own (stale).
//   - A Store error makes that refresh work alone, exactly as a Cache
//     from New does, with no further Store calls but the release of a
//     claim it holds, in the background.
func NewShared[V any](opts Options, load LoadFunc[V], second SecondLevel[V]) (*Cache[V], error) {
	if err := second.validate(); err != nil {
		return nil, err
	}
	c, err := New(opts, load)
	if err != nil {
		return nil, err
	}
	c.second = &second
	return c, nil
}

// SharedStats counts how the refreshes that consulted the second level
// ended (a refresh is the work of one singleflight call, which all the
// Gets waiting for the key share). Each refresh that ends with a value is
// counted once.
type SharedStats struct {
	// Found counts refreshes that took a fresh entry from the Store.
	Found uint64
	// Loaded counts refreshes that claimed the key at once and loaded it.
	Loaded uint64
	// Waited counts refreshes that waited for another process's load and
	// took the entry it put.
	Waited uint64
	// Takeovers counts refreshes that waited for another process's load,
	// then claimed the key (the other's claim ended without an entry: it
	// died, gave up, or its result was not to be shared) and loaded it.
	Takeovers uint64
	// Timeouts counts refreshes that waited for other processes' claims
	// longer than ClaimTTL, and loaded without a claim.
	Timeouts uint64
	// Unavailable counts refreshes for which a Store call failed: they
	// worked alone from then on.
	Unavailable uint64
}

// sharedCounters are the atomic counters behind SharedStats.
type sharedCounters struct {
	found, loaded, waited, takeovers, timeouts, unavailable atomic.Uint64
}

func (s *sharedCounters) snapshot() SharedStats {
	return SharedStats{
		Found:       s.found.Load(),
		Loaded:      s.loaded.Load(),
		Waited:      s.waited.Load(),
		Takeovers:   s.takeovers.Load(),
		Timeouts:    s.timeouts.Load(),
		Unavailable: s.unavailable.Load(),
	}
}

// stored is a Store's entry for a key, decoded.
type stored[V any] struct {
	// e is the entry as this process keeps it in memory.
	e *entry[V]
	// encoded is the value as the Store holds it, to put back a good
	// value that is served stale.
	encoded []byte
}

// unavailableError marks a Store error, after which the refresh works
// alone.
type unavailableError struct{ err error }

func (e unavailableError) Error() string { return e.err.Error() }

func (e unavailableError) Unwrap() error { return e.err }

// refreshShared is refresh for a Cache with a second level, given the entry
// this process holds (expired, or nil).
func (c *Cache[V]) refreshShared(ctx context.Context, key string, local *entry[V], localInMain bool) (flightResult[V], error) {
	f, err := c.throughStore(ctx, key, local, localInMain)
	var unavailable unavailableError
	if !errors.As(err, &unavailable) {
		return f, err
	}
	c.shared.unavailable.Add(1)
	// Debug only: the Store reports its own health, and a down Store
	// would otherwise log once per refresh.
	c.log.Debug("cache: shared store unavailable, working alone", "key", key, "error", unavailable.err)
	if f.e != nil {
		return f, nil // only the Put failed: the load is done
	}
	return c.loadAlone(ctx, key, local, localInMain)
}

// throughStore takes key's entry from the Store, or loads it under a claim,
// or waits for another process's load. It returns an unavailableError
// when a Store call fails, with the entry loaded if only the Put failed.
func (c *Cache[V]) throughStore(ctx context.Context, key string, local *entry[V], localInMain bool) (flightResult[V], error) {
	f, end, shared, err := c.step(ctx, key, local, localInMain)
	if err != nil {
		return f, err
	}
	switch end {
	case stepTaken:
		c.shared.found.Add(1)
	case stepLoaded:
		c.shared.loaded.Add(1)
	case stepBusy:
		return c.await(ctx, key, local, localInMain, shared)
	}
	return f, nil
}

// stepEnd says how one step through the Store ended.
type stepEnd uint8

const (
	stepTaken  stepEnd = iota // a fresh entry was found and taken
	stepLoaded                // loaded under this process's claim
	stepBusy                  // another process holds the claim
)

// step looks at key's entry in the Store and takes it when it is fresh;
// otherwise it tries the claim and loads under it. For stepBusy, shared is
// the entry it looked at (nil if none or undecodable).
func (c *Cache[V]) step(ctx context.Context, key string, local *entry[V], localInMain bool) (f flightResult[V], end stepEnd, shared *stored[V], err error) {
	shared, seen, err := c.getShared(ctx, key)
	if err != nil {
		return flightResult[V]{}, 0, nil, err
	}
	if e := c.adopt(shared, local, c.clock()); e != nil {
		c.store(key, e, local, localInMain)
		return flightResult[V]{e: e, src: SourceShared}, stepTaken, shared, nil
	}
	release, claimed, err := c.second.Store.Claim(ctx, key, c.second.ClaimTTL)
	if err != nil {
		return flightResult[V]{}, 0, nil, unavailableError{fmt.Errorf("claiming %q: %w", key, err)}
	}
	if !claimed {
		return flightResult[V]{}, stepBusy, shared, nil
	}
	f, loaded, err := c.underClaim(ctx, key, local, localInMain, shared, seen, release)
	if loaded {
		return f, stepLoaded, shared, err
	}
	return f, stepTaken, shared, err
}

// underClaim loads key under the claim just taken, unless another process
// put a fresh entry and released its claim between this process's look
// (which saw the entry seen, zero for none) and its claim: then that entry
// is taken (loaded false) and the claim released, so that a fleet starting
// cold loads once. The extra look costs a round trip per load, which is a
// fetch over the network anyway.
func (c *Cache[V]) underClaim(ctx context.Context, key string, local *entry[V], localInMain bool, first *stored[V], seen version, release func()) (f flightResult[V], loaded bool, err error) {
	se, found, err := c.second.Store.Get(ctx, key)
	if err != nil {
		// The Store may have failed for this process alone: the others
		// must not wait out the claim. The Get does not wait for it.
		go release()
		return flightResult[V]{}, false, unavailableError{fmt.Errorf("getting %q: %w", key, err)}
	}
	shared := first
	if found && !versionOf(se).equal(seen) { // the entry seen was no use: only a new one is looked at
		shared = c.decodeShared(key, se)
		if e := c.adopt(shared, local, c.clock()); e != nil {
			release()
			c.store(key, e, local, localInMain)
			return flightResult[V]{e: e, src: SourceShared}, false, nil
		}
	}
	f, err = c.loadShared(ctx, key, local, localInMain, shared, release)
	return f, true, err
}

// await waits for the process holding key's claim to put its entry,
// polling the Store, and takes that entry. If the claim ends without one,
// it claims the key and loads it; if the wait outlasts a claim's whole
// life, it loads without a claim. shared is the entry the Store held
// before the wait (nil if none or undecodable).
func (c *Cache[V]) await(ctx context.Context, key string, local *entry[V], localInMain bool, shared *stored[V]) (flightResult[V], error) {
	// The claim seen expires within ClaimTTL: one more poll after that
	// either finds the entry or claims the key, unless yet another
	// process claimed it first.
	deadline := time.Now().Add(c.second.ClaimTTL + maxPollInterval)
	for interval := firstPollInterval; ; interval = min(2*interval, maxPollInterval) {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		time.Sleep(min(interval, left))
		// An entry fresh now is the one the claim holder put: the entry
		// seen before the wait had expired or did not decode, and one
		// that does not decode is still not taken.
		f, end, looked, err := c.step(ctx, key, local, localInMain)
		if err != nil {
			return f, err
		}
		switch end {
		case stepTaken:
			c.shared.waited.Add(1)
			return f, nil
		case stepLoaded:
			c.shared.takeovers.Add(1)
			return f, nil
		}
		shared = looked
	}
	c.log.Warn("cache: waited in vain for another process's load, loading without a claim",
		"key", key, "claim_ttl", c.second.ClaimTTL.String())
	f, err := c.loadShared(ctx, key, local, localInMain, shared, func() {})
	if err == nil {
		c.shared.timeouts.Add(1)
	}
	return f, err
}

// loadShared loads key, stores the result in memory and puts it in the
// Store, unless Result.Shared is nil, then calls release to end the claim
// it loaded under. A discarded result is neither stored nor put. After a
// failed Put it releases the claim in the background: the Store may have
// failed for this process alone, and the others would wait out the claim,
// but the Get need not wait for one more call to a Store that just failed.
//
// The load settles against both the entry this process holds (local) and
// the Store's (shared, nil if none): the failure count comes from the one
// loaded last, the good value from the newest good one of both.
//
// A stale entry is put with its good value only if that value came from
// the Store, in the encoding the Store gave: a good value this process
// holds alone (loaded while the Store was unavailable) exists only
// decoded, and Result.Shared encodes the failed result, not it. The Store
// then gets the failure instead, with the Store's own good value if it has
// one young enough, and the fleet's failure count: other processes serve
// their own good values (a shared entry never makes them forget one) or
// the failed result, as they would after a failed load of their own.
func (c *Cache[V]) loadShared(ctx context.Context, key string, local *entry[V], localInMain bool, shared *stored[V], release func()) (flightResult[V], error) {
	r, err := c.call(ctx, key)
	if err != nil {
		release()
		return flightResult[V]{}, err
	}
	now := c.clock()
	var fromStore *entry[V]
	if shared != nil {
		fromStore = shared.e
	}
	failures, _ := history(c.lastLoaded(local, fromStore))
	_, storeGood := history(fromStore)
	good := newestGood(local, storeGood)
	if r.Discard {
		release()
		return c.discarded(failures, good, r, now), nil
	}
	e := c.settle(key, failures, good, r, now)
	c.store(key, e, local, localInMain)
	f := flightResult[V]{e: e, src: SourceLoaded}
	if r.Shared == nil {
		release()
		return f, nil
	}
	put, encoded := e, r.Shared
	if e.stale {
		if good != storeGood {
			put = c.next(failures, storeGood, r, now)
		}
		if put.stale {
			encoded = shared.encoded
		}
	}
	if err := c.second.Store.Put(ctx, key, c.toShared(put, encoded), time.Duration(put.keepUntil-now)); err != nil {
		go release()
		return f, unavailableError{fmt.Errorf("putting %q: %w", key, err)}
	}
	release()
	return f, nil
}

// lastLoaded returns whichever of a and b (either may be nil) the most
// recent load made, b on a tie. A good or failed value was made when it
// was loaded; a stale one, whose LoadedAt is its good value's, when its
// retry was scheduled: a backoff before ExpiresAt (at most: the stale
// horizon may have cut the retry short).
func (c *Cache[V]) lastLoaded(a, b *entry[V]) *entry[V] {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	if c.loadedAt(a) > c.loadedAt(b) {
		return a
	}
	return b
}

func (c *Cache[V]) loadedAt(e *entry[V]) int64 {
	if !e.stale {
		return e.loadedAt
	}
	return after(e.expiresAt, -c.backoff(int(e.failures)))
}

// newestGood returns the entry holding the newer good value of local and
// storeGood (either may be nil; storeGood holds one), storeGood on a tie,
// as its value can be put back in the Store.
func newestGood[V any](local, storeGood *entry[V]) *entry[V] {
	_, localGood := history(local)
	if localGood == nil || storeGood != nil && localGood.goodAt <= storeGood.goodAt {
		return storeGood
	}
	return localGood
}

// getShared returns key's entry in the Store, or nil when the Store has
// none or its value does not decode (it is then loaded again and
// replaced), and the version of the entry the Store gave, decodable or not
// (zero for none). The error is an unavailableError.
func (c *Cache[V]) getShared(ctx context.Context, key string) (*stored[V], version, error) {
	se, found, err := c.second.Store.Get(ctx, key)
	if err != nil {
		return nil, version{}, unavailableError{fmt.Errorf("getting %q: %w", key, err)}
	}
	if !found {
		return nil, version{}, nil
	}
	return c.decodeShared(key, se), versionOf(se), nil
}

// version tells a Store's entry from the one it replaced. LoadedAt alone
// does not: a stale entry keeps its good value's, so the entry of a retry
// that failed again differs from the last only in its retry time and
// failure count.
type version struct {
	loadedAt, expiresAt time.Time
	failures            int
}

func versionOf(se SharedEntry) version {
	return version{loadedAt: se.LoadedAt, expiresAt: se.ExpiresAt, failures: se.Failures}
}

func (v version) equal(w version) bool {
	return v.loadedAt.Equal(w.loadedAt) && v.expiresAt.Equal(w.expiresAt) && v.failures == w.failures
}

// decodeShared returns the entry se stands for, nil when its value does
// not decode.
func (c *Cache[V]) decodeShared(key string, se SharedEntry) *stored[V] {
	value, cost, err := c.decode(key, se.Value)
	if err != nil {
		c.log.Warn("cache: shared entry does not decode, loading it again", "key", key, "error", err)
		return nil
	}
	return &stored[V]{e: c.fromShared(se, value, cost, c.clock()), encoded: se.Value}
}

// decode runs the DecodeFunc, turning a panic into an error: the bytes come
// from outside the process, and a decoder that chokes on them must not end
// it.
func (c *Cache[V]) decode(key string, data []byte) (value V, cost int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("cache: decode panicked", "key", key, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("decode panicked: %v", p)
		}
	}()
	return c.second.Decode(key, data)
}

// fromShared makes the entry a shared entry stands for, at now. This
// process applies its own bounds to it, as the entry may come from a
// process with other options (or be corrupt): a failed value holds no good
// value, the failure count is not negative, a good value is fresh at most
// MaxAge after its load and a failure MaxRetryAfter (a load in the future
// counting as one now), and a stale value is not served past MaxStale,
// nor longer than MaxRetryAfter from now.
func (c *Cache[V]) fromShared(se SharedEntry, value V, cost int64, now int64) *entry[V] {
	e := &entry[V]{
		value:       value,
		outcome:     se.Outcome,
		lastOutcome: se.LastOutcome,
		failed:      se.Failed,
		failures:    failureCount(se.Failures),
		loadedAt:    c.readingOf(se.LoadedAt),
		expiresAt:   c.readingOf(se.ExpiresAt),
		stale:       se.Stale && !se.Failed,
		cost:        chargedCost(cost),
		goodAt:      noTime,
	}
	if !e.failed && !se.GoodAt.IsZero() {
		e.goodAt = c.readingOf(se.GoodAt)
	}
	staleUntil := noTime
	if e.goodAt != noTime {
		staleUntil = after(e.goodAt, c.opts.MaxStale)
	}
	loadedAt := min(e.loadedAt, now)
	latest := after(loadedAt, c.opts.MaxAge)
	switch {
	case e.failed:
		latest = after(loadedAt, c.opts.MaxRetryAfter)
	case e.stale:
		// Without a good value, staleUntil is noTime: expired.
		latest = min(after(now, c.opts.MaxRetryAfter), staleUntil)
	}
	e.expiresAt = min(e.expiresAt, latest)
	e.keepUntil = c.keepUntil(e.expiresAt, staleUntil)
	return e
}

// adopt returns the entry to keep and serve for a shared entry that is
// fresh at now, or nil if it is not (or shared is nil). If the shared
// entry holds no good value, or an older one than local's, local's good
// value is served stale instead, while younger than MaxStale, with the
// shared entry's failure count and retry time.
func (c *Cache[V]) adopt(shared *stored[V], local *entry[V], now int64) *entry[V] {
	if shared == nil || now >= shared.e.expiresAt {
		return nil
	}
	e := shared.e
	if !e.failed && !e.stale {
		return e
	}
	_, good := history(local)
	if good == nil || good.goodAt <= e.goodAt || !c.staleServable(good, now) {
		return e
	}
	staleUntil := after(good.goodAt, c.opts.MaxStale)
	expires := min(e.expiresAt, staleUntil)
	return &entry[V]{
		value:       good.value,
		outcome:     good.outcome,
		lastOutcome: e.lastOutcome,
		failures:    e.failures,
		loadedAt:    good.goodAt,
		expiresAt:   expires,
		stale:       true,
		cost:        good.cost,
		goodAt:      good.goodAt,
		keepUntil:   c.keepUntil(expires, staleUntil),
	}
}

// toShared makes the shared entry for e, whose value encoded is. Its times
// are on the wall clock only, as timeAt maps the cache's clock to it: the
// monotonic reading means nothing to another process.
func (c *Cache[V]) toShared(e *entry[V], encoded []byte) SharedEntry {
	se := SharedEntry{
		Value:       encoded,
		Outcome:     e.outcome,
		LastOutcome: e.lastOutcome,
		Failed:      e.failed,
		Stale:       e.stale,
		Failures:    int(e.failures),
		LoadedAt:    c.timeAt(e.loadedAt).Round(0),
		ExpiresAt:   c.timeAt(e.expiresAt).Round(0),
	}
	if e.goodAt != noTime {
		se.GoodAt = c.timeAt(e.goodAt).Round(0)
	}
	return se
}
