package fleet

import (
	"context"
	"crypto/rand"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"robotsgate/cache"
)

// RobotsStore keeps robots.txt entries in Redis for the fleet: a
// cache.Store. Each entry is a hash under <prefix>robots:<key>, each claim
// a string under <prefix>robots-claim:<key>.
type RobotsStore struct {
	c *Client
}

// Robots returns the Store of robots.txt entries.
func (c *Client) Robots() *RobotsStore { return &RobotsStore{c: c} }

var _ cache.Store = (*RobotsStore)(nil)

// entryVersion is the layout of the hash; an entry of another version
// counts as absent, so that instances of two releases replace each
// other's entries rather than misread them.
const entryVersion = "1"

// The fields of an entry's hash.
const (
	fieldVersion     = "v"
	fieldValue       = "value"
	fieldOutcome     = "outcome"
	fieldLastOutcome = "last_outcome"
	fieldFailed      = "failed"
	fieldStale       = "stale"
	fieldFailures    = "failures"
	fieldLoadedAt    = "loaded_at"
	fieldExpiresAt   = "expires_at"
	fieldGoodAt      = "good_at"
)

// maxOutcomeBytes bounds an outcome read back: it becomes a metrics label
// and a log attribute, and Redis may hold anything.
const maxOutcomeBytes = 64

// maxUnixMilli is the last millisecond of the year 9999: a later time read
// back is not one an instance wrote.
const maxUnixMilli = 253402300799999

func (s *RobotsStore) entryKey(key string) string { return s.c.prefix + "robots:" + key }
func (s *RobotsStore) claimKey(key string) string { return s.c.prefix + "robots-claim:" + key }

// Get implements cache.Store. An entry that is malformed, of another
// version or partly missing is not found: the caller loads it again and
// replaces it.
func (s *RobotsStore) Get(ctx context.Context, key string) (e cache.SharedEntry, found bool, err error) {
	err = s.c.do(ctx, opRobotsGet, func(ctx context.Context) error {
		fields, err := s.c.rdb.HGetAll(ctx, s.entryKey(key)).Result()
		if redis.HasErrorPrefix(err, "WRONGTYPE") {
			return nil
		}
		if err != nil {
			return err
		}
		e, found = decodeEntry(fields)
		return nil
	})
	if err != nil {
		return cache.SharedEntry{}, false, err
	}
	return e, found, nil
}

// Put implements cache.Store. It replaces the whole hash in one
// transaction, so that a reader never sees half of two entries; a keep of
// 0 or less only deletes the entry.
func (s *RobotsStore) Put(ctx context.Context, key string, e cache.SharedEntry, keep time.Duration) error {
	k := s.entryKey(key)
	return s.c.do(ctx, opRobotsPut, func(ctx context.Context) error {
		_, err := s.c.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Del(ctx, k)
			if keep > 0 {
				pipe.HSet(ctx, k, encodeEntry(e)...)
				pipe.PExpire(ctx, k, ceilMillis(keep))
			}
			return nil
		})
		return err
	})
}

// Claim implements cache.Store: SET NX with a token of the caller's own,
// which release deletes only while it is still there.
func (s *RobotsStore) Claim(ctx context.Context, key string, ttl time.Duration) (release func(), claimed bool, err error) {
	noop := func() {}
	token := rand.Text() // 128 random bits: no other claim holds the same
	k := s.claimKey(key)
	err = s.c.do(ctx, opRobotsClaim, func(ctx context.Context) error {
		claimed, err = s.c.rdb.SetNX(ctx, k, token, ceilMillis(ttl)).Result()
		return err
	})
	if err != nil {
		return noop, false, err
	}
	if !claimed {
		return noop, false, nil
	}
	// The loader that releases may have finished its caller's request, and
	// may have found Redis down since the claim when the other instances
	// did not: the release is a bestEffort, which tries all the same.
	var once sync.Once
	release = func() {
		once.Do(func() {
			s.c.bestEffort(opRobotsRelease, func(ctx context.Context) error {
				return s.c.scripts.release.Run(ctx, s.c.rdb, []string{k}, token).Err()
			})
		})
	}
	return release, true, nil
}

// ceilMillis rounds d up to whole milliseconds, at least one: PX takes
// milliseconds, and a shorter keep must still expire rather than be refused.
func ceilMillis(d time.Duration) time.Duration {
	if rest := d % time.Millisecond; rest > 0 {
		d += time.Millisecond - rest
	}
	return max(d, time.Millisecond)
}

// encodeEntry returns e as the field-value pairs of HSET.
func encodeEntry(e cache.SharedEntry) []any {
	return []any{
		fieldVersion, entryVersion,
		fieldValue, e.Value,
		fieldOutcome, e.Outcome,
		fieldLastOutcome, e.LastOutcome,
		fieldFailed, encodeBool(e.Failed),
		fieldStale, encodeBool(e.Stale),
		fieldFailures, strconv.Itoa(e.Failures),
		fieldLoadedAt, encodeTime(e.LoadedAt),
		fieldExpiresAt, encodeTime(e.ExpiresAt),
		fieldGoodAt, encodeTime(e.GoodAt),
	}
}

// decodeEntry reads back what encodeEntry wrote; ok is false for anything
// else, as Redis is shared and may hold anything.
func decodeEntry(fields map[string]string) (e cache.SharedEntry, ok bool) {
	if fields[fieldVersion] != entryVersion {
		return cache.SharedEntry{}, false
	}
	value, okValue := fields[fieldValue]
	e.Outcome, ok = decodeOutcome(fields, fieldOutcome)
	if !ok || !okValue {
		return cache.SharedEntry{}, false
	}
	if e.LastOutcome, ok = decodeOutcome(fields, fieldLastOutcome); !ok {
		return cache.SharedEntry{}, false
	}
	var okFailed, okStale, okFailures, okLoaded, okExpires, okGood bool
	e.Failed, okFailed = decodeBool(fields[fieldFailed])
	e.Stale, okStale = decodeBool(fields[fieldStale])
	e.Failures, okFailures = decodeCount(fields[fieldFailures])
	e.LoadedAt, okLoaded = decodeTime(fields[fieldLoadedAt])
	e.ExpiresAt, okExpires = decodeTime(fields[fieldExpiresAt])
	e.GoodAt, okGood = decodeTime(fields[fieldGoodAt])
	if !okFailed || !okStale || !okFailures || !okLoaded || !okExpires || !okGood {
		return cache.SharedEntry{}, false
	}
	e.Value = []byte(value)
	return e, true
}

func decodeOutcome(fields map[string]string, name string) (string, bool) {
	s, ok := fields[name]
	return s, ok && len(s) <= maxOutcomeBytes && utf8.ValidString(s)
}

func encodeBool(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func decodeBool(s string) (b, ok bool) {
	switch s {
	case "0":
		return false, true
	case "1":
		return true, true
	}
	return false, false
}

func decodeCount(s string) (int, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	return int(n), err == nil && n >= 0
}

// encodeTime writes t as Unix milliseconds, and the zero time as 0.
func encodeTime(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

func decodeTime(s string) (time.Time, bool) {
	ms, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil || ms < 0 || ms > maxUnixMilli:
		return time.Time{}, false
	case ms == 0:
		return time.Time{}, true
	}
	return time.UnixMilli(ms), true
}
