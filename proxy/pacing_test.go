package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"robotsgate/proxy/audit"
	"robotsgate/proxy/pace"
)

const pacedRobots = "User-agent: *\nCrawl-delay: 30\nDisallow: /private/\n\nUser-agent: slowbot\nCrawl-delay: 86400\n"

// pacedProxy serves origin through a proxy that paces in mode.
func pacedProxy(t *testing.T, mode pace.Mode, cfg proxyConfig) *testProxy {
	cfg.pacer = pace.New(pace.Options{Mode: mode, MaxWait: 5 * time.Second})
	if cfg.pacePolicy.Max == 0 {
		cfg.pacePolicy.Max = time.Minute
	}
	return startProxy(t, cfg)
}

// TestPaceEnforced: the second request within the Crawl-delay gets 429
// naming the line, and takes no slot; robots.txt and refusals are not
// paced.
func TestPaceEnforced(t *testing.T) {
	o := startOrigin(t, originConfig{robots: pacedRobots})
	p := pacedProxy(t, pace.ModeEnforce, proxyConfig{})
	c := p.client()

	if resp, _ := do(t, c, "GET", o.URL+"/a", ua("GPTBot/1.0")); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	resp, body := do(t, c, "GET", o.URL+"/b", ua("Mozilla/5.0 (compatible; gptbot/1.2)"))
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second request: %d %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Retry-After"); got != "30" && got != "29" {
		t.Errorf("Retry-After %q, want 30 (or 29 on a slow machine)", got)
	}
	wantHeader := `too-early; token="gptbot"; crawl-delay=30; source="crawl-delay"; rule="Crawl-delay: 30"; line=2; retry-after=`
	if got := resp.Header.Get(decisionHeader); !strings.HasPrefix(got, wantHeader) || !strings.HasSuffix(got, `; robots="`+o.robotsURL()+`"`) {
		t.Errorf("%s: %s\nwant %s…", decisionHeader, got, wantHeader)
	}
	for _, want := range []string{"429 Too Many Requests", `as "Crawl-delay: 30" asks (line 2)`, "URL:         " + o.URL + "/b", `product token "gptbot"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the 429 page does not say %q:\n%s", want, body)
		}
	}
	resp, body = do(t, c, "GET", o.URL+"/c", http.Header{"User-Agent": {"GPTBot"}, "Accept": {"application/json"}})
	var page map[string]any
	if err := json.Unmarshal([]byte(body), &page); err != nil || resp.StatusCode != 429 {
		t.Fatalf("JSON 429: %d %v\n%s", resp.StatusCode, err, body)
	}
	if page["status"] != 429.0 || page["crawl_delay"] != 30.0 || page["crawl_delay_source"] != "crawl-delay" || page["crawl_delay_line"] != 2.0 || page["pace"] != "too_early" {
		t.Errorf("JSON 429: %s", body)
	}
	if resp, _ := do(t, c, "GET", o.URL+"/robots.txt", ua("GPTBot")); resp.StatusCode != 200 {
		t.Errorf("robots.txt through the proxy: %d; it is never paced", resp.StatusCode)
	}
	if resp, _ := do(t, c, "GET", o.URL+"/private/x", ua("GPTBot")); resp.StatusCode != 403 {
		t.Errorf("a disallowed path: %d, want 403: the verdict comes first", resp.StatusCode)
	}
	// Another identity has its own schedule; the cap bounds an absurd delay.
	if resp, _ := do(t, c, "GET", o.URL+"/bing", ua("bingbot")); resp.StatusCode != 200 {
		t.Errorf("bingbot: %d", resp.StatusCode)
	}
	do(t, c, "GET", o.URL+"/slow1", ua("slowbot"))
	resp, _ = do(t, c, "GET", o.URL+"/slow2", ua("slowbot"))
	if got := resp.Header.Get(decisionHeader); resp.StatusCode != 429 || !strings.Contains(got, `crawl-delay=60; source="cap"; rule="Crawl-delay: 86400"; line=6`) {
		t.Errorf("slowbot: %d %s", resp.StatusCode, got)
	}

	if !o.saw("/a") || o.saw("/b") || o.saw("/c") || o.saw("/private/x") {
		t.Error("the origin saw other requests than the first")
	}
	recs := p.records()
	second := recordFor(t, recs, "GET", o.URL+"/b")
	if second.Status != 429 || second.Forwarded || second.Verdict != "allow" || second.Pace != "too_early" ||
		second.CrawlDelay != 30 || second.CrawlDelaySource != "crawl-delay" || second.CrawlDelayLine != 2 {
		t.Errorf("the 429's record: %+v", second)
	}
	first := recordFor(t, recs, "GET", o.URL+"/a")
	if first.Pace != "" || first.CrawlDelay != 30 || !first.Forwarded {
		t.Errorf("the first request's record: %+v", first)
	}
	robots := recordFor(t, recs, "GET", o.URL+"/robots.txt")
	if robots.CrawlDelay != 0 || robots.Pace != "" {
		t.Errorf("robots.txt's record: %+v", robots)
	}
}

// TestPaceAudit: too early is forwarded, with the header saying what
// enforcement would have done.
func TestPaceAudit(t *testing.T) {
	o := startOrigin(t, originConfig{robots: pacedRobots})
	p := pacedProxy(t, pace.ModeAudit, proxyConfig{})
	c := p.client()
	do(t, c, "GET", o.URL+"/a", ua("GPTBot"))
	resp, _ := do(t, c, "GET", o.URL+"/b", ua("GPTBot"))
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get(decisionHeader), "too-early;") || !strings.HasSuffix(resp.Header.Get(decisionHeader), "; mode=audit") {
		t.Errorf("audit: %d %q", resp.StatusCode, resp.Header.Get(decisionHeader))
	}
	if !o.saw("/b") {
		t.Error("audit did not forward")
	}
	if rec := recordFor(t, p.records(), "GET", o.URL+"/b"); rec.Pace != "too_early" || !rec.Forwarded || rec.Status != 200 {
		t.Errorf("audit record: %+v", rec)
	}
}

// TestPaceWait: wait mode holds the request until its slot and records
// the wait.
func TestPaceWait(t *testing.T) {
	o := startOrigin(t, originConfig{robots: "User-agent: *\nRequest-rate: 5/1\n"})
	p := pacedProxy(t, pace.ModeWait, proxyConfig{})
	c := p.client()
	for _, path := range []string{"/a", "/b", "/c"} {
		if resp, _ := do(t, c, "GET", o.URL+path, ua("GPTBot")); resp.StatusCode != 200 {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	recs := p.records()
	for _, path := range []string{"/b", "/c"} {
		rec := recordFor(t, recs, "GET", o.URL+path)
		if rec.Pace != "waited" || rec.WaitedMS <= 0 || rec.WaitedMS > 200 || rec.CrawlDelay != 0.2 || rec.CrawlDelaySource != "request-rate" {
			t.Errorf("%s: %+v", path, rec)
		}
	}
}

// TestPaceBlindTunnel: a tunnel that is not intercepted is paced as one
// request, refused with 429 before it opens.
func TestPaceBlindTunnel(t *testing.T) {
	o := startOrigin(t, originConfig{robots: pacedRobots, tls: true})
	p := pacedProxy(t, pace.ModeEnforce, proxyConfig{roots: o.roots})
	for i, want := range []int{200, 429} {
		resp, body := dialProxy(t, p).send(proxyRequest(t, http.MethodConnect, o.host(), "GPTBot", ""))
		if resp.StatusCode != want {
			t.Fatalf("CONNECT %d: %d %s", i, resp.StatusCode, body)
		}
		if i == 0 {
			continue
		}
		if resp.Header.Get("Retry-After") == "" || !strings.HasPrefix(resp.Header.Get(decisionHeader), "too-early;") {
			t.Errorf("refused CONNECT: %v", resp.Header)
		}
	}
}

// TestPaceBusy: past the bound on requests in flight to an origin, 429
// with Retry-After 1; the slot of the refused request stays free.
func TestPaceBusy(t *testing.T) {
	o := startOrigin(t, originConfig{robots: "User-agent: *\nDisallow:\n"})
	release, arrived := make(chan struct{}), make(chan struct{})
	o.mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
	})
	cfg := proxyConfig{pacer: pace.New(pace.Options{MaxConnsPerOrigin: 1}), pacePolicy: pace.Policy{Default: time.Minute, Max: time.Minute}}
	p := startProxy(t, cfg)
	c := p.client()
	done := make(chan int)
	go func() {
		resp, err := c.Get(o.URL + "/slow")
		if err != nil {
			done <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-arrived
	resp, _ := do(t, c, "GET", o.URL+"/a", ua("bingbot"))
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" || !strings.HasPrefix(resp.Header.Get(decisionHeader), `busy; token="bingbot"; max-conns-per-origin=1; retry-after=1`) {
		t.Errorf("past the bound: %d %v", resp.StatusCode, resp.Header)
	}
	close(release)
	if code := <-done; code != 200 {
		t.Fatalf("the slow request: %d", code)
	}
	if resp, _ := do(t, c, "GET", o.URL+"/a", ua("bingbot")); resp.StatusCode != 200 {
		t.Errorf("bingbot once the origin is free: %d; a refused request takes no slot", resp.StatusCode)
	}
	resp, body := do(t, p.direct(), "GET", p.url.String()+"/metrics", nil)
	if !strings.Contains(body, `robotsgate_paced_requests_total{forwarded="false",pace="busy"} 1`) {
		t.Errorf("metrics (%d) do not count the busy request:\n%s", resp.StatusCode, grep(body, "paced"))
	}
	recs := p.records()
	if !slices.ContainsFunc(recs, func(r audit.Record) bool { return r.Pace == "busy" && r.Status == 429 }) {
		t.Error("no busy record")
	}
}

// grep keeps the lines of s that contain word.
func grep(s, word string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, word) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
