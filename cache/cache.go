// Package cache is robotsgate's per-origin memory: it keeps, per key (an
// origin such as "https://example.com"), the value a LoadFunc produced,
// bounded by a memory budget in bytes, fresh for a time the source may ask
// for, loaded once per key at a time, and kept serving a last good value
// while the source is failing. It is generic over the value and knows
// nothing about HTTP or robots.txt.
package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"golang.org/x/sync/singleflight"
)

// Result is what a LoadFunc produced for a key.
type Result[V any] struct {
	// Value is what Get returns for the key.
	Value V
	// Cost is the number of bytes Value retains in memory; it is charged
	// against Options.MaxBytes (negative counts as 0).
	Cost int64
	// MaxAge is the freshness the source asked for (for example
	// Cache-Control max-age), clamped to [Options.MinAge, Options.MaxAge].
	// Zero means "no preference": the value is kept Options.MaxAge, which is
	// what RFC 9309 §2.4 allows for a robots.txt without cache headers.
	// A negative MaxAge is treated like NoStore.
	MaxAge time.Duration
	// NoStore reports that the source forbade keeping the value or asked for
	// revalidation on every use (no-store, no-cache, max-age=0). The value
	// is then kept only Options.MinAge, so such a source cannot make every
	// request refetch. NoStore takes precedence over MaxAge.
	NoStore bool
	// Failed marks a transient failure (source unreachable). A Failed
	// result does not replace a good value younger than Options.MaxStale;
	// without one it is served until the next retry. MaxAge and NoStore
	// are ignored for a Failed result: the retry backoff decides.
	Failed bool
	// Discard marks a result that says nothing of the key: the load could
	// not be made, for a reason of the caller's whose context it ran on
	// (for example no free resource for that caller in time; see
	// CallerKey). It is kept nowhere, neither in memory nor in a Store,
	// and is no failure of the key (no backoff, the failure count
	// unchanged). The Gets of the caller that started the load get it, or
	// the key's good value while younger than Options.MaxStale (as a stale
	// value); the other Gets that waited for the load load again, in one
	// load per caller. Every other field but Value and Outcome is ignored.
	Discard bool
	// Outcome is a short label counted in Stats.Loads (for example "ok",
	// "unavailable", "unreachable"). Empty means "ok", or "failed" when
	// Failed is set, or "discarded" when Discard is.
	Outcome string
	// Shared is Value encoded for a Store (see NewShared); nil keeps the
	// result in this process only, as for a value that depends on this
	// process's own settings.
	Shared []byte
}

// LoadFunc produces the value for key. It runs at most once per key at a
// time, on a context that carries the values of the first waiting caller's
// context but is never cancelled by callers giving up: the LoadFunc must
// bound its own running time. (Gets that joined a load whose result was
// discarded, see Result.Discard, load again on their own contexts, beside
// any other load of the key.) It should not panic; if it does, the panic is
// recovered, logged, and the waiting Gets return ErrLoadPanicked.
type LoadFunc[V any] func(ctx context.Context, key string) Result[V]

// CallerKey is the key of a Get's context value, a string, that names
// whom the Get is for: a discarded load (see Result.Discard) is one
// caller's, and is handed to no other's Gets. Gets whose context names no
// caller are all one caller, "".
type CallerKey struct{}

// callerOf returns the caller ctx names.
func callerOf(ctx context.Context) string {
	caller, _ := ctx.Value(CallerKey{}).(string)
	return caller
}

// ErrLoadPanicked is wrapped by the error Get returns when the LoadFunc
// panicked. Nothing is cached then; the next Get loads again.
var ErrLoadPanicked = errors.New("load panicked")

// Source says where the value returned by Get came from.
type Source uint8

// Sources of a value returned by Get.
const (
	// SourceHit: served from memory, no load ran for this Get.
	SourceHit Source = iota + 1
	// SourceLoaded: this Get waited for a load (its own or one it joined).
	SourceLoaded
	// SourceStale: a good value past its freshness, served because the
	// loads since then failed.
	SourceStale
	// SourceShared: the value came fresh from the second level (see
	// NewShared), loaded by another process or by this one earlier; no
	// load ran for this Get.
	SourceShared
)

