package fleet_test

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"robotsgate/cache"
	"robotsgate/cache/fleet"
)

func TestRobotsRoundTrip(t *testing.T) {
	srv := startRedis(t)
	writer, _ := newClient(t, srv, fleet.Options{})
	reader, _ := newClient(t, srv, fleet.Options{})
	loaded := time.UnixMilli(time.Now().UnixMilli())
	tests := []struct {
		name string
		key  string
		e    cache.SharedEntry
	}{
		{
			name: "good",
			key:  "https://example.com:443",
			e: cache.SharedEntry{
				Value:       []byte("User-agent: *\nDisallow: /private\n"),
				Outcome:     "ok",
				LastOutcome: "ok",
				LoadedAt:    loaded,
				ExpiresAt:   loaded.Add(24 * time.Hour),
				GoodAt:      loaded,
			},
		},
		{
			name: "stale, every field set, binary value",
			key:  "https://example.org:443",
			e: cache.SharedEntry{
				Value:       []byte{0, 1, 0xff, '\r', '\n', 0},
				Outcome:     "ok",
				LastOutcome: "unreachable",
				Stale:       true,
				Failures:    3,
				LoadedAt:    loaded.Add(-time.Hour),
				ExpiresAt:   loaded.Add(time.Minute),
				GoodAt:      loaded.Add(-time.Hour),
			},
		},
		{
			name: "failed, no good value",
			key:  "http://down.example:80",
			e: cache.SharedEntry{
				Value:       []byte{},
				Outcome:     "unreachable",
				LastOutcome: "unreachable",
				Failed:      true,
				Failures:    1,
				LoadedAt:    loaded,
				ExpiresAt:   loaded.Add(time.Second),
			},
		},
		{
			name: "a key of any bytes",
			key:  "http://a b\x00\xff*?[x]:80",
			e:    cache.SharedEntry{Value: []byte("x"), Outcome: "ok", LastOutcome: "ok", LoadedAt: loaded, ExpiresAt: loaded},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := writer.Robots().Put(t.Context(), tt.key, tt.e, time.Hour); err != nil {
				t.Fatalf("Put: %v", err)
			}
			got, found, err := reader.Robots().Get(t.Context(), tt.key)
			if err != nil || !found {
				t.Fatalf("Get = found %v, %v; want the entry", found, err)
			}
			if !sameEntry(got, tt.e) {
				t.Errorf("Get = %+v\nwant %+v", got, tt.e)
			}
			if keys := srv.Keys(fleet.DefaultPrefix + "robots:" + tt.key); !slices.Equal(keys, []string{fleet.DefaultPrefix + "robots:" + tt.key}) {
				t.Errorf("keys = %q; want the key as given", keys)
			}
		})
	}
}

// sameEntry compares entries with Equal for times, which lose their
// monotonic reading and location on the way through Redis.
func sameEntry(a, b cache.SharedEntry) bool {
	return bytes.Equal(a.Value, b.Value) && a.Outcome == b.Outcome && a.LastOutcome == b.LastOutcome &&
		a.Failed == b.Failed && a.Stale == b.Stale && a.Failures == b.Failures &&
		a.LoadedAt.Equal(b.LoadedAt) && a.ExpiresAt.Equal(b.ExpiresAt) && a.GoodAt.Equal(b.GoodAt)
}

func TestRobotsGetMissing(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv, fleet.Options{})
	if _, found, err := c.Robots().Get(t.Context(), "https://nowhere.example:443"); found || err != nil {
		t.Errorf("Get = found %v, %v; want not found", found, err)
	}
}

func TestRobotsPutReplacesAndExpires(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv, fleet.Options{})
	store, key := c.Robots(), "https://example.com:443"
	raw := srv.Raw(0)
	hashKey := fleet.DefaultPrefix + "robots:" + key
	first := cache.SharedEntry{Value: []byte("first"), Outcome: "ok", LastOutcome: "ok", LoadedAt: time.UnixMilli(1), ExpiresAt: time.UnixMilli(2)}
	if err := store.Put(t.Context(), key, first, time.Hour); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := raw.HSet(t.Context(), hashKey, "left_over", "x").Err(); err != nil {
		t.Fatal(err)
	}

	second := first
	second.Value = []byte("second")
	if err := store.Put(t.Context(), key, second, time.Minute); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if exists, _ := raw.HExists(t.Context(), hashKey, "left_over").Result(); exists {
		t.Error("Put kept a field of the hash it replaced")
	}
	if ttl, _ := raw.PTTL(t.Context(), hashKey).Result(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("PTTL = %v; want at most the keep, 1m", ttl)
	}
	got, found, err := store.Get(t.Context(), key)
	if err != nil || !found || string(got.Value) != "second" {
		t.Fatalf("Get = %q, found %v, %v; want the second entry", got.Value, found, err)
	}
	// A short keep is checked apart, by waiting for its end: reading the
	// entry within 100ms of its Put is a race a loaded machine loses.
	if err := store.Put(t.Context(), key, second, 100*time.Millisecond); err != nil {
		t.Fatalf("Put: %v", err)
	}
	gone := waitFor(5*time.Second, func() bool {
		_, found, err := store.Get(t.Context(), key)
		return !found && err == nil
	})
	if !gone {
		t.Error("the entry outlived its keep")
	}

	if err := store.Put(t.Context(), key, first, 0); err != nil {
		t.Fatalf("Put with keep 0: %v", err)
	}
	if _, found, _ := store.Get(t.Context(), key); found {
		t.Error("Put with keep 0 stored the entry")
	}
}

