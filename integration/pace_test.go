package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 10, politeness: robotsgate paces each identity (a credential's
// name, else the product token) at each origin by the Crawl-delay or
// Request-rate of the robots.txt group that applies to it, and can bound
// the requests in flight to one origin. Too early is a 429 in enforce
// mode, a wait in wait mode, a note in the audit log in audit mode.
//
// Timing: a request's pace is decided when the proxy reads it, which is
// after the client sent it and before the client had the answer. The
// tests reason from those two client-side instants (timedReply.sent and
// .done): a machine too slow for an assertion fails the test saying so
// (mustBeEarly) rather than asserting something wrong, and no upper bound
// on a duration is asserted except as a timeout.

// jitter is the most by which the gap between two requests' arrivals at
// an origin may fall short of the interval the proxy keeps between its
// decisions to forward them: what lies between the decision and the
// origin's handler (writing the request, the origin's read, scheduling)
// can differ from one request to the next by that much on a loaded
// machine. Nothing else is tolerated.
const jitter = 20 * time.Millisecond

// delayWant is the interval robotsgate applies to a request and where it
// says it came from.
type delayWant struct {
	seconds float64 // 0: no delay applies
	source  string  // "crawl-delay", "request-rate", "default" or "cap"
	line    int     // the robots.txt line; 0 for the default
	rule    string  // that line as written; "" for the default
}

// crawlDelay is the delay of a "Crawl-delay: N" on line.
func crawlDelay(seconds float64, line int) delayWant {
	return delayWant{seconds, "crawl-delay", line, "Crawl-delay: " + strconv.FormatFloat(seconds, 'f', -1, 64)}
}

// timedReply is a whole response and the client-side instants between
// which the proxy read its request.
type timedReply struct {
	reply
	sent time.Time // before the request was written
	done time.Time // after the whole body was read
}

// fetch GETs rawURL through client with userAgent and, unless accept is
// "", that Accept header.
func fetch(t *testing.T, client *http.Client, rawURL, userAgent, accept string) timedReply {
	t.Helper()
	r, err := tryFetch(context.Background(), client, rawURL, userAgent, accept)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryFetch is fetch for goroutines, which must not call t.Fatal.
func tryFetch(ctx context.Context, client *http.Client, rawURL, userAgent, accept string) (timedReply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return timedReply{}, fmt.Errorf("GET %s: %w", rawURL, err)
	}
	req.Header.Set("User-Agent", userAgent)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	sent := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return timedReply{}, fmt.Errorf("GET %s: %w", rawURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return timedReply{}, fmt.Errorf("GET %s: reading the body: %w", rawURL, err)
	}
	return timedReply{reply{status: resp.StatusCode, header: resp.Header, body: body}, sent, time.Now()}, nil
}

// want200 fetches rawURL and fails the test unless it is answered 200.
func want200(t *testing.T, client *http.Client, rawURL, userAgent string) timedReply {
	t.Helper()
	r := fetch(t, client, rawURL, userAgent, "")
	if r.status != http.StatusOK {
		t.Fatalf("%s as %q: status %d, want 200; X-Robotsgate-Decision %q, body %q",
			rawURL, userAgent, r.status, r.header.Get("X-Robotsgate-Decision"), r.body)
	}
	return r
}

// mustBeEarly fails the test when r may have reached the proxy interval
// or more after onTime did: then nothing can be said of its pace. It
// guards assertions that a request was too early against a machine too
// slow to test them.
func mustBeEarly(t *testing.T, what string, r, onTime timedReply, interval time.Duration) {
	t.Helper()
	if gap := r.done.Sub(onTime.sent); gap >= interval {
		t.Fatalf("%s: up to %v after the request whose slot it is, which is not too early for %v: the machine is too slow for this test",
			what, gap.Round(time.Millisecond), interval)
	}
}

// retryAfterRange bounds the Retry-After of a request too early for a
// delay of seconds, elapsed at most after the on-time request: the whole
// seconds to the slot, rounded up, at least 1.
func retryAfterRange(seconds float64, elapsed time.Duration) (lo, hi int) {
	hi = max(1, int(math.Ceil(seconds)))
	lo = max(1, int(math.Ceil(seconds-elapsed.Seconds())))
	return lo, hi
}

// decisionParam is one key=value of X-Robotsgate-Decision, the value
// quoted or not.
var decisionParam = regexp.MustCompile(`;\s*([A-Za-z_-]+)=("(?:[^"\\]|\\.)*"|[^;]*)`)

// parseDecision splits X-Robotsgate-Decision into its leading verdict and
// its parameters, quoted values unquoted.
func parseDecision(h string) (string, map[string]string) {
	verdict, _, _ := strings.Cut(h, ";")
	params := map[string]string{}
	for _, m := range decisionParam.FindAllStringSubmatch(h, -1) {
		v := strings.TrimSpace(m[2])
		if u, err := strconv.Unquote(v); err == nil && strings.HasPrefix(v, `"`) {
			v = u
		}
		params[m[1]] = v
	}
	return strings.TrimSpace(verdict), params
}

// checkTooEarly asserts the 429 robotsgate answers r, a request too early
// after onTime by d: Retry-After, no caching, the decision header naming
// the delay and its source, and a plain-text body. token "" is not
// checked.
func checkTooEarly(t *testing.T, what string, r, onTime timedReply, d delayWant, token, robotsURL string) {
	t.Helper()
	if r.status != http.StatusTooManyRequests {
		t.Errorf("%s: status %d, want 429; X-Robotsgate-Decision %q, body %q", what, r.status, r.header.Get("X-Robotsgate-Decision"), r.body)
		return
	}
	lo, hi := retryAfterRange(d.seconds, r.done.Sub(onTime.sent))
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < lo || ra > hi {
		t.Errorf("%s: Retry-After %q, want whole seconds in [%d, %d]", what, r.header.Get("Retry-After"), lo, hi)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("%s: Cache-Control %q, want no-store", what, cc)
	}
	checkDecision(t, what, r.header.Get("X-Robotsgate-Decision"), d, token, robotsURL)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("%s: Content-Type %q, want text/plain (no Accept: application/json)", what, ct)
	}
	if !bytes.Contains(r.body, []byte("429")) {
		t.Errorf("%s: the body does not say 429:\n%s", what, r.body)
	}
}

// checkDecision asserts an X-Robotsgate-Decision of a request too early.
func checkDecision(t *testing.T, what, header string, d delayWant, token, robotsURL string) {
	t.Helper()
	verdict, params := parseDecision(header)
	if verdict != "too-early" {
		t.Errorf("%s: X-Robotsgate-Decision %q does not begin with too-early", what, header)
	}
	if token != "" && params["token"] != token {
		t.Errorf("%s: X-Robotsgate-Decision %q: token %q, want %q", what, header, params["token"], token)
	}
	if v, err := strconv.ParseFloat(params["crawl-delay"], 64); err != nil || v != d.seconds {
		t.Errorf("%s: X-Robotsgate-Decision %q: crawl-delay %q, want %v seconds", what, header, params["crawl-delay"], d.seconds)
	}
	if params["source"] != d.source {
		t.Errorf("%s: X-Robotsgate-Decision %q: source %q, want %q", what, header, params["source"], d.source)
	}
	line, hasLine := params["line"]
	rule, hasRule := params["rule"]
	switch {
	case d.line == 0 && (hasLine || hasRule):
		t.Errorf("%s: X-Robotsgate-Decision %q names a line or rule for a delay robots.txt did not set", what, header)
	case d.line != 0 && (line != strconv.Itoa(d.line) || rule != d.rule):
		t.Errorf("%s: X-Robotsgate-Decision %q: line %q, rule %q; want %d, %q", what, header, line, rule, d.line, d.rule)
	}
	if params["robots"] != robotsURL {
		t.Errorf("%s: X-Robotsgate-Decision %q: robots %q, want %q", what, header, params["robots"], robotsURL)
	}
}

