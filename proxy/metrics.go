package proxy

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"robotsgate/proxy/audit"
)

// Metrics are the proxy's Prometheus metrics, served at /metrics.
type Metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	bytes    prometheus.Counter
	paced    *prometheus.CounterVec
	// byPolicy counts the requests the operator's policy decided or
	// shaped, by kind and verdict.
	byPolicy *prometheus.CounterVec
	// byUsage counts the requests a site's usage preference refused,
	// withheld or would have, by form and what was done.
	byUsage *prometheus.CounterVec
	// signed and signingFailures count the forwarded requests signed, and
	// those refused for want of a valid key, by identity.
	signed, signingFailures *prometheus.CounterVec
	waits                   prometheus.Histogram
	// handshakeFailures counts failed handshakes with intercepted
	// clients, one counter per cause of handshakes; served only while
	// HTTPS is intercepted, as the other robotsgate_mitm_ metrics.
	handshakes        *prometheus.CounterVec
	handshakeFailures [handshakeCauses]prometheus.Counter
}

// newMetrics registers robotsgate's metrics, the Go runtime's, the
// process's, and those the proxy's dependencies collect (the rules cache,
// the leaf issuer), in a registry of their own.
func newMetrics(version string, dependencies ...prometheus.Collector) *Metrics {
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
		paced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "robotsgate_paced_requests_total",
			Help: "Requests pacing acted on, by what it did (waited, too_early, busy, full, gone) and whether they were forwarded (too_early and busy forwarded: audit).",
		}, []string{"pace", "forwarded"}),
		byPolicy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "robotsgate_policy_decisions_total",
			Help: "Requests the operator's policy (ROBOTSGATE_POLICY) decided or shaped, by kind (destination, exception, rule, min-delay, max-concurrency) and verdict.",
		}, []string{"kind", "verdict"}),
		byUsage: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "robotsgate_usage_decisions_total",
			Help: "Requests a site's usage preference refused one of the crawler's purposes for, by form (content-usage, content-signal, tdmrep, x-robots-tag) and verdict (refused before the fetch, withheld after it, recorded only).",
		}, []string{"form", "verdict"}),
		signed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "robotsgate_signed_requests_total",
			Help: "Forwarded requests signed (Web Bot Auth), by identity (user NAME: a credential user's keys from the policy; token NAME: ROBOTSGATE_SIGNING_KEY's).",
		}, []string{"identity"}),
		signingFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "robotsgate_signing_failures_total",
			Help: "Requests that had to be signed and were refused (503) because no key of their identity was valid, by identity.",
		}, []string{"identity"}),
		waits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "robotsgate_pace_wait_seconds",
			Help:    "How long ROBOTSGATE_CRAWL_DELAY=wait held requests that were then forwarded.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
		}),
	}
	m.handshakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "robotsgate_mitm_client_handshake_failures_total",
		Help: "TLS handshakes with intercepted clients that failed, by cause: untrusted_ca (the client refused robotsgate's certificate), hung_up (it closed the connection on the certificate), timeout, other.",
	}, []string{"cause"})
	for c := range handshakeCauses {
		m.handshakeFailures[c] = m.handshakes.WithLabelValues(c.String())
	}
	m.registry.MustRegister(m.requests, m.duration, m.bytes, m.paced, m.byPolicy, m.byUsage, m.signed, m.signingFailures, m.waits,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "robotsgate_build_info", Help: "Always 1; the version is a label.",
			ConstLabels: prometheus.Labels{"version": version},
		}, func() float64 { return 1 }))
	m.registry.MustRegister(dependencies...)
	return m
}

// refusedHelp describes robotsgate_client_connections_refused_total.
const refusedHelp = "Client connections refused with 503, by bound: total (ROBOTSGATE_MAX_CONNECTIONS) or per_client (ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT)."

// registerServer adds what the Server itself counts: client connections,
// refusals at the connection bounds, the audit log's state and, when it
// intercepts HTTPS, failed handshakes with clients.
func (m *Metrics) registerServer(s *Server) {
	if s.opts.Issuer != nil {
		m.registry.MustRegister(m.handshakes)
	}
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "robotsgate_client_connections", Help: "Client connections open, tunnels included.",
		}, func() float64 { return float64(s.conns.open()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "robotsgate_client_connections_refused_total", Help: refusedHelp,
			ConstLabels: prometheus.Labels{"bound": "total"},
		}, func() float64 { return float64(s.conns.refused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "robotsgate_client_connections_refused_total", Help: refusedHelp,
			ConstLabels: prometheus.Labels{"bound": "per_client"},
		}, func() float64 { return float64(s.conns.refusedShare.Load()) }),
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
	forwarded := strconv.FormatBool(rec.Forwarded)
	m.requests.WithLabelValues(rec.Verdict, rec.Mode, forwarded).Inc()
	m.duration.WithLabelValues(forwarded).Observe(rec.Duration / 1000)
	m.bytes.Add(float64(rec.Bytes))
	if rec.Policy.Kind != "" {
		m.byPolicy.WithLabelValues(rec.Policy.Kind, rec.Verdict).Inc()
	}
	if rec.Usage.Verdict != "" {
		m.byUsage.WithLabelValues(rec.Usage.Form, rec.Usage.Verdict).Inc()
	}
	if rec.Pace != "" {
		m.paced.WithLabelValues(rec.Pace, forwarded).Inc()
		if rec.Forwarded && rec.WaitedMS > 0 {
			m.waits.Observe(rec.WaitedMS / 1000)
		}
	}
}
