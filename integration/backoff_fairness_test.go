package integration

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 25, a backoff fair on a shared gate: a failure without Retry-After
// holds the client whose request failed (its credential, else its address)
// for its own pause, doubled by each of its failures, and every crawler of
// the site for the site's pause, doubled only by a failure of another
// client than the one that raised it last. So a bot that keeps asking for a
// page the site fails on slows itself ever more and the others by the
// first pause at most; a site failing for several clients backs off as one.

// Pauses of these tests: long enough for a crawler's next request to reach
// the proxy within the first one on a loaded machine.
const fairBase, fairLimit = 500 * time.Millisecond, 4 * time.Second

var fairEnv = []string{"ROBOTSGATE_BACKOFF_BASE=500ms", "ROBOTSGATE_MAX_BACKOFF=4s"}

// fairPause is the pause after the n-th failure in a row: lo, and hi with
// the quarter at random, within the cap.
func fairPause(n int) (lo, hi time.Duration) {
	lo = backoffPause(n, fairBase, fairLimit)
	return lo, min(lo+lo/4, fairLimit)
}

// failsOn answers 500 to the paths with prefix, 200 to the others.
func failsOn(prefix string) func(int, string) answer {
	return func(_ int, path string) answer {
		if strings.HasPrefix(path, prefix) {
			return answer{status: http.StatusInternalServerError}
		}
		return answer{status: http.StatusOK}
	}
}

// clientAs is an HTTP client of p that presents c in Proxy-Authorization.
func clientAs(t *testing.T, p *proxyProcess, c credential) *http.Client {
	u := *p.url
	u.User = url.UserPassword(c.name, c.password)
	return newClient(t, &http.Transport{Proxy: http.ProxyURL(&u)})
}

