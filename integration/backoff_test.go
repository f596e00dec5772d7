package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 25, polite to the origin: an origin's 429 or 503 with Retry-After
// holds it, for every crawler, until then (capped by ROBOTSGATE_MAX_BACKOFF);
// a run of failures without one (429, 5xx but 501, no answer) doubles a
// pause from ROBOTSGATE_BACKOFF_BASE, and successes shrink it away;
// ROBOTSGATE_DELAY_FACTOR paces a crawler by the origin's response time;
// ROBOTSGATE_PACE_BY=address makes the names of one server share all this.
//
// Timing: a hold starts when the proxy has the origin's answer, which is
// after the origin began the request. So no later request may reach the
// origin before the origin's own arrival time of the failing request plus
// the hold: those lower bounds are asserted exactly, on the origin's
// timestamps. Upper bounds are asserted loosely, or not at all.

// answer is what a scripted origin answers one request with.
type answer struct {
	status     int
	retryAfter string        // the Retry-After header; "" for none
	delay      time.Duration // how long before the header is written
}

// hit is one request a scripted origin received.
type hit struct {
	path   string
	at     time.Time // when its handler began
	status int
}

// scriptOrigin is a local HTTP origin that answers robots.txt with robots
// and its k-th other request (from 0, in order of arrival) as script says,
// and records the arrival of each.
type scriptOrigin struct {
	addr   string // 127.0.0.1:port
	robots string
	script func(k int, path string) answer

	mu   sync.Mutex
	srv  *httptest.Server
	hits []hit
}

func newScriptOrigin(t *testing.T, robots string, script func(k int, path string) answer) *scriptOrigin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("origin listener: %v", err)
	}
	return startScriptOrigin(t, ln, robots, script)
}

// startScriptOrigin starts a scriptOrigin on ln.
func startScriptOrigin(t *testing.T, ln net.Listener, robots string, script func(k int, path string) answer) *scriptOrigin {
	o := &scriptOrigin{addr: ln.Addr().String(), robots: robots, script: script}
	o.serve(t, ln)
	return o
}

// serve starts serving on ln.
func (o *scriptOrigin) serve(t *testing.T, ln net.Listener) {
	srv := httptest.NewUnstartedServer(o)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	o.mu.Lock()
	o.srv = srv
	o.mu.Unlock()
}

// close stops serving and closes the listener and the connections.
func (o *scriptOrigin) close() {
	o.mu.Lock()
	srv := o.srv
	o.mu.Unlock()
	srv.Close()
}

func (o *scriptOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now() // first, so the lock does not delay it
	if r.URL.Path == "/robots.txt" {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, o.robots)
		return
	}
	o.mu.Lock()
	a := o.script(len(o.hits), r.URL.Path)
	o.hits = append(o.hits, hit{r.URL.Path, now, a.status})
	o.mu.Unlock()
	if a.delay > 0 {
		select {
		case <-time.After(a.delay):
		case <-r.Context().Done():
			return
		}
	}
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	if a.status == http.StatusOK {
		fmt.Fprintf(w, "page %s\n", r.URL.Path)
		return
	}
	http.Error(w, http.StatusText(a.status), a.status)
}

// arrivals is every request but robots.txt's the origin has received, in
// order.
func (o *scriptOrigin) arrivals() []hit {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.hits)
}

func (o *scriptOrigin) url(path string) string { return "http://" + o.addr + path }

// once answers the first request with first and every other 200.
func once(first answer) func(int, string) answer {
	return func(k int, _ string) answer {
		if k == 0 {
			return first
		}
		return answer{status: http.StatusOK}
	}
}

// noneBefore fails the test for every request from the i-th on that
// reached the origin before notBefore.
func noneBefore(t *testing.T, what string, hits []hit, i int, notBefore time.Time) {
	t.Helper()
	for _, h := range hits[min(i, len(hits)):] {
		if h.at.Before(notBefore) {
			t.Errorf("%s: %s reached the origin %v before the hold ended", what, h.path, notBefore.Sub(h.at).Round(time.Microsecond))
		}
	}
}

// heldWant is what a 429 for a hold says in X-Robotsgate-Decision.
type heldWant struct {
	verdict string // "held" or "backoff"
	status  int    // the origin's status; 0 for no answer
	failure string // for status 0: what origin-error says
	step    int    // backoff-step, for "backoff"; 0 leaves it unchecked
	group   string // group=, "" for none
}

