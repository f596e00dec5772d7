package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// policyPaceText gives three crawlers pace bounds of their own, per site,
// which no robots.txt here asks for.
const policyPaceText = `crawlers:
  - token: NarrowBot
    max_concurrency: 2      # line 3
  - token: SlowBot
    min_delay: 300ms        # line 5
  - token: PatientBot
    min_delay: 10s          # line 7
`

const (
	narrowUA  = "NarrowBot/1.0"
	slowUA    = "SlowBot/1.0"
	patientUA = "PatientBot/1.0"
	// paceRobots asks for no delay of anyone.
	paceRobots = "User-agent: *\nDisallow: /private/\n"
)

// gatedPages is a set of pages that each hold their request until the
// test lets one go, counting the requests in flight at the origin and
// the most ever in flight at once.
type gatedPages struct {
	gate             chan struct{} // one value lets one request go
	inFlight, most   atomic.Int64
	entered, settled atomic.Int64 // requests begun, and ended
}

func newGatedPages() *gatedPages { return &gatedPages{gate: make(chan struct{})} }

func (g *gatedPages) page(w http.ResponseWriter, r *http.Request) {
	g.entered.Add(1)
	n := g.inFlight.Add(1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	select {
	case <-g.gate:
	case <-r.Context().Done():
	}
	// Before the response leaves: the proxy cannot see this request end
	// and start another while it is still counted.
	g.inFlight.Add(-1)
	g.settled.Add(1)
	io.WriteString(w, "finally\n")
}

// waitFor polls cond until it holds, for at most requestTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(requestTimeout); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after %v", what, requestTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPolicyPaceWait: with ROBOTSGATE_CRAWL_DELAY=wait, a crawler's
// max_concurrency holds its requests to one site in flight at the origin
// to 2 under 8 at once, without holding another crawler's; and its
// min_delay spaces its requests' arrivals at the origin although
// robots.txt asks no delay. Held requests are recorded with the policy
// line that held them, and the report counts them as paced by policy.
func TestPolicyPaceWait(t *testing.T) {
	t.Parallel()
	polFile := writePolicy(t, "pace.yaml", policyPaceText)
	p := startProxy(t, "ROBOTSGATE_CRAWL_DELAY=wait", "ROBOTSGATE_POLICY="+polFile)
	client := p.clientFrom(t, "127.0.0.1")

	const crawl = 8
	g := newGatedPages()
	pages := map[string]http.HandlerFunc{"/robots.txt": robotsTxt(paceRobots)}
	for i := range crawl {
		pages[fmt.Sprintf("/slow/%d", i)] = g.page
	}
	narrow := newOrigin(t, false, pages)
	// Whatever fails, no handler stays blocked past the test.
	t.Cleanup(func() {
		for g.settled.Load() < g.entered.Load() {
			select {
			case g.gate <- struct{}{}:
			case <-time.After(time.Second):
				return
			}
		}
	})
	minDelay := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(paceRobots)})

	t.Run("max_concurrency", func(t *testing.T) {
		results := make(chan error, crawl)
		for i := range crawl {
			go func() {
				r, err := tryFetch(context.Background(), client, fmt.Sprintf("%s/slow/%d", narrow.base(), i), narrowUA, "")
				if err == nil && r.status != http.StatusOK {
					err = fmt.Errorf("/slow/%d: status %d, want 200; %q", i, r.status, r.header.Get("X-Robotsgate-Decision"))
				}
				results <- err
			}()
		}
		waitFor(t, "2 in flight at the origin", func() bool { return g.inFlight.Load() == 2 })
		waitForHeld(t, p, crawl-2)
		// Another crawler at the same site is not held by NarrowBot's bound.
		want200(t, client, narrow.base()+"/other", crawlerUA)
		// Let them go one at a time: each time one ends, one held takes
		// its place, never a third at once.
		for done := 1; done <= crawl; done++ {
			g.gate <- struct{}{}
			inFlight := int64(min(2, crawl-done))
			waitFor(t, fmt.Sprintf("%d begun, %d in flight", min(crawl, done+2), inFlight), func() bool {
				return g.entered.Load() == int64(min(crawl, done+2)) && g.inFlight.Load() == inFlight
			})
		}
		for range crawl {
			if err := <-results; err != nil {
				t.Error(err)
			}
		}
		if m := g.most.Load(); m != 2 {
			t.Errorf("at most %d of NarrowBot's requests were in flight at the origin at once, want 2 (its max_concurrency)", m)
		}
	})

	t.Run("min_delay", func(t *testing.T) {
		const n = 4
		results := make(chan error, n+2)
		send := func(path, ua string) {
			r, err := tryFetch(context.Background(), client, minDelay.base()+path, ua, "")
			if err == nil && r.status != http.StatusOK {
				err = fmt.Errorf("%s as %s: status %d, want 200; %q", path, ua, r.status, r.header.Get("X-Robotsgate-Decision"))
			}
			results <- err
		}
		for i := range n {
			go send(fmt.Sprintf("/slow-bot/%d", i), slowUA)
		}
		for i := range 2 {
			go send(fmt.Sprintf("/other/%d", i), crawlerUA)
		}
		for range n + 2 {
			if err := <-results; err != nil {
				t.Error(err)
			}
		}
		var slow []arrival
		for _, a := range minDelay.arrived() {
			if strings.HasPrefix(a.path, "/slow-bot/") {
				slow = append(slow, a)
			}
		}
		slices.SortFunc(slow, func(a, b arrival) int { return a.at.Compare(b.at) })
		if len(slow) != n {
			t.Fatalf("the origin received %d of SlowBot's requests, want %d", len(slow), n)
		}
		for i := 1; i < n; i++ {
			if gap := slow[i].at.Sub(slow[i-1].at); gap < 300*time.Millisecond-jitter {
				t.Errorf("%s reached the origin %v after %s, want at least SlowBot's min_delay of 300ms (less %v of jitter)",
					slow[i].path, gap.Round(time.Millisecond), slow[i-1].path, jitter)
			}
		}
	})

	recs := stopAndAudit(t, p)
	maxConc := findingWant{file: polFile, line: 3, kind: "max-concurrency"}
	floor := findingWant{file: polFile, line: 5, kind: "min-delay"}
	version := policyVersion(policyPaceText)
	var heldByConc, heldByDelay int
	for _, rec := range recs {
		switch path := strings.TrimPrefix(rec.URL, narrow.base()); {
		case rec.Pace == "" && rec.Status == http.StatusOK:
			// On time: nothing of the policy shaped it.
			checkPolicyRecord(t, rec.URL, rec, version, findingWant{})
		case strings.HasPrefix(path, "/slow/") && rec.Pace == "waited":
			heldByConc++
			checkPolicyRecord(t, rec.URL, rec, version, maxConc)
		case strings.HasPrefix(rec.URL, minDelay.base()+"/slow-bot/") && rec.Pace == "waited":
			heldByDelay++
			checkPolicyRecord(t, rec.URL, rec, version, floor)
			if rec.CrawlDelaySource != "policy" || rec.CrawlDelay != 0.3 {
				t.Errorf("%s: audit crawl_delay %v from %q, want 0.3 from policy", rec.URL, rec.CrawlDelay, rec.CrawlDelaySource)
			}
		default:
			t.Errorf("%s as %q: audit status %d, pace %q; want 200, on time or waited", rec.URL, rec.UserAgent, rec.Status, rec.Pace)
		}
	}
	if heldByConc != crawl-2 || heldByDelay != 3 {
		t.Errorf("%d requests held by max_concurrency, %d by min_delay; want %d and 3", heldByConc, heldByDelay, crawl-2)
	}
	if rep := runPolicyReport(t, p.auditLog); rep.Totals.PacedByPolicy != int64(heldByConc+heldByDelay) {
		t.Errorf("report: paced by policy %d, want %d", rep.Totals.PacedByPolicy, heldByConc+heldByDelay)
	}
}

