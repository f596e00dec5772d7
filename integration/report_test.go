package integration

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// "robotsgate report" sums up audit logs. These tests make the logs with
// real proxy runs whose every request's fate the test decides (which
// crawler, which origin, which rule, which answer), then run the report on
// them as an auditor would and check its figures exactly: every count
// below is worked out by hand from the requests sent, not from the log.

// googlebotUA is Googlebot's own User-Agent; its token is Googlebot.
const googlebotUA = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"

// reportDoc mirrors the JSON document of "robotsgate report -format json",
// by the names proxy/audit/report documents.
type reportDoc struct {
	Generated      time.Time       `json:"generated"`
	Filter         reportFilter    `json:"filter"`
	Sources        []reportSource  `json:"sources"`
	From           time.Time       `json:"from"`
	To             time.Time       `json:"to"`
	Records        int64           `json:"records"`
	FilteredOut    int64           `json:"filtered_out"`
	Malformed      int64           `json:"malformed"`
	MalformedLines []reportLine    `json:"malformed_lines"`
	Totals         reportCounts    `json:"totals"`
	Crawlers       []reportCrawler `json:"crawlers"`
	Origins        []reportOrigin  `json:"origins"`
	TopRules       []reportRule    `json:"top_rules"`
	TopPaths       []reportPath    `json:"top_paths"`
	Timeline       reportTimeline  `json:"timeline"`
}

type reportFilter struct {
	Since   time.Time `json:"since"`
	Until   time.Time `json:"until"`
	Tokens  []string  `json:"tokens"`
	Origins []string  `json:"origins"`
}

type reportSource struct {
	Name      string `json:"name"`
	Lines     int64  `json:"lines"`
	Gzip      bool   `json:"gzip"`
	Truncated bool   `json:"truncated"`
	Error     string `json:"error"`
}

type reportLine struct {
	Source string `json:"source"`
	Line   int64  `json:"line"`
	Error  string `json:"error"`
}

type reportCounts struct {
	Requests          int64     `json:"requests"`
	Allowed           int64     `json:"allowed"`
	Refused           int64     `json:"refused"`
	WouldBeRefused    int64     `json:"would_be_refused"`
	Compliance        *float64  `json:"compliance"`
	Delayed           int64     `json:"delayed"`
	TooEarly          int64     `json:"too_early"`
	WouldBeTooEarly   int64     `json:"would_be_too_early"`
	DeniedDestination int64     `json:"denied_destination"`
	Errors            int64     `json:"errors"`
	Bytes             int64     `json:"bytes"`
	FirstSeen         time.Time `json:"first_seen"`
	LastSeen          time.Time `json:"last_seen"`
}

type reportCrawler struct {
	Name string `json:"name"`
	By   string `json:"by"`
	reportCounts
	Origins       int          `json:"origins"`
	Tokens        []reportSeen `json:"tokens"`
	UserAgents    []reportSeen `json:"user_agents"`
	UAMismatches  int64        `json:"ua_mismatches"`
	ClaimedTokens []reportSeen `json:"claimed_tokens"`
}

type reportSeen struct {
	Value     string `json:"value"`
	Count     int64  `json:"count"`
	Overcount int64  `json:"overcount"`
}

type reportOrigin struct {
	Origin string `json:"origin"`
	reportCounts
	Crawlers         int              `json:"crawlers"`
	Robots           reportRobots     `json:"robots"`
	Incidents        []reportIncident `json:"robots_incidents"`
	IncidentsOmitted int64            `json:"robots_incidents_omitted"`
}

type reportRobots struct {
	OK          int64 `json:"ok"`
	Unavailable int64 `json:"unavailable"`
	Restricted  int64 `json:"restricted"`
	Unreachable int64 `json:"unreachable"`
	Stale       int64 `json:"stale"`
}

