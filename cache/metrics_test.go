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
`, DefaultMaxBytes, IndexBytes(DefaultMaxBytes)+2*(1000+entryOverhead))
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
		"cache_shared_total":    0, // no second level
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

// TestCollectShared scrapes a cache with a second level: the lookups count
// shared hits, and its refreshes are counted by how they ended.
func TestCollectShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, o := newMemStore(), newOrigin(Result[string]{})
		c := newProcess(t, withOptions(func(o *Options) { o.MetricsPrefix = "robots_cache" }), sharing(o, 0), store)
		defer c.Close()
		other := newProcess(t, DefaultOptions(), sharing(o, 0), store)
		defer other.Close()
		get(t, c, "a", "", SourceLoaded)
		get(t, c, "a", "", SourceHit)
		get(t, other, "b", "", SourceLoaded)
		get(t, c, "b", "", SourceShared)
		store.fail("Claim", true)
		get(t, c, "c", "", SourceLoaded)

		want := `
# HELP robots_cache_lookups_total Cache lookups, by result (hit: fresh value in memory; miss: waited for a load; stale: loads failing, last good value served; shared: fresh value from the second level shared with other processes).
# TYPE robots_cache_lookups_total counter
robots_cache_lookups_total{result="hit"} 1
robots_cache_lookups_total{result="miss"} 2
robots_cache_lookups_total{result="shared"} 1
robots_cache_lookups_total{result="stale"} 0
# HELP robots_cache_shared_total Refreshes of values missing from memory through the second level shared with other processes, by how they ended (hit: fresh entry found; loaded: loaded under this process's claim; waited: took the entry another process loaded; takeover: loaded after another's claim ended without an entry; timeout: waited longer than a claim lasts, loaded without one; unavailable: the store failed, worked alone).
# TYPE robots_cache_shared_total counter
robots_cache_shared_total{result="hit"} 1
robots_cache_shared_total{result="loaded"} 1
robots_cache_shared_total{result="takeover"} 0
robots_cache_shared_total{result="timeout"} 0
robots_cache_shared_total{result="unavailable"} 1
robots_cache_shared_total{result="waited"} 0
`
		if err := testutil.CollectAndCompare(c, strings.NewReader(want), "robots_cache_lookups_total", "robots_cache_shared_total"); err != nil {
			t.Error(err)
		}
		// lookups 4, loads 1 (ok), evictions, bytes, budget, shared 6
		if n := testutil.CollectAndCount(c); n != 4+1+1+1+1+6 {
			t.Errorf("%d series, want 14", n)
		}
	})
}