// checkHeld asserts a 429 of a request that met a hold and returns its
// Retry-After.
func checkHeld(t *testing.T, what string, r timedReply, want heldWant) int {
	t.Helper()
	decision := r.header.Get("X-Robotsgate-Decision")
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("%s: status %d, want 429 (%s); X-Robotsgate-Decision %q, body %q", what, r.status, want.verdict, decision, r.body)
	}
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || ra < 1 {
		t.Errorf("%s: Retry-After %q, want whole seconds, at least 1", what, r.header.Get("Retry-After"))
	}
	verdict, params := parseDecision(decision)
	if verdict != want.verdict {
		t.Errorf("%s: X-Robotsgate-Decision %q does not begin with %s;", what, decision, want.verdict)
	}
	if want.status != 0 {
		if params["origin-status"] != strconv.Itoa(want.status) {
			t.Errorf("%s: X-Robotsgate-Decision %q: origin-status %q, want %d", what, decision, params["origin-status"], want.status)
		}
	} else if _, ok := params["origin-status"]; ok || !strings.Contains(params["origin-error"], want.failure) {
		t.Errorf("%s: X-Robotsgate-Decision %q: want no origin-status and origin-error saying %q", what, decision, want.failure)
	}
	if _, err := http.ParseTime(params["origin-date"]); err != nil {
		t.Errorf("%s: X-Robotsgate-Decision %q: origin-date %q is not an HTTP-date: %v", what, decision, params["origin-date"], err)
	}
	if _, err := http.ParseTime(params["hold-until"]); err != nil {
		t.Errorf("%s: X-Robotsgate-Decision %q: hold-until %q is not an HTTP-date: %v", what, decision, params["hold-until"], err)
	}
	if params["retry-after"] != strconv.Itoa(ra) {
		t.Errorf("%s: X-Robotsgate-Decision %q: retry-after %q, want Retry-After's %d", what, decision, params["retry-after"], ra)
	}
	step, hasStep := params["backoff-step"]
	switch {
	case want.verdict == "held" && hasStep:
		t.Errorf("%s: X-Robotsgate-Decision %q names a backoff step for the origin's Retry-After", what, decision)
	case want.verdict == "backoff" && want.step > 0 && step != strconv.Itoa(want.step):
		t.Errorf("%s: X-Robotsgate-Decision %q: backoff-step %q, want %d", what, decision, step, want.step)
	}
	if params["group"] != want.group {
		t.Errorf("%s: X-Robotsgate-Decision %q: group %q, want %q", what, decision, params["group"], want.group)
	}
	return ra
}

// obeyRetryAfter sends send(0), send(1), … until one is answered 200, and
// after each 429, which check asserts, sleeps its Retry-After first, as a
// polite client is told to. It gives up after tries requests.
func obeyRetryAfter(t *testing.T, what string, tries int, send func(n int) timedReply, check func(r timedReply)) timedReply {
	t.Helper()
	for n := range tries {
		r := send(n)
		switch r.status {
		case http.StatusOK:
			return r
		case http.StatusTooManyRequests:
			check(r)
			ra, err := strconv.Atoi(r.header.Get("Retry-After"))
			if err != nil || ra < 1 || ra > 10 {
				t.Fatalf("%s: Retry-After %q, want 1 to 10 seconds here", what, r.header.Get("Retry-After"))
			}
			// Waiting as told is the behaviour under test.
			time.Sleep(time.Duration(ra) * time.Second)
		default:
			t.Fatalf("%s: status %d, want 200 or 429; X-Robotsgate-Decision %q, body %q",
				what, r.status, r.header.Get("X-Robotsgate-Decision"), r.body)
		}
	}
	t.Fatalf("%s: not answered 200 after %d requests obeying Retry-After", what, tries)
	return timedReply{}
}

// holdWant is what an audit record says of the hold its request met.
type holdWant struct {
	cause   string // hold_cause: "retry-after" or "backoff"
	status  int    // hold_status; 0: the field is absent
	failure string // what hold_error says; "": the field is absent
	step    int    // backoff_step; 0 leaves it unchecked
	// hold_until - hold_at is in [hold, holdMax] (holdMax 0: exactly
	// hold; hold 0: unchecked).
	hold, holdMax time.Duration
	group         string // pace_group; "": the field is absent
}

// recordTime reads an RFC 3339 time of an audit record, and how precise
// it is written: to the second when it has no fraction.
func recordTime(t *testing.T, what, field string, rec auditRecord) (time.Time, time.Duration) {
	t.Helper()
	s, ok := rec.raw[field].(string)
	if !ok {
		t.Errorf("%s: audit %s %#v, want an RFC 3339 time", what, field, rec.raw[field])
		return time.Time{}, 0
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Errorf("%s: audit %s %q: %v", what, field, s, err)
	}
	if !strings.Contains(s, ".") {
		return at, time.Second
	}
	return at, 0
}

// checkHoldRecord asserts the hold fields of the record of a request that
// met a hold, and returns hold_at and hold_until.
func checkHoldRecord(t *testing.T, what string, rec auditRecord, want holdWant) (at, until time.Time) {
	t.Helper()
	if rec.raw["hold_cause"] != want.cause {
		t.Errorf("%s: audit hold_cause %#v, want %q", what, rec.raw["hold_cause"], want.cause)
	}
	if v, ok := rec.raw["hold_status"]; want.status == 0 && ok {
		t.Errorf("%s: audit hold_status %#v, want none: no answer came", what, v)
	} else if want.status != 0 && v != float64(want.status) {
		t.Errorf("%s: audit hold_status %#v, want %d", what, v, want.status)
	}
	if v, ok := rec.raw["hold_error"]; want.failure == "" && ok {
		t.Errorf("%s: audit hold_error %#v, want none: the origin answered", what, v)
	} else if s, _ := v.(string); want.failure != "" && !strings.Contains(s, want.failure) {
		t.Errorf("%s: audit hold_error %#v, want it to say %q", what, v, want.failure)
	}
	if v := rec.raw["backoff_step"]; want.step != 0 && v != float64(want.step) {
		t.Errorf("%s: audit backoff_step %#v, want %d", what, v, want.step)
	}
	if v, ok := rec.raw["pace_group"]; want.group == "" && ok {
		t.Errorf("%s: audit pace_group %#v, want none", what, v)
	} else if want.group != "" && v != want.group {
		t.Errorf("%s: audit pace_group %#v, want %q", what, v, want.group)
	}
	at, p1 := recordTime(t, what, "hold_at", rec)
	until, p2 := recordTime(t, what, "hold_until", rec)
	if want.hold > 0 {
		lo, hi, slack := want.hold, want.holdMax, max(p1, p2)
		if hi == 0 {
			hi = lo
		}
		if d := until.Sub(at); d < lo-slack || d > hi+slack {
			t.Errorf("%s: audit hold_until - hold_at = %v, want %v to %v", what, d, lo, hi)
		}
	}
	return at, until
}

