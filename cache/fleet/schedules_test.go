package fleet_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"robotsgate/cache/fleet"
)

// take runs s.Take and fails t on an error.
func take(t *testing.T, s *fleet.Schedules, key string, interval, maxWait time.Duration) (slot int64, early time.Duration, taken bool) {
	t.Helper()
	slot, early, taken, err := s.Take(t.Context(), key, interval, maxWait)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	return slot, early, taken
}

func TestScheduleSteps(t *testing.T) {
	srv := startRedis(t)
	ca, _ := newClient(t, srv, fleet.Options{})
	cb, _ := newClient(t, srv, fleet.Options{})
	a, b := ca.Schedules(), cb.Schedules()
	const key, interval = "https://example.com:443 googlebot", time.Second

	first, early, taken := take(t, a, key, interval, 0)
	if !taken || early != 0 {
		t.Fatalf("first Take = early %v, taken %v; want on time", early, taken)
	}
	// The interval holds for every instance: B right after is early by
	// about the interval, and that changes nothing.
	due, early, taken := take(t, b, key, interval, 0)
	if taken || early <= interval/2 || early > interval {
		t.Fatalf("Take right after = early %v, taken %v; want refused, early by about %v", early, taken, interval)
	}
	if due != first+interval.Microseconds() {
		t.Errorf("Take right after names start %d; want %d, an interval after the first", due, first+interval.Microseconds())
	}
	// Within maxWait, B takes that start, and pushes the schedule on.
	second, early, taken := take(t, b, key, interval, 2*interval)
	if !taken || second != first+interval.Microseconds() || early <= interval/2 || early > interval {
		t.Fatalf("Take within maxWait = slot %d, early %v, taken %v; want slot %d, early by about %v",
			second, early, taken, first+interval.Microseconds(), interval)
	}
	if _, early, taken = take(t, a, key, interval, 0); taken || early <= interval || early > 2*interval {
		t.Errorf("Take after a reservation = early %v, taken %v; want refused, early by about %v", early, taken, 2*interval)
	}

	raw, stored := srv.Raw(0), fleet.DefaultPrefix+"pace:"+key
	if v, _ := raw.Get(t.Context(), stored).Result(); v != strconv.FormatInt(second+interval.Microseconds(), 10) {
		t.Errorf("the schedule holds %q; want the next start in whole microseconds, %d", v, second+interval.Microseconds())
	}
	ttl, err := raw.PTTL(t.Context(), stored).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= time.Second || ttl > 2*interval+time.Second {
		t.Errorf("PTTL = %v; want the time until the next start and a second, about %v", ttl, 2*interval+time.Second)
	}
}

func TestScheduleOnTimeAgain(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv, fleet.Options{})
	s := c.Schedules()
	// An interval a loaded machine cannot let pass between two Takes
	// by accident.
	const key, interval = "k", time.Second

	if _, _, taken := take(t, s, key, interval, 0); !taken {
		t.Fatal("first Take refused")
	}
	_, early, taken := take(t, s, key, interval, 0)
	if taken || early <= 0 {
		t.Fatalf("Take right after = early %v, taken %v; want refused", early, taken)
	}
	// The interval passing is the behaviour under test: the wait is the
	// one Take named, and a slower machine only waits longer.
	time.Sleep(early)
	if _, early, taken = take(t, s, key, interval, 0); !taken || early != 0 {
		t.Errorf("Take once the interval passed = early %v, taken %v; want on time", early, taken)
	}
}

func TestScheduleGiveBack(t *testing.T) {
	srv := startRedis(t)
	ca, _ := newClient(t, srv, fleet.Options{})
	cb, _ := newClient(t, srv, fleet.Options{})
	a, b := ca.Schedules(), cb.Schedules()
	const interval, maxWait = time.Second, time.Minute

	t.Run("the last Take is undone", func(t *testing.T) {
		const key = "last"
		take(t, a, key, interval, maxWait)
		second, _, _ := take(t, b, key, interval, maxWait)
		if err := b.GiveBack(t.Context(), key, second, interval); err != nil {
			t.Fatalf("GiveBack: %v", err)
		}
		if again, _, taken := take(t, a, key, interval, maxWait); !taken || again != second {
			t.Errorf("Take after GiveBack = slot %d, taken %v; want the start given back, %d", again, taken, second)
		}
	})
	t.Run("a Take followed by another stays", func(t *testing.T) {
		const key = "followed"
		first, _, _ := take(t, a, key, interval, maxWait)
		second, _, _ := take(t, b, key, interval, maxWait)
		if err := a.GiveBack(t.Context(), key, first, interval); err != nil {
			t.Fatalf("GiveBack: %v", err)
		}
		if third, _, _ := take(t, b, key, interval, maxWait); third != second+interval.Microseconds() {
			t.Errorf("Take after a GiveBack that came too late = slot %d; want %d, after the second", third, second+interval.Microseconds())
		}
	})
	t.Run("a schedule that is gone", func(t *testing.T) {
		if err := a.GiveBack(t.Context(), "never taken", 12345, interval); err != nil {
			t.Fatalf("GiveBack: %v", err)
		}
		if n, _ := srv.Raw(0).Exists(t.Context(), fleet.DefaultPrefix+"pace:never taken").Result(); n != 0 {
			t.Error("GiveBack of a schedule that is gone made one")
		}
	})
}

