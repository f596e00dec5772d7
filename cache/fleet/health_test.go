package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"robotsgate/cache"
	"robotsgate/cache/fleet"
	"robotsgate/cache/fleet/redistest"
)

const (
	testTimeout    = 200 * time.Millisecond
	testRetryEvery = 50 * time.Millisecond
)

// everyOp runs each kind of operation of c once, and returns their errors.
func everyOp(ctx context.Context, c *fleet.Client) map[string]error {
	const key = "https://example.com:443"
	errs := map[string]error{}
	_, _, errs["robots_get"] = c.Robots().Get(ctx, key)
	errs["robots_put"] = c.Robots().Put(ctx, key, cache.SharedEntry{Value: []byte("v")}, time.Minute)
	_, _, errs["robots_claim"] = c.Robots().Claim(ctx, key, time.Minute)
	_, _, _, errs["pace_take"] = c.Schedules().Take(ctx, key, time.Second, 0)
	errs["pace_give_back"] = c.Schedules().GiveBack(ctx, key, 1, time.Second)
	errs["pace_extend"] = c.Schedules().Extend(ctx, key, 1, time.Second)
	_, _, errs["hold_load"] = c.Holds().Load(ctx, key)
	_, errs["hold_store"] = c.Holds().Store(ctx, key, []byte("s"), 0, time.Minute)
	return errs
}

