package proxy

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"robotsgate/cache"
	"robotsgate/proxy/audit"
	"robotsgate/proxy/mitm"
)

// Metrics are the proxy's Prometheus metrics, served at /metrics.
type Metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	bytes    prometheus.Counter
}

// MetricSources are read at every scrape; either may be nil.
type MetricSources struct {
	Cache  func() cache.Stats
	Issuer func() mitm.IssuerStats
}

// NewMetrics registers robotsgate's metrics, the Go runtime's and the
// process's in a registry of their own.
func NewMetrics(version string, src MetricSources) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "robotsgate_requests_total",
			Help: "Requests decided, by verdict (allow, disallow, error), mode and whether they were forwarded.",
		}, []string{"verdict", "mode", "forwarded"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "robotsgate_request_duration_seconds",
			Help:    "Time from a request's arrival to its last byte, by whether it was forwarded.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"forwarded"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "robotsgate_upstream_bytes_total",
			Help: "Response body bytes relayed from origins to clients.",
		}),
	}
	m.registry.MustRegister(m.requests, m.duration, m.bytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "robotsgate_build_info", Help: "Always 1; the version is a label.",
			ConstLabels: prometheus.Labels{"version": version},
		}, func() float64 { return 1 }))
	if src.Cache != nil {
		m.registry.MustRegister(newCacheCollector(src.Cache))
	}
	if src.Issuer != nil {
		m.registry.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "robotsgate_mitm_leaves_signed_total", Help: "Leaf certificates signed for intercepted hosts.",
			}, func() float64 { return float64(src.Issuer().LeavesSigned) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "robotsgate_mitm_cached_hosts", Help: "Hosts whose leaf certificate is cached.",
			}, func() float64 { return float64(src.Issuer().CachedHosts) }))
	}
	return m
}

// registerServer adds what the Server itself counts: client connections,
// refusals at the connection bound and the audit log's state.
func (m *Metrics) registerServer(s *Server) {
	if m == nil {
		return
	}
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "robotsgate_client_connections", Help: "Client connections open, tunnels included.",
		}, func() float64 { return float64(s.conns.open()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "robotsgate_client_connections_refused_total", Help: "Client connections refused with 503 at ROBOTSGATE_MAX_CONNECTIONS.",
		}, func() float64 { return float64(s.conns.refused.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "robotsgate_audit_log_healthy", Help: "1 while the audit log can be written, 0 while it cannot.",
		}, func() float64 {
			if s.opts.Audit.Healthy() {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "robotsgate_audit_records_dropped_total", Help: "Audit records dropped because the log could not be written for too long.",
		}, func() float64 { return float64(s.opts.Audit.Dropped()) }),
	)
}

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

func (m *Metrics) observe(rec *audit.Record) {
	if m == nil {
		return
	}
	forwarded := strconv.FormatBool(rec.Forwarded)
	m.requests.WithLabelValues(rec.Verdict, rec.Mode, forwarded).Inc()
	m.duration.WithLabelValues(forwarded).Observe(rec.Duration / 1000)
	m.bytes.Add(float64(rec.Bytes))
}

// cacheCollector turns the robots.txt cache's counters into metrics at
// scrape time, so the cache keeps one set of counters.
type cacheCollector struct {
	stats                                    func() cache.Stats
	lookups, loads, evictions, bytes, budget *prometheus.Desc
}

func newCacheCollector(stats func() cache.Stats) *cacheCollector {
	return &cacheCollector{
		stats: stats,
		lookups: prometheus.NewDesc("robotsgate_robots_cache_lookups_total",
			"robots.txt cache lookups, by result (hit, miss, stale: origin unreachable, last good copy served).", []string{"result"}, nil),
		loads: prometheus.NewDesc("robotsgate_robots_fetches_total",
			"robots.txt fetches, by outcome (ok, unavailable, unreachable).", []string{"outcome"}, nil),
		evictions: prometheus.NewDesc("robotsgate_robots_cache_evictions_total",
			"Origins evicted from the robots.txt cache to stay within its memory budget.", nil, nil),
		bytes:  prometheus.NewDesc("robotsgate_robots_cache_bytes", "Memory charged to the robots.txt cache.", nil, nil),
		budget: prometheus.NewDesc("robotsgate_robots_cache_budget_bytes", "The robots.txt cache's memory budget.", nil, nil),
	}
}

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lookups, c.loads, c.evictions, c.bytes, c.budget} {
		ch <- d
	}
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(c.lookups, prometheus.CounterValue, float64(s.Hits), "hit")
	ch <- prometheus.MustNewConstMetric(c.lookups, prometheus.CounterValue, float64(s.Misses), "miss")
	ch <- prometheus.MustNewConstMetric(c.lookups, prometheus.CounterValue, float64(s.StaleServes), "stale")
	for outcome, n := range s.Loads {
		ch <- prometheus.MustNewConstMetric(c.loads, prometheus.CounterValue, float64(n), outcome)
	}
	ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(s.Evictions))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(s.CostBytes))
	ch <- prometheus.MustNewConstMetric(c.budget, prometheus.GaugeValue, float64(s.MaxBytes))
}