// checkPaceField asserts a record's pace, forwarded and status.
func checkPaceField(t *testing.T, what string, rec auditRecord, status int, forwarded bool, pace string) {
	t.Helper()
	if rec.Status != status || rec.Forwarded != forwarded || rec.Pace != pace {
		t.Errorf("%s: audit status %d, forwarded %v, pace %q; want %d, %v, %q", what, rec.Status, rec.Forwarded, rec.Pace, status, forwarded, pace)
	}
}

// labelledValue reads the sample of a labelled metric whose labels
// include label (`cause="backoff"`) from p's /metrics.
func labelledValue(t *testing.T, p *proxyProcess, name, label string) float64 {
	t.Helper()
	r := get(t, directClient(t), p.url.String()+"/metrics", "test")
	for line := range strings.Lines(string(r.body)) {
		sample, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !strings.HasPrefix(sample, name+"{") || !strings.Contains(sample, label) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("/metrics: %s has the value %q", sample, value)
		}
		return v
	}
	t.Errorf("/metrics has no %s{%s}:\n%s", name, label, grepLines(r.body, name))
	return -1
}

// checkCounters asserts robotsgate_pace_holds_raised_total by cause and
// robotsgate_pace_origin_failures_total by answer.
func checkCounters(t *testing.T, p *proxyProcess, raised, failures map[string]float64) {
	t.Helper()
	for cause, want := range raised {
		if got := labelledValue(t, p, "robotsgate_pace_holds_raised_total", `cause="`+cause+`"`); got != want {
			t.Errorf(`robotsgate_pace_holds_raised_total{cause=%q} = %v, want %v`, cause, got, want)
		}
	}
	for kind, want := range failures {
		if got := labelledValue(t, p, "robotsgate_pace_origin_failures_total", `answer="`+kind+`"`); got != want {
			t.Errorf(`robotsgate_pace_origin_failures_total{answer=%q} = %v, want %v`, kind, got, want)
		}
	}
}

// firstFails sends the request the origin answers with a failure and
// returns when that request reached the origin.
func firstFails(t *testing.T, client *http.Client, o *scriptOrigin, path, userAgent string, status int) time.Time {
	t.Helper()
	r := fetch(t, client, o.url(path), userAgent, "")
	if r.status != status {
		t.Fatalf("%s: status %d, want the origin's %d passed on; X-Robotsgate-Decision %q", path, r.status, status, r.header.Get("X-Robotsgate-Decision"))
	}
	hits := o.arrivals()
	if len(hits) != 1 || hits[0].path != path {
		t.Fatalf("the origin received %+v, want %s alone", hits, path)
	}
	return hits[0].at
}

