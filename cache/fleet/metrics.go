package fleet

import "github.com/prometheus/client_golang/prometheus"

// op names an operation on Redis, as the metrics label it.
type op uint8

const (
	opRobotsGet op = iota
	opRobotsPut
	opRobotsClaim
	opRobotsRelease
	opPaceTake
	opPaceGiveBack
	opPaceExtend
	opHoldLoad
	opHoldStore
	opPing
	opCount
)

func (o op) String() string {
	switch o {
	case opRobotsGet:
		return "robots_get"
	case opRobotsPut:
		return "robots_put"
	case opRobotsClaim:
		return "robots_claim"
	case opRobotsRelease:
		return "robots_release"
	case opPaceTake:
		return "pace_take"
	case opPaceGiveBack:
		return "pace_give_back"
	case opPaceExtend:
		return "pace_extend"
	case opHoldLoad:
		return "hold_load"
	case opHoldStore:
		return "hold_store"
	case opPing:
		return "ping"
	}
	return "unknown"
}

// result is how an operation ended.
type result uint8

const (
	resultOK      result = iota
	resultError          // Redis failed, did not answer in time, or refused the user the operation
	resultSkipped        // refused at once while Redis was down: the caller worked alone
	resultCount
)

func (r result) String() string {
	switch r {
	case resultOK:
		return "ok"
	case resultError:
		return "error"
	case resultSkipped:
		return "skipped"
	}
	return "unknown"
}

func (c *Client) count(o op, r result) { c.ops[o][r].Add(1) }

// holdMessage is what Watch did with a message on the holds channel.
type holdMessage uint8

const (
	holdApplied holdMessage = iota
	holdIgnored             // malformed or past MaxHoldBytes: not a hold Store published
	holdMessageCount
)

func (m holdMessage) String() string {
	if m == holdApplied {
		return "applied"
	}
	return "ignored"
}

// descs describe the metrics a Client collects.
type descs struct {
	up, changes, ops, holdMessages *prometheus.Desc
}

func newDescs() descs {
	return descs{
		up: prometheus.NewDesc("robotsgate_redis_up",
			"1 while the fleet's Redis answers; 0 while this instance works alone.", nil, nil),
		changes: prometheus.NewDesc("robotsgate_redis_state_changes_total",
			"Times robotsgate_redis_up changed: Redis went down, or answered after being down.", nil, nil),
		ops: prometheus.NewDesc("robotsgate_redis_operations_total",
			"Operations on Redis, by op and result (ok; error: Redis failed, was too slow, or refused the operation to the ACL user; skipped: refused at once while Redis was down, the caller worked alone).",
			[]string{"op", "result"}, nil),
		holdMessages: prometheus.NewDesc("robotsgate_redis_hold_messages_total",
			"Hold states the fleet published that this instance's watch received, by result (applied; ignored: malformed, not one robotsgate published).",
			[]string{"result"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Client) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.descs.up
	ch <- c.descs.changes
	ch <- c.descs.ops
	ch <- c.descs.holdMessages
}

// Collect implements prometheus.Collector.
func (c *Client) Collect(ch chan<- prometheus.Metric) {
	up := 0.0
	if c.up.Load() {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.descs.up, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(c.descs.changes, prometheus.CounterValue, float64(c.changes.Load()))
	for o := range opCount {
		for r := range resultCount {
			ch <- prometheus.MustNewConstMetric(c.descs.ops, prometheus.CounterValue, float64(c.ops[o][r].Load()), o.String(), r.String())
		}
	}
	for m := range holdMessageCount {
		ch <- prometheus.MustNewConstMetric(c.descs.holdMessages, prometheus.CounterValue, float64(c.holdMessages[m].Load()), m.String())
	}
}
