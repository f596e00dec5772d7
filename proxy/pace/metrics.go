package pace

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector metrics: schedules kept, requests held, identities turned away.
var (
	schedulesDesc = prometheus.NewDesc("robotsgate_pace_schedules",
		"Crawl-delay schedules kept, one per (origin, identity) held back now; about "+fmt.Sprint(ScheduleBytes)+" bytes each.", nil, nil)
	waitingDesc = prometheus.NewDesc("robotsgate_pace_waiting",
		"Requests held now for their slot or for a connection (ROBOTSGATE_CRAWL_DELAY=wait).", nil, nil)
	fullDesc = prometheus.NewDesc("robotsgate_pace_schedules_full_total",
		"Requests of a new identity that found the schedule table full.", nil, nil)
	shareFullDesc = prometheus.NewDesc("robotsgate_pace_client_share_full_total",
		"Requests of a new identity whose client holds its share of the schedule table (ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT).", nil, nil)
	sharedTakesDesc = prometheus.NewDesc("robotsgate_pace_shared_takes_total",
		"Requests paced by the schedules the fleet shares.", nil, nil)
	fallbacksDesc = prometheus.NewDesc("robotsgate_pace_shared_fallbacks_total",
		"Requests paced by this instance alone because the schedules the fleet shares failed.", nil, nil)
	holdsDesc = prometheus.NewDesc("robotsgate_pace_holds",
		"Holds in force now, by an origin's Retry-After or a backoff pause: of origin groups, of origins in a group, of single clients' own backoff.", nil, nil)
	originFailuresDesc = prometheus.NewDesc("robotsgate_pace_origin_failures_total",
		"Origins' answers that count toward a backoff: 429, 503, other 5xx (not 501), or no answer.", []string{"answer"}, nil)
	holdsRaisedDesc = prometheus.NewDesc("robotsgate_pace_holds_raised_total",
		"Times a hold was set or moved later: every crawler's, by the origin's Retry-After (retry-after) or a backoff pause (backoff); one client's own backoff pause (client-backoff).", []string{"cause"}, nil)
	holdsDroppedDesc = prometheus.NewDesc("robotsgate_pace_holds_dropped_total",
		"Holds of new origin groups not kept because the table of holds was full.", nil, nil)
	holdFallbacksDesc = prometheus.NewDesc("robotsgate_pace_shared_hold_fallbacks_total",
		"Holds stepped by this instance alone because the holds the fleet shares failed.", nil, nil)
)

// Describe implements prometheus.Collector. The shared schedules' metrics
// are there only when the Pacer has Shared schedules.
func (p *Pacer) Describe(ch chan<- *prometheus.Desc) {
	ch <- schedulesDesc
	ch <- waitingDesc
	ch <- fullDesc
	ch <- shareFullDesc
	ch <- holdsDesc
	ch <- originFailuresDesc
	ch <- holdsRaisedDesc
	ch <- holdsDroppedDesc
	if p.opts.Shared != nil {
		ch <- sharedTakesDesc
		ch <- fallbacksDesc
	}
	if p.opts.SharedHolds != nil {
		ch <- holdFallbacksDesc
	}
}

// Collect implements prometheus.Collector.
func (p *Pacer) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(schedulesDesc, prometheus.GaugeValue, float64(p.Schedules()))
	ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(p.waiting.Load()))
	ch <- prometheus.MustNewConstMetric(fullDesc, prometheus.CounterValue, float64(p.full.Load()))
	ch <- prometheus.MustNewConstMetric(shareFullDesc, prometheus.CounterValue, float64(p.shareFull.Load()))
	ch <- prometheus.MustNewConstMetric(holdsDesc, prometheus.GaugeValue, float64(p.Holds()))
	for k := range failureKinds {
		ch <- prometheus.MustNewConstMetric(originFailuresDesc, prometheus.CounterValue, float64(p.holds.failures[k].Load()), k.String())
	}
	ch <- prometheus.MustNewConstMetric(holdsRaisedDesc, prometheus.CounterValue, float64(p.holds.raisedByAnswer.Load()), "retry-after")
	ch <- prometheus.MustNewConstMetric(holdsRaisedDesc, prometheus.CounterValue, float64(p.holds.raisedOff.Load()), "backoff")
	ch <- prometheus.MustNewConstMetric(holdsRaisedDesc, prometheus.CounterValue, float64(p.holds.raisedClient.Load()), "client-backoff")
	ch <- prometheus.MustNewConstMetric(holdsDroppedDesc, prometheus.CounterValue, float64(p.holds.dropped.Load()))
	if p.opts.SharedHolds != nil {
		ch <- prometheus.MustNewConstMetric(holdFallbacksDesc, prometheus.CounterValue, float64(p.holds.sharedFallbacks.Load()))
	}
	if p.opts.Shared != nil {
		ch <- prometheus.MustNewConstMetric(sharedTakesDesc, prometheus.CounterValue, float64(p.sharedTakes.Load()))
		ch <- prometheus.MustNewConstMetric(fallbacksDesc, prometheus.CounterValue, float64(p.fallbacks.Load()))
	}
}

var groupLookupsDesc = prometheus.NewDesc("robotsgate_pace_group_lookups_total",
	"Pace groups by address (ROBOTSGATE_PACE_BY=address) by how the address was found: hit (kept), miss (looked up), failure (a lookup that failed: the origin is its own group).", []string{"result"}, nil)

// Describe implements prometheus.Collector.
func (g *Grouper) Describe(ch chan<- *prometheus.Desc) { ch <- groupLookupsDesc }

// Collect implements prometheus.Collector.
func (g *Grouper) Collect(ch chan<- prometheus.Metric) {
	hits, misses, failures := g.Lookups()
	ch <- prometheus.MustNewConstMetric(groupLookupsDesc, prometheus.CounterValue, float64(hits), "hit")
	ch <- prometheus.MustNewConstMetric(groupLookupsDesc, prometheus.CounterValue, float64(misses), "miss")
	ch <- prometheus.MustNewConstMetric(groupLookupsDesc, prometheus.CounterValue, float64(failures), "failure")
}