// TestHoldRetryAfter: an origin answers 503 with Retry-After: 5 once.
// For the next 5 seconds no request of any crawler reaches it: enforce
// answers 429 naming the origin's status and date, its Retry-After
// counting down; wait holds the requests until the hold ends; audit
// forwards them at once and records that they met a hold.
func TestHoldRetryAfter(t *testing.T) {
	t.Parallel()
	// Long enough for the held requests to be on their way before it ends
	// on a loaded machine.
	const hold = 5 * time.Second
	crawlers := []string{crawlerUA, gptBotUA}
	for _, mode := range []string{"enforce", "wait", "audit"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			o := newScriptOrigin(t, "User-agent: *\nDisallow: /private/\n", once(answer{status: http.StatusServiceUnavailable, retryAfter: "5"}))
			p := startProxy(t, "ROBOTSGATE_CRAWL_DELAY="+mode, "ROBOTSGATE_MAX_WAIT=20s")
			client := p.client(t)
			a0 := firstFails(t, client, o, "/first", crawlerUA, http.StatusServiceUnavailable)
			end := a0.Add(hold)
			want := holdWant{cause: "retry-after", status: http.StatusServiceUnavailable, hold: hold}

			switch mode {
			case "enforce":
				ras := make([]int, len(crawlers))
				for i, ua := range crawlers {
					r := fetch(t, client, o.url(fmt.Sprintf("/held/%d", i)), ua, "")
					ras[i] = checkHeld(t, fmt.Sprintf("crawler %d", i), r, heldWant{verdict: "held", status: http.StatusServiceUnavailable})
					if ras[i] > 5 {
						t.Errorf("crawler %d: Retry-After %d, more than the origin's 5", i, ras[i])
					}
					if body := string(r.body); !strings.Contains(body, "503") || !strings.Contains(body, "Retry-After") {
						t.Errorf("crawler %d: the 429 does not say the origin answered 503 with Retry-After:\n%s", i, body)
					}
				}
				// A disallowed path is still refused as such, hold or not.
				if r := fetch(t, client, o.url("/private/x"), crawlerUA, ""); r.status != http.StatusForbidden {
					t.Errorf("/private/x during the hold: status %d, want 403", r.status)
				}
				// A client that asks for JSON gets the hold in the record's words.
				j := fetch(t, client, o.url("/json"), crawlerUA, "application/json")
				var page map[string]any
				if err := json.Unmarshal(j.body, &page); err != nil || j.status != http.StatusTooManyRequests {
					t.Errorf("JSON 429: status %d, %v:\n%s", j.status, err, j.body)
				} else if page["pace"] != "held" || page["hold_cause"] != "retry-after" || page["hold_status"] != 503.0 ||
					page["hold_at"] == nil || page["hold_until"] == nil {
					t.Errorf("JSON 429 %s\nwant pace held, hold_cause retry-after, hold_status 503, hold_at and hold_until", j.body)
				}
				// Counting down: a second later it is a second less.
				time.Sleep(time.Second)
				if r := fetch(t, client, o.url("/countdown"), crawlerUA, ""); r.status == http.StatusTooManyRequests {
					ra := checkHeld(t, "a second later", r, heldWant{verdict: "held", status: http.StatusServiceUnavailable})
					if ra > ras[0]-1 {
						t.Errorf("a second after Retry-After: %d, Retry-After: %d; want it counting down", ras[0], ra)
					}
				}
				for i, ua := range crawlers {
					obeyRetryAfter(t, fmt.Sprintf("crawler %d", i), 5, func(n int) timedReply {
						return fetch(t, client, o.url(fmt.Sprintf("/after/%d/%d", i, n)), ua, "")
					}, func(r timedReply) {
						checkHeld(t, fmt.Sprintf("crawler %d", i), r, heldWant{verdict: "held", status: http.StatusServiceUnavailable})
					})
				}
				checkCounters(t, p, map[string]float64{"retry-after": 1, "backoff": 0}, map[string]float64{"503": 1, "5xx": 0})

			case "wait":
				type result struct {
					r   timedReply
					err error
				}
				done := make(chan result, len(crawlers))
				for i, ua := range crawlers {
					go func() {
						r, err := tryFetch(context.Background(), client, o.url(fmt.Sprintf("/held/%d", i)), ua, "")
						done <- result{r, err}
					}()
				}
				waitForHeld(t, p, len(crawlers))
				for range crawlers {
					res := <-done
					if res.err != nil {
						t.Fatal(res.err)
					}
					if res.r.status != http.StatusOK {
						t.Errorf("a request held in wait mode: status %d, want 200; X-Robotsgate-Decision %q", res.r.status, res.r.header.Get("X-Robotsgate-Decision"))
					}
				}

			case "audit":
				for i, ua := range crawlers {
					r := fetch(t, client, o.url(fmt.Sprintf("/held/%d", i)), ua, "")
					decision := r.header.Get("X-Robotsgate-Decision")
					verdict, params := parseDecision(decision)
					if r.status != http.StatusOK || string(r.body) != fmt.Sprintf("page /held/%d\n", i) {
						t.Errorf("crawler %d in audit mode: status %d, body %q; want the origin's page", i, r.status, r.body)
					}
					if verdict != "held" || params["origin-status"] != "503" || params["origin-date"] == "" || !strings.HasSuffix(decision, "mode=audit") {
						t.Errorf("crawler %d in audit mode: X-Robotsgate-Decision %q, want held; … origin-status=503; origin-date=…; … mode=audit", i, decision)
					}
				}
			}

			hits := o.arrivals()
			if mode != "audit" {
				noneBefore(t, mode, hits, 1, end)
			}
			recs := stopAndAudit(t, p)
			checkPaceField(t, "/first", auditFor(t, recs, o.url("/first")), http.StatusServiceUnavailable, true, "")
			for i := range crawlers {
				what := fmt.Sprintf("crawler %d", i)
				rec := auditFor(t, recs, o.url(fmt.Sprintf("/held/%d", i)))
				switch mode {
				case "enforce":
					checkPaceField(t, what, rec, http.StatusTooManyRequests, false, "held")
					if rec.Verdict != "allow" {
						t.Errorf("%s: audit verdict %q, want allow: robots.txt allows the path", what, rec.Verdict)
					}
				case "wait":
					checkPaceField(t, what, rec, http.StatusOK, true, "waited")
					if rec.WaitedMS <= 0 {
						t.Errorf("%s: audit waited_ms %v, want the time it was held", what, rec.WaitedMS)
					}
				case "audit":
					checkPaceField(t, what, rec, http.StatusOK, true, "held")
					if _, ok := rec.raw["waited_ms"]; ok {
						t.Errorf("%s: audit waited_ms %v in audit mode, want none: forwarded at once", what, rec.raw["waited_ms"])
					}
				}
				at, _ := checkHoldRecord(t, what, rec, want)
				// hold_at is when the proxy had the 503: after the origin began it.
				if at.Before(a0.Truncate(time.Second)) || at.After(a0.Add(2*time.Second)) {
					t.Errorf("%s: audit hold_at %v, want when the origin answered, at %v", what, at, a0)
				}
			}
		})
	}
}

// TestHoldRetryAfterDate: a 429 with an HTTP-date holds the origin until
// that date, which is whole seconds: at most 4s away here, at least 3s.
func TestHoldRetryAfterDate(t *testing.T) {
	t.Parallel()
	dates := make(chan time.Time, 1)
	o := newScriptOrigin(t, "User-agent: *\n", func(k int, _ string) answer {
		if k > 0 {
			return answer{status: http.StatusOK}
		}
		date := time.Now().Add(4 * time.Second).UTC().Truncate(time.Second)
		dates <- date
		return answer{status: http.StatusTooManyRequests, retryAfter: date.Format(http.TimeFormat)}
	})
	p := startProxy(t)
	client := p.client(t)
	firstFails(t, client, o, "/first", crawlerUA, http.StatusTooManyRequests)
	date := <-dates

	r := fetch(t, client, o.url("/held"), gptBotUA, "")
	if ra := checkHeld(t, "during the hold", r, heldWant{verdict: "held", status: http.StatusTooManyRequests}); ra > 4 {
		t.Errorf("Retry-After %d, more than the 4s to the origin's date", ra)
	}
	obeyRetryAfter(t, "after the date", 6, func(n int) timedReply {
		return fetch(t, client, o.url(fmt.Sprintf("/after/%d", n)), crawlerUA, "")
	}, func(r timedReply) {
		checkHeld(t, "before the date", r, heldWant{verdict: "held", status: http.StatusTooManyRequests})
	})
	noneBefore(t, "Retry-After: "+date.Format(http.TimeFormat), o.arrivals(), 1, date)

	recs := stopAndAudit(t, p)
	rec := auditFor(t, recs, o.url("/held"))
	checkPaceField(t, "/held", rec, http.StatusTooManyRequests, false, "held")
	_, until := checkHoldRecord(t, "/held", rec, holdWant{cause: "retry-after", status: http.StatusTooManyRequests})
	if until.Before(date.Add(-time.Millisecond)) || !until.Before(date.Add(time.Second)) {
		t.Errorf("audit hold_until %v, want the origin's date %v", until, date)
	}
}

