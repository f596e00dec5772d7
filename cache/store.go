package cache

import (
	"context"
	"time"
)

// Store is a second level of memory shared by the Caches of several
// processes (package cache/fleet keeps it in Redis), so that a fleet loads
// each key once. Its values are bytes: each process decodes them itself.
//
// Every method must return within a short bound. An error means the store
// is unavailable: the Cache then works alone, exactly as without a Store,
// for that Get.
//
// A Cache calls it only for a key it holds no fresh value for, once per key
// at a time: Get; if that finds no fresh entry, Claim; then, claimed, Get
// again (another process may have put its entry just before the claim),
// and Put after the load and release; not claimed, Get and Claim again
// every 10 to 200 ms until the entry appears or the claim is won, for at
// most the claim's ttl plus 200 ms. After a failed call it makes no more,
// except to release a claim it holds.
type Store interface {
	// Get returns key's shared entry; found is false when it has none.
	Get(ctx context.Context, key string) (e SharedEntry, found bool, err error)
	// Claim makes the caller key's one loader for at most ttl, unless
	// another holds a claim that has not expired (claimed false). release
	// ends the claim early; it releases only the caller's own claim, never
	// one taken after it expired. It is best effort, within the same short
	// bound, and must try even when the Store's other calls have failed:
	// the failure may be the caller's alone, and the other processes would
	// wait out the claim. After a failure the Cache calls it in the
	// background.
	Claim(ctx context.Context, key string, ttl time.Duration) (release func(), claimed bool, err error)
	// Put stores e for key, to be dropped after keep.
	Put(ctx context.Context, key string, e SharedEntry, keep time.Duration) error
}

// SharedEntry is a key's state as a Store keeps it: what an entry in
// memory holds, with the value encoded (Result.Shared) and times on the
// wall clock, which every process of a fleet reads alike.
type SharedEntry struct {
	// Value is the encoded value: the last good one when Stale.
	Value []byte
	// Outcome is the Result.Outcome of the load that produced Value;
	// LastOutcome that of the most recent load.
	Outcome, LastOutcome string
	// Failed: Value is a failed result (no good value within MaxStale).
	Failed bool
	// Stale: Value is the last good value, served because loads fail.
	Stale bool
	// Failures counts the consecutive failed loads.
	Failures int
	// LoadedAt is when the load that produced Value ended; ExpiresAt when
	// the next load is due; GoodAt when the good value was loaded (zero
	// when Value is not a good value).
	LoadedAt, ExpiresAt, GoodAt time.Time
}

// DecodeFunc turns a Store's encoded value back into a value, with the
// bytes it retains (as Result.Cost). An error makes the entry count as
// absent: the value is loaded again and the entry replaced.
type DecodeFunc[V any] func(key string, data []byte) (value V, cost int64, err error)