// arrivalOf is the origin's hit of path, which it received once.
func arrivalOf(t *testing.T, o *scriptOrigin, path string) hit {
	t.Helper()
	var found []hit
	for _, h := range o.arrivals() {
		if h.path == path {
			found = append(found, h)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the origin received %s %d times, want once", path, len(found))
	}
	return found[0]
}

// scopeOf is the scope= of a 429's X-Robotsgate-Decision: "client" for
// the client's own pause, "" for the site's.
func scopeOf(r timedReply) string {
	_, params := parseDecision(r.header.Get("X-Robotsgate-Decision"))
	return params["scope"]
}

// sleepRetryAfter sleeps what r's Retry-After asks from when r came.
func sleepRetryAfter(r timedReply) {
	ra, _ := strconv.Atoi(r.header.Get("Retry-After"))
	// Waiting as told is the behaviour under test.
	time.Sleep(time.Until(r.done.Add(time.Duration(ra) * time.Second)))
}

// TestBackoffFairness: behind one proxy, one client's failures slow that
// client ever more and the others by the first pause at most; two clients'
// failures make the site's pause grow for everyone.
func TestBackoffFairness(t *testing.T) {
	t.Parallel()
	const failures = 4 // the 4th pause is the cap, 4s

	// Bots X and Y, with credentials, share one address, as behind a
	// gateway. X keeps asking for pages the origin fails on, obeying each
	// Retry-After; right after each failure Y asks for a good page.
	t.Run("one client fails", func(t *testing.T) {
		t.Parallel()
		x, y := newCredential("x-bot", ""), newCredential("y-bot", "")
		p := startProxy(t, append([]string{"ROBOTSGATE_CREDENTIALS_FILE=" + credentialsFile(t, x, y)}, fairEnv...)...)
		cx, cy := clientAs(t, p, x), clientAs(t, p, y)
		o := newScriptOrigin(t, "User-agent: *\n", failsOn("/x/"))

		var fails []hit              // X's, as the origin received them
		var xSteps []int             // of X's 429s, in order
		var yProbe, xHeld timedReply // Y's last ask after a failure; X's 429 after the last failure
		deadline := time.Now().Add(30 * time.Second)
		for i := 0; xHeld.status == 0; i++ {
			if time.Now().After(deadline) {
				t.Fatalf("after 30s: X failed %d times, its 429s had steps %v; want %d failures and a 429 after the last", len(fails), xSteps, failures)
			}
			what := fmt.Sprintf("/x/%d", i)
			r := fetch(t, cx, o.url(what), crawlerUA, "")
			switch r.status {
			case http.StatusInternalServerError:
				fails = append(fails, arrivalOf(t, o, what))
				if len(fails) > failures {
					t.Fatalf("X failed %d times, want %d: it got through its own pause", len(fails), failures)
				}
				// The site's pause holds Y too, at its first step however
				// often X failed.
				n := len(fails)
				yProbe = fetch(t, cy, o.url(fmt.Sprintf("/y/probe/%d", n)), crawlerUA, "")
				switch yProbe.status {
				case http.StatusTooManyRequests:
					what := fmt.Sprintf("Y after X's failure %d", n)
					if ra := checkHeld(t, what, yProbe, heldWant{verdict: "backoff", status: http.StatusInternalServerError, step: 1}); ra != 1 {
						t.Errorf("%s: Retry-After %d, want 1: the site's first pause, %v and a quarter at most", what, ra, fairBase)
					}
					if s := scopeOf(yProbe); s != "" {
						t.Errorf("%s: scope=%q in X-Robotsgate-Decision, want the site's pause: Y never failed", what, s)
					}
				case http.StatusOK:
					// It reached the proxy after the site's pause; the
					// origin's times below show it did not reach it early.
				default:
					t.Fatalf("Y after X's failure %d: status %d, want 429 or 200", n, yProbe.status)
				}
			case http.StatusTooManyRequests:
				n := len(fails)
				checkHeld(t, what, r, heldWant{verdict: "backoff", status: http.StatusInternalServerError, step: n})
				// From the second failure on, X's own pause is the longer.
				if s := scopeOf(r); n >= 2 && s != "client" {
					t.Errorf("%s after X's failure %d: scope=%q in X-Robotsgate-Decision %q, want \"client\": its own pause", what, n, s, r.header.Get("X-Robotsgate-Decision"))
				}
				xSteps = append(xSteps, n)
				if n == failures {
					xHeld = r // at the cap: enough
				} else {
					sleepRetryAfter(r)
				}
			default:
				t.Fatalf("%s: status %d, want 500 or 429; X-Robotsgate-Decision %q", what, r.status, r.header.Get("X-Robotsgate-Decision"))
			}
		}
		if ra, _ := strconv.Atoi(xHeld.header.Get("Retry-After")); ra < 4 {
			t.Errorf("X after its failure %d: Retry-After %d, want its own pause at the cap, 4", failures, ra)
		}
		// Y, obeying its Retry-After, gets through while X is held.
		if yProbe.status == http.StatusTooManyRequests {
			sleepRetryAfter(yProbe)
		}
		through := want200(t, cy, o.url("/y/through"), crawlerUA)
		last := fails[len(fails)-1].at
		if lo, _ := fairPause(failures); !through.done.Before(last.Add(lo)) {
			t.Errorf("Y got through %v after X's failure %d, want within X's own pause, %v", through.done.Sub(last), failures, lo)
		}

		// X waited out its own pause after each failure; no request of Y's
		// reached the origin within the site's first pause after one.
		for i := 1; i < len(fails); i++ {
			if lo, _ := fairPause(i); fails[i].at.Sub(fails[i-1].at) < lo {
				t.Errorf("X's %s reached the origin %v after its failure %d, want at least its own pause, %v", fails[i].path, fails[i].at.Sub(fails[i-1].at), i, lo)
			}
		}
		for _, h := range o.arrivals() {
			for _, f := range fails {
				if strings.HasPrefix(h.path, "/y/") && !h.at.Before(f.at) && h.at.Before(f.at.Add(fairBase)) {
					t.Errorf("Y's %s reached the origin %v after X's %s failed, within the site's pause, %v", h.path, h.at.Sub(f.at), f.path, fairBase)
				}
			}
		}
		checkCounters(t, p, map[string]float64{"client-backoff": failures}, map[string]float64{"5xx": failures})

		for _, rec := range stopAndAudit(t, p) {
			if rec.Status != http.StatusTooManyRequests {
				continue
			}
			checkPaceField(t, rec.URL, rec, http.StatusTooManyRequests, false, "backoff")
			switch {
			case strings.Contains(rec.URL, "/y/"):
				lo, hi := fairPause(1)
				checkHoldRecord(t, rec.URL, rec, holdWant{cause: "backoff", status: http.StatusInternalServerError, step: 1, hold: lo, holdMax: hi})
				if rec.Credential != y.name {
					t.Errorf("%s: audit credential %q, want %q", rec.URL, rec.Credential, y.name)
				}
			default:
				step, _ := rec.raw["backoff_step"].(float64)
				lo, hi := fairPause(int(step))
				checkHoldRecord(t, rec.URL, rec, holdWant{cause: "backoff", status: http.StatusInternalServerError, hold: lo, holdMax: hi})
				if rec.Credential != x.name {
					t.Errorf("%s: audit credential %q, want %q", rec.URL, rec.Credential, x.name)
				}
			}
		}
	})

	// Clients from two addresses take turns failing, each obeying
	// Retry-After; a third, Z, asks for a good page right after the later
	// failures.
	t.Run("two clients fail", func(t *testing.T) {
		t.Parallel()
		p := startProxy(t, fairEnv...)
		failing := []*http.Client{p.clientFrom(t, "127.0.0.2"), p.clientFrom(t, "127.0.0.3")}
		z := p.clientFrom(t, "127.0.0.4")
		o := newScriptOrigin(t, "User-agent: *\n", failsOn("/bad/"))

		var fails []hit
		var steps []int // of the failing clients' 429s, in order
		deadline := time.Now().Add(30 * time.Second)
		for i := 0; len(fails) < failures; i++ {
			if time.Now().After(deadline) {
				t.Fatalf("after 30s: %d failures, 429s with steps %v; want %d failures", len(fails), steps, failures)
			}
			n := len(fails)
			what := fmt.Sprintf("/bad/%d", i)
			r := fetch(t, failing[n%2], o.url(what), crawlerUA, "") // the client that did not fail last
			switch r.status {
			case http.StatusInternalServerError:
				f := arrivalOf(t, o, what)
				fails = append(fails, f)
				if n+1 < 3 {
					continue
				}
				// Pauses of 2s and 4s: Z, which never failed, meets them.
				probe := fmt.Sprintf("Z after failure %d", n+1)
				zr := fetch(t, z, o.url(fmt.Sprintf("/z/%d", n+1)), crawlerUA, "")
				lo, _ := fairPause(n + 1)
				if zr.status == http.StatusOK && zr.sent.Sub(f.at) >= lo {
					t.Fatalf("%s: sent %v after it, too late to meet the site's pause of %v: the machine is too slow for this test", probe, zr.sent.Sub(f.at), lo)
				}
				if ra := checkHeld(t, probe, zr, heldWant{verdict: "backoff", status: http.StatusInternalServerError, step: n + 1}); ra < int(lo/time.Second) {
					t.Errorf("%s: Retry-After %d, want the site's pause, %v", probe, ra, lo)
				}
				if s := scopeOf(zr); s != "" {
					t.Errorf("%s: scope=%q in X-Robotsgate-Decision, want the site's pause", probe, s)
				}
			case http.StatusTooManyRequests:
				checkHeld(t, what, r, heldWant{verdict: "backoff", status: http.StatusInternalServerError, step: n})
				if s := scopeOf(r); s != "" {
					t.Errorf("%s: scope=%q in X-Robotsgate-Decision, want the site's pause: this client's own is over", what, s)
				}
				steps = append(steps, n)
				sleepRetryAfter(r)
			default:
				t.Fatalf("%s: status %d, want 500 or 429; X-Robotsgate-Decision %q", what, r.status, r.header.Get("X-Robotsgate-Decision"))
			}
		}
		// A client that came back after the pause had passed failed at
		// once: a step may be missing, but those seen go up.
		rising := len(steps) >= 2 && steps[len(steps)-1] >= 3
		for i := 1; i < len(steps); i++ {
			rising = rising && steps[i] > steps[i-1]
		}
		if !rising {
			t.Errorf("429s with backoff-step %v, want them stepping up to 3", steps)
		}
		// Each failure held the other client for the site's pause, doubled.
		for i := 1; i < len(fails); i++ {
			if lo, _ := fairPause(i); fails[i].at.Sub(fails[i-1].at) < lo {
				t.Errorf("%s reached the origin %v after failure %d, want at least the site's pause, %v", fails[i].path, fails[i].at.Sub(fails[i-1].at), i, lo)
			}
		}
		for _, h := range o.arrivals() {
			if strings.HasPrefix(h.path, "/z/") {
				t.Errorf("Z's %s reached the origin, want it held", h.path)
			}
		}
		checkCounters(t, p, map[string]float64{"backoff": failures}, map[string]float64{"5xx": failures})

		for _, rec := range stopAndAudit(t, p) {
			if rec.Status != http.StatusTooManyRequests {
				continue
			}
			checkPaceField(t, rec.URL, rec, http.StatusTooManyRequests, false, "backoff")
			step, _ := rec.raw["backoff_step"].(float64)
			lo, hi := fairPause(int(step))
			checkHoldRecord(t, rec.URL, rec, holdWant{cause: "backoff", status: http.StatusInternalServerError, hold: lo, holdMax: hi})
			if want := strings.TrimPrefix(rec.URL, o.url("/z/")); want != rec.URL && want != strconv.Itoa(int(step)) {
				t.Errorf("%s: audit backoff_step %v, want %s: the site's pause after as many failures of two clients", rec.URL, step, want)
			}
		}
	})
}