type reportIncident struct {
	Outcome  string    `json:"outcome"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Requests int64     `json:"requests"`
	Status   int       `json:"robots_status"`
}

type reportRule struct {
	Origin    string `json:"origin"`
	Group     string `json:"group"`
	Rule      string `json:"rule"`
	Line      int    `json:"line"`
	Refused   int64  `json:"refused"`
	Overcount int64  `json:"overcount"`
}

type reportPath struct {
	URL       string `json:"url"`
	Refused   int64  `json:"refused"`
	Overcount int64  `json:"overcount"`
}

type reportTimeline struct {
	Interval        string         `json:"interval"`
	IntervalSeconds int64          `json:"interval_seconds"`
	Buckets         []reportBucket `json:"buckets"`
}

type reportBucket struct {
	Start             time.Time `json:"start"`
	Requests          int64     `json:"requests"`
	Allowed           int64     `json:"allowed"`
	Refused           int64     `json:"refused"`
	WouldBeRefused    int64     `json:"would_be_refused"`
	TooEarly          int64     `json:"too_early"`
	WouldBeTooEarly   int64     `json:"would_be_too_early"`
	DeniedDestination int64     `json:"denied_destination"`
	Errors            int64     `json:"errors"`
}

// runReport runs "robotsgate report" with args.
func runReport(t *testing.T, args ...string) (stdout, stderr string, exit int) {
	t.Helper()
	exit, stdout, stderr = runBinary(t, "", nil, append([]string{"report"}, args...)...)
	return stdout, stderr, exit
}

// jsonReport runs "robotsgate report -format json" with args, which must
// exit 0, and decodes its report.
func jsonReport(t *testing.T, args ...string) reportDoc {
	t.Helper()
	stdout, stderr, exit := runReport(t, append([]string{"-format", "json"}, args...)...)
	if exit != 0 {
		t.Fatalf("report %q: exit %d, want 0\nstderr:\n%s", args, exit, stderr)
	}
	return decodeReport(t, stdout)
}

func decodeReport(t *testing.T, stdout string) reportDoc {
	t.Helper()
	var doc reportDoc
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("the report is not a JSON document: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Fatalf("the report holds more than one JSON document:\n%s", stdout)
	}
	return doc
}

// sameJSON fails the test unless got and want encode to the same JSON:
// equal values, times equal to the nanosecond.
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		t.Errorf("%s:\ngot  %s\nwant %s", what, g, w)
	}
}

// rate is the compliance a report gives allowed requests of judged ones.
func rate(allowed, judged int) *float64 {
	r := float64(allowed) / float64(judged)
	return &r
}

// visit is one request through the proxy and the status it must get.
type visit struct {
	ua, url string
	status  int
	client  *http.Client // nil: the run's client
}

// proxyRun is what a run of visits left: each visit's answer and the
// time of its audit record, in order, and the audit log they are in.
type proxyRun struct {
	visits  []visit
	replies []reply
	times   []time.Time
	log     string
	start   time.Time // when the first visit was sent
}

// send makes the visits one after another, each once the previous one's
// answer is read, so that their records' times are in that order.
func (r *proxyRun) send(t *testing.T, client *http.Client, visits ...visit) {
	t.Helper()
	if r.start.IsZero() {
		r.start = time.Now()
	}
	for _, v := range visits {
		c := v.client
		if c == nil {
			c = client
		}
		got := get(t, c, v.url, v.ua)
		if got.status != v.status {
			// The time tells a machine too slow for a Crawl-delay from a
			// wrong answer.
			t.Fatalf("%s as %q: status %d, want %d, %v after the run's first request; X-Robotsgate-Decision %q, body %q",
				v.url, v.ua, got.status, v.status, time.Since(r.start).Round(time.Millisecond),
				got.header.Get("X-Robotsgate-Decision"), got.body)
		}
		r.visits = append(r.visits, v)
		r.replies = append(r.replies, got)
	}
}

// finish stops the proxy, which flushes its audit log, and matches each
// visit to its record. A record's time is when its request arrived, so
// the visits' records are in the order of their times; the log's order
// may differ (a forwarded request's record is written once the whole
// response is relayed, after the client may have sent the next request).
func (r *proxyRun) finish(t *testing.T, p *proxyProcess) {
	t.Helper()
	recs := stopAndAudit(t, p)
	if len(recs) != len(r.visits) {
		t.Fatalf("%d audit records for %d requests: %+v", len(recs), len(r.visits), recs)
	}
	type timed struct {
		auditRecord
		at time.Time
	}
	byTime := make([]timed, len(recs))
	for i, rec := range recs {
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(rec.raw["time"]))
		if err != nil {
			t.Fatalf("audit record %d: time: %v", i, err)
		}
		byTime[i] = timed{rec, at}
	}
	slices.SortStableFunc(byTime, func(x, y timed) int { return x.at.Compare(y.at) })
	for i, rec := range byTime {
		if rec.URL != r.visits[i].url || rec.UserAgent != r.visits[i].ua {
			t.Fatalf("audit record %d by time is %s as %q, want %s as %q", i, rec.URL, rec.UserAgent, r.visits[i].url, r.visits[i].ua)
		}
		// Cut points for -since and -until are taken between records.
		if i > 0 && !rec.at.After(r.times[i-1]) {
			t.Fatalf("audit record %d has the time of the one before (%v)", i, rec.at)
		}
		r.times = append(r.times, rec.at)
	}
	r.log = p.auditLog
}

// bytes is the length of the bodies the origin sent the visits numbered
// visits (the 200s; every other status here is the proxy's own): what the
// report must say was relayed.
func (r *proxyRun) bytes(visits ...int) int64 {
	var n int64
	for _, i := range visits {
		if r.replies[i].status == http.StatusOK {
			n += int64(len(r.replies[i].body))
		}
	}
	return n
}

// between is the visits numbered from to to, both included.
func between(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// metadataOrigin is in the ROBOTSGATE_DENY_DESTINATIONS of enforcedRun:
// refused before any connection is tried, so nothing leaves 127.0.0.1.
const metadataOrigin = "http://169.254.169.254"

// enforcedRun is one proxy run in enforce mode with every kind of verdict:
// two crawlers by token and a browser, an HTTP origin whose robots.txt
// disallows /private/ to all, an intercepted HTTPS origin with a group for
// GPTBot, an origin whose robots.txt is missing (404: no restrictions),
// one whose robots.txt fails (503: complete disallow), and a denied
// destination.
type enforcedRun struct {
	proxyRun
	plain, secure, missing, failing *origin
}

// GPTBot in two spellings: one crawler, its tokens matched case aside.
const (
	gptBot10 = "GPTBot/1.0"
	gptBot11 = "gptbot/1.1 (+https://openai.com/gptbot)"
)

func newEnforcedRun(t *testing.T) *enforcedRun {
	t.Helper()
	r := &enforcedRun{
		plain:   newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)}),
		secure:  newOrigin(t, true, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(identityRobots)}),
		missing: newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": statusPage(http.StatusNotFound)}),
		failing: newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": statusPage(http.StatusServiceUnavailable)}),
	}
	p := startProxy(t, upstreamCA(t, r.secure), "ROBOTSGATE_DENY_DESTINATIONS=169.254.0.0/16")
	a, b, c, d := r.plain.base(), r.secure.base(), r.missing.base(), r.failing.base()
	const ok, no = http.StatusOK, http.StatusForbidden
	r.send(t, p.client(t),
		// Googlebot: 0-8.
		visit{ua: googlebotUA, url: a + "/", status: ok},
		visit{ua: googlebotUA, url: a + "/page", status: ok},
		visit{ua: googlebotUA, url: a + "/private/a", status: no},
		visit{ua: googlebotUA, url: a + "/robots.txt", status: ok}, // always allowed; no robots.txt outcome
		visit{ua: googlebotUA, url: b + "/gpt/1", status: ok},
		visit{ua: googlebotUA, url: b + "/others/1", status: no},
		visit{ua: googlebotUA, url: c + "/c", status: ok},
		visit{ua: googlebotUA, url: d + "/d", status: no},
		visit{ua: googlebotUA, url: metadataOrigin + "/latest/meta-data/", status: no},
		// GPTBot: 9-16.
		visit{ua: gptBot10, url: a + "/", status: ok},
		visit{ua: gptBot10, url: a + "/private/b", status: no},
		visit{ua: gptBot10, url: a + "/private/b", status: no},
		visit{ua: gptBot10, url: b + "/gpt/2", status: no},
		visit{ua: gptBot10, url: b + "/others/2", status: ok},
		visit{ua: gptBot11, url: b + "/gpt/3", status: no},
		visit{ua: gptBot11, url: c + "/c", status: ok},
		visit{ua: gptBot11, url: d + "/d", status: no},
		// A browser, whose User-Agent names no token: 17-18.
		visit{ua: browserUA, url: a + "/private/c", status: no},
		visit{ua: browserUA, url: a + "/", status: ok},
	)
	r.finish(t, p)
	return r
}

// TestReportOfAnEnforcedRun reads the log of one enforce-mode run (see
// enforcedRun) every way the command allows.
func TestReportOfAnEnforcedRun(t *testing.T) {
	t.Parallel()
	run := newEnforcedRun(t)
	t.Run("figures", func(t *testing.T) { t.Parallel(); checkEnforcedFigures(t, run) })
	t.Run("text", func(t *testing.T) { t.Parallel(); checkEnforcedText(t, run) })
	t.Run("filters", func(t *testing.T) { t.Parallel(); checkFilters(t, run) })
	t.Run("log files", func(t *testing.T) { t.Parallel(); checkLogFiles(t, run) })
	t.Run("usage and exit status", func(t *testing.T) { t.Parallel(); checkReportExits(t, run) })
}

// checkEnforcedFigures checks every figure of the JSON report.
func checkEnforcedFigures(t *testing.T, run *enforcedRun) {
	doc := jsonReport(t, run.log)
	at := run.times
	a, b, c, d := run.plain.base(), run.secure.base(), run.missing.base(), run.failing.base()

	sameJSON(t, "sources", doc.Sources, []reportSource{{Name: run.log, Lines: 19}})
	sameJSON(t, "filter", doc.Filter, reportFilter{})
	if doc.Records != 19 || doc.FilteredOut != 0 || doc.Malformed != 0 || len(doc.MalformedLines) != 0 {
		t.Errorf("records %d, filtered out %d, malformed %d %v; want 19, 0, 0", doc.Records, doc.FilteredOut, doc.Malformed, doc.MalformedLines)
	}
	if !doc.From.Equal(at[0]) || !doc.To.Equal(at[18]) {
		t.Errorf("from %v to %v, want the first and last records' %v to %v", doc.From, doc.To, at[0], at[18])
	}
	sameJSON(t, "totals", doc.Totals, reportCounts{
		Requests: 19, Allowed: 9, Refused: 9, DeniedDestination: 1, Compliance: rate(9, 18),
		Bytes:     run.bytes(between(0, 18)...),
		FirstSeen: at[0], LastSeen: at[18],
	})

	sameJSON(t, "crawlers", doc.Crawlers, []reportCrawler{
		{
			Name: "Googlebot", By: "token", Origins: 5,
			reportCounts: reportCounts{
				Requests: 9, Allowed: 5, Refused: 3, DeniedDestination: 1, Compliance: rate(5, 8),
				Bytes: run.bytes(0, 1, 3, 4, 6), FirstSeen: at[0], LastSeen: at[8],
			},
			UserAgents: []reportSeen{{Value: googlebotUA, Count: 9}},
		},
		{
			// Named as first seen; "gptbot" is the same crawler.
			Name: "GPTBot", By: "token", Origins: 4,
			reportCounts: reportCounts{
				Requests: 8, Allowed: 3, Refused: 5, Compliance: rate(3, 8),
				Bytes: run.bytes(9, 13, 15), FirstSeen: at[9], LastSeen: at[16],
			},
			UserAgents: []reportSeen{{Value: gptBot10, Count: 5}, {Value: gptBot11, Count: 3}},
		},
		{
			Name: "", By: "token", Origins: 1,
			reportCounts: reportCounts{
				Requests: 2, Allowed: 1, Refused: 1, Compliance: rate(1, 2),
				Bytes: run.bytes(18), FirstSeen: at[17], LastSeen: at[18],
			},
			UserAgents: []reportSeen{{Value: browserUA, Count: 2}},
		},
	})

	origins := []reportOrigin{
		{
			Origin: a, Crawlers: 3,
			reportCounts: reportCounts{
				Requests: 9, Allowed: 5, Refused: 4, Compliance: rate(5, 9),
				Bytes: run.bytes(0, 1, 3, 9, 18), FirstSeen: at[0], LastSeen: at[18],
			},
			// /robots.txt itself (visit 3) has no robots.txt outcome.
			Robots: reportRobots{OK: 8}, Incidents: []reportIncident{},
		},
		{
			Origin: b, Crawlers: 2,
			reportCounts: reportCounts{
				Requests: 5, Allowed: 2, Refused: 3, Compliance: rate(2, 5),
				Bytes: run.bytes(4, 13), FirstSeen: at[4], LastSeen: at[14],
			},
			Robots: reportRobots{OK: 5}, Incidents: []reportIncident{},
		},
		{
			Origin: c, Crawlers: 2,
			reportCounts: reportCounts{
				Requests: 2, Allowed: 2, Compliance: rate(2, 2),
				Bytes: run.bytes(6, 15), FirstSeen: at[6], LastSeen: at[15],
			},
			Robots:    reportRobots{Unavailable: 2},
			Incidents: []reportIncident{{Outcome: "unavailable", From: at[6], To: at[15], Requests: 2, Status: 404}},
		},
		{
			Origin: d, Crawlers: 2,
			reportCounts: reportCounts{
				Requests: 2, Refused: 2, Compliance: rate(0, 2),
				FirstSeen: at[7], LastSeen: at[16],
			},
			Robots:    reportRobots{Unreachable: 2},
			Incidents: []reportIncident{{Outcome: "unreachable", From: at[7], To: at[16], Requests: 2, Status: 503}},
		},
		{
			// Refused before robots.txt was asked for: no outcome, and no
			// compliance, since robots.txt judged nothing.
			Origin: metadataOrigin, Crawlers: 1,
			reportCounts: reportCounts{Requests: 1, DeniedDestination: 1, FirstSeen: at[8], LastSeen: at[8]},
			Incidents:    []reportIncident{},
		},
	}
	// Busiest first, then by name: the order of the two origins of 2
	// requests depends on their ports.
	slices.SortStableFunc(origins, func(x, y reportOrigin) int {
		if x.Requests != y.Requests {
			return int(y.Requests - x.Requests)
		}
		return strings.Compare(x.Origin, y.Origin)
	})
	sameJSON(t, "origins", doc.Origins, origins)

	// Most refusals first; ties by origin, group, line.
	rules := []reportRule{
		{Origin: a, Group: "*", Rule: "/private/", Line: 2, Refused: 4},
		{Origin: b, Group: "GPTBot", Rule: "/gpt/", Line: 2, Refused: 2},
		{Origin: d, Group: "", Rule: "robots.txt 503: complete disallow", Refused: 2},
		{Origin: b, Group: "*", Rule: "/others/", Line: 5, Refused: 1},
	}
	if d < b {
		rules[1], rules[2] = rules[2], rules[1]
	}
	sameJSON(t, "top rules", doc.TopRules, rules)
	paths := []reportPath{
		{URL: a + "/private/b", Refused: 2}, {URL: d + "/d", Refused: 2},
		{URL: a + "/private/a", Refused: 1}, {URL: a + "/private/c", Refused: 1},
		{URL: b + "/gpt/2", Refused: 1}, {URL: b + "/gpt/3", Refused: 1}, {URL: b + "/others/1", Refused: 1},
	}
	slices.SortStableFunc(paths, func(x, y reportPath) int {
		if x.Refused != y.Refused {
			return int(y.Refused - x.Refused)
		}
		return strings.Compare(x.URL, y.URL)
	})
	sameJSON(t, "top paths", doc.TopPaths, paths)

	checkTimeline(t, doc, &run.proxyRun, func(i int, b *reportBucket) {
		switch v := run.visits[i]; {
		case strings.HasPrefix(v.url, metadataOrigin):
			b.DeniedDestination++
		case v.status == http.StatusOK:
			b.Allowed++
		default:
			b.Refused++
		}
	})
}

// checkTimeline checks the report's timeline against the times of a
// run's records: buckets of the interval the span calls for (1s for a run
// of less than a minute), from the first record's to the last's, each
// holding the visits whose records fall in it, counted by count.
func checkTimeline(t *testing.T, doc reportDoc, run *proxyRun, count func(visit int, b *reportBucket)) {
	t.Helper()
	tl := doc.Timeline
	step := tl.IntervalSeconds
	if span := run.times[len(run.times)-1].Sub(run.times[0]); span < time.Minute && (step != 1 || tl.Interval != "1s") {
		t.Errorf("timeline interval %q (%ds) for a span of %v, want 1s", tl.Interval, step, span)
	}
	if step <= 0 {
		t.Fatalf("timeline interval %ds", step)
	}
	first := run.times[0].Unix() / step
	n := run.times[len(run.times)-1].Unix()/step - first + 1
	want := make([]reportBucket, n)
	for i := range want {
		want[i].Start = time.Unix((first+int64(i))*step, 0).UTC()
	}
	for i, at := range run.times {
		b := &want[at.Unix()/step-first]
		b.Requests++
		count(i, b)
	}
	sameJSON(t, "timeline buckets", tl.Buckets, want)
}

// fields is the whitespace-separated words of the first line of text
// that starts with prefix (after spaces), or nil.
func fields(text, prefix string) []string {
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), prefix) {
			return strings.Fields(line)
		}
	}
	return nil
}

// rowOf is the words of the first line of text whose words start with
// first and end with last.
func rowOf(text string, first string, last ...string) []string {
	for line := range strings.SplitSeq(text, "\n") {
		f := strings.Fields(line)
		if len(f) > len(last) && f[0] == first && slices.Equal(f[len(f)-len(last):], last) {
			return f
		}
	}
	return nil
}

// rowStarting is the words of the first line of text whose words start
// with first.
func rowStarting(text string, first ...string) []string {
	for line := range strings.SplitSeq(text, "\n") {
		if f := strings.Fields(line); len(f) >= len(first) && slices.Equal(f[:len(first)], first) {
			return f
		}
	}
	return nil
}

// checkEnforcedText checks the text report's summary lines and a row of
// each table whose figures the JSON report checks, word by word: the
// alignment is the report's business.
func checkEnforcedText(t *testing.T, run *enforcedRun) {
	stdout, stderr, exit := runReport(t, "-format", "text", run.log)
	if exit != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", exit, stderr)
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"Records:", strings.Fields("Records: 19 counted, 0 outside the filter, 0 malformed")},
		{"Requests:", strings.Fields("Requests: 19: 9 allowed, 9 refused, 0 would be refused (audit mode); compliance 50.0%")},
		{"Pacing:", strings.Fields("Pacing: 0 delayed, 0 too early (429), 0 would be too early (audit mode)")},
		{"Seen:", strings.Fields("Seen: 3 crawlers, 5 origins")},
	} {
		if got := fields(stdout, c.prefix); !slices.Equal(got, c.want) {
			t.Errorf("text line %q, want %q\n%s", got, c.want, stdout)
		}
	}
	if got := fields(stdout, "Other:"); len(got) < 5 || !slices.Equal(got[:5], strings.Fields("Other: 1 refused by ROBOTSGATE_DENY_DESTINATIONS,")) {
		t.Errorf("text line %q does not count 1 denied destination\n%s", got, stdout)
	}

	// Crawler rows: the name, BY, then REQUESTS ALLOWED REFUSED WOULD-BE
	// COMPLIANCE DELAYED 429 WOULD-429, the bytes (a number and a unit),
	// ORIGINS, UA-MISMATCH, and two times of two words each.
	for _, c := range []struct {
		name   []string
		counts []string
		after  []string // ORIGINS UA-MISMATCH
	}{
		{[]string{"Googlebot"}, strings.Fields("token 9 5 3 0 62.5% 0 0 0"), []string{"5", "0"}},
		{[]string{"GPTBot"}, strings.Fields("token 8 3 5 0 37.5% 0 0 0"), []string{"4", "0"}},
		{[]string{"(no", "token)"}, strings.Fields("token 2 1 1 0 50.0% 0 0 0"), []string{"1", "0"}},
	} {
		row := rowStarting(stdout, append(slices.Clone(c.name), "token")...)
		if row == nil {
			t.Errorf("no crawler row starts with %q:\n%s", c.name, stdout)
			continue
		}
		row = row[len(c.name):]
		end := len(row) - 4 // before the times
		if len(row) < len(c.counts)+2+len(c.after)+4 || !slices.Equal(row[:len(c.counts)], c.counts) ||
			!slices.Equal(row[end-2:end], c.after) {
			t.Errorf("crawler row %q, want it to start with %q and have %q before its times", row, c.counts, c.after)
		}
	}
	// A top rule: REFUSED ORIGIN GROUP LINE RULE.
	if row := rowOf(stdout, "4", run.plain.base(), "*", "2", "/private/"); row == nil || len(row) != 5 {
		t.Errorf("no top rule row %q:\n%s", []string{"4", run.plain.base(), "*", "2", "/private/"}, stdout)
	}
	if row := rowOf(stdout, "2", run.failing.base(), "-", "-", "robots.txt", "503:", "complete", "disallow"); row == nil {
		t.Errorf("no top rule row for the failing robots.txt:\n%s", stdout)
	}
}

// checkFilters runs the report with each filter and checks which records
// it counted.
func checkFilters(t *testing.T, run *enforcedRun) {
	at := func(i int) string { return run.times[i].Format(time.RFC3339Nano) }
	a, b := run.plain, run.secure
	for _, c := range []struct {
		name   string
		args   []string
		want   []int         // the visits counted
		filter *reportFilter // how the report must describe its filter, if given
	}{
		{"token, case aside", []string{"-token", "googlebot"}, between(0, 8), nil},
		{"token of two spellings", []string{"-token", "GPTBOT"}, between(9, 16), nil},
		{"two tokens in one flag", []string{"-token", "GPTBot,Googlebot"}, between(0, 16), nil},
		{"origin", []string{"-origin", a.base()}, []int{0, 1, 2, 3, 9, 10, 11, 17, 18}, nil},
		{"origin with a slash", []string{"-origin", a.base() + "/"}, []int{0, 1, 2, 3, 9, 10, 11, 17, 18}, nil},
		{"host and port", []string{"-origin", a.addr}, []int{0, 1, 2, 3, 9, 10, 11, 17, 18}, nil},
		{"host and port of an https origin", []string{"-origin", b.addr}, []int{4, 5, 12, 13, 14}, nil},
		{"host alone", []string{"-origin", "127.0.0.1"}, slices.DeleteFunc(between(0, 18), func(i int) bool { return i == 8 }), nil},
		{"denied destination's host", []string{"-origin", "169.254.169.254"}, []int{8}, nil},
		{"origin repeated", []string{"-origin", run.missing.base(), "-origin", run.failing.base()}, []int{6, 7, 15, 16}, nil},
		{"since, inclusive", []string{"-since", at(5)}, between(5, 18), nil},
		{"until, exclusive", []string{"-until", at(5)}, between(0, 4), nil},
		{"since and until", []string{"-since", at(5), "-until", at(12)}, between(5, 11), nil},
		{"everything at once", []string{"-since", at(5), "-until", at(12), "-token", "gptbot", "-origin", a.addr}, []int{9, 10, 11},
			&reportFilter{Since: run.times[5], Until: run.times[12], Tokens: []string{"gptbot"}, Origins: []string{a.addr}}},
		{"nothing", []string{"-token", "bingbot"}, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			doc := jsonReport(t, append(c.args, run.log)...)
			want := reportCounts{Requests: int64(len(c.want))}
			crawlers, origins := map[string]bool{}, map[string]bool{}
			for _, i := range c.want {
				v := run.visits[i]
				switch {
				case strings.HasPrefix(v.url, metadataOrigin):
					want.DeniedDestination++
				case v.status == http.StatusOK:
					want.Allowed++
				default:
					want.Refused++
				}
				want.Bytes += run.bytes(i)
				crawlers[strings.ToLower(tokenOf(v.ua))] = true
				origins[originOf(v.url)] = true
			}
			if len(c.want) > 0 {
				want.FirstSeen, want.LastSeen = run.times[c.want[0]], run.times[c.want[len(c.want)-1]]
				if judged := want.Allowed + want.Refused; judged > 0 {
					want.Compliance = rate(int(want.Allowed), int(judged))
				}
			}
			if doc.Records != int64(len(c.want)) || doc.FilteredOut != int64(19-len(c.want)) {
				t.Errorf("records %d, filtered out %d; want %d, %d", doc.Records, doc.FilteredOut, len(c.want), 19-len(c.want))
			}
			sameJSON(t, "totals", doc.Totals, want)
			if c.filter != nil {
				sameJSON(t, "filter", doc.Filter, *c.filter)
			}
			var gotCrawlers, gotOrigins []string
			for _, cr := range doc.Crawlers {
				gotCrawlers = append(gotCrawlers, strings.ToLower(cr.Name))
			}
			for _, o := range doc.Origins {
				gotOrigins = append(gotOrigins, o.Origin)
			}
			slices.Sort(gotCrawlers)
			slices.Sort(gotOrigins)
			if w := slices.Sorted(maps.Keys(crawlers)); !slices.Equal(gotCrawlers, w) {
				t.Errorf("crawlers %q, want %q", gotCrawlers, w)
			}
			if w := slices.Sorted(maps.Keys(origins)); !slices.Equal(gotOrigins, w) {
				t.Errorf("origins %q, want %q", gotOrigins, w)
			}
		})
	}
}

// tokenOf is the token of the User-Agents of enforcedRun.
func tokenOf(ua string) string {
	switch ua {
	case googlebotUA:
		return "Googlebot"
	case gptBot10, gptBot11:
		return "GPTBot"
	}
	return ""
}

// originOf is a URL's scheme and authority.
func originOf(rawURL string) string {
	scheme, rest, _ := strings.Cut(rawURL, "://")
	host, _, _ := strings.Cut(rest, "/")
	return scheme + "://" + host
}

// figures is a report without what says where it came from: two reports
// of the same records must agree on it.
func figures(doc reportDoc) reportDoc {
	doc.Generated, doc.Sources, doc.Malformed, doc.MalformedLines = time.Time{}, nil, 0, nil
	return doc
}

// gzipped compresses data.
func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkLogFiles gives the run's log to the report in other shapes: with
// garbage lines, cut while being written, rotated into two files one of
// them compressed, on standard input. Each must give the clean log's
// figures, and say what it skipped.
func checkLogFiles(t *testing.T, run *enforcedRun) {
	clean := jsonReport(t, run.log)
	data, err := os.ReadFile(run.log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	lines = lines[:len(lines)-1] // after the last line break
	if len(lines) != 19 {
		t.Fatalf("the log has %d lines, want 19", len(lines))
	}
	join := func(parts ...[]string) []byte {
		return []byte(strings.Join(slices.Concat(parts...), ""))
	}
	// A record being written when the log was read: half a line.
	partial := lines[0][:len(lines[0])/2]

	for _, c := range []struct {
		name      string
		files     map[string][]byte // written to a new directory
		args      []string          // files named by their base name
		stdin     []byte
		sources   []reportSource // names are base names
		malformed []reportLine   // sources are base names
	}{
		{
			name: "garbage lines and a cut last line",
			// Lines 3 (not JSON) and 6 (JSON, not a record) are
			// malformed; the blank line 8 is not; the cut line 23 is
			// neither.
			files: map[string][]byte{"audit.log": join(lines[:2], []string{"not json at all\n"}, lines[2:4],
				[]string{`{"note":"JSON without time or verdict"}` + "\n"}, lines[4:5], []string{"\n"}, lines[5:],
				[]string{partial})},
			args:    []string{"audit.log"},
			sources: []reportSource{{Name: "audit.log", Lines: 23, Truncated: true}},
			malformed: []reportLine{
				{Source: "audit.log", Line: 3}, {Source: "audit.log", Line: 6},
			},
		},
		{
			// A whole record without its line break is a record.
			name:    "no line break after the last record",
			files:   map[string][]byte{"audit.log": bytes.TrimSuffix(data, []byte("\n"))},
			args:    []string{"audit.log"},
			sources: []reportSource{{Name: "audit.log", Lines: 19}},
		},
		{
			name:    "rotated, the older file compressed",
			files:   map[string][]byte{"audit.log.1.gz": gzipped(t, join(lines[:7])), "audit.log": join(lines[7:])},
			args:    []string{"audit.log.1.gz", "audit.log"},
			sources: []reportSource{{Name: "audit.log.1.gz", Lines: 7, Gzip: true}, {Name: "audit.log", Lines: 12}},
		},
		{
			// gzip is known by its magic bytes, whatever the name.
			name:    "compressed without .gz",
			files:   map[string][]byte{"audit.jsonl": gzipped(t, data)},
			args:    []string{"audit.jsonl"},
			sources: []reportSource{{Name: "audit.jsonl", Lines: 19, Gzip: true}},
		},
		{
			name:    "standard input",
			stdin:   data,
			sources: []reportSource{{Name: "-", Lines: 19}},
		},
		{
			name:    "a file and standard input",
			files:   map[string][]byte{"audit.log.1": join(lines[:10])},
			args:    []string{"audit.log.1", "-"},
			stdin:   join(lines[10:]),
			sources: []reportSource{{Name: "audit.log.1", Lines: 10}, {Name: "-", Lines: 9}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, content := range c.files {
				writeFile(t, dir, name, content)
			}
			args := []string{"report", "-format", "json"}
			for _, a := range c.args {
				if a != "-" {
					a = filepath.Join(dir, a)
				}
				args = append(args, a)
			}
			exit, stdout, stderr := runBinary(t, string(c.stdin), nil, args...)
			if exit != 0 {
				t.Fatalf("exit %d, want 0\nstderr:\n%s", exit, stderr)
			}
			doc := decodeReport(t, stdout)
			sameJSON(t, "figures", figures(doc), figures(clean))
			for i := range doc.Sources {
				doc.Sources[i].Name = filepath.Base(doc.Sources[i].Name)
			}
			sameJSON(t, "sources", doc.Sources, c.sources)
			if doc.Malformed != int64(len(c.malformed)) || len(doc.MalformedLines) != len(c.malformed) {
				t.Fatalf("malformed %d, listed %+v; want %d", doc.Malformed, doc.MalformedLines, len(c.malformed))
			}
			for i, m := range doc.MalformedLines {
				if filepath.Base(m.Source) != c.malformed[i].Source || m.Line != c.malformed[i].Line || m.Error == "" {
					t.Errorf("malformed line %+v, want %s:%d with an error", m, c.malformed[i].Source, c.malformed[i].Line)
				}
			}
			if c.malformed != nil && !strings.Contains(stderr, fmt.Sprintf("%d malformed lines", len(c.malformed))) {
				t.Errorf("stderr does not count the malformed lines:\n%s", stderr)
			}
		})
	}
}

// checkReportExits checks the command's exit statuses and where it writes.
func checkReportExits(t *testing.T, run *enforcedRun) {
	data, err := os.ReadFile(run.log)
	if err != nil {
		t.Fatal(err)
	}
	compressed := gzipped(t, data)
	for _, c := range []struct {
		name   string
		args   func(dir string) []string
		exit   int
		stderr []string // each must be in it
		check  func(t *testing.T, dir, stdout string)
	}{
		{
			name: "missing file",
			args: func(dir string) []string { return []string{run.log, filepath.Join(dir, "no-such.log")} },
			exit: 2, stderr: []string{"no-such.log"},
		},
		{
			// README's logrotate example before the first rotation: the
			// shell passes the unmatched pattern on as it is.
			name: "pattern that matches no file yet",
			args: func(dir string) []string {
				return []string{"-format", "json", filepath.Join(dir, "audit.log*.gz"), run.log}
			},
			stderr: []string{"audit.log*.gz; skipped"},
			check: func(t *testing.T, _, stdout string) {
				if doc := decodeReport(t, stdout); doc.Records != 19 || len(doc.Sources) != 1 {
					t.Errorf("%d records from %d logs, want 19 from 1", doc.Records, len(doc.Sources))
				}
			},
		},
		{
			name: "patterns only, matching nothing",
			args: func(dir string) []string { return []string{filepath.Join(dir, "audit.log*.gz")} },
			exit: 2, stderr: []string{"audit.log*.gz", "no log to read"},
		},
		{name: "bad -since", args: func(string) []string { return []string{"-since", "yesterday", run.log} }, exit: 2,
			stderr: []string{"-since", `"yesterday"`}},
		{name: "bad -until", args: func(string) []string { return []string{"-until", "2026-13-01", run.log} }, exit: 2,
			stderr: []string{"-until"}},
		{name: "-until before -since", args: func(string) []string {
			return []string{"-since", "2026-01-02T00:00:00Z", "-until", "2026-01-01T00:00:00Z", run.log}
		}, exit: 2, stderr: []string{"-until", "-since"}},
		{name: "bad -format", args: func(string) []string { return []string{"-format", "xml", run.log} }, exit: 2,
			stderr: []string{`"xml"`}},
		{name: "bad -top", args: func(string) []string { return []string{"-top", "0", run.log} }, exit: 2,
			stderr: []string{"-top"}},
		{name: "unknown flag", args: func(string) []string { return []string{"-verbose", run.log} }, exit: 2,
			stderr: []string{"-verbose"}},
		{
			name: "-o out.json",
			args: func(dir string) []string { return []string{"-o", filepath.Join(dir, "out.json"), run.log} },
			check: func(t *testing.T, dir, stdout string) {
				if stdout != "" {
					t.Errorf("stdout %q, want nothing: the report goes to the file", stdout)
				}
				out, err := os.ReadFile(filepath.Join(dir, "out.json"))
				if err != nil {
					t.Fatal(err)
				}
				if doc := decodeReport(t, string(out)); doc.Records != 19 || doc.Totals.Refused != 9 {
					t.Errorf("out.json: records %d, refused %d; want 19, 9", doc.Records, doc.Totals.Refused)
				}
			},
		},
		{
			name: "-o out.html",
			args: func(dir string) []string { return []string{"-o", filepath.Join(dir, "out.html"), run.log} },
			check: func(t *testing.T, dir, stdout string) {
				out, err := os.ReadFile(filepath.Join(dir, "out.html"))
				if err != nil {
					t.Fatal(err)
				}
				if stdout != "" || !bytes.HasPrefix(out, []byte("<!DOCTYPE html>")) {
					t.Errorf("stdout %q, out.html starts %q; want nothing and an HTML page", stdout, out[:min(len(out), 40)])
				}
			},
		},
		{
			name: "-top 1",
			args: func(string) []string { return []string{"-format", "json", "-top", "1", run.log} },
			check: func(t *testing.T, _, stdout string) {
				doc := decodeReport(t, stdout)
				sameJSON(t, "top rules", doc.TopRules, []reportRule{{Origin: run.plain.base(), Group: "*", Rule: "/private/", Line: 2, Refused: 4}})
				if len(doc.TopPaths) != 1 || doc.TopPaths[0].Refused != 2 {
					t.Errorf("top paths %+v, want one refused twice", doc.TopPaths)
				}
			},
		},
		{
			// The reader stops inside the gzip stream: what was read
			// counts, and the report says the log is incomplete.
			name: "gzip cut in the middle",
			args: func(dir string) []string {
				return []string{"-format", "json", writeFile(t, dir, "cut.log.gz", compressed[:len(compressed)/2])}
			},
			exit: 1, stderr: []string{"cut.log.gz", "covers what was read"},
			check: func(t *testing.T, _, stdout string) {
				doc := decodeReport(t, stdout)
				if len(doc.Sources) != 1 || doc.Sources[0].Error == "" || !doc.Sources[0].Gzip {
					t.Errorf("sources %+v, want one gzip source with an error", doc.Sources)
				}
				if doc.Records >= 19 {
					t.Errorf("%d records counted from half a log of 19", doc.Records)
				}
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			stdout, stderr, exit := runReport(t, c.args(dir)...)
			if exit != c.exit {
				t.Errorf("exit %d, want %d\nstderr:\n%s", exit, c.exit, stderr)
			}
			for _, want := range c.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr)
				}
			}
			if c.exit == 2 && stdout != "" {
				t.Errorf("a usage error wrote a report:\n%s", stdout)
			}
			if c.check != nil {
				c.check(t, dir, stdout)
			}
		})
	}
}

// TestReportModesAndPacing: what audit mode and each Crawl-delay mode
// make of requests, in the report's counts. Crawl-delay: 30 leaves a
// loaded machine ample time to send a request too early.
func TestReportModesAndPacing(t *testing.T) {
	t.Parallel()
	const (
		disallowing = "User-agent: *\nDisallow: /private/\n\nUser-agent: GPTBot\nDisallow: /\n"
		slow        = "User-agent: *\nCrawl-delay: 30\n"
		slowPrivate = "User-agent: *\nDisallow: /private/\nCrawl-delay: 30\n"
	)
	type want struct {
		counts reportCounts // the totals, but for the bytes and times
		bytes  []int        // the visits whose bodies count
		rules  []reportRule // the top rules, Origin left to the run's
		paths  []reportPath // the top paths, URLs as paths
	}
	for _, c := range []struct {
		name   string
		env    []string
		robots string
		visits []visit // URLs are paths
		pace   string  // the pace the audit log must give the last visit, or ""
		want   want
	}{
		{
			name: "audit mode", env: []string{"ROBOTSGATE_MODE=audit"}, robots: disallowing,
			visits: []visit{
				{ua: googlebotUA, url: "/", status: 200},
				{ua: googlebotUA, url: "/private/a", status: 200},
				{ua: googlebotUA, url: "/private/a", status: 200},
				{ua: gptBot10, url: "/x", status: 200},
			},
			want: want{
				counts: reportCounts{Requests: 4, Allowed: 1, WouldBeRefused: 3, Compliance: rate(1, 4)},
				bytes:  []int{0, 1, 2, 3},
				rules:  []reportRule{{Group: "*", Rule: "/private/", Line: 2, Refused: 2}, {Group: "GPTBot", Rule: "/", Line: 5, Refused: 1}},
				paths:  []reportPath{{URL: "/private/a", Refused: 2}, {URL: "/x", Refused: 1}},
			},
		},
		{
			// robots.txt allows all three: the 429s are allowed, and too
			// early.
			name: "Crawl-delay enforced", robots: slow,
			visits: []visit{
				{ua: googlebotUA, url: "/1", status: 200},
				{ua: googlebotUA, url: "/2", status: 429},
				{ua: googlebotUA, url: "/3", status: 429},
			},
			want: want{counts: reportCounts{Requests: 3, Allowed: 3, TooEarly: 2, Compliance: rate(3, 3)}, bytes: []int{0}},
		},
		{
			name: "Crawl-delay audited", env: []string{"ROBOTSGATE_CRAWL_DELAY=audit"}, robots: slow,
			visits: []visit{
				{ua: googlebotUA, url: "/1", status: 200},
				{ua: googlebotUA, url: "/2", status: 200},
				{ua: googlebotUA, url: "/3", status: 200},
			},
			want: want{counts: reportCounts{Requests: 3, Allowed: 3, WouldBeTooEarly: 2, Compliance: rate(3, 3)}, bytes: []int{0, 1, 2}},
		},
		{
			// A refusal robots.txt would make is only would-be in audit
			// mode, even when the pace answers 429 for another reason.
			name: "audit mode, Crawl-delay enforced", env: []string{"ROBOTSGATE_MODE=audit", "ROBOTSGATE_CRAWL_DELAY=enforce"}, robots: slowPrivate,
			visits: []visit{
				{ua: googlebotUA, url: "/1", status: 200},
				{ua: googlebotUA, url: "/private/x", status: 429},
				{ua: googlebotUA, url: "/2", status: 429},
			},
			want: want{
				counts: reportCounts{Requests: 3, Allowed: 2, WouldBeRefused: 1, TooEarly: 2, Compliance: rate(2, 3)},
				bytes:  []int{0},
				rules:  []reportRule{{Group: "*", Rule: "/private/", Line: 2, Refused: 1}},
				paths:  []reportPath{{URL: "/private/x", Refused: 1}},
			},
		},
		{
			// Held until its slot a second later, then forwarded.
			name: "Crawl-delay waited", env: []string{"ROBOTSGATE_CRAWL_DELAY=wait"}, robots: "User-agent: *\nCrawl-delay: 1\n",
			visits: []visit{
				{ua: googlebotUA, url: "/1", status: 200},
				{ua: googlebotUA, url: "/2", status: 200},
			},
			pace: "waited",
			want: want{counts: reportCounts{Requests: 2, Allowed: 2, Delayed: 1, Compliance: rate(2, 2)}, bytes: []int{0, 1}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(c.robots)})
			p := startProxy(t, c.env...)
			var run proxyRun
			visits := slices.Clone(c.visits)
			for i := range visits {
				visits[i].url = o.base() + visits[i].url
			}
			run.send(t, p.client(t), visits...)
			run.finish(t, p)
			if c.pace != "" {
				if rec := auditFor(t, p.audit(), visits[len(visits)-1].url); rec.Pace != c.pace {
					t.Fatalf("the last request's pace is %q, want %q: the machine is too slow for this test", rec.Pace, c.pace)
				}
			}

			doc := jsonReport(t, run.log)
			want := c.want.counts
			want.Bytes = run.bytes(c.want.bytes...)
			want.FirstSeen, want.LastSeen = run.times[0], run.times[len(run.times)-1]
			sameJSON(t, "totals", doc.Totals, want)
			if len(doc.Origins) != 1 {
				t.Fatalf("origins %+v, want one", doc.Origins)
			}
			sameJSON(t, "the origin's counts", doc.Origins[0].reportCounts, want)
			rules := []reportRule{}
			for _, r := range c.want.rules {
				r.Origin = o.base()
				rules = append(rules, r)
			}
			sameJSON(t, "top rules", doc.TopRules, rules)
			paths := []reportPath{}
			for _, p := range c.want.paths {
				p.URL = o.base() + p.URL
				paths = append(paths, p)
			}
			sameJSON(t, "top paths", doc.TopPaths, paths)
		})
	}
}

// TestReportCredentials: a client with a proxy credential is one crawler,
// by its credential's name, whatever User-Agents it sends; the report
// lists the tokens judged for it and the ones its User-Agents claimed
// instead.
func TestReportCredentials(t *testing.T) {
	t.Parallel()
	acme := newCredential("acme", "GPTBot") // judged as GPTBot
	plain := newCredential("plain", "")     // judged by its name
	wrong := plain
	wrong.password = "not-" + plain.password
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(identityRobots)})
	p := startProxy(t, "ROBOTSGATE_CREDENTIALS_FILE="+credentialsFile(t, acme, plain), "ROBOTSGATE_AUTH=optional")
	asAcme, asPlain, asWrong := p.clientAs(t, acme), p.clientAs(t, plain), p.clientAs(t, wrong)
	base := o.base()
	var run proxyRun
	run.send(t, p.client(t),
		visit{client: asAcme, ua: googlebotUA, url: base + "/gpt/a", status: 403},    // 0: judged as GPTBot
		visit{client: asAcme, ua: googlebotUA, url: base + "/others/a", status: 200}, // 1
		visit{client: asAcme, ua: gptBot10, url: base + "/x", status: 200},           // 2: no mismatch
		visit{client: asAcme, ua: browserUA, url: base + "/y", status: 200},          // 3: claims no token
		visit{client: asPlain, ua: googlebotUA, url: base + "/gpt/b", status: 200},   // 4: judged as "plain"
		visit{ua: googlebotUA, url: base + "/others/b", status: 403},                 // 5: anonymous
		visit{client: asWrong, ua: googlebotUA, url: base + "/z", status: 407},       // 6: no verdict, no origin
	)
	run.finish(t, p)
	at := run.times

	doc := jsonReport(t, run.log)
	sameJSON(t, "totals", doc.Totals, reportCounts{
		Requests: 7, Allowed: 4, Refused: 2, Errors: 1, Compliance: rate(4, 6),
		Bytes: run.bytes(1, 2, 3, 4), FirstSeen: at[0], LastSeen: at[6],
	})
	sameJSON(t, "crawlers", doc.Crawlers, []reportCrawler{
		{
			Name: "acme", By: "credential", Origins: 1,
			reportCounts: reportCounts{
				Requests: 4, Allowed: 3, Refused: 1, Compliance: rate(3, 4),
				Bytes: run.bytes(1, 2, 3), FirstSeen: at[0], LastSeen: at[3],
			},
			Tokens:        []reportSeen{{Value: "GPTBot", Count: 4}},
			UserAgents:    []reportSeen{{Value: googlebotUA, Count: 2}, {Value: gptBot10, Count: 1}, {Value: browserUA, Count: 1}},
			UAMismatches:  3,
			ClaimedTokens: []reportSeen{{Value: "Googlebot", Count: 2}, {Value: "", Count: 1}},
		},
		{
			// The 407: no credential was accepted, no token judged, no
			// origin reached.
			Name: "", By: "token", Origins: 0,
			reportCounts: reportCounts{Requests: 1, Errors: 1, FirstSeen: at[6], LastSeen: at[6]},
			UserAgents:   []reportSeen{{Value: googlebotUA, Count: 1}},
		},
		{
			Name: "Googlebot", By: "token", Origins: 1,
			reportCounts: reportCounts{Requests: 1, Refused: 1, Compliance: rate(0, 1), FirstSeen: at[5], LastSeen: at[5]},
			UserAgents:   []reportSeen{{Value: googlebotUA, Count: 1}},
		},
		{
			Name: "plain", By: "credential", Origins: 1,
			reportCounts: reportCounts{
				Requests: 1, Allowed: 1, Compliance: rate(1, 1),
				Bytes: run.bytes(4), FirstSeen: at[4], LastSeen: at[4],
			},
			Tokens:        []reportSeen{{Value: "plain", Count: 1}},
			UserAgents:    []reportSeen{{Value: googlebotUA, Count: 1}},
			UAMismatches:  1,
			ClaimedTokens: []reportSeen{{Value: "Googlebot", Count: 1}},
		},
	})
	if len(doc.Origins) != 1 || doc.Origins[0].Requests != 6 || doc.Origins[0].Crawlers != 3 {
		t.Errorf("origins %+v, want one with 6 requests from 3 crawlers (the 407 has no origin)", doc.Origins)
	}

	// -token matches a credential's name or the token judged.
	for _, c := range []struct {
		token string
		want  int64
	}{{"ACME", 4}, {"gptbot", 4}, {"plain", 1}, {"Googlebot", 1}} {
		if got := jsonReport(t, "-token", c.token, run.log).Records; got != c.want {
			t.Errorf("-token %s: %d records, want %d", c.token, got, c.want)
		}
	}
}

// TestReportStaleRobotsTxt: robots.txt cached for a second, then failing:
// the last good copy is obeyed (stale) until robots.txt answers again.
// Each span of failure is one incident.
func TestReportStaleRobotsTxt(t *testing.T) {
	t.Parallel()
	var failing atomic.Bool
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			statusPage(http.StatusServiceUnavailable)(w, r)
			return
		}
		robotsTxt(privateRobots)(w, r)
	}})
	p := startProxy(t, "ROBOTSGATE_CACHE_MAX_AGE=1s", "ROBOTSGATE_UNREACHABLE_RETRY=1s")
	client := p.client(t)
	base := o.base()
	var run proxyRun
	// expire makes robots.txt fail (or answer again), then waits for the
	// proxy to fetch it anew: a probe, by another crawler that the report
	// below leaves out, asks for a page until one makes the proxy fetch
	// robots.txt, which it does once its copy (or the failure) is a
	// second old. The Googlebot visit that follows meets the fetch's
	// outcome.
	expire := func(fail bool) {
		t.Helper()
		failing.Store(fail)
		fetched := o.count("/robots.txt")
		deadline := time.Now().Add(10 * time.Second)
		for o.count("/robots.txt") == fetched {
			if time.Now().After(deadline) {
				t.Fatalf("robots.txt not fetched again in 10 s (cached for 1 s)")
			}
			time.Sleep(20 * time.Millisecond) // a probe every 20 ms, at most ~50 a second
			run.send(t, client, visit{ua: "ProbeBot/1.0", url: base + "/probe", status: 200})
		}
	}
	// seen is the indexes of the Googlebot visits, numbered as below.
	var seen []int
	send := func(visits ...visit) {
		t.Helper()
		for _, v := range visits {
			seen = append(seen, len(run.visits))
			run.send(t, client, v)
		}
	}
	send(visit{ua: googlebotUA, url: base + "/a", status: 200}) // 0: ok
	expire(true)
	send(
		visit{ua: googlebotUA, url: base + "/b", status: 200},         // 1: stale
		visit{ua: googlebotUA, url: base + "/private/x", status: 403}, // 2: stale, and obeyed
	)
	// Had visit 2 come a second after the failed fetch, robots.txt would
	// have been fetched again, and the next retry put off for longer.
	if n := o.count("/robots.txt"); n != 2 {
		t.Fatalf("robots.txt fetched %d times by visit 2, want 2: the machine is too slow for this test", n)
	}
	expire(false)
	send(visit{ua: googlebotUA, url: base + "/c", status: 200}) // 3: ok again
	expire(true)
	send(visit{ua: googlebotUA, url: base + "/d", status: 200}) // 4: stale
	run.finish(t, p)
	at := func(i int) time.Time { return run.times[seen[i]] }

	doc := jsonReport(t, "-token", "Googlebot", run.log)
	if len(doc.Origins) != 1 {
		t.Fatalf("origins %+v, want one", doc.Origins)
	}
	got := doc.Origins[0]
	sameJSON(t, "robots.txt outcomes", got.Robots, reportRobots{OK: 2, Stale: 3})
	// A stale record's robots_status is the obeyed copy's, 200, not the
	// failure's: the report shows none.
	sameJSON(t, "incidents", got.Incidents, []reportIncident{
		{Outcome: "stale", From: at(1), To: at(2), Requests: 2},
		{Outcome: "stale", From: at(4), To: at(4), Requests: 1},
	})
	sameJSON(t, "counts", got.reportCounts, reportCounts{
		Requests: 5, Allowed: 4, Refused: 1, Compliance: rate(4, 5),
		Bytes: run.bytes(seen[0], seen[1], seen[3], seen[4]), FirstSeen: at(0), LastSeen: at(4),
	})
}

// TestReportHostileUserAgents: User-Agents are written by crawlers, and
// a report must show them as text, never as markup or terminal control:
// the HTML page escapes them and loads nothing, the text report replaces
// control characters, the JSON report keeps them exact.
func TestReportHostileUserAgents(t *testing.T) {
	t.Parallel()
	const (
		scriptUA = `<script>alert(1)</script>`
		imgUA    = `"><img src=x onerror=alert(1)>`
		tabUA    = "Tab\tBot/1.0"
		bidiUA   = "Bidi\u202eBot/1.0" // RIGHT-TO-LEFT OVERRIDE
		// Go's HTTP server answers 400 to a header with an escape
		// character before robotsgate sees it, so no run can log one;
		// the report must still be safe on a log that has it.
		escapeUA = "\x1b[31mRedBot/1.0\x1b[0m"
	)
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)})
	p := startProxy(t)
	var run proxyRun
	run.send(t, p.client(t),
		visit{ua: scriptUA, url: o.base() + "/", status: 200},
		visit{ua: imgUA, url: o.base() + "/private/x", status: 403},
		visit{ua: tabUA, url: o.base() + "/", status: 200},
		visit{ua: bidiUA, url: o.base() + "/", status: 200},
	)
	run.finish(t, p)
	data, err := os.ReadFile(run.log)
	if err != nil {
		t.Fatal(err)
	}
	// The last record again, as if its User-Agent had held escapes.
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rec); err != nil {
		t.Fatal(err)
	}
	rec["user_agent"], rec["token"] = escapeUA, "Red\x1bBot"
	extra, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	log := writeFile(t, t.TempDir(), "audit.log", append(data, append(extra, '\n')...))

	t.Run("json keeps them", func(t *testing.T) {
		doc := jsonReport(t, log)
		var uas []string
		for _, c := range doc.Crawlers {
			for _, ua := range c.UserAgents {
				uas = append(uas, ua.Value)
			}
		}
		slices.Sort(uas)
		want := []string{scriptUA, imgUA, tabUA, bidiUA, escapeUA}
		slices.Sort(want)
		if !slices.Equal(uas, want) {
			t.Errorf("User-Agents %q, want %q", uas, want)
		}
	})

	t.Run("text replaces control characters", func(t *testing.T) {
		stdout, stderr, exit := runReport(t, "-format", "text", log)
		if exit != 0 {
			t.Fatalf("exit %d\n%s", exit, stderr)
		}
		for _, raw := range []string{"\x1b", "\t", "\u202e"} {
			if strings.Contains(stdout, raw) {
				t.Errorf("the text report holds %q raw:\n%s", raw, stdout)
			}
		}
		for _, shown := range []string{
			`"Tab` + "\uFFFD" + `Bot/1.0"`, `"Bidi` + "\uFFFD" + `Bot/1.0"`,
			`"` + "\uFFFD" + `[31mRedBot/1.0` + "\uFFFD" + `[0m"`, "Red\uFFFDBot",
			`"` + scriptUA + `"`, // text is not markup: as sent
		} {
			if !strings.Contains(stdout, shown) {
				t.Errorf("the text report does not show %q:\n%s", shown, stdout)
			}
		}
	})

	t.Run("html escapes them and loads nothing", func(t *testing.T) {
		stdout, stderr, exit := runReport(t, "-format", "html", log)
		if exit != 0 {
			t.Fatalf("exit %d\n%s", exit, stderr)
		}
		checkInertHTML(t, stdout, scriptUA, imgUA)
	})
}