// backoffPause is the pause after the n-th failure in a row, from base
// doubling to limit.
func backoffPause(n int, base, limit time.Duration) time.Duration {
	d := base
	for range n - 1 {
		d = min(2*d, limit)
	}
	return min(d, limit)
}

// TestBackoffGrowsAndRecovers: a run of 500s without Retry-After holds
// the origin for a pause that doubles from ROBOTSGATE_BACKOFF_BASE to
// ROBOTSGATE_MAX_BACKOFF; once the origin answers 200 again, successes
// halve it until it is gone, and the next failure starts from the base.
func TestBackoffGrowsAndRecovers(t *testing.T) {
	t.Parallel()
	// A base long enough for the crawler's next request to reach the proxy
	// within the pause on a loaded machine.
	const base, limit = 500 * time.Millisecond, 2 * time.Second
	env := []string{"ROBOTSGATE_BACKOFF_BASE=500ms", "ROBOTSGATE_MAX_BACKOFF=2s"}
	pauseOf := func(n int) (lo, hi time.Duration) {
		lo = backoffPause(n, base, limit)
		return lo, lo + lo/4 // up to a quarter more, at random
	}

	t.Run("wait", func(t *testing.T) {
		t.Parallel()
		// 4 failures, 4 successes, a failure, successes.
		script := func(k int, _ string) answer {
			if k < 4 || k == 8 {
				return answer{status: http.StatusInternalServerError}
			}
			return answer{status: http.StatusOK}
		}
		o := newScriptOrigin(t, "User-agent: *\n", script)
		p := startProxy(t, append(env, "ROBOTSGATE_CRAWL_DELAY=wait", "ROBOTSGATE_MAX_WAIT=20s")...)
		client := p.client(t)
		const requests = 11
		for i := range requests {
			r := fetch(t, client, o.url(fmt.Sprintf("/b/%d", i)), crawlerUA, "")
			if want := script(i, "").status; r.status != want {
				t.Fatalf("/b/%d: status %d, want the origin's %d; X-Robotsgate-Decision %q", i, r.status, want, r.header.Get("X-Robotsgate-Decision"))
			}
		}
		hits := o.arrivals()
		if len(hits) != requests {
			t.Fatalf("the origin received %d requests, want %d", len(hits), requests)
		}
		// The run: the gap after the n-th failure is its pause at least.
		for i, n := range map[int]int{0: 1, 1: 2, 2: 3, 3: 4, 8: 1} {
			lo, hi := pauseOf(n)
			gap := hits[i+1].at.Sub(hits[i].at)
			if gap < lo {
				t.Errorf("%s reached the origin %v after failure %d in a row (%s), want at least the pause, %v",
					hits[i+1].path, gap, n, hits[i].path, lo)
			}
			if gap > hi+3*time.Second {
				t.Errorf("%s reached the origin %v after failure %d in a row, want about its pause, %v to %v", hits[i+1].path, gap, n, lo, hi)
			}
		}
		checkCounters(t, p, map[string]float64{"backoff": 5, "retry-after": 0}, map[string]float64{"5xx": 5})

		recs := stopAndAudit(t, p)
		for i := range requests {
			what := fmt.Sprintf("/b/%d", i)
			rec := auditFor(t, recs, o.url(what))
			n := map[int]int{1: 1, 2: 2, 3: 3, 4: 4, 9: 1}[i] // the hold request i waited out
			if n == 0 || n < 3 && rec.Pace == "" {
				// The first request, and those after the origin recovered,
				// went at once; so did one that reached the proxy after a
				// short pause had passed (the gaps above show it did not
				// reach the origin early). The 2s ones it must have waited.
				checkPaceRecord(t, what, rec, script(i, "").status, true, "", nil)
				continue
			}
			checkPaceField(t, what, rec, script(i, "").status, true, "waited")
			lo, hi := pauseOf(n)
			checkHoldRecord(t, what, rec, holdWant{cause: "backoff", status: http.StatusInternalServerError, step: n, hold: lo, holdMax: hi})
		}
	})

	t.Run("enforce", func(t *testing.T) {
		t.Parallel()
		o := newScriptOrigin(t, "User-agent: *\n", func(k int, _ string) answer {
			if k < 4 {
				return answer{status: http.StatusInternalServerError}
			}
			return answer{status: http.StatusOK}
		})
		p := startProxy(t, env...)
		client := p.client(t)
		// The crawler retries at once after a 500, and after a 429's
		// Retry-After.
		failures, allowed := 0, 0
		var steps []int // of the 429s, in order
		deadline := time.Now().Add(30 * time.Second)
		for i := 0; allowed < 2; i++ {
			if time.Now().After(deadline) {
				t.Fatalf("after 30s: %d failures, 429s with steps %v, %d answered 200; want 4 failures then 200s", failures, steps, allowed)
			}
			what := fmt.Sprintf("/e/%d", i)
			r := fetch(t, client, o.url(what), crawlerUA, "")
			switch r.status {
			case http.StatusInternalServerError:
				failures++
			case http.StatusTooManyRequests:
				if allowed > 0 {
					t.Fatalf("%s: 429 right after a 200, want the origin's recovery to let the crawler through at once; X-Robotsgate-Decision %q",
						what, r.header.Get("X-Robotsgate-Decision"))
				}
				// Every 500 came from a request sent after the previous
				// raise: each one is a step.
				ra := checkHeld(t, what, r, heldWant{verdict: "backoff", status: http.StatusInternalServerError, step: failures})
				steps = append(steps, failures)
				// Waiting as told is the behaviour under test.
				time.Sleep(time.Duration(max(1, ra)) * time.Second)
			case http.StatusOK:
				allowed++
			default:
				t.Fatalf("%s: status %d, want 500, 429 or 200", what, r.status)
			}
		}
		// A retry that reached the proxy after a pause had passed went to
		// the origin and failed instead of meeting a 429: a step may be
		// missing, but those seen go up, to the 2s pauses at least.
		rising := len(steps) >= 2 && steps[len(steps)-1] >= 3
		for i := 1; i < len(steps); i++ {
			rising = rising && steps[i] > steps[i-1]
		}
		if failures != 4 || !rising {
			t.Errorf("%d failures and 429s with backoff-step %v; want 4 failures and 429s stepping up to 3 or 4", failures, steps)
		}
		hits := o.arrivals()
		n := 0
		for i := 0; i+1 < len(hits); i++ {
			if hits[i].status != http.StatusInternalServerError {
				continue
			}
			n++
			if lo, _ := pauseOf(n); hits[i+1].at.Sub(hits[i].at) < lo {
				t.Errorf("%s reached the origin %v after failure %d in a row, want at least the pause, %v",
					hits[i+1].path, hits[i+1].at.Sub(hits[i].at), n, lo)
			}
		}

		for _, rec := range stopAndAudit(t, p) {
			switch rec.Status {
			case http.StatusTooManyRequests:
				checkPaceField(t, rec.URL, rec, http.StatusTooManyRequests, false, "backoff")
				step, _ := rec.raw["backoff_step"].(float64)
				lo, hi := pauseOf(int(step))
				checkHoldRecord(t, rec.URL, rec, holdWant{cause: "backoff", status: http.StatusInternalServerError, hold: lo, holdMax: hi})
			case http.StatusOK:
				// The origin is well again: nothing held these.
				checkPaceRecord(t, rec.URL, rec, http.StatusOK, true, "", nil)
			}
		}
	})
}