// String returns "hit", "loaded", "stale" or "shared".
func (s Source) String() string {
	switch s {
	case SourceHit:
		return "hit"
	case SourceLoaded:
		return "loaded"
	case SourceStale:
		return "stale"
	case SourceShared:
		return "shared"
	default:
		return fmt.Sprintf("Source(%d)", uint8(s))
	}
}

// Info describes the value returned by Get.
type Info struct {
	// Source says how this Get obtained the value.
	Source Source
	// Outcome is the Result.Outcome of the load that produced the value.
	Outcome string
	// LastOutcome is the Result.Outcome of the most recent load for the
	// key; it differs from Outcome when a stale value is served.
	LastOutcome string
	// Failed reports that the value is a Failed result: loads are failing
	// and no good value younger than Options.MaxStale exists.
	Failed bool
	// Failures counts the consecutive failed loads for the key (0 after a
	// successful one).
	Failures int
	// LoadedAt is when the load that produced the value finished.
	LoadedAt time.Time
	// ExpiresAt is when the next Get loads again: the end of freshness, or
	// the next retry after a failure.
	ExpiresAt time.Time
}

// Stats is a snapshot of the cache's counters since New (or NewShared).
//
// Every Get is counted exactly once, in Hits, Misses, StaleServes or
// SharedHits, by the Source it returned, so
// Hits+Misses+StaleServes+SharedHits is the number of Gets.
type Stats struct {
	// Hits counts Gets that returned SourceHit: a fresh value from memory.
	Hits uint64
	// Misses counts Gets that returned SourceLoaded, or an error: they found
	// no fresh value and waited for a load (or their context ended first).
	Misses uint64
	// Loads counts LoadFunc calls by Result.Outcome ("panic" for a
	// LoadFunc that panicked).
	Loads map[string]uint64
	// FailedLoads counts loads whose Result was Failed, or that panicked.
	FailedLoads uint64
	// StaleServes counts Gets that returned SourceStale, whether from
	// memory, from the second level, or right after a failed load.
	StaleServes uint64
	// SharedHits counts Gets that returned SourceShared: a fresh value
	// from the second level.
	SharedHits uint64
	// Shared counts how the refreshes that consulted the second level
	// ended; all zero for a Cache without one.
	Shared SharedStats
	// Evictions counts entries dropped to stay within MaxBytes.
	Evictions uint64
	// Expirations counts entries dropped because they outlived their use
	// (see Cache).
	Expirations uint64
	// Rejections counts loaded values ristretto did not take (refused by
	// its admission policy, or dropped from its full write buffer); they
	// were kept in the admission window instead.
	Rejections uint64
	// Uncacheable counts loaded values too large to keep at all; they were
	// returned to the waiting Gets and not cached.
	Uncacheable uint64
	// CostBytes is the number of bytes currently charged against
	// MaxBytes: the entries held, and the index (IndexBytes) always.
	CostBytes int64
	// MaxBytes is the budget.
	MaxBytes int64
}

const (
	// entryOverhead is what one entry costs the cache beyond Result.Cost:
	// the entry itself (96 bytes) and its slots in ristretto's store,
	// policy and expiry maps. BenchmarkEntryOverhead measures about 230
	// bytes when many entries share an expiry bucket (ristretto's are 5 s
	// wide), as they do when the cache holds many, and about 420 when every
	// entry has a bucket of its own, the worst case, of a cache loading
	// less than an entry per 5 s. An entry in the admission window costs
	// windowNodeBytes and its key more (see windowCost).
	entryOverhead = 240
	// typicalEntryBytes sizes ristretto's frequency sketch: ten counters
	// per entry of this size that fits in the budget, as ristretto advises.
	// A cached robots.txt costs about 3 KiB, its rules and entry together.
	typicalEntryBytes = 3 << 10
	minCounters       = 1 << 10
	// ttlTickerSeconds sets how often ristretto drops expired entries
	// (every half of it). Expired entries are already invisible to Get, so
	// this only bounds how long their memory lingers; a slow ticker keeps
	// the goroutine mostly asleep (and testing/synctest bubbles cheap).
	ttlTickerSeconds = 600
)