func TestRobotsMalformedIsNotFound(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv, fleet.Options{})
	raw := srv.Raw(0)
	good := map[string]string{
		"v": "1", "value": "User-agent: *", "outcome": "ok", "last_outcome": "ok", "failed": "0", "stale": "0",
		"failures": "0", "loaded_at": "1700000000000", "expires_at": "1700000060000", "good_at": "1700000000000",
	}
	with := func(field, value string) map[string]string {
		m := maps.Clone(good)
		m[field] = value
		return m
	}
	without := func(field string) map[string]string {
		m := maps.Clone(good)
		delete(m, field)
		return m
	}
	tests := []struct {
		name  string
		write func(ctx context.Context, key string) error
	}{
		{"garbage fields", hset(raw, map[string]string{"a": "b", "c": "\x00\xff"})},
		{"version 2", hset(raw, with("v", "2"))},
		{"no version", hset(raw, without("v"))},
		{"no value", hset(raw, without("value"))},
		{"no outcome", hset(raw, without("outcome"))},
		{"no last outcome", hset(raw, without("last_outcome"))},
		{"no failed", hset(raw, without("failed"))},
		{"no stale", hset(raw, without("stale"))},
		{"no failures", hset(raw, without("failures"))},
		{"no loaded_at", hset(raw, without("loaded_at"))},
		{"no expires_at", hset(raw, without("expires_at"))},
		{"no good_at", hset(raw, without("good_at"))},
		{"failed is a word", hset(raw, with("failed", "true"))},
		{"stale is 2", hset(raw, with("stale", "2"))},
		{"failures negative", hset(raw, with("failures", "-1"))},
		{"failures huge", hset(raw, with("failures", "99999999999999999999999"))},
		{"failures beyond 32 bits", hset(raw, with("failures", "4294967296"))},
		{"failures a fraction", hset(raw, with("failures", "1.5"))},
		{"loaded_at a float", hset(raw, with("loaded_at", "1e12"))},
		{"loaded_at negative", hset(raw, with("loaded_at", "-1"))},
		{"expires_at past the year 9999", hset(raw, with("expires_at", "9223372036854775807"))},
		{"good_at empty", hset(raw, with("good_at", ""))},
		{"outcome too long", hset(raw, with("outcome", strings.Repeat("x", 65)))},
		{"last outcome not UTF-8", hset(raw, with("last_outcome", "\xff\xfe"))},
		{"a string", func(ctx context.Context, key string) error { return raw.Set(ctx, key, "v=1", 0).Err() }},
		{"a list", func(ctx context.Context, key string) error { return raw.RPush(ctx, key, "1", "2").Err() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "https://" + strings.ReplaceAll(tt.name, " ", "-") + ".example:443"
			if err := tt.write(t.Context(), fleet.DefaultPrefix+"robots:"+key); err != nil {
				t.Fatalf("writing it: %v", err)
			}
			e, found, err := c.Robots().Get(t.Context(), key)
			if found || err != nil {
				t.Errorf("Get = %+v, found %v, %v; want not found and no error", e, found, err)
			}
		})
	}
	// The good hash the rows spoil is read, so each row fails for its own
	// reason; and no row took Redis for down.
	if err := hset(raw, good)(t.Context(), fleet.DefaultPrefix+"robots:good"); err != nil {
		t.Fatal(err)
	}
	if _, found, err := c.Robots().Get(t.Context(), "good"); !found || err != nil {
		t.Errorf("Get of the good hash = found %v, %v", found, err)
	}
	if !c.Status().Up {
		t.Errorf("a malformed entry took Redis for down: %+v", c.Status())
	}
}

