package fleet_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"robotsgate/cache/fleet"
	"robotsgate/cache/fleet/redistest"
	"robotsgate/proxy/pace"
)

var (
	_ pace.SharedSchedules = (*fleet.Schedules)(nil)
	_ pace.SharedHolds     = (*fleet.Holds)(nil)
	_ prometheus.Collector = (*fleet.Client)(nil)
)

// logBuffer collects a Client's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// lines returns the lines logged at level ("INFO", "WARN").
func (l *logBuffer) lines(level string) []string {
	var found []string
	for line := range strings.Lines(l.String()) {
		if strings.Contains(line, "level="+level+" ") {
			found = append(found, line)
		}
	}
	return found
}

// newClient returns a Client of srv with opts, closed when t ends, and
// what it logs.
func newClient(t testing.TB, srv *redistest.Server, opts fleet.Options) (*fleet.Client, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	if opts.URL == "" {
		opts.URL = srv.URL()
	}
	if opts.RootCAs == nil {
		opts.RootCAs = srv.CAs()
	}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := fleet.New(t.Context(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c, logs
}

// waitFor polls cond every few milliseconds until it holds or limit
// passes, and reports whether it held.
func waitFor(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// operations returns robotsgate_redis_operations_total of c by "op/result",
// gathered by a pedantic registry, which also checks the metrics are
// consistent.
func operations(t *testing.T, c *fleet.Client) map[string]float64 {
	t.Helper()
	return counters(t, c, "robotsgate_redis_operations_total", "op", "result")
}

// counters returns the counter family name of c by the values of labels,
// joined by "/", gathered by a pedantic registry, which also checks the
// metrics are consistent.
func counters(t *testing.T, c *fleet.Client, name string, labels ...string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			values := map[string]string{}
			for _, l := range m.GetLabel() {
				values[l.GetName()] = l.GetValue()
			}
			key := make([]string, len(labels))
			for i, l := range labels {
				key[i] = values[l]
			}
			got[strings.Join(key, "/")] = m.GetCounter().GetValue()
		}
	}
	return got
}
