package fleet_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"robotsgate/cache"
	"robotsgate/cache/fleet"
)

func BenchmarkRobotsGet(b *testing.B) {
	srv := startRedis(b)
	c, _ := newClient(b, srv, fleet.Options{})
	line := []byte("User-agent: *\nDisallow: /search?q=\nAllow: /search/about\n")
	for _, size := range []int{4 << 10, 100 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			now := time.Now()
			e := cache.SharedEntry{
				Value:       bytes.Repeat(line, size/len(line)+1)[:size],
				Outcome:     "ok",
				LastOutcome: "ok",
				LoadedAt:    now,
				ExpiresAt:   now.Add(24 * time.Hour),
				GoodAt:      now,
			}
			key := fmt.Sprintf("https://example-%d.com:443", size)
			if err := c.Robots().Put(b.Context(), key, e, time.Hour); err != nil {
				b.Fatalf("Put: %v", err)
			}
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, found, err := c.Robots().Get(b.Context(), key); !found || err != nil {
					b.Fatalf("Get = found %v, %v", found, err)
				}
			}
		})
	}
}

func BenchmarkScheduleTake(b *testing.B) {
	srv := startRedis(b)
	c, _ := newClient(b, srv, fleet.Options{})
	s := c.Schedules()
	for b.Loop() {
		if _, _, _, err := s.Take(b.Context(), "https://example.com:443 googlebot", time.Microsecond, 0); err != nil {
			b.Fatalf("Take: %v", err)
		}
	}
}

// BenchmarkSecondLevelHit is what a Get costs that misses this process's
// memory and finds a fresh entry in Redis: the round trip, the copy into
// memory, the Get itself. Decoding the value is the caller's (for
// robots.txt, fetch's BenchmarkDecode: parsing the body again); here it is
// a copy.
func BenchmarkSecondLevelHit(b *testing.B) {
	srv := startRedis(b)
	c, _ := newClient(b, srv, fleet.Options{})
	rules, err := cache.NewShared(cache.DefaultOptions(),
		func(context.Context, string) cache.Result[[]byte] {
			b.Fatal("a load ran: every key is fresh in Redis")
			return cache.Result[[]byte]{}
		},
		cache.SecondLevel[[]byte]{
			Store:    c.Robots(),
			Decode:   func(_ string, data []byte) ([]byte, int64, error) { return bytes.Clone(data), int64(len(data)), nil },
			ClaimTTL: time.Second,
		})
	if err != nil {
		b.Fatal(err)
	}
	defer rules.Close()
	now := time.Now()
	e := cache.SharedEntry{
		Value:   bytes.Repeat([]byte("User-agent: *\nDisallow: /search?q=\n"), 120), // 4 KiB, a typical robots.txt
		Outcome: "ok", LastOutcome: "ok", LoadedAt: now, ExpiresAt: now.Add(time.Hour), GoodAt: now,
	}
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = fmt.Sprintf("https://origin-%d.example:443", i)
		if err := c.Robots().Put(b.Context(), keys[i], e, time.Hour); err != nil {
			b.Fatalf("Put: %v", err)
		}
	}
	b.ResetTimer()
	for _, key := range keys {
		if _, info, err := rules.Get(b.Context(), key); err != nil || info.Source != cache.SourceShared {
			b.Fatalf("Get(%s) = %v from %v, want a second-level hit", key, err, info.Source)
		}
	}
}