// checkTooEarlyJSON asserts the JSON 429 a client that accepts JSON gets.
func checkTooEarlyJSON(t *testing.T, what string, r, onTime timedReply, d delayWant) {
	t.Helper()
	if r.status != http.StatusTooManyRequests {
		t.Errorf("%s: status %d, want 429; body %q", what, r.status, r.body)
		return
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q, want application/json", what, ct)
	}
	var page map[string]any
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatalf("%s: the 429 is not a JSON object: %v\n%s", what, err, r.body)
	}
	lo, hi := retryAfterRange(d.seconds, r.done.Sub(onTime.sent))
	retryAfter, _ := page["retry_after"].(float64)
	if page["status"] != 429.0 || page["crawl_delay"] != d.seconds || page["crawl_delay_source"] != d.source ||
		retryAfter < float64(lo) || retryAfter > float64(hi) {
		t.Errorf("%s: JSON 429 %s\nwant status 429, crawl_delay %v, crawl_delay_source %q, retry_after in [%d, %d]",
			what, r.body, d.seconds, d.source, lo, hi)
	}
}

// checkPaceRecord asserts the politeness fields of an audit record: pace
// "" means on time, and no pace field; d nil leaves the delay unchecked.
func checkPaceRecord(t *testing.T, what string, rec auditRecord, status int, forwarded bool, pace string, d *delayWant) {
	t.Helper()
	if rec.Status != status || rec.Forwarded != forwarded {
		t.Errorf("%s: audit status %d, forwarded %v; want %d, %v", what, rec.Status, rec.Forwarded, status, forwarded)
	}
	if p, ok := rec.raw["pace"]; pace == "" && ok {
		t.Errorf("%s: audit pace %#v, want no pace field for a request on time", what, p)
	} else if pace != "" && rec.Pace != pace {
		t.Errorf("%s: audit pace %q, want %q", what, rec.Pace, pace)
	}
	if status == http.StatusTooManyRequests && rec.Verdict != "allow" {
		t.Errorf("%s: audit verdict %q of a 429, want allow: robots.txt allows the path", what, rec.Verdict)
	}
	w, ok := rec.raw["waited_ms"]
	switch {
	case pace == "waited" && rec.WaitedMS <= 0:
		t.Errorf("%s: audit waited_ms %#v of a request held, want more than 0", what, w)
	case pace == "" && ok:
		t.Errorf("%s: audit waited_ms %#v of a request on time, want no such field", what, w)
	}
	if d == nil {
		return
	}
	if d.seconds == 0 {
		for _, f := range []string{"crawl_delay", "crawl_delay_source", "crawl_delay_line"} {
			if v, ok := rec.raw[f]; ok {
				t.Errorf("%s: audit %s %#v where no delay applies, want no such field", what, f, v)
			}
		}
		return
	}
	if rec.CrawlDelay != d.seconds || rec.CrawlDelaySource != d.source {
		t.Errorf("%s: audit crawl_delay %v, crawl_delay_source %q; want %v, %q", what, rec.CrawlDelay, rec.CrawlDelaySource, d.seconds, d.source)
	}
	if l, ok := rec.raw["crawl_delay_line"]; d.line == 0 && ok {
		t.Errorf("%s: audit crawl_delay_line %#v for the default delay, want no such field", what, l)
	} else if d.line != 0 && rec.CrawlDelayLine != d.line {
		t.Errorf("%s: audit crawl_delay_line %d, want %d", what, rec.CrawlDelayLine, d.line)
	}
}

// recordsFor is every record of rawURL, in the order the requests arrived
// (a forwarded request's record is written when it ends, so the log's
// order may differ).
func recordsFor(t *testing.T, recs []auditRecord, rawURL string) []auditRecord {
	t.Helper()
	type arrived struct {
		at  time.Time
		rec auditRecord
	}
	var found []arrived
	for _, r := range recs {
		if r.URL != rawURL {
			continue
		}
		s, _ := r.raw["time"].(string)
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("audit record of %s: time %q: %v", rawURL, s, err)
		}
		found = append(found, arrived{at, r})
	}
	slices.SortStableFunc(found, func(a, b arrived) int { return a.at.Compare(b.at) })
	out := make([]auditRecord, len(found))
	for i, f := range found {
		out[i] = f.rec
	}
	return out
}

// pacedTotal matches a robotsgate_paced_requests_total sample.
var pacedTotal = regexp.MustCompile(`(?m)^robotsgate_paced_requests_total\{([^}]*)\} (\S+)$`)

// pacedCount is the robotsgate_paced_requests_total sample of pace and
// forwarded in a /metrics page; 0 when there is none.
func pacedCount(metrics []byte, pace string, forwarded bool) float64 {
	for _, m := range pacedTotal.FindAllSubmatch(metrics, -1) {
		labels := string(m[1])
		if strings.Contains(labels, `pace="`+pace+`"`) && strings.Contains(labels, fmt.Sprintf(`forwarded="%t"`, forwarded)) {
			v, _ := strconv.ParseFloat(string(m[2]), 64)
			return v
		}
	}
	return 0
}