// TestBackoffConnectionRefused: an origin that refuses connections fails
// as a 500 does: the proxy backs off, and says it got no answer and why.
func TestBackoffConnectionRefused(t *testing.T) {
	t.Parallel()
	const base = 500 * time.Millisecond
	// The origin closes and listens again on its port: one no other test
	// can be given meanwhile.
	o := startScriptOrigin(t, listenReusable(t), "User-agent: *\n", func(int, string) answer { return answer{status: http.StatusOK} })
	p := startProxy(t, "ROBOTSGATE_BACKOFF_BASE=500ms")
	client := p.client(t)
	want200(t, client, o.url("/before"), crawlerUA) // robots.txt is cached from here on

	o.close()
	down := fetch(t, client, o.url("/down"), crawlerUA, "")
	if down.status < 500 {
		t.Fatalf("/down with the origin closed: status %d, want a 5xx from the proxy", down.status)
	}
	r := fetch(t, client, o.url("/held"), gptBotUA, "")
	checkHeld(t, "/held", r, heldWant{verdict: "backoff", failure: "connection refused", step: 1})

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		t.Fatalf("listening on %s again: %v", o.addr, err)
	}
	o.serve(t, ln)
	obeyRetryAfter(t, "after the pause", 5, func(n int) timedReply {
		return fetch(t, client, o.url(fmt.Sprintf("/after/%d", n)), crawlerUA, "")
	}, func(r timedReply) {
		checkHeld(t, "before the pause ended", r, heldWant{verdict: "backoff", failure: "connection refused", step: 1})
	})
	// The refusal came after /down was sent.
	noneBefore(t, "after a refused connection", o.arrivals(), 1, down.sent.Add(base))
	checkCounters(t, p, map[string]float64{"backoff": 1, "retry-after": 0}, map[string]float64{"no_answer": 1, "5xx": 0})

	recs := stopAndAudit(t, p)
	rec := auditFor(t, recs, o.url("/held"))
	checkPaceField(t, "/held", rec, http.StatusTooManyRequests, false, "backoff")
	checkHoldRecord(t, "/held", rec, holdWant{cause: "backoff", failure: "connection refused", step: 1, hold: base, holdMax: base + base/4})
	if rec := auditFor(t, recs, o.url("/down")); rec.Forwarded || rec.Status != down.status {
		t.Errorf("/down: audit forwarded %v, status %d; want false, %d", rec.Forwarded, rec.Status, down.status)
	}
}