// Cache maps keys to values produced by a LoadFunc. It is safe for
// concurrent use. It is a prometheus.Collector of its Stats (see Collect).
//
// Storage is a ristretto cache bounded by cost (Result.Cost plus a fixed
// per-entry overhead), with a small LRU beside it, the admission window,
// for just-loaded values ristretto's admission policy refuses: 1/16 of
// MaxBytes, or room for a value of Options.LargestCost if that is more (at
// most half of MaxBytes), so that no value a load may produce is loaded
// again on every Get for want of room. An entry stays in memory until it
// is of no further use: past both its next reload time and the end of its
// stale-serving horizon, plus Options.MaxRetryAfter so that the failure
// count of a key that keeps failing survives between retries. Ristretto's
// TTL drops it then.
//
// A Cache made by NewShared has a second level, a Store shared with the
// Caches of other processes, which it consults when it holds no fresh
// value.
type Cache[V any] struct {
	opts    Options
	load    LoadFunc[V]
	log     *slog.Logger
	main    *ristretto.Cache[string, *entry[V]]
	index   int64 // IndexBytes(opts.MaxBytes), charged from the start
	window  *admissionWindow[V]
	flights singleflight.Group
	// retries are the flights, one per caller and key, of the Gets whose
	// load was another caller's and discarded (see Result.Discard).
	retries singleflight.Group
	epoch   time.Time // when the cache was made: the base of Get's clock reading

	// closeMu makes Close exclusive with every use of main: ristretto
	// panics (send on closed channel) when used during its Close.
	closeMu sync.RWMutex
	closed  atomic.Bool
	// storeMu makes stores one at a time (see store).
	storeMu sync.Mutex

	// second is the level shared with other processes; nil for New.
	second *SecondLevel[V]

	hits, misses, staleServes, failedLoads atomic.Uint64
	sharedHits                             atomic.Uint64
	shared                                 sharedCounters
	evictions, expirations                 atomic.Uint64
	rejections, uncacheable                atomic.Uint64
	loadsMu                                sync.Mutex
	loads                                  map[string]uint64

	descs descs
}

// entry is one key's state. It is immutable once stored, except for
// rejected, so the hit path reads it without locks. It is kept small, one
// per key the cache holds: its times are readings of the cache's clock
// (see Cache.clock) rather than time.Time, and the Info that Get returns
// is made from it when served.
type entry[V any] struct {
	value V
	// outcome and lastOutcome are Info.Outcome and Info.LastOutcome.
	outcome, lastOutcome string
	// cost is what the entry is charged: Result.Cost plus entryOverhead.
	cost int64
	// loadedAt and expiresAt are Info.LoadedAt and Info.ExpiresAt.
	loadedAt, expiresAt int64
	// goodAt is when value was loaded, if it is a good (non-Failed) value;
	// noTime otherwise.
	goodAt int64
	// keepUntil is when the entry stops being useful and leaves memory.
	keepUntil int64
	// failures is Info.Failures.
	failures int32
	// failed is Info.Failed.
	failed bool
	// stale marks a good value served because loads are failing.
	stale bool
	// rejected is set by ristretto's OnReject when its admission policy
	// refused the entry.
	rejected atomic.Bool
}

// noTime is entry.goodAt of an entry without a good value.
const noTime int64 = math.MinInt64

// clock reads the cache's clock: nanoseconds since the cache was made, on
// the monotonic clock only, which costs half of time.Now (the wall clock
// is read too); the hit path needs no wall time.
func (c *Cache[V]) clock() int64 { return int64(time.Since(c.epoch)) }

// timeAt is the time of a reading of the cache's clock. Its wall clock
// reading is the epoch's plus the monotonic time since, which is how the
// cache tells the times of a shared store (see toShared and fromShared):
// a fixed mapping, so that what one process puts it reads back unchanged.
func (c *Cache[V]) timeAt(n int64) time.Time { return c.epoch.Add(time.Duration(n)) }

// readingOf is the reading of the cache's clock at t (by its wall clock
// when t has no monotonic reading), saturated at the int64 range.
func (c *Cache[V]) readingOf(t time.Time) int64 { return int64(t.Sub(c.epoch)) }