// hset returns a writer of fields as a hash.
func hset(raw *redis.Client, fields map[string]string) func(ctx context.Context, key string) error {
	return func(ctx context.Context, key string) error { return raw.HSet(ctx, key, fields).Err() }
}

func TestRobotsClaim(t *testing.T) {
	srv := startRedis(t)
	a, _ := newClient(t, srv, fleet.Options{})
	b, _ := newClient(t, srv, fleet.Options{})
	const key = "https://example.com:443"

	releaseA, claimed, err := a.Robots().Claim(t.Context(), key, time.Minute)
	if err != nil || !claimed {
		t.Fatalf("first Claim = %v, %v; want claimed", claimed, err)
	}
	releaseB, claimed, err := b.Robots().Claim(t.Context(), key, time.Minute)
	if err != nil || claimed {
		t.Fatalf("Claim while another holds it = %v, %v; want not claimed", claimed, err)
	}
	releaseB() // not B's claim: it must not end A's
	if _, claimed, _ := b.Robots().Claim(t.Context(), key, time.Minute); claimed {
		t.Fatal("the release of a Claim that failed ended another's claim")
	}

	// A releases on a context its caller has cancelled meanwhile.
	ctx, cancel := context.WithCancel(t.Context())
	releaseA, claimed, err = a.Robots().Claim(ctx, "https://other.example:443", time.Minute)
	if err != nil || !claimed {
		t.Fatalf("Claim = %v, %v; want claimed", claimed, err)
	}
	cancel()
	releaseA()
	if _, claimed, _ := b.Robots().Claim(t.Context(), "https://other.example:443", time.Minute); !claimed {
		t.Error("a release after its caller was done did not end the claim")
	}
}

func TestRobotsClaimExpires(t *testing.T) {
	srv := startRedis(t)
	a, _ := newClient(t, srv, fleet.Options{})
	b, _ := newClient(t, srv, fleet.Options{})
	const key = "https://example.com:443"

	releaseA, claimed, err := a.Robots().Claim(t.Context(), key, 50*time.Millisecond)
	if err != nil || !claimed {
		t.Fatalf("Claim = %v, %v; want claimed", claimed, err)
	}
	var releaseB func()
	expired := waitFor(5*time.Second, func() bool {
		releaseB, claimed, err = b.Robots().Claim(t.Context(), key, time.Minute)
		return claimed && err == nil
	})
	if !expired {
		t.Fatal("the claim outlived its ttl")
	}
	// A's loader finishes late: its release must leave B's claim alone.
	releaseA()
	if _, claimed, _ := a.Robots().Claim(t.Context(), key, time.Minute); claimed {
		t.Fatal("a late release ended the claim taken after it expired")
	}
	releaseB()
	if _, claimed, _ := a.Robots().Claim(t.Context(), key, time.Minute); !claimed {
		t.Error("the release of the claim holder did not end it")
	}
}

// TestRobotsReleaseWhileMarkedDown: an instance that took Redis for down
// when the others did not (here, a pause outlasted its timeout) still ends
// its claim, so that they need not wait it out; the release leaves the
// instance's view of Redis as it was.
func TestRobotsReleaseWhileMarkedDown(t *testing.T) {
	srv := startRedis(t)
	// A prober that never runs keeps a down until the end.
	a, _ := newClient(t, srv, fleet.Options{Timeout: testTimeout, RetryEvery: time.Hour})
	b, _ := newClient(t, srv, fleet.Options{})
	const key = "https://example.com:443"
	release, claimed, err := a.Robots().Claim(t.Context(), key, time.Minute)
	if err != nil || !claimed {
		t.Fatalf("Claim = %v, %v; want claimed", claimed, err)
	}

	raw := srv.Raw(0)
	if err := raw.ClientPause(t.Context(), 2*testTimeout).Err(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
	if _, _, err := a.Robots().Get(t.Context(), key); err == nil {
		t.Fatal("Get while Redis is paused succeeded")
	}
	// The pause holds this PING until it ends.
	if err := raw.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("PING after the pause: %v", err)
	}
	if a.Status().Up {
		t.Fatal("a timeout left Redis up")
	}

	release()
	if _, claimed, err := b.Robots().Claim(t.Context(), key, time.Minute); err != nil || !claimed {
		t.Errorf("another instance's Claim after the release = %v, %v; want claimed", claimed, err)
	}
	if a.Status().Up {
		t.Error("the release marked Redis up")
	}
	if ops := operations(t, a); ops["robots_release/ok"] != 1 {
		t.Errorf("robots_release ok = %v; want 1", ops["robots_release/ok"])
	}
}