// TestDelayFactor: with ROBOTSGATE_DELAY_FACTOR=3 and an origin that takes
// 400ms to answer, a crawler's requests start at least 1.2s apart, while
// another crawler is not held by its schedule.
func TestDelayFactor(t *testing.T) {
	t.Parallel()
	const took, factor = 400 * time.Millisecond, 3
	slow := func(int, string) answer { return answer{status: http.StatusOK, delay: took} }

	t.Run("wait", func(t *testing.T) {
		t.Parallel()
		o := newScriptOrigin(t, "User-agent: *\n", slow)
		p := startProxy(t, "ROBOTSGATE_DELAY_FACTOR=3", "ROBOTSGATE_CRAWL_DELAY=wait", "ROBOTSGATE_MAX_WAIT=20s")
		client := p.client(t)
		want200(t, client, o.url("/a/1"), crawlerUA)
		second := make(chan error, 1)
		go func() {
			r, err := tryFetch(context.Background(), client, o.url("/a/2"), crawlerUA, "")
			if err == nil && r.status != http.StatusOK {
				err = fmt.Errorf("/a/2: status %d, want 200", r.status)
			}
			second <- err
		}()
		waitForHeld(t, p, 1)
		// Another crawler while the first is held for its slot.
		want200(t, client, o.url("/b/1"), gptBotUA)
		if err := <-second; err != nil {
			t.Fatal(err)
		}
		want200(t, client, o.url("/a/3"), crawlerUA)

		var a []hit
		for _, h := range o.arrivals() {
			if strings.HasPrefix(h.path, "/a/") {
				a = append(a, h)
			}
		}
		for i := 1; i < len(a); i++ {
			if gap := a[i].at.Sub(a[i-1].at); gap < factor*took-jitter {
				t.Errorf("%s reached the origin %v after %s, want at least %d × %v (less %v of jitter)", a[i].path, gap, a[i-1].path, factor, took, jitter)
			}
		}
		recs := stopAndAudit(t, p)
		for _, path := range []string{"/a/2", "/a/3"} {
			checkPaceRecord(t, path, auditFor(t, recs, o.url(path)), http.StatusOK, true, "waited", nil)
		}
		checkPaceRecord(t, "another crawler", auditFor(t, recs, o.url("/b/1")), http.StatusOK, true, "", nil)
	})

	t.Run("enforce", func(t *testing.T) {
		t.Parallel()
		o := newScriptOrigin(t, "User-agent: *\n", slow)
		p := startProxy(t, "ROBOTSGATE_DELAY_FACTOR=3")
		client := p.client(t)
		first := want200(t, client, o.url("/a/1"), crawlerUA)
		early := fetch(t, client, o.url("/a/2"), crawlerUA, "")
		mustBeEarly(t, "/a/2", early, first, factor*took)
		decision := early.header.Get("X-Robotsgate-Decision")
		verdict, params := parseDecision(decision)
		if early.status != http.StatusTooManyRequests || verdict != "too-early" || params["source"] != "delay-factor" || params["delay-factor"] != "3" {
			t.Errorf("/a/2: status %d, X-Robotsgate-Decision %q; want 429 too-early; … source=\"delay-factor\"; delay-factor=3", early.status, decision)
		}
		want200(t, client, o.url("/b/1"), gptBotUA)

		recs := stopAndAudit(t, p)
		rec := auditFor(t, recs, o.url("/a/2"))
		checkPaceField(t, "/a/2", rec, http.StatusTooManyRequests, false, "too_early")
		if rec.CrawlDelaySource != "delay-factor" {
			t.Errorf("/a/2: audit crawl_delay_source %q, want delay-factor", rec.CrawlDelaySource)
		}
		checkPaceRecord(t, "another crawler", auditFor(t, recs, o.url("/b/1")), http.StatusOK, true, "", nil)
	})
}

// TestPaceByAddress: with ROBOTSGATE_PACE_BY=address, localhost and
// 127.0.0.1 on one port are one server: a Crawl-delay schedule taken
// through one name and a hold set through it apply through the other. By
// host, the default, they are two origins.
func TestPaceByAddress(t *testing.T) {
	t.Parallel()
	const group = "address:127.0.0.1"
	for _, byAddress := range []bool{true, false} {
		name := "host"
		if byAddress {
			name = "address"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := newScriptOrigin(t, "User-agent: *\nCrawl-delay: 5\n", func(_ int, path string) answer {
				if path == "/busy" {
					return answer{status: http.StatusServiceUnavailable, retryAfter: "5"}
				}
				return answer{status: http.StatusOK}
			})
			_, port, _ := net.SplitHostPort(o.addr)
			byName, byIP := "http://localhost:"+port, "http://127.0.0.1:"+port
			var env []string
			wantGroup := ""
			if byAddress {
				env, wantGroup = []string{"ROBOTSGATE_PACE_BY=address"}, group
			}
			p := startProxy(t, env...)
			client := p.client(t)

			first := want200(t, client, byName+"/a", crawlerUA)
			// The same crawler, through the other name.
			b := fetch(t, client, byIP+"/b", crawlerUA, "")
			if byAddress {
				mustBeEarly(t, "/b", b, first, 5*time.Second)
				if verdict, _ := parseDecision(b.header.Get("X-Robotsgate-Decision")); b.status != http.StatusTooManyRequests || verdict != "too-early" {
					t.Errorf("127.0.0.1/b right after localhost/a: status %d, X-Robotsgate-Decision %q; want 429 too-early: one schedule",
						b.status, b.header.Get("X-Robotsgate-Decision"))
				}
			} else if b.status != http.StatusOK {
				t.Errorf("127.0.0.1/b right after localhost/a by host: status %d, X-Robotsgate-Decision %q; want 200: another origin",
					b.status, b.header.Get("X-Robotsgate-Decision"))
			}

			// The origin asks every crawler to hold off, through one name.
			if r := fetch(t, client, byName+"/busy", gptBotUA, ""); r.status != http.StatusServiceUnavailable {
				t.Fatalf("localhost/busy: status %d, want the origin's 503; X-Robotsgate-Decision %q", r.status, r.header.Get("X-Robotsgate-Decision"))
			}
			const third = "ThirdBot/1.0"
			c := fetch(t, client, byIP+"/c", third, "")
			if byAddress {
				checkHeld(t, "127.0.0.1/c", c, heldWant{verdict: "held", status: http.StatusServiceUnavailable, group: group})
			} else if c.status != http.StatusOK {
				t.Errorf("127.0.0.1/c after localhost's 503 by host: status %d, X-Robotsgate-Decision %q; want 200: another origin",
					c.status, c.header.Get("X-Robotsgate-Decision"))
			}
			// Through the name that set it, the hold holds either way.
			d := fetch(t, client, byName+"/d", third, "")
			checkHeld(t, "localhost/d", d, heldWant{verdict: "held", status: http.StatusServiceUnavailable, group: wantGroup})

			var reached []string
			for _, h := range o.arrivals() {
				reached = append(reached, h.path)
			}
			want := []string{"/a", "/b", "/busy", "/c"}
			if byAddress {
				want = []string{"/a", "/busy"}
			}
			if !slices.Equal(reached, want) {
				t.Errorf("the origin received %v, want %v", reached, want)
			}

			recs := stopAndAudit(t, p)
			for _, rec := range recs {
				if v, ok := rec.raw["pace_group"]; byAddress && v != group {
					t.Errorf("%s: audit pace_group %#v, want %q", rec.URL, v, group)
				} else if !byAddress && ok {
					t.Errorf("%s: audit pace_group %#v by host, want none", rec.URL, v)
				}
			}
			hold := holdWant{cause: "retry-after", status: http.StatusServiceUnavailable, hold: 5 * time.Second, group: wantGroup}
			if byAddress {
				checkPaceField(t, "127.0.0.1/b", auditFor(t, recs, byIP+"/b"), http.StatusTooManyRequests, false, "too_early")
				rec := auditFor(t, recs, byIP+"/c")
				checkPaceField(t, "127.0.0.1/c", rec, http.StatusTooManyRequests, false, "held")
				checkHoldRecord(t, "127.0.0.1/c", rec, hold)
			}
			rec := auditFor(t, recs, byName+"/d")
			checkPaceField(t, "localhost/d", rec, http.StatusTooManyRequests, false, "held")
			checkHoldRecord(t, "localhost/d", rec, hold)
		})
	}
}

