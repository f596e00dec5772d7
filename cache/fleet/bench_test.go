package fleet_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"robotsgate/cache"
	"robotsgate/cache/fleet"
	"robotsgate/cache/fleet/redistest"
)

func BenchmarkRobotsGet(b *testing.B) {
	srv := redistest.Start(b)
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
	srv := redistest.Start(b)
	c, _ := newClient(b, srv, fleet.Options{})
	s := c.Schedules()
	for b.Loop() {
		if _, _, _, err := s.Take(b.Context(), "https://example.com:443 googlebot", time.Microsecond, 0); err != nil {
			b.Fatalf("Take: %v", err)
		}
	}
}