// checkInertHTML checks that page can neither load nor run anything but
// its own inline style and script, and that each of texts appears in it
// as text.
func checkInertHTML(t *testing.T, page string, texts ...string) {
	t.Helper()
	var csp string
	scripts, found := 0, map[string]bool{}
	z := html.NewTokenizer(strings.NewReader(page))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		tok := z.Token()
		switch tt {
		case html.TextToken:
			for _, s := range texts {
				if strings.Contains(tok.Data, s) {
					found[s] = true
				}
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			switch tok.Data {
			case "script":
				scripts++
			case "link", "img", "iframe", "object", "embed", "base", "frame", "form":
				t.Errorf("the page has a <%s> element: %s", tok.Data, tok)
			}
			httpEquiv, content := "", ""
			for _, a := range tok.Attr {
				key := strings.ToLower(a.Key)
				switch {
				case key == "src" || key == "srcset" || key == "action" || key == "formaction" || key == "poster":
					t.Errorf("the page has a %s attribute: %s", key, tok)
				case key == "href" && !strings.HasPrefix(a.Val, "#"):
					t.Errorf("the page links out: %s", tok)
				case strings.HasPrefix(key, "on"):
					t.Errorf("the page has an event handler: %s", tok)
				case key == "http-equiv":
					httpEquiv = a.Val
				case key == "content":
					content = a.Val
				}
			}
			if tok.Data == "meta" && strings.EqualFold(httpEquiv, "Content-Security-Policy") {
				csp = content
			}
		}
	}
	if !strings.HasPrefix(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q, want it to start with default-src 'none'", csp)
	}
	if scripts != 1 {
		t.Errorf("%d <script> elements, want the page's own one", scripts)
	}
	for _, s := range texts {
		if !found[s] {
			t.Errorf("the page does not show %q as text", s)
		}
		if strings.Contains(page, s) {
			t.Errorf("the page holds %q unescaped", s)
		}
	}
}
