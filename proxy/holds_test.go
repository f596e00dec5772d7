package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"robotsgate/proxy/audit"
	"robotsgate/proxy/pace"
)

func TestRetryAfterOf(t *testing.T) {
	date := "Thu, 26 Nov 2026 11:00:00 GMT" // the answer's Date: the origin's now
	for _, c := range []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"", 0, false},
		{"3", 3 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", 0, true},
		{"99999999999999999999999", maxRetryAfterSeconds * time.Second, true},
		{"Thu, 26 Nov 2026 11:00:05 GMT", 5 * time.Second, true}, // IMF-fixdate
		{"Thursday, 26-Nov-26 11:01:00 GMT", time.Minute, true},  // RFC 850
		{"Thu Nov 26 11:00:30 2026", 30 * time.Second, true},     // asctime
		{"Thu, 26 Nov 2026 10:00:00 GMT", 0, true},               // past
		{"-5", 0, false},
		{"1.5", 0, false},
		{"3s", 0, false},
		{"tomorrow", 0, false},
		{"Thu, 26 Nov 2026 11:00:05 CET", 0, false},
	} {
		got, ok := retryAfterOf(http.Header{"Retry-After": {c.value}, "Date": {date}})
		if got != c.want || ok != c.ok {
			t.Errorf("Retry-After %q: %v, %v; want %v, %v", c.value, got, ok, c.want, c.ok)
		}
	}
	// Without a Date, robotsgate's clock.
	soon := time.Now().Add(time.Minute).UTC().Format(http.TimeFormat)
	if got, ok := retryAfterOf(http.Header{"Retry-After": {soon}}); !ok || got < 58*time.Second || got > time.Minute {
		t.Errorf("Retry-After %q without Date: %v, %v", soon, got, ok)
	}
}

// TestHeldAnswered: an origin's 503 with Retry-After holds every crawler's
// requests to it, answered 429 naming the origin's status and date, in
// plain words and in JSON; the origin sees none of them.
func TestHeldAnswered(t *testing.T) {
	o := startOrigin(t, originConfig{robots: "User-agent: *\nDisallow: /private/\n"})
	o.mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	p := startProxy(t, proxyConfig{pacer: pace.New(pace.Options{Mode: pace.ModeEnforce, MaxBackoff: time.Hour})})
	c := p.client()
	if resp, _ := do(t, c, "GET", o.URL+"/busy", ua("GPTBot/1.0")); resp.StatusCode != 503 {
		t.Fatalf("the origin's answer: %d", resp.StatusCode)
	}
	resp, body := do(t, c, "GET", o.URL+"/page", ua("bingbot/2.0"))
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("another crawler during the hold: %d %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Retry-After"); got != "30" && got != "29" {
		t.Errorf("Retry-After %q", got)
	}
	header := resp.Header.Get(decisionHeader)
	for _, want := range []string{`held; token="bingbot"; origin-status=503; origin-date="`, `; hold-until="`, `; retry-after=`} {
		if !strings.Contains(header, want) {
			t.Errorf("%s: %s\nlacks %s", decisionHeader, header, want)
		}
	}
	if strings.Contains(header, "backoff-step") {
		t.Errorf("a Retry-After hold shows a backoff step: %s", header)
	}
	for _, want := range []string{o.URL + " answered 503 Service Unavailable with Retry-After at ", "robotsgate holds every crawler's requests to it until", "ROBOTSGATE_MAX_BACKOFF"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page does not say %q:\n%s", want, body)
		}
	}
	resp, body = do(t, c, "GET", o.URL+"/json", http.Header{"User-Agent": {"GPTBot"}, "Accept": {"application/json"}})
	var page map[string]any
	if err := json.Unmarshal([]byte(body), &page); err != nil || resp.StatusCode != 429 {
		t.Fatalf("JSON: %d %v\n%s", resp.StatusCode, err, body)
	}
	if page["pace"] != "held" || page["hold_cause"] != "retry-after" || page["hold_status"] != 503.0 || page["hold_until"] == nil {
		t.Errorf("JSON: %s", body)
	}
	// robots.txt's verdict still comes first, and robots.txt itself passes.
	if resp, _ := do(t, c, "GET", o.URL+"/private/x", ua("GPTBot")); resp.StatusCode != 403 {
		t.Errorf("a disallowed path during the hold: %d", resp.StatusCode)
	}
	if o.saw("/page") || o.saw("/json") {
		t.Error("the origin saw a request during its hold")
	}
	var held []audit.Record
	for _, r := range p.records() {
		if r.Pace == "held" {
			held = append(held, r)
		}
	}
	if len(held) != 2 {
		t.Fatalf("%d records held, want 2", len(held))
	}
	for _, r := range held {
		if r.HoldCause != "retry-after" || r.HoldStatus != 503 || r.HoldError != "" || r.BackoffStep != 0 || r.Forwarded || r.Status != 429 ||
			r.HoldUntil.Sub(r.HoldAt) != 30*time.Second || r.PaceGroup != "" || r.RobotsTxt != "" {
			t.Errorf("record: %+v", r)
		}
	}
}

// TestBackoffAnswered: a failure without Retry-After holds the origin for
// the backoff's first pause, named with its step; a 501 is no failure.
func TestBackoffAnswered(t *testing.T) {
	o := startOrigin(t, originConfig{robots: "User-agent: *\nAllow: /\n"})
	o.mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	o.mux.HandleFunc("/not-implemented", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotImplemented) })
	p := startProxy(t, proxyConfig{pacer: pace.New(pace.Options{Mode: pace.ModeEnforce, MaxBackoff: time.Hour, BackoffBase: 20 * time.Second})})
	c := p.client()
	if resp, _ := do(t, c, "GET", o.URL+"/not-implemented", ua("GPTBot")); resp.StatusCode != 501 {
		t.Fatalf("501: %d", resp.StatusCode)
	}
	if resp, _ := do(t, c, "GET", o.URL+"/ok", ua("GPTBot")); resp.StatusCode != 200 {
		t.Fatalf("after a 501: %d; a 501 is no failure", resp.StatusCode)
	}
	do(t, c, "GET", o.URL+"/fail", ua("GPTBot"))
	resp, body := do(t, c, "GET", o.URL+"/ok", ua("bingbot"))
	header := resp.Header.Get(decisionHeader)
	if resp.StatusCode != 429 || !strings.HasPrefix(header, `backoff; token="bingbot"; origin-status=502; origin-date="`) || !strings.Contains(header, "; backoff-step=1; hold-until=") {
		t.Fatalf("after a 502: %d %s\n%s", resp.StatusCode, header, body)
	}
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); ra < 20 || ra > 25 {
		t.Errorf("Retry-After %d, want 20 to 25 (the base and up to a quarter more)", ra)
	}
	if !strings.Contains(body, "answered 502 Bad Gateway at") || !strings.Contains(body, "backoff step 1") {
		t.Errorf("page:\n%s", body)
	}
}