// TestPolicyPaceEnforce: in enforce mode a crawler's request before its
// min_delay has passed is answered 429 by the policy, and one past its
// max_concurrency likewise, each naming the policy line; robots.txt asks
// nothing, and other crawlers are not refused.
func TestPolicyPaceEnforce(t *testing.T) {
	t.Parallel()
	polFile := writePolicy(t, "pace.yaml", policyPaceText)
	p := startProxy(t, "ROBOTSGATE_POLICY="+polFile)
	client := p.clientFrom(t, "127.0.0.1")
	version := policyVersion(policyPaceText)
	g := newGatedPages()
	o := newOrigin(t, false, map[string]http.HandlerFunc{
		"/robots.txt": robotsTxt(paceRobots), "/slow/1": g.page, "/slow/2": g.page,
	})
	t.Cleanup(func() {
		for g.settled.Load() < g.entered.Load() {
			select {
			case g.gate <- struct{}{}:
			case <-time.After(time.Second):
				return
			}
		}
	})

	// min_delay: 10s is far beyond the time between these two.
	want200(t, client, o.base()+"/patient/1", patientUA)
	early := fetch(t, client, o.base()+"/patient/2", patientUA, "")
	floor := findingWant{file: polFile, line: 7, kind: "min-delay"}
	if early.status != http.StatusTooManyRequests || early.header.Get("Retry-After") == "" {
		t.Fatalf("PatientBot's second request: status %d, Retry-After %q; want 429 with Retry-After", early.status, early.header.Get("Retry-After"))
	}
	checkDecisionHeader(t, "PatientBot's second request", early.reply, "too-early", floor)
	if h := early.header.Get("X-Robotsgate-Decision"); !strings.Contains(h, `source="policy"`) {
		t.Errorf(`PatientBot's second request: X-Robotsgate-Decision %q lacks source="policy"`, h)
	}
	// Another crawler is not bound by PatientBot's floor.
	want200(t, client, o.base()+"/other/1", crawlerUA)

	// max_concurrency: two in flight, the third refused.
	results := make(chan error, 2)
	for i := 1; i <= 2; i++ {
		go func() {
			r, err := tryFetch(context.Background(), client, fmt.Sprintf("%s/slow/%d", o.base(), i), narrowUA, "")
			if err == nil && r.status != http.StatusOK {
				err = fmt.Errorf("/slow/%d: status %d, want 200", i, r.status)
			}
			results <- err
		}()
	}
	waitFor(t, "2 in flight at the origin", func() bool { return g.inFlight.Load() == 2 })
	busy := fetch(t, client, o.base()+"/slow/3", narrowUA, "")
	maxConc := findingWant{file: polFile, line: 3, kind: "max-concurrency"}
	if busy.status != http.StatusTooManyRequests {
		t.Errorf("NarrowBot's third request at once: status %d, want 429", busy.status)
	}
	checkDecisionHeader(t, "NarrowBot's third request", busy.reply, "busy", maxConc)
	if h := busy.header.Get("X-Robotsgate-Decision"); !strings.Contains(h, "max-concurrency=2") {
		t.Errorf("NarrowBot's third request: X-Robotsgate-Decision %q lacks max-concurrency=2", h)
	}
	want200(t, client, o.base()+"/other/2", crawlerUA)
	g.gate <- struct{}{}
	g.gate <- struct{}{}
	for range 2 {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}

	recs := stopAndAudit(t, p)
	rec := auditFor(t, recs, o.base()+"/patient/2")
	if rec.Status != http.StatusTooManyRequests || rec.Pace != "too_early" || rec.CrawlDelaySource != "policy" {
		t.Errorf("PatientBot's second request: audit status %d, pace %q, crawl_delay_source %q; want 429, too_early, policy",
			rec.Status, rec.Pace, rec.CrawlDelaySource)
	}
	checkPolicyRecord(t, "PatientBot's second request", rec, version, floor)
	rec = auditFor(t, recs, o.base()+"/slow/3")
	if rec.Status != http.StatusTooManyRequests || rec.Pace != "busy" {
		t.Errorf("NarrowBot's third request: audit status %d, pace %q; want 429, busy", rec.Status, rec.Pace)
	}
	checkPolicyRecord(t, "NarrowBot's third request", rec, version, maxConc)
	for _, path := range []string{"/other/1", "/other/2"} {
		if rec := auditFor(t, recs, o.base()+path); rec.Status != http.StatusOK || rec.Pace != "" {
			t.Errorf("another crawler's %s: audit status %d, pace %q; want 200 on time", path, rec.Status, rec.Pace)
		}
	}
	if n := o.count("/patient/2") + o.count("/slow/3"); n != 0 {
		t.Errorf("the origin received %d of the refused requests, want 0", n)
	}
}