// TestHoldMaxBackoff: ROBOTSGATE_MAX_BACKOFF caps what an origin asks
// (Retry-After: 86400 holds 2s with a cap of 2s, not a day), and 0 heeds
// no answer of the origin at all.
func TestHoldMaxBackoff(t *testing.T) {
	t.Parallel()
	const day = "86400"

	t.Run("capped", func(t *testing.T) {
		t.Parallel()
		const limit = 2 * time.Second
		o := newScriptOrigin(t, "User-agent: *\n", once(answer{status: http.StatusServiceUnavailable, retryAfter: day}))
		p := startProxy(t, "ROBOTSGATE_MAX_BACKOFF=2s")
		client := p.client(t)
		a0 := firstFails(t, client, o, "/first", crawlerUA, http.StatusServiceUnavailable)
		r := fetch(t, client, o.url("/held"), crawlerUA, "")
		if ra := checkHeld(t, "/held", r, heldWant{verdict: "held", status: http.StatusServiceUnavailable}); ra > 2 {
			t.Errorf("/held: Retry-After %d, want at most ROBOTSGATE_MAX_BACKOFF's 2", ra)
		}
		allowed := obeyRetryAfter(t, "after the cap", 5, func(n int) timedReply {
			return fetch(t, client, o.url(fmt.Sprintf("/after/%d", n)), crawlerUA, "")
		}, func(r timedReply) {
			checkHeld(t, "before the cap", r, heldWant{verdict: "held", status: http.StatusServiceUnavailable})
		})
		hits := o.arrivals()
		noneBefore(t, "capped at 2s", hits, 1, a0.Add(limit))
		if took := allowed.done.Sub(a0); took > 10*time.Second {
			t.Errorf("allowed again %v after the 503, want about ROBOTSGATE_MAX_BACKOFF (2s)", took)
		}
		recs := stopAndAudit(t, p)
		checkHoldRecord(t, "/held", auditFor(t, recs, o.url("/held")), holdWant{cause: "retry-after", status: http.StatusServiceUnavailable, hold: limit})
	})

	t.Run("off", func(t *testing.T) {
		t.Parallel()
		statuses := []int{http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusTooManyRequests, http.StatusOK}
		o := newScriptOrigin(t, "User-agent: *\n", func(k int, _ string) answer {
			a := answer{status: statuses[min(k, len(statuses)-1)]}
			if a.status != http.StatusOK && a.status != http.StatusInternalServerError {
				a.retryAfter = day
			}
			return a
		})
		p := startProxy(t, "ROBOTSGATE_MAX_BACKOFF=0")
		client := p.client(t)
		for i, want := range statuses {
			if r := fetch(t, client, o.url(fmt.Sprintf("/p/%d", i)), crawlerUA, ""); r.status != want {
				t.Errorf("/p/%d with ROBOTSGATE_MAX_BACKOFF=0: status %d, want the origin's %d; X-Robotsgate-Decision %q",
					i, r.status, want, r.header.Get("X-Robotsgate-Decision"))
			}
		}
		checkCounters(t, p, map[string]float64{"retry-after": 0, "backoff": 0}, nil)
		for _, rec := range stopAndAudit(t, p) {
			checkPaceRecord(t, rec.URL, rec, rec.Status, true, "", nil)
			if v, ok := rec.raw["hold_cause"]; ok {
				t.Errorf("%s: audit hold_cause %#v with ROBOTSGATE_MAX_BACKOFF=0, want none", rec.URL, v)
			}
		}
	})
}
