package report

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

func TestTimelineInterval(t *testing.T) {
	day := 24 * time.Hour
	for _, c := range []struct {
		name          string
		from, to      time.Time
		interval      string
		seconds       int64
		buckets       int
		first, last   time.Time
		firstN, lastN int64 // requests in the first and the last bucket
	}{
		{"0s", t0, t0, "1s", 1, 1, t0, t0, 2, 2},
		{"3s", t0, t0.Add(3 * time.Second), "1s", 1, 4, t0, t0.Add(3 * time.Second), 1, 1},
		{"59s", t0, t0.Add(59 * time.Second), "1s", 1, 60, t0, t0.Add(59 * time.Second), 1, 1},
		{"60s", t0, t0.Add(time.Minute), "2s", 2, 31, t0, t0.Add(time.Minute), 1, 1},
		{"1h", t0, t0.Add(time.Hour), "2m", 120, 31, t0, t0.Add(time.Hour), 1, 1},
		{"1h, not aligned", t0.Add(-time.Second), t0.Add(time.Hour - time.Second), "2m", 120, 31, t0.Add(-2 * time.Minute), t0.Add(58 * time.Minute), 1, 1},
		{"1 day", t0, t0.Add(day), "30m", 1800, 49, t0, t0.Add(day), 1, 1},
		// 10-day buckets from the epoch: 2026-11-25 is day 20782.
		{"1 year", t0, t0.Add(365 * day), "10d", 864000, 37,
			time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), time.Date(2027, 11, 18, 0, 0, 0, 0, time.UTC), 1, 1},
		{"a new year before 1970", time.Date(1968, 12, 31, 23, 59, 58, 0, time.UTC), time.Date(1969, 1, 1, 0, 0, 1, 0, time.UTC), "1s", 1, 4,
			time.Date(1968, 12, 31, 23, 59, 58, 0, time.UTC), time.Date(1969, 1, 1, 0, 0, 1, 0, time.UTC), 1, 1},
		{"across 1970", time.Date(1969, 12, 31, 23, 59, 59, 5e8, time.UTC), time.Date(1970, 1, 1, 0, 0, 1, 0, time.UTC), "1s", 1, 3,
			time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(1970, 1, 1, 0, 0, 1, 0, time.UTC), 1, 1},
		// 100-day buckets from the epoch: 1960-06-01 is day -3501, in
		// the bucket from day -3600; 1969-06-01 is day -214.
		{"years before 1970", time.Date(1960, 6, 1, 0, 0, 0, 0, time.UTC), time.Date(1969, 6, 1, 0, 0, 0, 0, time.UTC), "100d", 8640000, 34,
			time.Date(1960, 2, 23, 0, 0, 0, 0, time.UTC), time.Date(1969, 3, 7, 0, 0, 0, 0, time.UTC), 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, rep := readLogs(t, Options{}, encode(t, allowed(c.from), allowed(c.to)))
			tl := rep.Timeline
			if tl.Interval != c.interval || tl.IntervalSeconds != c.seconds || len(tl.Buckets) != c.buckets {
				t.Fatalf("%d buckets of %s (%ds), want %d of %s (%ds)", len(tl.Buckets), tl.Interval, tl.IntervalSeconds, c.buckets, c.interval, c.seconds)
			}
			first, last := tl.Buckets[0], tl.Buckets[len(tl.Buckets)-1]
			if !first.Start.Equal(c.first) || !last.Start.Equal(c.last) {
				t.Errorf("buckets from %v to %v, want %v to %v", first.Start, last.Start, c.first, c.last)
			}
			if first.Requests != c.firstN || last.Requests != c.lastN {
				t.Errorf("%d requests first, %d last; want %d, %d", first.Requests, last.Requests, c.firstN, c.lastN)
			}
			for i, b := range tl.Buckets {
				// Empty intervals are there, each one interval on.
				if want := c.first.Add(time.Duration(i) * time.Duration(c.seconds) * time.Second); !b.Start.Equal(want) || b.Start.Location() != time.UTC {
					t.Errorf("bucket %d starts %v, want %v UTC", i, b.Start, want)
				}
				if i > 0 && i < len(tl.Buckets)-1 && b.Requests != 0 {
					t.Errorf("bucket %d: %d requests", i, b.Requests)
				}
			}
		})
	}
}

func TestTimelineEmpty(t *testing.T) {
	_, rep := readLogs(t, Options{}, nil)
	if tl := rep.Timeline; tl.Buckets == nil || len(tl.Buckets) != 0 || tl.Interval == "" {
		t.Errorf("timeline of no record: %+v", tl)
	}
}