// waitForPaced polls /metrics until robotsgate_paced_requests_total of
// pace and forwarded is want: a request may be counted just after its
// answer was written.
func waitForPaced(t *testing.T, p *proxyProcess, pace string, forwarded bool, want float64) {
	t.Helper()
	direct := directClient(t)
	for deadline := time.Now().Add(5 * time.Second); ; {
		r := get(t, direct, p.url.String()+"/metrics", "test")
		if r.status != http.StatusOK {
			t.Fatalf("/metrics: status %d", r.status)
		}
		got := pacedCount(r.body, pace, forwarded)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf(`robotsgate_paced_requests_total{pace=%q,forwarded="%t"} is %v, want %v:\n%s`, pace, forwarded, got, want,
				grepLines(r.body, "robotsgate_paced"))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// paceWaiting matches the robotsgate_pace_waiting gauge: the requests
// held now.
var paceWaiting = regexp.MustCompile(`(?m)^robotsgate_pace_waiting (\S+)$`)

// waitForHeld waits until the proxy holds n requests in wait mode, by its
// robotsgate_pace_waiting gauge.
func waitForHeld(t *testing.T, p *proxyProcess, n int) {
	t.Helper()
	direct := directClient(t)
	for deadline := time.Now().Add(requestTimeout); ; {
		r := get(t, direct, p.url.String()+"/metrics", "test")
		m := paceWaiting.FindSubmatch(r.body)
		if m == nil {
			t.Fatalf("no robotsgate_pace_waiting in /metrics:\n%s", grepLines(r.body, "robotsgate_pace"))
		}
		if v, _ := strconv.ParseFloat(string(m[1]), 64); v == float64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("robotsgate_pace_waiting is %s after %v, want %d", m[1], requestTimeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// grepLines is the lines of text that contain s, or a note that none does.
func grepLines(text []byte, s string) string {
	var out []string
	for line := range strings.SplitSeq(string(text), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	if out == nil {
		return "(no line has " + s + ")"
	}
	return strings.Join(out, "\n")
}

// stopAndAudit stops the proxy, which must exit 0, and reads its audit log.
func stopAndAudit(t *testing.T, p *proxyProcess) []auditRecord {
	t.Helper()
	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	return p.audit()
}

// TestCrawlDelayEnforcedWithCurl is the issue's own example: curl, asked
// again and again for one page of a site with "Crawl-delay: 1", gets 200,
// then 429 with Retry-After: 1 and the line that asked for the delay,
// then, after waiting that long, 200 again. Only the 200s reach the
// origin, and each answer is audited and counted.
func TestCrawlDelayEnforcedWithCurl(t *testing.T) {
	t.Parallel()
	curl := tools.Look(t, "apt-get install curl", "curl")
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: *\nCrawl-delay: 1\n")})
	p := startProxy(t)
	target := o.base() + "/page"
	delay := crawlDelay(1, 2)

	// curlOnce runs curl once and reads the status and header it dumps.
	curlOnce := func() timedReply {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		defer cancel()
		// -q first: no ~/.curlrc.
		cmd := exec.CommandContext(ctx, curl, "-q", "-sS", "-x", p.url.String(), "-A", crawlerUA,
			"-o", "/dev/null", "-D", "-", target)
		cmd.Env = cleanEnv()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		sent := time.Now()
		out, err := cmd.Output()
		done := time.Now()
		if err != nil {
			t.Fatalf("curl %s: %v\n%s", target, err, stderr.Bytes())
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
		if err != nil {
			t.Fatalf("curl -D - %s: not a response header: %v\n%s", target, err, out)
		}
		resp.Body.Close() // -o /dev/null: there is none to read
		return timedReply{reply{status: resp.StatusCode, header: resp.Header}, sent, done}
	}

	var statuses []int // of every run, in order
	onTime := curlOnce()
	statuses = append(statuses, onTime.status)
	if onTime.status != http.StatusOK {
		t.Fatalf("first request: status %d, want 200", onTime.status)
	}
	// A loaded machine may take a second between two runs of curl: then a
	// 200 is right, and the loop tries again from that one.
	var early timedReply
	for tries := 1; ; tries++ {
		if tries > 5 {
			t.Fatalf("%d runs of curl in a row were answered 200, each a second or more after the last: the machine is too slow for this test", tries-1)
		}
		r := curlOnce()
		statuses = append(statuses, r.status)
		if r.status == http.StatusTooManyRequests {
			early = r
			break
		}
		if r.status != http.StatusOK {
			t.Fatalf("status %d, want 200 or 429", r.status)
		}
		if gap := r.done.Sub(onTime.sent); gap < time.Second {
			t.Fatalf("200 at most %v after the previous 200 began, want 429: Crawl-delay: 1 was not enforced", gap.Round(time.Millisecond))
		}
		onTime = r
	}
	checkDecision(t, "429", early.header.Get("X-Robotsgate-Decision"), delay, "ExampleBot", o.base()+"/robots.txt")
	if ra := early.header.Get("Retry-After"); ra != "1" {
		t.Fatalf("429: Retry-After %q, want 1", ra)
	}
	if cc := early.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("429: Cache-Control %q, want no-store", cc)
	}

	// Retry-After is rounded up: by then the slot has come. Waiting it is
	// what the client is told to do, and what is under test; a loaded
	// machine only waits longer, which cannot turn the 200 into a 429.
	time.Sleep(time.Second)
	if r := curlOnce(); r.status != http.StatusOK {
		t.Fatalf("after Retry-After: status %d, want 200; X-Robotsgate-Decision %q", r.status, r.header.Get("X-Robotsgate-Decision"))
	}
	statuses = append(statuses, http.StatusOK)
	waitForPaced(t, p, "too_early", false, 1)

	recs := stopAndAudit(t, p)
	got := recordsFor(t, recs, target)
	if len(got) != len(statuses) {
		t.Fatalf("%d audit records of %s, want %d, one per run of curl (statuses %v): %+v", len(got), target, len(statuses), statuses, got)
	}
	allowed := 0
	for i, rec := range got {
		what := fmt.Sprintf("run %d (status %d)", i+1, statuses[i])
		if statuses[i] == http.StatusOK {
			allowed++
			checkPaceRecord(t, what, rec, http.StatusOK, true, "", &delay)
		} else {
			checkPaceRecord(t, what, rec, http.StatusTooManyRequests, false, "too_early", &delay)
		}
	}
	if n := o.count("/page"); n != allowed {
		t.Errorf("the origin received /page %d times, want %d: only the requests answered 200", n, allowed)
	}
}

// TestCrawlDelayWaitWithWget crawls a small site whose robots.txt says
// "Crawl-delay: 1" with wget -r through a proxy in wait mode: wget never
// sees a refusal and fetches every page, while the origin receives them a
// second apart.
func TestCrawlDelayWaitWithWget(t *testing.T) {
	t.Parallel()
	wget := tools.Look(t, "apt-get install wget", "wget")
	pages := []string{"/a.html", "/b.html", "/c.html", "/d.html"}
	html := func(links ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, "<!doctype html><title>%s</title>\n", r.URL.Path)
			for _, l := range links {
				fmt.Fprintf(w, "<a href=\"%s\">%s</a>\n", l, l)
			}
		}
	}
	handlers := map[string]http.HandlerFunc{
		"/robots.txt": robotsTxt("User-agent: *\nCrawl-delay: 1\n"),
		"/":           html(pages...),
	}
	for _, page := range pages {
		handlers[page] = html("/") // back to the index, which wget has
	}
	o := newOrigin(t, false, handlers)
	p := startProxy(t, "ROBOTSGATE_CRAWL_DELAY=wait")

	dir := t.TempDir()
	// Five pages a second apart, and a robots.txt: well within this.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// --no-config first: no ~/.wgetrc. --tries=1: a refusal is a failure,
	// not a retry. -nd: the pages land in dir by their names.
	cmd := exec.CommandContext(ctx, wget, "--no-config", "-r", "-l", "2", "-nd", "-nv", "--tries=1", "-P", dir,
		"-e", "use_proxy=yes", "-e", "http_proxy="+p.url.String(), o.base()+"/")
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("wget still running after 60s:\n%s", out)
	}
	if err != nil {
		t.Fatalf("wget: %v\n%s", err, out)
	}
	for _, name := range []string{"index.html", "a.html", "b.html", "c.html", "d.html"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("wget did not save %s: %v\nwget said:\n%s", name, err, out)
		}
	}
	for _, path := range append([]string{"/"}, pages...) {
		if n := o.count(path); n != 1 {
			t.Errorf("the origin received %s %d times, want 1", path, n)
		}
	}

	var arrivals []arrival // of the pages, robots.txt aside
	for _, a := range o.arrived() {
		if a.path != "/robots.txt" {
			arrivals = append(arrivals, a)
		}
	}
	for i := 1; i < len(arrivals); i++ {
		if gap := arrivals[i].at.Sub(arrivals[i-1].at); gap < time.Second-jitter {
			t.Errorf("%s reached the origin %v after %s, want at least 1s (less %v of jitter)",
				arrivals[i].path, gap.Round(time.Millisecond), arrivals[i-1].path, jitter)
		}
	}

	waitForPaced(t, p, "waited", true, float64(len(pages)))

	recs := stopAndAudit(t, p)
	delay := crawlDelay(1, 2)
	// The index comes first: robots.txt, which wget fetched before it,
	// takes no slot. wget asks for each page as soon as it has the one
	// before, well within the second, so each is held.
	checkPaceRecord(t, "/", auditFor(t, recs, o.base()+"/"), http.StatusOK, true, "", &delay)
	for _, page := range pages {
		checkPaceRecord(t, page, auditFor(t, recs, o.base()+page), http.StatusOK, true, "waited", &delay)
	}
}

// TestPaceTooEarlyTakesNoSlot is the issue's timeline for "Crawl-delay:
// 1": a request at 0s is answered 200, one at 0.3s 429 with Retry-After:
// 1, and one at 1s 200: the refused request did not move the slot to
// 1.3s.
func TestPaceTooEarlyTakesNoSlot(t *testing.T) {
	t.Parallel()
	p := startProxy(t)
	client := p.client(t)
	delay := crawlDelay(1, 2)

	// The times are the behaviour under test. A loaded machine that
	// answers /2 only after /1's second has passed tells nothing: the
	// timeline starts again, on an origin of its own.
	var o *origin
	for attempt := 1; ; attempt++ {
		o = newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: *\nCrawl-delay: 1\n")})
		first := want200(t, client, o.base()+"/1", crawlerUA)
		// The proxy began /1 before first.done: these are 0.3s and 1s
		// after it, or a little more, which only makes /3 later still.
		time.Sleep(time.Until(first.done.Add(300 * time.Millisecond)))
		second := fetch(t, client, o.base()+"/2", crawlerUA, "")
		if second.done.Sub(first.sent) >= time.Second && attempt < 3 {
			t.Logf("attempt %d: /2 answered %v after /1 was sent, too late to be early; again", attempt, second.done.Sub(first.sent))
			continue
		}
		mustBeEarly(t, "/2", second, first, time.Second)
		checkTooEarly(t, "/2", second, first, delay, "ExampleBot", o.base()+"/robots.txt")
		time.Sleep(time.Until(first.done.Add(time.Second)))
		want200(t, client, o.base()+"/3", crawlerUA)
		break
	}

	recs := stopAndAudit(t, p)
	checkPaceRecord(t, "/2", auditFor(t, recs, o.base()+"/2"), http.StatusTooManyRequests, false, "too_early", &delay)
	checkPaceRecord(t, "/3", auditFor(t, recs, o.base()+"/3"), http.StatusOK, true, "", &delay)
}

// TestPaceSkipsRobotsTxtAndRefusals: robots.txt through the proxy is
// never delayed and takes no slot, nor does a request robots.txt
// disallows, which is refused as such even when it comes too early.
func TestPaceSkipsRobotsTxtAndRefusals(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, false, map[string]http.HandlerFunc{
		"/robots.txt": robotsTxt("User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n"),
	})
	p := startProxy(t)
	client := p.client(t)
	delay := crawlDelay(2, 3)
	const interval = 2 * time.Second
	robotsURL := o.base() + "/robots.txt"

	want200(t, client, robotsURL, crawlerUA)
	a := want200(t, client, o.base()+"/a", crawlerUA) // robots.txt took no slot
	if r := fetch(t, client, robotsURL, crawlerUA, ""); r.status != http.StatusOK {
		t.Errorf("robots.txt right after a page: status %d, want 200: it is never delayed", r.status)
	}
	b := fetch(t, client, o.base()+"/b", crawlerUA, "")
	mustBeEarly(t, "/b", b, a, interval)
	checkTooEarly(t, "/b", b, a, delay, "ExampleBot", robotsURL)
	if r := fetch(t, client, o.base()+"/private/x", crawlerUA, ""); r.status != http.StatusForbidden {
		t.Errorf("/private/x too early: status %d, want 403: robots.txt disallows it", r.status)
	}

	time.Sleep(time.Until(a.done.Add(interval))) // /a's slot has passed
	want200(t, client, robotsURL, crawlerUA)
	if r := fetch(t, client, o.base()+"/private/y", crawlerUA, ""); r.status != http.StatusForbidden {
		t.Fatalf("/private/y: status %d, want 403", r.status)
	}
	// Neither robots.txt nor the refusal just before took the slot.
	c := want200(t, client, o.base()+"/c", crawlerUA)
	d := fetch(t, client, o.base()+"/d", crawlerUA, "")
	mustBeEarly(t, "/d", d, c, interval)
	checkTooEarly(t, "/d", d, c, delay, "ExampleBot", robotsURL)

	recs := stopAndAudit(t, p)
	checkPaceRecord(t, "/a", auditFor(t, recs, o.base()+"/a"), http.StatusOK, true, "", &delay)
	checkPaceRecord(t, "/b", auditFor(t, recs, o.base()+"/b"), http.StatusTooManyRequests, false, "too_early", &delay)
	checkPaceRecord(t, "/c", auditFor(t, recs, o.base()+"/c"), http.StatusOK, true, "", &delay)
	checkPaceRecord(t, "/d", auditFor(t, recs, o.base()+"/d"), http.StatusTooManyRequests, false, "too_early", &delay)
	if rec := auditFor(t, recs, o.base()+"/private/x"); rec.Status != http.StatusForbidden || rec.Verdict != "disallow" || rec.Forwarded {
		t.Errorf("/private/x: audit status %d, verdict %q, forwarded %v; want 403, disallow, false", rec.Status, rec.Verdict, rec.Forwarded)
	}
	// On time, and refused: nothing to say about its pace.
	checkPaceRecord(t, "/private/y", auditFor(t, recs, o.base()+"/private/y"), http.StatusForbidden, false, "", nil)
	for _, path := range []string{"/b", "/d", "/private/x", "/private/y"} {
		if n := o.count(path); n != 0 {
			t.Errorf("the origin received %s %d times, want 0", path, n)
		}
	}
}

// TestPaceByIdentity: each identity has its own budget at each origin. An
// identity is the product token, whatever the rest of the User-Agent and
// its case, or the name of the credential the client presented, whatever
// its token and User-Agent.
func TestPaceByIdentity(t *testing.T) {
	t.Parallel()
	const robots = "User-agent: *\nCrawl-delay: 3\n"
	delay := crawlDelay(3, 2)
	const interval = 3 * time.Second

	t.Run("product tokens", func(t *testing.T) {
		t.Parallel()
		o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(robots)})
		other := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(robots)})
		p := startProxy(t)
		client := p.client(t)

		first := want200(t, client, o.base()+"/1", "GPTBot/1.0")
		// The same token in another User-Agent, in lower case.
		same := fetch(t, client, o.base()+"/2", "Mozilla/5.0 (compatible; gptbot/1.2)", "")
		mustBeEarly(t, "gptbot/1.2", same, first, interval)
		checkTooEarly(t, "gptbot/1.2 after GPTBot/1.0", same, first, delay, "", o.base()+"/robots.txt")
		// Another token, and the same token at another origin.
		want200(t, client, o.base()+"/3", crawlerUA)
		want200(t, client, other.base()+"/4", "GPTBot/1.0")
		again := fetch(t, client, o.base()+"/5", "GPTBot/1.0", "")
		mustBeEarly(t, "GPTBot/1.0 again", again, first, interval)
		checkTooEarly(t, "GPTBot/1.0 again", again, first, delay, "GPTBot", o.base()+"/robots.txt")
	})

	t.Run("credentials", func(t *testing.T) {
		t.Parallel()
		// Both GPTBot: their names keep them apart.
		alice, bob := newCredential("alice", "GPTBot"), newCredential("bob", "GPTBot")
		credsFile := credentialsFile(t, alice, bob)
		o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(robots)})
		p := startProxy(t, "ROBOTSGATE_CREDENTIALS_FILE="+credsFile, "ROBOTSGATE_AUTH=optional")

		first := want200(t, p.clientAs(t, alice), o.base()+"/1", browserUA)
		want200(t, p.clientAs(t, bob), o.base()+"/2", browserUA)
		// Anonymous, judged by the User-Agent's token: not alice either.
		want200(t, p.client(t), o.base()+"/3", gptBotUA)
		again := fetch(t, p.clientAs(t, alice), o.base()+"/4", crawlerUA, "")
		mustBeEarly(t, "alice again", again, first, interval)
		checkTooEarly(t, "alice again, with another User-Agent", again, first, delay, "GPTBot", o.base()+"/robots.txt")
	})
}