func TestRedisDiesAndComesBack(t *testing.T) {
	srv := startRedis(t)
	c, logs := newClient(t, srv, fleet.Options{Timeout: testTimeout, RetryEvery: testRetryEvery})
	if st := c.Status(); !st.Up || st.Addr != srv.Addr()+" db 0" || st.TLS || st.LastError != "" {
		t.Fatalf("Status at start = %+v; want up at %s db 0", st, srv.Addr())
	}
	for op, err := range everyOp(t.Context(), c) {
		if err != nil {
			t.Fatalf("%s while up: %v", op, err)
		}
	}

	srv.Stop()
	// Several callers find Redis gone at once: one line says so.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	began := time.Now()
	for i := range errs {
		wg.Go(func() { _, _, errs[i] = c.Robots().Get(t.Context(), "https://example.com:443") })
	}
	wg.Wait()
	// The prober may have found Redis gone just before them: it pings
	// every RetryEvery, up or down.
	probedFirst := operations(t, c)["ping/error"] > 0
	if took := time.Since(began); took > 3*testTimeout {
		t.Errorf("the first operations took %v to fail; want about the timeout, %v, at most", took, testTimeout)
	}
	for _, err := range errs {
		if err == nil {
			t.Fatal("an operation on a stopped Redis succeeded")
		}
	}
	st := c.Status()
	if st.Up || st.LastError == "" || time.Since(st.Since) > time.Minute {
		t.Fatalf("Status after a failure = %+v; want down since now, with the error", st)
	}

	for op, err := range everyOp(t.Context(), c) {
		if !errors.Is(err, fleet.ErrUnavailable) {
			t.Errorf("%s while down = %v; want ErrUnavailable", op, err)
		}
	}
	// Refused at once: far within the timeout, whatever the machine's load.
	began = time.Now()
	for range 20 {
		everyOp(t.Context(), c)
	}
	if took := time.Since(began) / 100; took > testTimeout/2 {
		t.Errorf("an operation while down took %v on average; want it refused without waiting", took)
	}
	if warns := logs.lines("WARN"); len(warns) != 1 || !strings.Contains(warns[0], "redis unreachable") {
		t.Errorf("WARN lines = %q; want one, redis unreachable", warns)
	}

	// While down, the prober keeps looking.
	if !waitFor(20*testRetryEvery, func() bool { return operations(t, c)["ping/error"] >= 2 }) {
		t.Errorf("pings while down = %v; want one every RetryEvery", operations(t, c)["ping/error"])
	}
	// What go-redis prints of the failures goes to the Logger, at Debug:
	// by now a ping has dialled a Redis that is not there.
	if debug := logs.lines("DEBUG"); len(debug) == 0 || !strings.Contains(strings.Join(debug, "\n"), "go-redis: connection pool: failed to dial") {
		t.Errorf("DEBUG lines = %q; want go-redis's own", debug)
	}
	if st := c.Status(); !strings.Contains(st.LastError, "ping") {
		t.Errorf("Status while down = %+v; want the error of the last ping", st)
	}

	srv.Start()
	if !waitFor(20*testRetryEvery+testTimeout, func() bool { return c.Status().Up }) {
		t.Fatalf("Status once Redis is back = %+v; want up within a few RetryEvery", c.Status())
	}
	infos := logs.lines("INFO")
	if len(infos) != 2 || !strings.Contains(infos[1], "redis reachable") || !strings.Contains(infos[1], "down_for=") {
		t.Errorf("INFO lines = %q; want two, the last redis reachable with down_for", infos)
	}
	for op, err := range everyOp(t.Context(), c) {
		if err != nil {
			t.Errorf("%s once Redis is back: %v", op, err)
		}
	}

	ops := operations(t, c)
	// Of the 8 Gets that found Redis gone, those that came after the first
	// failure (theirs or the prober's) were refused at once.
	if failed := ops["robots_get/error"]; (failed < 1 && !probedFirst) || failed+ops["robots_get/skipped"] != 8+21 {
		t.Errorf("robots_get error %v, skipped %v; want 29 together, 1 error at least unless a ping failed first", failed, ops["robots_get/skipped"])
	}
	for op, want := range map[string]float64{
		"robots_get/ok":        2,
		"pace_take/skipped":    21,
		"pace_take/error":      0,
		"pace_give_back/ok":    2,
		"pace_extend/ok":       2,
		"pace_extend/skipped":  21,
		"hold_load/ok":         2,
		"hold_load/skipped":    21,
		"hold_store/ok":        2,
		"hold_store/skipped":   21,
		"robots_claim/skipped": 21,
		"ping/ok":              2,
	} {
		if ops[op] != want {
			t.Errorf("operations %s = %v; want %v", op, ops[op], want)
		}
	}
	want := `
# HELP robotsgate_redis_state_changes_total Times robotsgate_redis_up changed: Redis went down, or answered after being down.
# TYPE robotsgate_redis_state_changes_total counter
robotsgate_redis_state_changes_total 2
# HELP robotsgate_redis_up 1 while the fleet's Redis answers; 0 while this instance works alone.
# TYPE robotsgate_redis_up gauge
robotsgate_redis_up 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "robotsgate_redis_up", "robotsgate_redis_state_changes_total"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestNewWhileRedisIsDown(t *testing.T) {
	srv := startRedis(t)
	srv.Stop()
	c, logs := newClient(t, srv, fleet.Options{Timeout: testTimeout, RetryEvery: testRetryEvery})
	if st := c.Status(); st.Up || st.LastError == "" {
		t.Fatalf("Status = %+v; want down, with the error", st)
	}
	if warns := logs.lines("WARN"); len(warns) != 1 || !strings.Contains(warns[0], "redis unreachable") {
		t.Errorf("WARN lines = %q; want one, redis unreachable", warns)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader("# HELP robotsgate_redis_up 1 while the fleet's Redis answers; 0 while this instance works alone.\n# TYPE robotsgate_redis_up gauge\nrobotsgate_redis_up 0\n"), "robotsgate_redis_up"); err != nil {
		t.Error(err)
	}
	if _, _, err := c.Robots().Get(t.Context(), "k"); !errors.Is(err, fleet.ErrUnavailable) {
		t.Errorf("Get = %v; want ErrUnavailable", err)
	}

	srv.Start()
	if !waitFor(20*testRetryEvery+testTimeout, func() bool { return c.Status().Up }) {
		t.Fatalf("Status = %+v; want up once Redis answers", c.Status())
	}
	// Redis was never there: it did not come back.
	if infos := logs.lines("INFO"); len(infos) != 1 || !strings.Contains(infos[0], "redis reachable: ") || strings.Contains(infos[0], "down_for") {
		t.Errorf("INFO lines = %q; want one, redis reachable, without down_for", infos)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP robotsgate_redis_state_changes_total Times robotsgate_redis_up changed: Redis went down, or answered after being down.
# TYPE robotsgate_redis_state_changes_total counter
robotsgate_redis_state_changes_total 1
`), "robotsgate_redis_state_changes_total"); err != nil {
		t.Error(err)
	}
}

func TestSlowRedisIsDown(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv, fleet.Options{Timeout: testTimeout, RetryEvery: testRetryEvery})
	// CLIENT PAUSE holds every client's commands: Redis is there, but does
	// not answer within the timeout.
	if err := srv.Raw(0).ClientPause(t.Context(), 4*testTimeout).Err(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
	began := time.Now()
	_, _, _, err := c.Schedules().Take(t.Context(), "k", time.Second, 0)
	if err == nil || errors.Is(err, fleet.ErrUnavailable) {
		t.Fatalf("Take while Redis is paused = %v; want it to time out", err)
	}
	if took := time.Since(began); took < testTimeout/2 || took > 3*testTimeout {
		t.Errorf("Take failed after %v; want about the timeout, %v", took, testTimeout)
	}
	if c.Status().Up {
		t.Error("a timeout left Redis up")
	}
	if !waitFor(4*testTimeout+20*testRetryEvery, func() bool { return c.Status().Up }) {
		t.Errorf("Status = %+v; want up once the pause ends", c.Status())
	}
}