// after is t plus d, saturated at the int64 range: the times of a shared
// entry come from outside and may be anything, and the options allow long
// durations.
func after(t int64, d time.Duration) int64 {
	switch {
	case d > 0 && t > math.MaxInt64-int64(d):
		return math.MaxInt64
	case d < 0 && t < math.MinInt64-int64(d):
		return math.MinInt64
	}
	return t + int64(d)
}

// info is the Info of e served as src.
func (c *Cache[V]) info(e *entry[V], src Source) Info {
	return Info{
		Source:      src,
		Outcome:     e.outcome,
		LastOutcome: e.lastOutcome,
		Failed:      e.failed,
		Failures:    int(e.failures),
		LoadedAt:    c.timeAt(e.loadedAt),
		ExpiresAt:   c.timeAt(e.expiresAt),
	}
}

// failureCount is n as entry.failures holds it.
func failureCount(n int) int32 { return int32(min(max(n, 0), math.MaxInt32)) }

// flightResult is what one singleflight call hands to its waiters.
type flightResult[V any] struct {
	e *entry[V]
	// src is SourceLoaded when the flight called the LoadFunc,
	// SourceShared when it took a fresh entry from the second level, and
	// SourceHit when it found a fresh entry another flight had just
	// stored.
	src Source
	// discarded marks e as a discarded result (Result.Discard), stored
	// nowhere and meant for the Gets of caller, who started the flight.
	discarded bool
	caller    string
}

