package integration

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPaceShare: a client that names itself anew on every request, at an
// origin that asks for a Crawl-delay, fills its own share of the schedule
// table and no more; another client is paced as usual.
//
// The hostile client, from 127.0.0.2, sends one request under each of 1000
// product tokens to an origin with "Crawl-delay: 60": each token is a
// crawler of its own (RFC 9309), so each gets a schedule until the client
// holds its share, 64 with ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT=64 (one in
// each sixty-fourth of the table, which 1000 names fill but for a chance
// of about 10⁻⁵). Past it, its new tokens are answered 429 full, naming
// the client's share. The healthy client, from 127.0.0.3, then gets 200,
// and 429 too early for its second request, as Crawl-delay: 60 asks.
func TestPaceShare(t *testing.T) {
	t.Parallel()
	const (
		share    = 64
		rotating = 1000
		interval = 60 * time.Second
	)
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: *\nCrawl-delay: 60\n")})
	p := startProxy(t, "ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT=64")
	hostile, healthy := p.clientFrom(t, "127.0.0.2"), p.clientFrom(t, "127.0.0.3")

	start := time.Now()
	held, full := 0, 0
	var fullURL string
	for i := range rotating {
		token := "Rotor" + letters(i) // a header that is one token is that token
		u := o.base() + "/page/" + token
		r := get(t, hostile, u, token)
		decision := r.header.Get("X-Robotsgate-Decision")
		switch r.status {
		case http.StatusOK:
			held++
		case http.StatusTooManyRequests:
			full++
			fullURL = u
			want := `full; token="` + token + `"; max-schedules-per-client=64; retry-after=1`
			if decision != want || r.header.Get("Retry-After") != "1" ||
				!strings.Contains(string(r.body), "ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT=64") {
				t.Fatalf("%s as %s: decision %q, Retry-After %q, body %q; want %q, 1 and the setting named",
					u, token, decision, r.header.Get("Retry-After"), r.body, want)
			}
		default:
			t.Fatalf("%s as %s: status %d, decision %q; want 200 or 429 full", u, token, r.status, decision)
		}
	}
	if took := time.Since(start); took >= interval {
		t.Fatalf("%d requests took %v, longer than the delay: schedules ran out meanwhile; the machine is too slow for this test", rotating, took)
	}
	if held != share || full != rotating-share {
		t.Errorf("hostile client: %d answered 200, %d full; want its share, %d, and the other %d", held, full, share, rotating-share)
	}
	if n := o.count("/page/" + "Rotor" + letters(0)); n != 1 {
		t.Errorf("the hostile client's first page reached the origin %d times, want 1", n)
	}
	forwarded := 0
	for _, a := range o.arrived() {
		if strings.HasPrefix(a.path, "/page/") {
			forwarded++
		}
	}
	if forwarded != held {
		t.Errorf("the origin received %d of the hostile client's pages, want the %d answered 200", forwarded, held)
	}

	// The healthy client's identity is new too: it finds room.
	page := o.base() + "/public"
	first := get(t, healthy, page, crawlerUA)
	if first.status != http.StatusOK {
		t.Fatalf("healthy client's first request: status %d, decision %q, body %q; want 200",
			first.status, first.header.Get("X-Robotsgate-Decision"), first.body)
	}
	second := get(t, healthy, page, crawlerUA)
	if second.status != http.StatusTooManyRequests || !strings.HasPrefix(second.header.Get("X-Robotsgate-Decision"), "too-early;") {
		t.Fatalf("healthy client's second request: status %d, decision %q; want 429 too-early",
			second.status, second.header.Get("X-Robotsgate-Decision"))
	}
	if n := metricValue(t, p, "robotsgate_pace_client_share_full_total"); n != float64(full) {
		t.Errorf("robotsgate_pace_client_share_full_total %v, want %d", n, full)
	}
	if n := metricValue(t, p, "robotsgate_pace_schedules_full_total"); n != 0 {
		t.Errorf("robotsgate_pace_schedules_full_total %v, want 0: the table is not full", n)
	}

	if code := p.stop(); code != 0 {
		t.Fatalf("robotsgate exited %d", code)
	}
	recs := p.audit()
	if full > 0 {
		rec := auditFor(t, recs, fullURL)
		if rec.Pace != "full" || rec.Status != http.StatusTooManyRequests || rec.Forwarded ||
			!strings.Contains(rec.Error, "this client holds its share") || !strings.HasPrefix(rec.raw["client"].(string), "127.0.0.2:") {
			t.Errorf("record of a full answer: %+v; want pace full, 429, not forwarded, the client's share named, from 127.0.0.2", rec)
		}
	}
	var healthyRecs []string
	for _, rec := range recs {
		if rec.URL == page {
			healthyRecs = append(healthyRecs, fmt.Sprintf("%d %q", rec.Status, rec.Pace))
		}
	}
	if want := []string{`200 ""`, `429 "too_early"`}; !slices.Equal(healthyRecs, want) {
		t.Errorf("healthy client's records: %q, want %q", healthyRecs, want)
	}
}

// letters writes i in base 26 with the letters a to z: a product token
// holds no digits.
func letters(i int) string {
	var b []byte
	for {
		b = append(b, byte('a'+i%26))
		i /= 26
		if i == 0 {
			return string(b)
		}
	}
}