func TestScheduleExpires(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv, fleet.Options{})
	const key = "short"
	if _, _, taken := take(t, c.Schedules(), key, 10*time.Millisecond, 0); !taken {
		t.Fatal("Take refused")
	}
	raw := srv.Raw(0)
	gone := waitFor(5*time.Second, func() bool {
		n, err := raw.Exists(t.Context(), fleet.DefaultPrefix+"pace:"+key).Result()
		return err == nil && n == 0
	})
	if !gone {
		t.Error("a schedule that holds nothing back stayed")
	}
}

func TestScheduleHostileValues(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv, fleet.Options{})
	raw := srv.Raw(0)
	tests := []struct {
		name  string
		write func(ctx context.Context, key string) error
	}{
		{"garbage", set(raw, "garbage")},
		{"nan", set(raw, "nan")},
		{"inf", set(raw, "inf")},
		{"negative", set(raw, "-5")},
		{"beyond 2^53", set(raw, "1e300")},
		{"empty", set(raw, "")},
		{"a hash", hset(raw, map[string]string{"a": "b"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "hostile " + tt.name
			if err := tt.write(t.Context(), fleet.DefaultPrefix+"pace:"+key); err != nil {
				t.Fatal(err)
			}
			slot, early, taken, err := c.Schedules().Take(t.Context(), key, time.Second, 0)
			if err != nil || !taken || early != 0 || slot <= 0 {
				t.Errorf("Take = slot %d, early %v, taken %v, %v; want on time, as without a schedule", slot, early, taken, err)
			}
			if err := c.Schedules().GiveBack(t.Context(), key, slot, time.Second); err != nil {
				t.Errorf("GiveBack: %v", err)
			}
		})
	}
	if !c.Status().Up {
		t.Errorf("a hostile schedule took Redis for down: %+v", c.Status())
	}
}

// set returns a writer of value as a string.
func set(raw *redis.Client, value string) func(ctx context.Context, key string) error {
	return func(ctx context.Context, key string) error { return raw.Set(ctx, key, value, 0).Err() }
}

func TestScheduleExtend(t *testing.T) {
	srv := startRedis(t)
	ca, _ := newClient(t, srv, fleet.Options{})
	cb, _ := newClient(t, srv, fleet.Options{})
	a, b := ca.Schedules(), cb.Schedules()
	raw := srv.Raw(0)
	stored := func(key string) int64 {
		t.Helper()
		v, err := raw.Get(t.Context(), fleet.DefaultPrefix+"pace:"+key).Int64()
		if err != nil {
			t.Fatalf("the schedule of %q: %v", key, err)
		}
		return v
	}
	const interval = time.Second

	t.Run("pushes and never pulls back", func(t *testing.T) {
		const key = "extended"
		slot, _, _ := take(t, a, key, interval, 0)
		if err := b.Extend(t.Context(), key, slot, 5*time.Second); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		if got, want := stored(key), slot+(5*time.Second).Microseconds(); got != want {
			t.Errorf("schedule after Extend = %d; want the slot and 5s, %d", got, want)
		}
		// Every instance's Take now waits the longer time.
		if _, early, taken := take(t, a, key, interval, 0); taken || early <= 4*time.Second || early > 5*time.Second {
			t.Errorf("Take after Extend = early %v, taken %v; want refused, early by about 5s", early, taken)
		}
		if err := a.Extend(t.Context(), key, slot, 2*time.Second); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		if got, want := stored(key), slot+(5*time.Second).Microseconds(); got != want {
			t.Errorf("schedule after a shorter Extend = %d; want it left at %d", got, want)
		}
		// Shorter than the interval Take set: nothing moves either.
		slot2, _, _ := take(t, a, "short", interval, 0)
		if err := a.Extend(t.Context(), "short", slot2, interval/2); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		if got, want := stored("short"), slot2+interval.Microseconds(); got != want {
			t.Errorf("schedule after an Extend within the interval = %d; want Take's, %d", got, want)
		}
	})
	t.Run("a schedule that is gone is made", func(t *testing.T) {
		const key = "gone"
		slot, _, _ := take(t, a, key, interval, 0)
		if err := raw.Del(t.Context(), fleet.DefaultPrefix+"pace:"+key).Err(); err != nil {
			t.Fatal(err)
		}
		if err := a.Extend(t.Context(), key, slot, 3*time.Second); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		if got, want := stored(key), slot+(3*time.Second).Microseconds(); got != want {
			t.Errorf("schedule made by Extend = %d; want %d", got, want)
		}
		ttl, err := raw.PTTL(t.Context(), fleet.DefaultPrefix+"pace:"+key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 3*time.Second || ttl > 4*time.Second {
			t.Errorf("PTTL = %v; want the time until the start and a second, about 4s", ttl)
		}
	})
	t.Run("a hostile schedule is replaced", func(t *testing.T) {
		const key = "hostile"
		if err := raw.Set(t.Context(), fleet.DefaultPrefix+"pace:"+key, "1e300", 0).Err(); err != nil {
			t.Fatal(err)
		}
		slot, _, _ := take(t, b, "clock", interval, 0)
		if err := a.Extend(t.Context(), key, slot, 2*time.Second); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		if got, want := stored(key), slot+(2*time.Second).Microseconds(); got != want {
			t.Errorf("schedule after Extend = %d; want %d", got, want)
		}
	})
	if ops := operations(t, ca); ops["pace_extend/ok"] != 4 {
		t.Errorf("pace_extend/ok = %v; want 4, one per Extend of A", ops["pace_extend/ok"])
	}
}