func TestCallerGivingUpIsNotRedisFailing(t *testing.T) {
	srv := startRedis(t)
	c, logs := newClient(t, srv, fleet.Options{Timeout: testTimeout, RetryEvery: testRetryEvery})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for op, err := range everyOp(ctx, c) {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s on a cancelled context = %v; want context.Canceled", op, err)
		}
	}
	if !c.Status().Up || len(logs.lines("WARN")) != 0 {
		t.Errorf("a caller's cancellation took Redis for down: %+v\n%s", c.Status(), logs)
	}
}

func TestPasswordAndDatabase(t *testing.T) {
	const password = "p@ss w/rd%"
	srv := startRedis(t, redistest.WithPassword(password))
	c, _ := newClient(t, srv, fleet.Options{URL: srv.URL() + "/3", Prefix: "fleet-a:"})
	if st := c.Status(); !st.Up || st.Addr != srv.Addr()+" db 3" {
		t.Fatalf("Status = %+v; want up at %s db 3", st, srv.Addr())
	}
	if err := c.Robots().Put(t.Context(), "k", cache.SharedEntry{Value: []byte("v")}, time.Minute); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if n, _ := srv.Raw(3).Exists(t.Context(), "fleet-a:robots:k").Result(); n != 1 {
		t.Error("the entry is not in database 3 under the prefix")
	}
	if keys := srv.Keys(""); len(keys) != 0 {
		t.Errorf("database 0 holds %q; want nothing", keys)
	}

	// A Redis that refuses the credentials will not mend by itself: New
	// fails, unlike for a Redis that cannot be reached.
	for _, tt := range []struct {
		name, user, password, answer string
	}{
		{"wrong password", "", "wrong " + password, "WRONGPASS"},
		{"no password", "", "", "NOAUTH"},
		{"unknown user", "nobody", password, "WRONGPASS"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := url.URL{Scheme: "redis", Host: srv.Addr()}
			if tt.user != "" || tt.password != "" {
				u.User = url.UserPassword(tt.user, tt.password)
			}
			c, err := fleet.New(t.Context(), fleet.Options{URL: u.String()})
			if err == nil {
				c.Close()
				t.Fatal("New succeeded; want ErrCredentialsRefused")
			}
			if !errors.Is(err, fleet.ErrCredentialsRefused) || !strings.Contains(err.Error(), tt.answer) || !strings.Contains(err.Error(), srv.Addr()) {
				t.Errorf("New = %v; want ErrCredentialsRefused with Redis's %s and its address", err, tt.answer)
			}
			if strings.Contains(err.Error(), "w/rd") {
				t.Errorf("%q shows the password", err)
			}
		})
	}
}

