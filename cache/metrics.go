package cache

import "github.com/prometheus/client_golang/prometheus"

// descs describe the metrics a Cache collects, named after
// Options.MetricsPrefix.
type descs struct {
	lookups, loads, evictions, bytes, budget *prometheus.Desc
	// shared is collected only from a Cache with a second level.
	shared *prometheus.Desc
}

func newDescs(prefix string) descs {
	return descs{
		lookups: prometheus.NewDesc(prefix+"_lookups_total",
			"Cache lookups, by result (hit: fresh value in memory; miss: waited for a load; stale: loads failing, last good value served; shared: fresh value from the second level shared with other processes).",
			[]string{"result"}, nil),
		loads: prometheus.NewDesc(prefix+"_loads_total",
			"Loads of values into the cache, by outcome (as the loader labels it; panic for a load that panicked).", []string{"outcome"}, nil),
		evictions: prometheus.NewDesc(prefix+"_evictions_total",
			"Entries evicted from the cache to stay within its memory budget.", nil, nil),
		bytes:  prometheus.NewDesc(prefix+"_bytes", "Memory charged to the cache.", nil, nil),
		budget: prometheus.NewDesc(prefix+"_budget_bytes", "The cache's memory budget.", nil, nil),
		shared: prometheus.NewDesc(prefix+"_shared_total",
			"Refreshes of values missing from memory through the second level shared with other processes, by how they ended (hit: fresh entry found; loaded: loaded under this process's claim; waited: took the entry another process loaded; takeover: loaded after another's claim ended without an entry; timeout: waited longer than a claim lasts, loaded without one; unavailable: the store failed, worked alone).",
			[]string{"result"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Cache[V]) Describe(ch chan<- *prometheus.Desc) {
	d := c.descs
	for _, desc := range []*prometheus.Desc{d.lookups, d.loads, d.evictions, d.bytes, d.budget} {
		ch <- desc
	}
	if c.second != nil {
		ch <- d.shared
	}
}

// Collect implements prometheus.Collector. It reads Stats at scrape time, so
// the cache keeps one set of counters.
func (c *Cache[V]) Collect(ch chan<- prometheus.Metric) {
	d, s := c.descs, c.Stats()
	ch <- prometheus.MustNewConstMetric(d.lookups, prometheus.CounterValue, float64(s.Hits), "hit")
	ch <- prometheus.MustNewConstMetric(d.lookups, prometheus.CounterValue, float64(s.Misses), "miss")
	ch <- prometheus.MustNewConstMetric(d.lookups, prometheus.CounterValue, float64(s.StaleServes), "stale")
	if c.second != nil {
		ch <- prometheus.MustNewConstMetric(d.lookups, prometheus.CounterValue, float64(s.SharedHits), "shared")
		for _, r := range []struct {
			result string
			n      uint64
		}{
			{"hit", s.Shared.Found},
			{"loaded", s.Shared.Loaded},
			{"waited", s.Shared.Waited},
			{"takeover", s.Shared.Takeovers},
			{"timeout", s.Shared.Timeouts},
			{"unavailable", s.Shared.Unavailable},
		} {
			ch <- prometheus.MustNewConstMetric(d.shared, prometheus.CounterValue, float64(r.n), r.result)
		}
	}
	for outcome, n := range s.Loads {
		ch <- prometheus.MustNewConstMetric(d.loads, prometheus.CounterValue, float64(n), outcome)
	}
	ch <- prometheus.MustNewConstMetric(d.evictions, prometheus.CounterValue, float64(s.Evictions))
	ch <- prometheus.MustNewConstMetric(d.bytes, prometheus.GaugeValue, float64(s.CostBytes))
	ch <- prometheus.MustNewConstMetric(d.budget, prometheus.GaugeValue, float64(s.MaxBytes))
}