// TestPaceDelaySources: which interval applies, and where robotsgate
// says it comes from, in the 429, its JSON form and the audit log: the
// Crawl-delay or Request-rate of the group that applies to the token, the
// stricter of the two, the cap, or the default for an origin that says
// nothing. Each case sends a request on time, then one too early, then one
// too early asking for JSON; none of the cases waits for a slot.
func TestPaceDelaySources(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		env    []string
		robots string // "" serves no robots.txt: a 404
		ua     string // crawlerUA when ""
		want   delayWant
		// robots.txt asks for no delay, on a line the audit record may
		// name: no delay applies, whatever the fields say of the line.
		zero bool
	}{
		{name: "crawl-delay", robots: "User-agent: *\nCrawl-delay: 2\n", want: crawlDelay(2, 2)},
		{name: "crawl-delay with decimals", robots: "User-agent: *\nDisallow: /private/\nCrawl-delay: 2.5\n", want: crawlDelay(2.5, 3)},
		{name: "request-rate per second", robots: "User-agent: *\nRequest-rate: 1/5\n",
			want: delayWant{5, "request-rate", 2, "Request-rate: 1/5"}},
		{name: "request-rate per minute", robots: "User-agent: *\nRequest-rate: 10/1m\n",
			want: delayWant{6, "request-rate", 2, "Request-rate: 10/1m"}},
		{name: "request-rate stricter", robots: "User-agent: *\nCrawl-delay: 1\nRequest-rate: 1/3\n",
			want: delayWant{3, "request-rate", 3, "Request-rate: 1/3"}},
		{name: "crawl-delay stricter", robots: "User-agent: *\nRequest-rate: 1/2\nCrawl-delay: 4\n", want: crawlDelay(4, 3)},
		{name: "the token's own group", robots: "User-agent: *\nCrawl-delay: 5\n\nUser-agent: GPTBot\nCrawl-delay: 2\n",
			ua: gptBotUA, want: crawlDelay(2, 5)},
		// The group that applies says nothing: the "*" group's delay is
		// not GPTBot's.
		{name: "the token's group has none", robots: "User-agent: GPTBot\nDisallow: /private/\n\nUser-agent: *\nCrawl-delay: 5\n",
			ua: gptBotUA},
		{name: "no delay at all", robots: "User-agent: *\nDisallow: /private/\n"},
		// Lines robotsgate cannot read are ignored.
		{name: "unreadable crawl-delay", robots: "User-agent: *\nCrawl-delay: soon\n"},
		{name: "unreadable request-rate", robots: "User-agent: *\nRequest-rate: bogus\nCrawl-delay: 2\n", want: crawlDelay(2, 3)},
		// proxy/pace/README.md: a pace line speaks for the user-agent lines just above
		// it, although these four lines are one group for Allow/Disallow.
		{name: "pace line under its own user-agent", robots: "User-agent: GPTBot\nCrawl-delay: 10\nUser-agent: *\nCrawl-delay: 2\n",
			ua: gptBotUA, want: crawlDelay(10, 2)},
		{name: "pace line under its own user-agent, *", robots: "User-agent: GPTBot\nCrawl-delay: 10\nUser-agent: *\nCrawl-delay: 2\n",
			want: crawlDelay(2, 4)},
		// Two groups for one token: the longest interval wins.
		{name: "two groups", robots: "User-agent: GPTBot\nCrawl-delay: 2\n\nUser-agent: GPTBot\nCrawl-delay: 4\n",
			ua: gptBotUA, want: crawlDelay(4, 5)},
		// proxy/pace/README.md: an explicit "Crawl-delay: 0" is no delay, not the default.
		{name: "explicit zero over the default", env: []string{"ROBOTSGATE_DEFAULT_CRAWL_DELAY=3s"},
			robots: "User-agent: *\nCrawl-delay: 0\n", zero: true},
		{name: "default cap of 60s", robots: "User-agent: *\nCrawl-delay: 86400\n",
			want: delayWant{60, "cap", 2, "Crawl-delay: 86400"}},
		{name: "cap", env: []string{"ROBOTSGATE_MAX_CRAWL_DELAY=2s"}, robots: "User-agent: *\nCrawl-delay: 86400\n",
			want: delayWant{2, "cap", 2, "Crawl-delay: 86400"}},
		{name: "default", env: []string{"ROBOTSGATE_DEFAULT_CRAWL_DELAY=3s"}, robots: "User-agent: *\nDisallow: /private/\n",
			want: delayWant{3, "default", 0, ""}},
		{name: "default without a robots.txt", env: []string{"ROBOTSGATE_DEFAULT_CRAWL_DELAY=3s"},
			want: delayWant{3, "default", 0, ""}},
		// The default is for origins that say nothing, however shorter
		// what they say is.
		{name: "robots.txt over the default", env: []string{"ROBOTSGATE_DEFAULT_CRAWL_DELAY=5s"},
			robots: "User-agent: *\nCrawl-delay: 2\n", want: crawlDelay(2, 2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pages := map[string]http.HandlerFunc{}
			if c.robots != "" {
				pages["/robots.txt"] = robotsTxt(c.robots)
			}
			o := newOrigin(t, false, pages)
			p := startProxy(t, c.env...)
			client := p.client(t)
			ua := c.ua
			if ua == "" {
				ua = crawlerUA
			}
			interval := time.Duration(c.want.seconds * float64(time.Second))

			first := want200(t, client, o.base()+"/1", ua)
			second := fetch(t, client, o.base()+"/2", ua, "")
			third := fetch(t, client, o.base()+"/3", ua, "application/json")
			if c.want.seconds == 0 {
				for _, r := range []timedReply{second, third} {
					if r.status != http.StatusOK {
						t.Errorf("no delay applies, yet status %d, X-Robotsgate-Decision %q", r.status, r.header.Get("X-Robotsgate-Decision"))
					}
				}
			} else {
				mustBeEarly(t, "the third request", third, first, interval)
				checkTooEarly(t, "the second request", second, first, c.want, "", o.base()+"/robots.txt")
				// The second request took no slot: the third is still
				// measured from the first.
				checkTooEarlyJSON(t, "the third request, JSON", third, first, c.want)
			}

			recs := stopAndAudit(t, p)
			want := &c.want
			if c.zero {
				want = nil
				for _, path := range []string{"/1", "/2"} {
					if rec := auditFor(t, recs, o.base()+path); rec.CrawlDelay != 0 {
						t.Errorf("%s: audit crawl_delay %v, want none or 0", path, rec.CrawlDelay)
					}
				}
			}
			checkPaceRecord(t, "/1", auditFor(t, recs, o.base()+"/1"), http.StatusOK, true, "", want)
			if c.want.seconds == 0 {
				checkPaceRecord(t, "/2", auditFor(t, recs, o.base()+"/2"), http.StatusOK, true, "", want)
				return
			}
			for _, path := range []string{"/2", "/3"} {
				checkPaceRecord(t, path, auditFor(t, recs, o.base()+path), http.StatusTooManyRequests, false, "too_early", &c.want)
				if n := o.count(path); n != 0 {
					t.Errorf("the origin received %s %d times, want 0", path, n)
				}
			}
		})
	}
}