// TestCredentialsRefusedLater: Redis's password changes under a running
// Client (rotated on Redis first): the Client works alone, and its Status,
// /healthz's line and one warning say that Redis refuses its credentials,
// until Redis accepts them again.
func TestCredentialsRefusedLater(t *testing.T) {
	const password = "old secret"
	srv := redistest.Start(t, redistest.WithPassword(password))
	// JSON, as robotsgate logs where no terminal reads it.
	logs := &logBuffer{}
	c, err := fleet.New(t.Context(), fleet.Options{URL: srv.URL(), Timeout: testTimeout, RetryEvery: testRetryEvery,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if !c.Status().Up {
		t.Fatalf("Status = %+v; want up", c.Status())
	}
	logged := func(msgPrefix string) []map[string]any {
		var found []map[string]any
		for line := range strings.Lines(logs.String()) {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if msg, _ := rec["msg"].(string); strings.HasPrefix(msg, msgPrefix) {
				found = append(found, rec)
			}
		}
		return found
	}
	admin := srv.Raw(0) // stays authenticated: CLIENT KILL skips it
	setPassword := func(pw string) {
		t.Helper()
		if err := admin.ConfigSet(t.Context(), "requirepass", pw).Err(); err != nil {
			t.Fatal(err)
		}
		// Connections already open stay authenticated; close them.
		if err := admin.Do(t.Context(), "CLIENT", "KILL", "TYPE", "normal").Err(); err != nil {
			t.Fatal(err)
		}
	}

	setPassword("new secret")
	if !waitFor(20*testRetryEvery+testTimeout, func() bool { return c.Status().Refused }) {
		t.Fatalf("Status after the password changed = %+v; want down, refused", c.Status())
	}
	if st := c.Status(); st.Up || !strings.Contains(st.LastError, "WRONGPASS") {
		t.Errorf("Status = %+v; want down with Redis's WRONGPASS", st)
	}
	if h := c.HealthDetail(); !strings.HasPrefix(h, "redis: unreachable since ") || !strings.Contains(h, "refuses robotsgate's credentials") ||
		!strings.Contains(h, "ROBOTSGATE_REDIS_URL") || strings.Contains(h, "secret") {
		t.Errorf("HealthDetail = %q; want unreachable, refusing the credentials of ROBOTSGATE_REDIS_URL, no password", h)
	}
	// The prober keeps being refused: said once.
	pings := operations(t, c)["ping/error"]
	if !waitFor(20*testRetryEvery, func() bool { return operations(t, c)["ping/error"] >= pings+2 }) {
		t.Fatal("the prober stopped trying")
	}
	if refusals := logged("redis refuses robotsgate's credentials"); len(refusals) != 1 || refusals[0]["level"] != "WARN" ||
		!strings.Contains(refusals[0]["msg"].(string), "ROBOTSGATE_REDIS_URL") {
		t.Errorf("warnings about the credentials: %v, want 1 naming ROBOTSGATE_REDIS_URL:\n%s", refusals, logs)
	}

	setPassword(password)
	if !waitFor(20*testRetryEvery+testTimeout, func() bool { return c.Status().Up }) {
		t.Fatalf("Status once Redis accepts the password again = %+v; want up", c.Status())
	}
	if st := c.Status(); st.Refused {
		t.Errorf("Status = %+v; want no refusal once up", st)
	}
	if h := c.HealthDetail(); !strings.HasPrefix(h, "redis: shared with the fleet since ") {
		t.Errorf("HealthDetail = %q; want shared", h)
	}
	// How long Redis was away reads as a duration, not in nanoseconds.
	back := logged("redis reachable again")
	if len(back) != 1 {
		t.Fatalf("%d lines saying Redis is back, want 1:\n%s", len(back), logs)
	}
	if s, ok := back[0]["down_for"].(string); !ok || !isDuration(s) {
		t.Errorf("down_for = %#v; want a duration such as \"1.5s\"", back[0]["down_for"])
	}
}

// isDuration reports whether s reads as a time.Duration with its unit.
func isDuration(s string) bool {
	_, err := time.ParseDuration(s)
	return err == nil && strings.IndexFunc(s, unicode.IsLetter) >= 0
}

func TestTLS(t *testing.T) {
	// A handshake, under the race detector on a busy machine, may take
	// longer than DefaultTimeout: a timeout is not what this test is about.
	const timeout = 2 * time.Second
	srv := startRedis(t, redistest.WithTLS())
	c, _ := newClient(t, srv, fleet.Options{Timeout: timeout})
	if st := c.Status(); !st.Up || !st.TLS {
		t.Fatalf("Status = %+v; want up over TLS", st)
	}
	if _, _, taken, err := c.Schedules().Take(t.Context(), "k", time.Second, 0); err != nil || !taken {
		t.Errorf("Take over TLS = %v, %v", taken, err)
	}

	// The system's roots do not know the test's CA.
	untrusted, err := fleet.New(t.Context(), fleet.Options{URL: srv.URL(), Timeout: timeout})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer untrusted.Close()
	if st := untrusted.Status(); st.Up || !strings.Contains(st.LastError, "certificate") {
		t.Errorf("Status without the CA = %+v; want down for the certificate", st)
	}
}

// TestIdleClientNoticesRedis: a Client nobody asks anything of still
// notices Redis leave and come back, and /healthz's line follows.
func TestIdleClientNoticesRedis(t *testing.T) {
	srv := startRedis(t)
	c, logs := newClient(t, srv, fleet.Options{Timeout: testTimeout, RetryEvery: testRetryEvery})
	if h := c.HealthDetail(); !strings.HasPrefix(h, "redis: shared with the fleet since ") {
		t.Fatalf("HealthDetail while up = %q", h)
	}
	waitUp := func(up bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for c.Status().Up != up {
			if time.Now().After(deadline) {
				t.Fatalf("Status().Up is not %v 5s after Redis changed; status %+v", up, c.Status())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	srv.Stop()
	waitUp(false)
	h := c.HealthDetail()
	if !strings.HasPrefix(h, "redis: unreachable since ") || !strings.Contains(h, "works alone") || strings.Contains(h, srv.Addr()) {
		t.Errorf("HealthDetail while down = %q; want unreachable, working alone, without the address", h)
	}
	srv.Start()
	waitUp(true)
	if warns := logs.lines("WARN"); len(warns) != 1 || !strings.Contains(warns[0], "redis unreachable") {
		t.Errorf("WARN lines = %q; want one, redis unreachable", warns)
	}
	if infos := logs.lines("INFO"); len(infos) != 2 || !strings.Contains(infos[1], "redis reachable again") {
		t.Errorf("INFO lines = %q; want two, the last redis reachable again", infos)
	}
}
