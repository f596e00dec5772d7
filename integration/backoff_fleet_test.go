package integration

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestHoldFleet: two robotsgate processes on one redis-server hold an
// origin together: the 503 with Retry-After: 5 that one of them saw holds
// every crawler's requests through the other too, and no request reaches
// the origin early through either. Two processes without Redis each keep
// their own holds: that shows the measurement can fail.
func TestHoldFleet(t *testing.T) {
	t.Parallel()
	// Long enough for proxy 2 to hear of the hold and the requests to be on
	// their way before it ends, on a loaded machine.
	const hold = 5 * time.Second
	for _, shared := range []bool{true, false} {
		name := "alone"
		if shared {
			name = "shared"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := newScriptOrigin(t, "User-agent: *\n", once(answer{status: http.StatusServiceUnavailable, retryAfter: "5"}))
			var fleet []*proxyProcess
			if shared {
				fleet = startFleet(t, 2, startRedis(t).URL())
			} else {
				fleet = []*proxyProcess{startProxy(t), startProxy(t)}
			}
			clients := []*http.Client{fleet[0].client(t), fleet[1].client(t)}
			// Both have robots.txt before the origin fails.
			for _, c := range clients {
				if r, err := tryGet(c, o.url("/robots.txt"), crawlerUA); err != nil || r.status != http.StatusOK {
					t.Fatalf("robots.txt: %v, status %d", err, r.status)
				}
			}
			a0 := firstFails(t, clients[0], o, "/first", crawlerUA, http.StatusServiceUnavailable)

			if !shared {
				// The other process knows nothing of the 503.
				want200(t, clients[1], o.url("/early"), gptBotUA)
				return
			}
			// The hold reaches the other process by Redis's publication,
			// not with each request: wait until it has it. It counts two:
			// the group's, and the first client's own.
			for metricValue(t, fleet[1], "robotsgate_pace_holds") < 2 {
				if time.Since(a0) > hold {
					t.Fatalf("proxy 2 did not count the hold proxy 1 set within the hold's %v: robotsgate_pace_holds is %v",
						hold, metricValue(t, fleet[1], "robotsgate_pace_holds"))
				}
				time.Sleep(20 * time.Millisecond)
			}
			want := heldWant{verdict: "held", status: http.StatusServiceUnavailable}
			// From another client than the one whose request failed: the
			// group's hold, not that client's own, holds it.
			other := fleet[1].clientFrom(t, "127.0.0.2")
			for i, ua := range []string{crawlerUA, gptBotUA} {
				what := fmt.Sprintf("crawler %d through proxy 2", i)
				r := fetch(t, other, o.url(fmt.Sprintf("/held/%d", i)), ua, "")
				if r.status == http.StatusOK && r.done.Sub(a0) >= hold {
					t.Fatalf("%s: answered 200 %v after the 503: the machine was too slow to send it within the %v hold",
						what, r.done.Sub(a0).Round(time.Millisecond), hold)
				}
				checkHeld(t, what, r, want)
			}
			// A polite crawler alternating between the proxies.
			obeyRetryAfter(t, "through the fleet", 8, func(n int) timedReply {
				return fetch(t, clients[n%2], o.url(fmt.Sprintf("/after/%d", n)), gptBotUA, "")
			}, func(r timedReply) { checkHeld(t, "through the fleet", r, want) })
			noneBefore(t, "through either proxy", o.arrivals(), 1, a0.Add(hold))

			checkCounters(t, fleet[0], map[string]float64{"retry-after": 1}, map[string]float64{"503": 1})
			checkCounters(t, fleet[1], nil, map[string]float64{"503": 0}) // it saw no 503 itself
			fleet[0].stop()
			recs := stopAndAudit(t, fleet[1])
			for i := range 2 {
				what := fmt.Sprintf("crawler %d through proxy 2", i)
				rec := auditFor(t, recs, o.url(fmt.Sprintf("/held/%d", i)))
				checkPaceField(t, what, rec, http.StatusTooManyRequests, false, "held")
				checkHoldRecord(t, what, rec, holdWant{cause: "retry-after", status: http.StatusServiceUnavailable, hold: hold})
			}
		})
	}
}