// TestPaceModes: in audit mode a request too early is forwarded and
// recorded as such; ROBOTSGATE_CRAWL_DELAY follows ROBOTSGATE_MODE unless
// set, and off paces nothing.
func TestPaceModes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		env  []string
		late int    // the status of the request too early
		pace string // its audit pace
	}{
		{"audit by ROBOTSGATE_MODE", []string{"ROBOTSGATE_MODE=audit"}, http.StatusOK, "too_early"},
		{"audit alone", []string{"ROBOTSGATE_CRAWL_DELAY=audit"}, http.StatusOK, "too_early"},
		{"enforce in audit mode", []string{"ROBOTSGATE_MODE=audit", "ROBOTSGATE_CRAWL_DELAY=enforce"}, http.StatusTooManyRequests, "too_early"},
		{"off", []string{"ROBOTSGATE_CRAWL_DELAY=off"}, http.StatusOK, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: *\nCrawl-delay: 3\n")})
			p := startProxy(t, c.env...)
			client := p.client(t)
			first := want200(t, client, o.base()+"/1", crawlerUA)
			second := fetch(t, client, o.base()+"/2", crawlerUA, "")
			mustBeEarly(t, "the second request", second, first, 3*time.Second)
			if second.status != c.late {
				t.Errorf("the second request: status %d, want %d; X-Robotsgate-Decision %q", second.status, c.late, second.header.Get("X-Robotsgate-Decision"))
			}
			forwarded := c.late == http.StatusOK
			// proxy/pace/README.md: forwarded too early, the response says what
			// enforcement would have done.
			if h := second.header.Get("X-Robotsgate-Decision"); forwarded && c.pace != "" &&
				(!strings.HasPrefix(h, "too-early") || !strings.HasSuffix(h, "mode=audit")) {
				t.Errorf("the second request: X-Robotsgate-Decision %q, want too-early ... mode=audit", h)
			}
			if c.pace != "" {
				waitForPaced(t, p, c.pace, forwarded, 1)
			}

			recs := stopAndAudit(t, p)
			var delay *delayWant
			if c.pace != "" { // off: whether a delay is reported is not said
				delay = &delayWant{3, "crawl-delay", 2, "Crawl-delay: 3"}
			}
			checkPaceRecord(t, "/1", auditFor(t, recs, o.base()+"/1"), http.StatusOK, true, "", delay)
			checkPaceRecord(t, "/2", auditFor(t, recs, o.base()+"/2"), c.late, forwarded, c.pace, delay)
			wantHits := 0
			if forwarded {
				wantHits = 1
			}
			if n := o.count("/2"); n != wantHits {
				t.Errorf("the origin received /2 %d times, want %d", n, wantHits)
			}
		})
	}
}