// A timeline keeps at most maxFineBuckets, whatever the log's span,
// merging them into wider ones; every record stays counted in the right
// interval.
func TestTimelineCoarsens(t *testing.T) {
	for _, c := range []struct {
		name     string
		from, to time.Time
	}{
		{"two years", t0.AddDate(-2, 0, 0), t0},
		{"around 1970", time.Date(1965, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1975, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"a week", t0, t0.AddDate(0, 0, 7)},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 100_000
			rng := rand.New(rand.NewPCG(5, 6))
			tl := newTimeline()
			times := []time.Time{c.from, c.to}
			for range n - 2 {
				times = append(times, c.from.Add(time.Duration(rng.Int64N(int64(c.to.Sub(c.from))))))
			}
			for _, at := range times {
				tl.bucket(at).add(&record{Time: at}, kind{allowed: true})
				if len(tl.buckets) > maxFineBuckets {
					t.Fatalf("%d fine buckets", len(tl.buckets))
				}
			}
			if tl.width == 0 {
				t.Fatalf("never coarsened: %d buckets of 1s", len(tl.buckets))
			}
			out := tl.result(c.from, c.to)
			// Count each record in its interval, the slow way.
			step := out.IntervalSeconds
			first := floorDiv(c.from.Unix(), step)
			want := make([]int64, floorDiv(c.to.Unix(), step)-first+1)
			for _, at := range times {
				want[floorDiv(at.Unix(), step)-first]++
			}
			if len(out.Buckets) != len(want) {
				t.Fatalf("%d buckets of %s, want %d", len(out.Buckets), out.Interval, len(want))
			}
			var sum int64
			for i, b := range out.Buckets {
				sum += b.Requests
				if b.Requests != want[i] || b.Allowed != want[i] {
					t.Errorf("bucket %d (%v): %d requests, %d allowed; want %d", i, b.Start, b.Requests, b.Allowed, want[i])
				}
			}
			if sum != n {
				t.Errorf("the buckets count %d requests, want %d", sum, n)
			}
		})
	}
}

func TestDurationWords(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Second: "1s", 15 * time.Second: "15s", 90 * time.Second: "90s", 2 * time.Minute: "2m",
		time.Hour: "1h", 12 * time.Hour: "12h", 24 * time.Hour: "1d", 100000 * 24 * time.Hour: "100000d",
	} {
		if got := durationWords(d); got != want {
			t.Errorf("durationWords(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestFloorDiv(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{7, 2, 3}, {6, 2, 3}, {-7, 2, -4}, {-8, 2, -4}, {0, 5, 0}, {-1, 10, -1}, {-10, 10, -1}, {-11, 10, -2},
	} {
		if got := floorDiv(c.a, c.b); got != c.want {
			t.Errorf("floorDiv(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// A clock gone wrong can put records centuries apart: longer than a
// time.Duration holds (292 years), and at the edges of the years JSON
// writes (0 to 9999), which intervals aligned on the epoch may leave.
func TestTimelineOverCenturies(t *testing.T) {
	earliest, latest := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	west := time.FixedZone("west", -5*3600)
	for _, c := range []struct {
		name     string
		from, to time.Time
		interval string
		buckets  int
	}{
		// 739,944 days: 74 intervals of 10,000 days, 8 of 100,000.
		{"year 1 to now", time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC), t0, "100000d", 9},
		{"year 0 to 9999", earliest, latest, "100000d", 38},
		{"the last second of 9999, west of UTC", time.Date(9999, 12, 31, 23, 59, 58, 0, west), time.Date(9999, 12, 31, 23, 59, 59, 0, west), "1s", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, rep := readLogs(t, Options{}, encode(t, allowed(c.from), allowed(c.to)))
			tl := rep.Timeline
			if tl.Interval != c.interval || len(tl.Buckets) != c.buckets {
				t.Errorf("%d buckets of %s, want %d of %s", len(tl.Buckets), tl.Interval, c.buckets, c.interval)
			}
			var sum int64
			for i, b := range tl.Buckets {
				sum += b.Requests
				if b.Start.Before(earliest) || b.Start.After(latest) {
					t.Errorf("bucket %d starts %v", i, b.Start)
				}
			}
			if sum != 2 {
				t.Errorf("the buckets count %d requests, want 2", sum)
			}
			var out bytes.Buffer
			if err := WriteJSON(&out, rep); err != nil {
				t.Error(err)
			}
		})
	}
}
