package cache

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCollect scrapes a cache, through a pedantic registry, after loads of
// every kind and lookups of every result.
func TestCollect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newOrigin(Result[string]{Cost: 1000, MaxAge: time.Hour})
		c := newCache(t, withOptions(func(o *Options) { o.MetricsPrefix = "robotsgate_robots_cache" }), o.load)
		defer c.Close()
		get(t, c, "a", "", SourceLoaded)
		get(t, c, "a", "", SourceHit)
		get(t, c, "b", "", SourceLoaded)
		time.Sleep(time.Hour)
		o.answer(Result[string]{Failed: true, Outcome: "unreachable"})
		get(t, c, "a", "", SourceStale)

		want := fmt.Sprintf(`
# HELP robotsgate_robots_cache_budget_bytes The cache's memory budget.
# TYPE robotsgate_robots_cache_budget_bytes gauge
robotsgate_robots_cache_budget_bytes %d
# HELP robotsgate_robots_cache_bytes Memory charged to the cache.
# TYPE robotsgate_robots_cache_bytes gauge
robotsgate_robots_cache_bytes %d
# HELP robotsgate_robots_cache_evictions_total Entries evicted from the cache to stay within its memory budget.
# TYPE robotsgate_robots_cache_evictions_total counter
robotsgate_robots_cache_evictions_total 0
# HELP robotsgate_robots_cache_loads_total Loads of values into the cache, by outcome (as the loader labels it; panic for a load that panicked).
# TYPE robotsgate_robots_cache_loads_total counter
robotsgate_robots_cache_loads_total{outcome="ok"} 2
robotsgate_robots_cache_loads_total{outcome="unreachable"} 1
# HELP robotsgate_robots_cache_lookups_total Cache lookups, by result (hit: fresh value in memory; miss: waited for a load; stale: loads failing, last good value served; shared: fresh value from the second level shared with other processes).
# TYPE robotsgate_robots_cache_lookups_total counter
robotsgate_robots_cache_lookups_total{result="hit"} 1
robotsgate_robots_cache_lookups_total{result="miss"} 2
robotsgate_robots_cache_lookups_total{result="stale"} 1
`, DefaultMaxBytes, 2*(1000+entryOverhead))
		if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
			t.Error(err)
		}
	})
}

// TestCollectNamesFollowPrefix: the default prefix names the metrics, and a
// closed cache still collects, holding nothing.
func TestCollectNamesFollowPrefix(t *testing.T) {
	c := newCache(t, DefaultOptions(), newOrigin(Result[string]{}).load)
	if _, _, err := c.Get(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for name, want := range map[string]int{
		"cache_lookups_total":   3, // one per result
		"cache_loads_total":     1,
		"cache_evictions_total": 1,
		"cache_bytes":           1,
		"cache_budget_bytes":    1,
	} {
		if got := testutil.CollectAndCount(c, name); got != want {
			t.Errorf("%d %s series, want %d", got, name, want)
		}
	}
	closed := `
# HELP cache_bytes Memory charged to the cache.
# TYPE cache_bytes gauge
cache_bytes 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(closed), "cache_bytes"); err != nil {
		t.Error(err)
	}
}