// New returns a Cache that calls load for keys it does not hold fresh.
// It uses every field of opts as given, after checking them (see Options;
// DefaultOptions has the usual values). Close must be called to stop its
// background goroutines.
func New[V any](opts Options, load LoadFunc[V]) (*Cache[V], error) {
	if load == nil {
		return nil, errors.New("cache: nil LoadFunc")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	windowBytes := opts.windowBytes()
	window, err := newAdmissionWindow[V](windowBytes)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	c := &Cache[V]{
		epoch:  time.Now(),
		opts:   opts,
		load:   load,
		log:    log,
		window: window,
		loads:  make(map[string]uint64),
		descs:  newDescs(opts.MetricsPrefix),
	}
	// The index ristretto allocates for the budget is memory the budget
	// causes: it is charged first, and the entries get the rest.
	c.index = IndexBytes(opts.MaxBytes)
	c.main, err = ristretto.NewCache(c.ristrettoConfig(opts.MaxBytes - windowBytes - c.index))
	if err != nil {
		return nil, fmt.Errorf("cache: creating ristretto cache: %w", err)
	}
	return c, nil
}

// ristrettoConfig configures the ristretto cache holding up to maxCost.
func (c *Cache[V]) ristrettoConfig(maxCost int64) *ristretto.Config[string, *entry[V]] {
	return &ristretto.Config[string, *entry[V]]{
		NumCounters:            numCounters(c.opts.MaxBytes),
		MaxCost:                maxCost,
		BufferItems:            64,
		IgnoreInternalCost:     true, // entryOverhead already covers it
		TtlTickerDurationInSec: ttlTickerSeconds,
		OnEvict:                c.onEvict,
		OnReject: func(it *ristretto.Item[*entry[V]]) {
			if it.Value != nil {
				it.Value.rejected.Store(true)
			}
		},
	}
}

// numCounters is the size of ristretto's frequency sketch for a budget.
func numCounters(maxBytes int64) int64 { return max(10*maxBytes/typicalEntryBytes, minCounters) }

// IndexBytes is the memory a Cache with the budget maxBytes allocates when
// it is made, whatever it holds, out of MaxBytes: ristretto's admission
// index, a frequency sketch (4 rows of 4-bit counters) and a bloom filter
// (1% false positives), each rounded up to a power of two, for ten
// counters per 3 KiB of budget: 12 to 24 KiB per MiB of budget (1.2% to
// 2.3%), as the rounding falls. It is charged against MaxBytes from the
// start, so that the budget bounds all the memory it causes.
func IndexBytes(maxBytes int64) int64 {
	n := numCounters(maxBytes)
	sketch := 4 * nextPowerOfTwo(n) / 2
	bloomBits := nextPowerOfTwo(max(int64(float64(n)*-math.Log(0.01)/(math.Ln2*math.Ln2)), 512))
	return sketch + bloomBits/8
}

// nextPowerOfTwo is the least power of two at least n (n > 0).
func nextPowerOfTwo(n int64) int64 { return 1 << bits.Len64(uint64(n-1)) }

// Options returns the options the Cache was made with.
func (c *Cache[V]) Options() Options { return c.opts }

// Get returns the value for key: from memory while it is fresh, otherwise
// after a load (one per key at a time; concurrent Gets wait for it), or,
// with a second level (NewShared), from the Store, where another process
// may have loaded it (a Get may then wait for that process's load). The
// error is non-nil only when ctx ends before a value is available (it wraps
// ctx.Err(); the load goes on for the other callers) or when the LoadFunc
// panicked (it wraps ErrLoadPanicked).
func (c *Cache[V]) Get(ctx context.Context, key string) (V, Info, error) {
	// Reading only the monotonic clock costs half of time.Now, which reads
	// the wall clock too; the hit path needs no wall time.
	now := c.clock()
	if e, _ := c.lookup(key, now); e != nil && now < e.expiresAt {
		// serve, unrolled: the hit path is the one that counts.
		if e.stale {
			c.staleServes.Add(1)
			return e.value, c.info(e, SourceStale), nil
		}
		c.hits.Add(1)
		return e.value, c.info(e, SourceHit), nil
	}
	var zero V
	if err := ctx.Err(); err != nil {
		c.misses.Add(1)
		return zero, Info{}, fmt.Errorf("cache: get %q: %w", key, err)
	}
	detached := context.WithoutCancel(ctx)
	caller := callerOf(ctx)
	f, err := c.receive(ctx, key, c.flights.DoChan(key, c.flight(detached, key, caller)))
	if err == nil && f.discarded && f.caller != caller {
		// The load ran on another caller's context and could not be made
		// for that one: it says nothing of this Get, which loads again in
		// a flight of its caller's own, where no one else's discarded load
		// can stand in for its caller's.
		ownKey := strconv.Itoa(len(caller)) + ":" + caller + key
		f, err = c.receive(ctx, key, c.retries.DoChan(ownKey, c.flight(detached, key, caller)))
	}
	if err != nil {
		c.misses.Add(1)
		return zero, Info{}, err
	}
	return c.serve(f.e, f.src)
}

// flight is the function a singleflight call runs for caller: a refresh,
// its result marked as caller's.
func (c *Cache[V]) flight(ctx context.Context, key, caller string) func() (any, error) {
	return func() (any, error) {
		f, err := c.refresh(ctx, key)
		f.caller = caller
		return f, err
	}
}

// receive waits for the result of a refresh, or for ctx to end.
func (c *Cache[V]) receive(ctx context.Context, key string, ch <-chan singleflight.Result) (flightResult[V], error) {
	select {
	case r := <-ch:
		if r.Err != nil {
			return flightResult[V]{}, r.Err
		}
		return r.Val.(flightResult[V]), nil
	case <-ctx.Done():
		return flightResult[V]{}, fmt.Errorf("cache: get %q: %w", key, ctx.Err())
	}
}

// serve returns e's value and Info with its source, src unless e is a
// stale value, and counts the Get under that source.
func (c *Cache[V]) serve(e *entry[V], src Source) (V, Info, error) {
	switch {
	case e.stale:
		src = SourceStale
		c.staleServes.Add(1)
	case src == SourceHit:
		c.hits.Add(1)
	case src == SourceShared:
		c.sharedHits.Add(1)
	default:
		c.misses.Add(1)
	}
	return e.value, c.info(e, src), nil
}

// lookup returns the entry held for key, fresh or not, and whether it is
// in ristretto (rather than the admission window). It returns nil after
// Close.
func (c *Cache[V]) lookup(key string, now int64) (*entry[V], bool) {
	c.closeMu.RLock()
	defer c.closeMu.RUnlock()
	if c.closed.Load() {
		return nil, false
	}
	if e, ok := c.main.Get(key); ok {
		return e, true
	}
	return c.window.get(key, now), false
}

// refresh runs inside a singleflight call: it loads key (through the
// second level, if the Cache has one) and stores the result, unless a
// flight that ended just before this one started already stored a fresh
// entry (the caller missed before that store, joined no flight, and must
// not cause a second load).
func (c *Cache[V]) refresh(ctx context.Context, key string) (flightResult[V], error) {
	now := c.clock()
	local, localInMain := c.lookup(key, now)
	if local != nil && now < local.expiresAt {
		return flightResult[V]{e: local, src: SourceHit}, nil
	}
	if c.second != nil {
		return c.refreshShared(ctx, key, local, localInMain)
	}
	return c.loadAlone(ctx, key, local, localInMain)
}

// loadAlone loads key and stores the result in this process only, given
// the entry held before (nil if none).
func (c *Cache[V]) loadAlone(ctx context.Context, key string, local *entry[V], localInMain bool) (flightResult[V], error) {
	r, err := c.call(ctx, key)
	if err != nil {
		return flightResult[V]{}, err
	}
	failures, good := history(local)
	if r.Discard {
		return c.discarded(failures, good, r, c.clock()), nil
	}
	e := c.settle(key, failures, good, r, c.clock())
	c.store(key, e, local, localInMain)
	return flightResult[V]{e: e, src: SourceLoaded}, nil
}

// history returns what a load settles against from the entry held before
// it (nil if none): the count of consecutive failures, and the entry
// holding the last good value, nil if there is none.
func history[V any](prev *entry[V]) (failures int, good *entry[V]) {
	if prev == nil {
		return 0, nil
	}
	if prev.goodAt == noTime {
		return int(prev.failures), nil
	}
	return int(prev.failures), prev
}

// call runs the LoadFunc, turning a panic into an error: singleflight would
// otherwise re-panic it on a fresh goroutine and end the process.
func (c *Cache[V]) call(ctx context.Context, key string) (r Result[V], err error) {
	defer func() {
		if p := recover(); p != nil {
			c.countLoad("panic", true)
			c.log.Error("cache: load panicked", "key", key, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("cache: load %q: %w: %v", key, ErrLoadPanicked, p)
		}
	}()
	r = c.load(ctx, key)
	if r.Discard {
		r.Failed = false
	}
	if r.Outcome == "" {
		switch {
		case r.Discard:
			r.Outcome = "discarded"
		case r.Failed:
			r.Outcome = "failed"
		default:
			r.Outcome = "ok"
		}
	}
	c.countLoad(r.Outcome, r.Failed)
	return r, nil
}

func (c *Cache[V]) countLoad(outcome string, failed bool) {
	if failed {
		c.failedLoads.Add(1)
	}
	c.loadsMu.Lock()
	c.loads[outcome]++
	c.loadsMu.Unlock()
}

// settle turns a load result into the entry to store, given the count of
// consecutive failures before the load and the entry holding the last good
// value (nil if none), and logs a failed load.
func (c *Cache[V]) settle(key string, failures int, good *entry[V], r Result[V], now int64) *entry[V] {
	e := c.next(failures, good, r, now)
	switch {
	case e.stale:
		c.log.Warn("cache: load failed, serving stale value",
			"key", key, "outcome", r.Outcome, "failures", e.failures,
			"loaded_at", c.timeAt(e.goodAt), "retry_at", c.timeAt(e.expiresAt))
	case e.failed:
		attrs := []any{"key", key, "outcome", r.Outcome, "failures", e.failures, "retry_at", c.timeAt(e.expiresAt)}
		if good != nil {
			attrs = append(attrs, "stale_value_loaded_at", c.timeAt(good.goodAt), "max_stale", c.opts.MaxStale.String())
		}
		c.log.Warn("cache: load failed, no usable stale value", attrs...)
	}
	return e
}

// next is the entry a load result makes, as settle describes.
func (c *Cache[V]) next(failures int, good *entry[V], r Result[V], now int64) *entry[V] {
	if !r.Failed {
		expires := after(now, c.freshness(r))
		return &entry[V]{
			value:       r.Value,
			outcome:     r.Outcome,
			lastOutcome: r.Outcome,
			loadedAt:    now,
			expiresAt:   expires,
			cost:        chargedCost(r.Cost),
			goodAt:      now,
			keepUntil:   c.keepUntil(expires, after(now, c.opts.MaxStale)),
		}
	}

	failures++
	retryAt := after(now, c.backoff(failures))
	if good != nil && c.staleServable(good, now) {
		staleUntil := after(good.goodAt, c.opts.MaxStale)
		// The next Get past the stale horizon must not serve it.
		expires := min(retryAt, staleUntil)
		e := staleOf(good, failures, r.Outcome, expires)
		e.keepUntil = c.keepUntil(expires, staleUntil)
		return e
	}
	return &entry[V]{
		value:       r.Value,
		outcome:     r.Outcome,
		lastOutcome: r.Outcome,
		failed:      true,
		failures:    failureCount(failures),
		loadedAt:    now,
		expiresAt:   retryAt,
		cost:        chargedCost(r.Cost),
		goodAt:      noTime,
		keepUntil:   c.keepUntil(retryAt, noTime),
	}
}

// staleOf is the entry that serves good's value stale after loads that
// failed, the last one ending in lastOutcome, until expires.
func staleOf[V any](good *entry[V], failures int, lastOutcome string, expires int64) *entry[V] {
	return &entry[V]{
		value:       good.value,
		outcome:     good.outcome,
		lastOutcome: lastOutcome,
		failures:    failureCount(failures),
		loadedAt:    good.goodAt,
		expiresAt:   expires,
		stale:       true,
		cost:        good.cost,
		goodAt:      good.goodAt,
	}
}

// discarded is what the Get that started a load whose result r was
// discarded gets, stored nowhere: the good value (held in good, nil if
// none) served stale while younger than MaxStale, else r's value. Its
// Info keeps the key's failure count, and says a load is due at once.
func (c *Cache[V]) discarded(failures int, good *entry[V], r Result[V], now int64) flightResult[V] {
	if good != nil && c.staleServable(good, now) {
		return flightResult[V]{e: staleOf(good, failures, r.Outcome, now), src: SourceLoaded}
	}
	return flightResult[V]{e: &entry[V]{
		value:       r.Value,
		outcome:     r.Outcome,
		lastOutcome: r.Outcome,
		failures:    failureCount(failures),
		loadedAt:    now,
		expiresAt:   now,
		cost:        chargedCost(r.Cost),
		goodAt:      noTime,
	}, src: SourceLoaded, discarded: true}
}

// staleServable reports whether good's value, a good one, is younger than
// MaxStale at now.
func (c *Cache[V]) staleServable(good *entry[V], now int64) bool {
	return good.goodAt > after(now, -c.opts.MaxStale)
}

// freshness is how long a good result stays fresh.
func (c *Cache[V]) freshness(r Result[V]) time.Duration {
	switch {
	case r.NoStore || r.MaxAge < 0:
		return c.opts.MinAge
	case r.MaxAge == 0:
		return c.opts.MaxAge
	default:
		return min(max(r.MaxAge, c.opts.MinAge), c.opts.MaxAge)
	}
}

// backoff is the wait before retrying after the given number of
// consecutive failures: RetryAfter doubled per failure after the first,
// capped at MaxRetryAfter.
func (c *Cache[V]) backoff(failures int) time.Duration {
	d := c.opts.RetryAfter
	for i := 1; i < failures && d < c.opts.MaxRetryAfter; i++ {
		d *= 2
	}
	return min(d, c.opts.MaxRetryAfter)
}

// keepUntil is when an entry that reloads at expires and can serve a stale
// value until staleUntil (noTime: cannot) stops being useful.
func (c *Cache[V]) keepUntil(expires, staleUntil int64) int64 {
	return after(max(expires, staleUntil), c.opts.MaxRetryAfter)
}

func chargedCost(cost int64) int64 { return max(cost, 0) + entryOverhead }

// store makes e the entry for key and makes sure the next lookup finds it.
//
// Ristretto's Set is asynchronous and may drop an item: when its buffer is
// full (Set returns false) and, for a new key in a full cache, when the
// TinyLFU admission policy estimates the key less frequently used than the
// entries it would evict (reported through OnReject). A just-loaded origin
// has had almost no accesses yet, so under budget pressure it would be
// refused again and again, and every request to it would refetch its
// robots.txt. Hence: Set, then Wait (after which the item is either stored
// or rejected, since ristretto applies its buffer in order), and an entry
// that did not get in goes to the admission window, a small LRU beside
// ristretto (as in W-TinyLFU), where it stays while in use and builds up the
// access frequency it needs to be admitted on its next reload.
//
// An update of a key ristretto holds replaces the value at once and skips
// admission, but ristretto then adjusts its used cost without evicting. So
// only a value that does not grow replaces the one found in ristretto in
// place; otherwise the key is deleted first (it may also be held there
// expired, invisible to lookups) and set anew, evicting as needed.
//
// Stores are one at a time: a Del and a Set of one key from two
// goroutines can lose both entries in ristretto's buffer, and two flights
// may store one key (see Cache.retries). A load, which goes to the
// network, costs far more than the wait.
func (c *Cache[V]) store(key string, e, prev *entry[V], prevInMain bool) {
	c.storeMu.Lock()
	defer c.storeMu.Unlock()
	c.closeMu.RLock()
	defer c.closeMu.RUnlock()
	if c.closed.Load() {
		return
	}
	c.window.remove(key)
	if !prevInMain || e.cost > prev.cost {
		c.main.Del(key)
	}
	set := c.main.SetWithTTL(key, e, e.cost, time.Duration(e.keepUntil-c.clock()))
	c.main.Wait()
	if set && !e.rejected.Load() {
		return
	}
	c.rejections.Add(1)
	if !c.window.put(key, e) {
		c.uncacheable.Add(1)
		c.log.Warn("cache: value too large to cache", "key", key, "cost", e.cost, "largest_kept", c.opts.LargestKept(), "max_bytes", c.opts.MaxBytes)
	}
}

// onEvict counts ristretto's removals: victims of the budget carry no
// expiration, entries its TTL cleanup dropped carry a past one.
func (c *Cache[V]) onEvict(it *ristretto.Item[*entry[V]]) {
	if c.closed.Load() {
		return // Close empties the cache; that is not an eviction
	}
	if !it.Expiration.IsZero() && !it.Expiration.After(time.Now()) {
		c.expirations.Add(1)
		return
	}
	c.evictions.Add(1)
}

// Stats returns a snapshot of the counters.
func (c *Cache[V]) Stats() Stats {
	s := Stats{
		Hits:        c.hits.Load(),
		Misses:      c.misses.Load(),
		FailedLoads: c.failedLoads.Load(),
		StaleServes: c.staleServes.Load(),
		SharedHits:  c.sharedHits.Load(),
		Shared:      c.shared.snapshot(),
		Evictions:   c.evictions.Load() + c.window.evictions.Load(),
		Expirations: c.expirations.Load() + c.window.expirations.Load(),
		Rejections:  c.rejections.Load(),
		Uncacheable: c.uncacheable.Load(),
		MaxBytes:    c.opts.MaxBytes,
	}
	c.loadsMu.Lock()
	s.Loads = make(map[string]uint64, len(c.loads))
	for k, v := range c.loads {
		s.Loads[k] = v
	}
	c.loadsMu.Unlock()
	s.CostBytes = c.CostBytes()
	return s
}

// CostBytes is what Stats.CostBytes says, read alone: the bytes charged
// against MaxBytes (the index and the entries held), 0 after Close.
func (c *Cache[V]) CostBytes() int64 {
	c.closeMu.RLock()
	defer c.closeMu.RUnlock()
	if c.closed.Load() {
		return 0
	}
	return c.index + c.main.MaxCost() - c.main.RemainingCost() + c.window.bytes()
}

// Close stops the cache's background goroutines and frees its memory.
// Gets after Close still load, but nothing is cached. Close is idempotent.
func (c *Cache[V]) Close() {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed.Load() {
		return
	}
	c.closed.Store(true)
	c.main.Close()
	c.window.clear()
}