// TestPaceInsideTunnel: requests inside an intercepted tunnel are paced
// like plain ones, by the origin and identity inside, across tunnels.
func TestPaceInsideTunnel(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, true, map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: *\nCrawl-delay: 3\n")})
	p := startProxy(t, upstreamCA(t, o))
	delay := crawlDelay(3, 2)
	robotsURL := o.base() + "/robots.txt"
	tunnel := p.interceptAs(t, o.addr, crawlerUA, "")

	timed := func(conn *keptConn, path string) timedReply {
		t.Helper()
		sent := time.Now()
		r := conn.get(t, o.base()+path, crawlerUA, "")
		return timedReply{r, sent, time.Now()}
	}
	first := timed(tunnel, "/1")
	if first.status != http.StatusOK {
		t.Fatalf("/1: status %d, want 200", first.status)
	}
	second := timed(tunnel, "/2")
	mustBeEarly(t, "/2", second, first, 3*time.Second)
	checkTooEarly(t, "/2 in the same tunnel", second, first, delay, "ExampleBot", robotsURL)
	// The tunnel carries on after a 429, and another one shares the budget.
	third := timed(p.interceptAs(t, o.addr, crawlerUA, ""), "/3")
	mustBeEarly(t, "/3", third, first, 3*time.Second)
	checkTooEarly(t, "/3 in another tunnel", third, first, delay, "ExampleBot", robotsURL)
	if r := timed(tunnel, "/robots.txt"); r.status != http.StatusOK {
		t.Errorf("robots.txt in the tunnel: status %d, want 200", r.status)
	}

	recs := stopAndAudit(t, p)
	checkPaceRecord(t, "/1", auditFor(t, recs, o.base()+"/1"), http.StatusOK, true, "", &delay)
	for _, path := range []string{"/2", "/3"} {
		rec := auditFor(t, recs, o.base()+path)
		checkPaceRecord(t, path, rec, http.StatusTooManyRequests, false, "too_early", &delay)
		if rec.Tunnel != o.addr {
			t.Errorf("%s: audit tunnel %q, want %q", path, rec.Tunnel, o.addr)
		}
	}
}

// TestPaceBlindTunnel: a tunnel robotsgate does not intercept is paced as
// one request when it opens (proxy/pace/README.md): the requests inside cannot be seen.
// A CONNECT too early is answered 429 like a request.
func TestPaceBlindTunnel(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, true, map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: *\nCrawl-delay: 3\n")})
	p := startProxy(t, "ROBOTSGATE_MITM=false", upstreamCA(t, o))
	delay := crawlDelay(3, 2)

	// A request through the first tunnel: one that carried nothing would
	// give its slot back. The client trusts the origin's certificate only.
	roots := x509.NewCertPool()
	roots.AddCert(o.Certificate())
	client := newClient(t, &http.Transport{
		Proxy:              http.ProxyURL(p.url),
		ProxyConnectHeader: http.Header{"User-Agent": {crawlerUA}},
		TLSClientConfig:    &tls.Config{RootCAs: roots},
		DisableKeepAlives:  true,
	})
	first := want200(t, client, o.base()+"/1", crawlerUA)
	sent := time.Now()
	_, r := p.connect(t, o.addr, crawlerUA)
	second := timedReply{r, sent, time.Now()}
	mustBeEarly(t, "the second CONNECT", second, first, 3*time.Second)
	checkTooEarly(t, "the second CONNECT", second, first, delay, "ExampleBot", o.base()+"/robots.txt")

	recs := stopAndAudit(t, p)
	var connects []auditRecord
	for _, rec := range recs {
		if rec.Method == http.MethodConnect {
			connects = append(connects, rec)
		}
	}
	if len(connects) != 2 {
		t.Fatalf("%d audit records of a CONNECT, want 2: %+v", len(connects), recs)
	}
	tooEarly := 0
	for _, rec := range connects {
		if rec.Pace == "too_early" {
			tooEarly++
			checkPaceRecord(t, "the second CONNECT", rec, http.StatusTooManyRequests, false, "too_early", &delay)
		}
	}
	if tooEarly != 1 {
		t.Errorf("%d audit records of a CONNECT too early, want 1: %+v", tooEarly, connects)
	}
}

// blockingPage answers once released, and tells entered when it has a
// request. The test's cleanup releases it, so the origin can close.
func blockingPage() (page http.HandlerFunc, entered <-chan struct{}, release func()) {
	in := make(chan struct{}, 16)
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	page = func(w http.ResponseWriter, r *http.Request) {
		in <- struct{}{}
		select {
		case <-gate:
		case <-r.Context().Done():
		}
		io.WriteString(w, "finally\n")
	}
	return page, in, release
}

// waitEntered waits for the blocking page to have a request.
func waitEntered(t *testing.T, entered <-chan struct{}) {
	t.Helper()
	select {
	case <-entered:
	case <-time.After(requestTimeout):
		t.Fatal("the slow page never received its request")
	}
}

// TestPaceConnsPerOrigin: with ROBOTSGATE_MAX_CONNS_PER_ORIGIN=1, a second
// request to an origin while one is in flight, whoever sends it, is
// refused in enforce mode, held until the first ends in wait mode (or 429
// after ROBOTSGATE_MAX_WAIT), and forwarded and recorded in audit mode.
// Another origin is not affected.
func TestPaceConnsPerOrigin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		env    []string
		second int    // the status of the request while one is in flight
		pace   string // its audit pace
		// held: the second request waits until the first is released;
		// heldFor: it is held at least that long, then refused.
		held    bool
		heldFor time.Duration
	}{
		{name: "enforce", second: http.StatusTooManyRequests, pace: "busy"},
		{name: "wait", env: []string{"ROBOTSGATE_CRAWL_DELAY=wait"}, second: http.StatusOK, pace: "waited", held: true},
		{name: "wait beyond ROBOTSGATE_MAX_WAIT", env: []string{"ROBOTSGATE_CRAWL_DELAY=wait", "ROBOTSGATE_MAX_WAIT=1s"},
			second: http.StatusTooManyRequests, pace: "busy", heldFor: time.Second},
		{name: "audit", env: []string{"ROBOTSGATE_CRAWL_DELAY=audit"}, second: http.StatusOK, pace: "busy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			slow, entered, release := blockingPage()
			// No delay: only the connection limit paces.
			o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots), "/slow": slow})
			t.Cleanup(release) // before the origin closes: cleanups run last first
			other := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)})
			p := startProxy(t, append([]string{"ROBOTSGATE_MAX_CONNS_PER_ORIGIN=1"}, c.env...)...)
			client := p.client(t)

			type result struct {
				r   timedReply
				err error
			}
			firstDone := make(chan result, 1)
			go func() {
				r, err := tryFetch(context.Background(), client, o.base()+"/slow", crawlerUA, "")
				firstDone <- result{r, err}
			}()
			waitEntered(t, entered)
			// Another identity: the limit is the origin's.
			secondDone := make(chan result, 1)
			go func() {
				r, err := tryFetch(context.Background(), client, o.base()+"/second", gptBotUA, "")
				secondDone <- result{r, err}
			}()
			want200(t, client, other.base()+"/unaffected", crawlerUA)

			var released time.Time
			if c.held {
				waitForHeld(t, p, 1)
				if n := o.count("/second"); n != 0 {
					t.Errorf("the second request reached the origin while the first was in flight")
				}
				released = time.Now()
				release()
			}
			var second result
			select {
			case second = <-secondDone:
			case <-time.After(requestTimeout):
				t.Fatal("the second request got no answer")
			}
			release()
			if second.err != nil {
				t.Fatal(second.err)
			}
			if second.r.status != c.second {
				t.Errorf("the second request: status %d, want %d; body %q", second.r.status, c.second, second.r.body)
			}
			// proxy/pace/README.md: a 429 at the connection bound says so, and to retry
			// in a second.
			if h := second.r.header.Get("X-Robotsgate-Decision"); c.second == http.StatusTooManyRequests &&
				(!strings.HasPrefix(h, "busy") || !strings.Contains(h, "max-conns-per-origin=1") || second.r.header.Get("Retry-After") != "1") {
				t.Errorf("the second request: X-Robotsgate-Decision %q, Retry-After %q; want busy ... max-conns-per-origin=1, 1",
					h, second.r.header.Get("Retry-After"))
			}
			if held := second.r.done.Sub(second.r.sent); held < c.heldFor {
				t.Errorf("the second request was answered after %v, want it held ROBOTSGATE_MAX_WAIT (%v) first", held, c.heldFor)
			}
			first := <-firstDone
			if first.err != nil || first.r.status != http.StatusOK {
				t.Fatalf("the first request: %v, status %d; want 200", first.err, first.r.status)
			}
			if c.held {
				for _, a := range o.arrived() {
					if a.path == "/second" && a.at.Before(released) {
						t.Errorf("the second request reached the origin %v before the first was released", released.Sub(a.at))
					}
				}
			}
			// Once the first has ended, the origin is free again: the
			// proxy may count it ended just after its last byte.
			busyRetries := 0
			for deadline := time.Now().Add(5 * time.Second); ; {
				r := fetch(t, client, o.base()+"/third", crawlerUA, "")
				if r.status == http.StatusOK {
					break
				}
				if r.status != http.StatusTooManyRequests || time.Now().After(deadline) {
					t.Fatalf("/third after the first request ended: status %d, want 200", r.status)
				}
				busyRetries++
				time.Sleep(20 * time.Millisecond)
			}
			if c.second == http.StatusTooManyRequests {
				waitForPaced(t, p, "busy", false, float64(1+busyRetries))
			}

			recs := stopAndAudit(t, p)
			forwarded := c.second == http.StatusOK
			checkPaceRecord(t, "the request in flight", auditFor(t, recs, o.base()+"/slow"), http.StatusOK, true, "", nil)
			checkPaceRecord(t, "the second request", auditFor(t, recs, o.base()+"/second"), c.second, forwarded, c.pace, nil)
			checkPaceRecord(t, "another origin", auditFor(t, recs, other.base()+"/unaffected"), http.StatusOK, true, "", nil)
		})
	}
}

// TestPaceWaitBounds: in wait mode a request whose slot is further than
// ROBOTSGATE_MAX_WAIT is refused at once, and a client that hangs up while
// held frees its slot for the next.
func TestPaceWaitBounds(t *testing.T) {
	t.Parallel()

	t.Run("beyond ROBOTSGATE_MAX_WAIT", func(t *testing.T) {
		t.Parallel()
		o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: *\nCrawl-delay: 5\n")})
		p := startProxy(t, "ROBOTSGATE_CRAWL_DELAY=wait", "ROBOTSGATE_MAX_WAIT=2s")
		client := p.client(t)
		first := want200(t, client, o.base()+"/1", crawlerUA)
		second := fetch(t, client, o.base()+"/2", crawlerUA, "")
		mustBeEarly(t, "/2", second, first, 3*time.Second) // then its wait is beyond 2s
		checkTooEarly(t, "/2", second, first, crawlDelay(5, 2), "ExampleBot", o.base()+"/robots.txt")
		recs := stopAndAudit(t, p)
		checkPaceRecord(t, "/2", auditFor(t, recs, o.base()+"/2"), http.StatusTooManyRequests, false, "too_early", nil)
	})

	t.Run("hang-up frees the slot", func(t *testing.T) {
		t.Parallel()
		// /1 at 0s takes the slot at 3s for the next. If /2, held for it
		// and gone at once, kept it, /3 would have the slot at 6s,
		// further than ROBOTSGATE_MAX_WAIT: 429. Freed, /3 gets 3s.
		o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: *\nCrawl-delay: 3\n")})
		p := startProxy(t, "ROBOTSGATE_CRAWL_DELAY=wait", "ROBOTSGATE_MAX_WAIT=4s")
		client := p.client(t)
		first := want200(t, client, o.base()+"/1", crawlerUA)

		// /2 hangs up once the proxy holds it, and the proxy lets it go.
		ctx, cancel := context.WithCancel(context.Background())
		gone := make(chan error, 1)
		go func() {
			_, err := tryFetch(ctx, client, o.base()+"/2", crawlerUA, "")
			gone <- err
		}()
		waitForHeld(t, p, 1)
		cancel()
		if err := <-gone; err == nil {
			t.Fatal("/2 was answered before its client hung up, want it held until 3s after /1")
		}
		waitForHeld(t, p, 0)
		third := fetch(t, client, o.base()+"/3", crawlerUA, "")
		if gap := third.sent.Sub(first.done); gap >= 2*time.Second {
			t.Fatalf("/3 sent %v after /1: the machine is too slow for this test", gap)
		}
		if third.status != http.StatusOK {
			t.Fatalf("/3: status %d, want 200, held for the slot /2 gave up; X-Robotsgate-Decision %q",
				third.status, third.header.Get("X-Robotsgate-Decision"))
		}
		if n := o.count("/2"); n != 0 {
			t.Errorf("the origin received /2, whose client had gone, %d times", n)
		}
		var at1, at3 time.Time
		for _, a := range o.arrived() {
			switch a.path {
			case "/1":
				at1 = a.at
			case "/3":
				at3 = a.at
			}
		}
		if gap := at3.Sub(at1); gap < 3*time.Second-jitter {
			t.Errorf("/3 reached the origin %v after /1, want at least 3s (less %v of jitter)", gap.Round(time.Millisecond), jitter)
		}
		recs := stopAndAudit(t, p)
		checkPaceRecord(t, "/3", auditFor(t, recs, o.base()+"/3"), http.StatusOK, true, "waited", nil)
		if rec := auditFor(t, recs, o.base()+"/2"); rec.Forwarded {
			t.Errorf("/2: audit record %+v says forwarded, though its client hung up while held", rec)
		}
	})
}

// TestPaceConfigurationAccepted: the pacing variables, each within
// bounds, start the proxy (TestInvalidConfiguration has those that do not).
func TestPaceConfigurationAccepted(t *testing.T) {
	t.Parallel()
	startProxy(t, "ROBOTSGATE_CRAWL_DELAY=wait", "ROBOTSGATE_DEFAULT_CRAWL_DELAY=500ms",
		"ROBOTSGATE_MAX_CRAWL_DELAY=1h", "ROBOTSGATE_MAX_WAIT=1m59s", "ROBOTSGATE_MAX_CONNS_PER_ORIGIN=3")
	startProxy(t, "ROBOTSGATE_CRAWL_DELAY=off", "ROBOTSGATE_DEFAULT_CRAWL_DELAY=0s", "ROBOTSGATE_MAX_CONNS_PER_ORIGIN=0")
}

// TestCheckCrawlDelay: check -json says which delay applies and where it
// comes from, with the proxy's default and cap; the text output keeps its
// four columns; a delay line check cannot read is listed on standard
// error and ignored.
func TestCheckCrawlDelay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	decimal := write("decimal.txt", "User-agent: *\nDisallow: /private/\nCrawl-delay: 2.5\nRequest-rate: bogus\n")
	rate := write("rate.txt", "User-agent: *\nCrawl-delay: soon\nRequest-rate: 10/1m\n")
	hourly := write("hourly.txt", "User-agent: *\nRequest-rate: 30/1h\n") // 120s
	none := write("none.txt", "User-agent: *\nDisallow: /private/\n")
	huge := write("huge.txt", "User-agent: *\nCrawl-delay: 86400\n")
	huge2 := write("huge2.txt", "User-agent: *\nCrawl-delay: 200000\n")
	groups := write("groups.txt", "User-agent: *\nCrawl-delay: 5\n\nUser-agent: GPTBot\nCrawl-delay: 2\n")

	for _, c := range []struct {
		name    string
		env     []string
		robots  string
		ua      string
		want    map[string]any // crawl_delay, crawl_delay_source, crawl_delay_line; nil: absent
		ignored string         // a regular expression stderr matches
		used    int            // a line stderr must not list: check read it
	}{
		{"crawl-delay", nil, decimal, "ExampleBot",
			map[string]any{"crawl_delay": 2.5, "crawl_delay_source": "crawl-delay", "crawl_delay_line": 3.0},
			`(?im)\bline 4:.*(request-rate|bogus)`, 3},
		{"request-rate", nil, rate, "ExampleBot",
			map[string]any{"crawl_delay": 6.0, "crawl_delay_source": "request-rate", "crawl_delay_line": 3.0},
			`(?im)\bline 2:.*(crawl-delay|soon)`, 3},
		{"request-rate per hour, capped", nil, hourly, "ExampleBot",
			map[string]any{"crawl_delay": 60.0, "crawl_delay_source": "cap", "crawl_delay_line": 2.0}, "", 2},
		// proxy/pace/README.md: decimals may start with the point; a unit makes the
		// line unreadable; a visit time after a rate is accepted; past a
		// day is a day.
		{"leading point", nil, write("point.txt", "User-agent: *\nCrawl-delay: .5\n"), "ExampleBot",
			map[string]any{"crawl_delay": 0.5, "crawl_delay_source": "crawl-delay", "crawl_delay_line": 2.0}, "", 2},
		{"a unit", nil, write("unit.txt", "User-agent: *\nCrawl-delay: 10s\n"), "ExampleBot",
			map[string]any{"crawl_delay": 0.0, "crawl_delay_source": nil, "crawl_delay_line": nil}, `(?im)\bline 2:.*(crawl-delay|10s)`, 0},
		{"visit time", []string{"ROBOTSGATE_MAX_CRAWL_DELAY=1h"}, write("visit.txt", "User-agent: *\nRequest-rate: 1/10m 0600-0845\n"), "ExampleBot",
			map[string]any{"crawl_delay": 600.0, "crawl_delay_source": "request-rate", "crawl_delay_line": 2.0}, "", 2},
		{"more than a day", []string{"ROBOTSGATE_MAX_CRAWL_DELAY=24h"}, huge2, "ExampleBot",
			map[string]any{"crawl_delay": 86400.0, "crawl_delay_source": "crawl-delay", "crawl_delay_line": 2.0}, "", 2},
		{"none", nil, none, "ExampleBot",
			map[string]any{"crawl_delay": 0.0, "crawl_delay_source": nil, "crawl_delay_line": nil}, "", 0},
		{"default", []string{"ROBOTSGATE_DEFAULT_CRAWL_DELAY=1500ms"}, none, "ExampleBot",
			map[string]any{"crawl_delay": 1.5, "crawl_delay_source": "default", "crawl_delay_line": nil}, "", 0},
		{"cap", []string{"ROBOTSGATE_MAX_CRAWL_DELAY=2s"}, huge, "ExampleBot",
			map[string]any{"crawl_delay": 2.0, "crawl_delay_source": "cap", "crawl_delay_line": 2.0}, "", 2},
		{"default cap of 60s", nil, huge, "ExampleBot",
			map[string]any{"crawl_delay": 60.0, "crawl_delay_source": "cap", "crawl_delay_line": 2.0}, "", 2},
		{"the token's group", nil, groups, gptBotUA,
			map[string]any{"crawl_delay": 2.0, "crawl_delay_source": "crawl-delay", "crawl_delay_line": 5.0}, "", 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runBinary(t, "", c.env, "check", "-json", "-user-agent", c.ua, "-robots", c.robots, "/a", "/b")
			if code != 0 {
				t.Errorf("exit %d, want 0; stderr:\n%s", code, stderr)
			}
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			if len(lines) != 2 {
				t.Fatalf("%d lines, want 2:\n%s", len(lines), stdout)
			}
			for i, line := range lines {
				var got map[string]any
				if err := json.Unmarshal([]byte(line), &got); err != nil {
					t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, line)
				}
				for field, want := range c.want {
					if v, ok := got[field]; want == nil && ok {
						t.Errorf("line %d: %s = %#v, want no such field\n%s", i+1, field, v, line)
					} else if want != nil && v != want {
						t.Errorf("line %d: %s = %#v, want %#v\n%s", i+1, field, v, want, line)
					}
				}
			}
			if c.ignored != "" && !regexp.MustCompile(c.ignored).MatchString(stderr) {
				t.Errorf("stderr does not list the line check ignored (%s):\n%s", c.ignored, stderr)
			}
			if c.used != 0 && regexp.MustCompile(fmt.Sprintf(`\bline %d:`, c.used)).MatchString(stderr) {
				t.Errorf("stderr lists line %d, which check used:\n%s", c.used, stderr)
			}
		})
	}

	t.Run("text", func(t *testing.T) {
		t.Parallel()
		code, stdout, stderr := runBinary(t, "", nil, "check", "-user-agent", "ExampleBot", "-robots", decimal, "/a", "/private/b")
		want := "allowed\tExampleBot\t/a\tno matching rule\n" +
			"disallowed\tExampleBot\t/private/b\tdisallow: /private/ (line 2)\n"
		if code != 1 || stdout != want {
			t.Errorf("exit %d, stdout:\n%s\nwant exit 1, stdout:\n%s\nstderr:\n%s", code, stdout, want, stderr)
		}
	})
}
