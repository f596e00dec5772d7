package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"robotsgate/proxy/audit"
	"robotsgate/robots"
)

// t0 is when the records of these tests start; on a whole hour, so the
// timeline's buckets start on it.
var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// allowed is a request robots.txt allowed and the proxy forwarded, as
// the proxy logs it; tests change the fields they look at.
func allowed(at time.Time) audit.Record {
	return audit.Record{
		Time: at, Client: "10.0.0.1:40000", Method: "GET",
		Decision: robots.Decision{
			URL: "https://example.com/a", UserAgent: "Mozilla/5.0 (compatible; GPTBot/1.0)", Token: "GPTBot",
			Verdict: "allow", Reason: "no matching rule", RobotsOutcome: "ok", RobotsStatus: 200,
		},
		Origin: "https://example.com", PathsChecked: true, RobotsCache: "hit", Mode: "enforce",
		Forwarded: true, Status: 200, Upstream: 200, Bytes: 100, Duration: 1,
	}
}

// refused is a request robots.txt disallowed, answered 403.
func refused(at time.Time) audit.Record {
	r := allowed(at)
	r.Verdict, r.Reason, r.Rule, r.RuleLine, r.Group = "disallow", "disallow: /private/ (line 4)", "/private/", 4, "*"
	r.URL, r.RobotsTxt = "https://example.com/private/x", "https://example.com/robots.txt"
	r.Forwarded, r.Status, r.Upstream, r.Bytes = false, 403, 0, 0
	return r
}

// encode writes records as audit log lines.
func encode(tb testing.TB, recs ...audit.Record) []byte {
	tb.Helper()
	var buf bytes.Buffer
	for i := range recs {
		line, err := json.Marshal(&recs[i])
		if err != nil {
			tb.Fatal(err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// readLogs reads each log as a source named log1, log2, ... and returns
// the reader (for its internal state) and its report.
func readLogs(tb testing.TB, opts Options, logs ...[]byte) (*Reader, *Report) {
	tb.Helper()
	if opts.Now.IsZero() {
		opts.Now = t0.Add(48 * time.Hour)
	}
	rd := NewReader(opts)
	for i, log := range logs {
		if err := rd.Read(context.Background(), fmt.Sprintf("log%d", i+1), bytes.NewReader(log)); err != nil {
			tb.Fatalf("Read log%d: %v", i+1, err)
		}
	}
	return rd, rd.Report()
}

func rate(f float64) *float64 { return &f }

func TestCountsOfOneRecord(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(r *audit.Record)
		want   Counts // Requests, FirstSeen and LastSeen are filled in
	}{
		{"allowed", func(r *audit.Record) { r.Bytes = 1234 },
			Counts{Allowed: 1, Compliance: rate(1), Bytes: 1234}},
		{"allowed, held until its slot", func(r *audit.Record) { r.Pace = "waited" },
			Counts{Allowed: 1, Compliance: rate(1), Delayed: 1, Bytes: 100}},
		{"allowed, client left while held", func(r *audit.Record) { r.Pace, r.Forwarded, r.Bytes = "gone", false, 0 },
			Counts{Allowed: 1, Compliance: rate(1), Delayed: 1}},
		{"too early, 429", func(r *audit.Record) { r.Pace, r.Forwarded, r.Status, r.Bytes = "too_early", false, 429, 0 },
			Counts{Allowed: 1, Compliance: rate(1), TooEarly: 1}},
		{"too early, forwarded (audit mode)", func(r *audit.Record) { r.Pace = "too_early" },
			Counts{Allowed: 1, Compliance: rate(1), WouldBeTooEarly: 1, Bytes: 100}},
		{"busy, 429", func(r *audit.Record) { r.Pace, r.Forwarded, r.Bytes = "busy", false, 0 },
			Counts{Allowed: 1, Compliance: rate(1), TooEarly: 1}},
		{"busy, forwarded", func(r *audit.Record) { r.Pace = "busy" },
			Counts{Allowed: 1, Compliance: rate(1), WouldBeTooEarly: 1, Bytes: 100}},
		{"schedule full, 429", func(r *audit.Record) { r.Pace, r.Forwarded, r.Bytes = "full", false, 0 },
			Counts{Allowed: 1, Compliance: rate(1), TooEarly: 1}},
		{"schedule full, forwarded", func(r *audit.Record) { r.Pace = "full" },
			Counts{Allowed: 1, Compliance: rate(1), WouldBeTooEarly: 1, Bytes: 100}},
		{"a pace this version does not know", func(r *audit.Record) { r.Pace = "later" },
			Counts{Allowed: 1, Compliance: rate(1), Bytes: 100}},
		{"refused", func(r *audit.Record) { *r = refused(r.Time) },
			Counts{Refused: 1, Compliance: rate(0)}},
		{"would be refused (audit mode)", func(r *audit.Record) { *r = refused(r.Time); r.Forwarded, r.Bytes = true, 7 },
			Counts{WouldBeRefused: 1, Compliance: rate(0), Bytes: 7}},
		{"refused and too early", func(r *audit.Record) { *r = refused(r.Time); r.Pace = "too_early" },
			Counts{Refused: 1, Compliance: rate(0), TooEarly: 1}},
		{"denied destination", func(r *audit.Record) { *r = refused(r.Time); r.DeniedDestination = true },
			Counts{DeniedDestination: 1}},
		{"denied destination, forwarded", func(r *audit.Record) {
			*r = refused(r.Time)
			r.DeniedDestination, r.Forwarded = true, true
		}, Counts{DeniedDestination: 1}},
		{"no verdict", func(r *audit.Record) { r.Verdict, r.Forwarded, r.Status, r.Bytes = "error", false, 503, 0 },
			Counts{Errors: 1}},
		{"a verdict this version does not know", func(r *audit.Record) { r.Verdict, r.Bytes = "maybe", 0 },
			Counts{Errors: 1}},
		{"no verdict, busy", func(r *audit.Record) { r.Verdict, r.Pace, r.Forwarded, r.Bytes = "error", "busy", false, 0 },
			Counts{Errors: 1, TooEarly: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			at := t0.Add(90 * time.Second)
			r := allowed(at)
			c.change(&r)
			_, rep := readLogs(t, Options{}, encode(t, r))
			want := c.want
			want.Requests, want.FirstSeen, want.LastSeen = 1, at, at
			if rep.Records != 1 || rep.Malformed != 0 {
				t.Fatalf("%d records, %d malformed", rep.Records, rep.Malformed)
			}
			// The same counts for the whole log, its crawler, its origin.
			for what, got := range map[string]Counts{"totals": rep.Totals, "crawler": rep.Crawlers[0].Counts, "origin": rep.Origins[0].Counts} {
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s:\n got %s\nwant %s", what, showCounts(got), showCounts(want))
				}
			}
			b := rep.Timeline.Buckets
			wantBucket := Bucket{Start: at, Requests: 1, Allowed: want.Allowed, Refused: want.Refused, WouldBeRefused: want.WouldBeRefused,
				TooEarly: want.TooEarly, WouldBeTooEarly: want.WouldBeTooEarly, DeniedDestination: want.DeniedDestination, Errors: want.Errors}
			if len(b) != 1 || b[0] != wantBucket {
				t.Errorf("timeline %+v, want [%+v]", b, wantBucket)
			}
		})
	}
}

func showCounts(c Counts) string {
	compliance := "nil"
	if c.Compliance != nil {
		compliance = fmt.Sprint(*c.Compliance)
	}
	c.Compliance = nil
	return fmt.Sprintf("%+v compliance %s", c, compliance)
}

func TestCountsOverSeveralRecords(t *testing.T) {
	var recs []audit.Record
	for _, s := range []int{5, 0, 2} { // out of order: first and last seen are the extremes
		recs = append(recs, allowed(t0.Add(time.Duration(s)*time.Second)))
	}
	recs = append(recs, refused(t0.Add(3*time.Second)), refused(t0.Add(4*time.Second)))
	recs[1].Bytes = 1 << 40
	_, rep := readLogs(t, Options{}, encode(t, recs...))
	want := Counts{Requests: 5, Allowed: 3, Refused: 2, Compliance: rate(0.6), Bytes: 1<<40 + 200, FirstSeen: t0, LastSeen: t0.Add(5 * time.Second)}
	if !reflect.DeepEqual(rep.Totals, want) {
		t.Errorf("totals\n got %s\nwant %s", showCounts(rep.Totals), showCounts(want))
	}
	if !rep.From.Equal(t0) || !rep.To.Equal(t0.Add(5*time.Second)) {
		t.Errorf("span %v to %v", rep.From, rep.To)
	}
}

func TestNothingJudgedHasNoCompliance(t *testing.T) {
	r1, r2 := allowed(t0), refused(t0)
	r1.Verdict = "error"
	r2.DeniedDestination = true
	_, rep := readLogs(t, Options{}, encode(t, r1, r2))
	if rep.Totals.Compliance != nil || rep.Crawlers[0].Compliance != nil || rep.Origins[0].Compliance != nil {
		t.Errorf("compliance %v %v %v, want none: no request was judged", rep.Totals.Compliance, rep.Crawlers[0].Compliance, rep.Origins[0].Compliance)
	}
	var out bytes.Buffer
	if err := WriteJSON(&out, rep); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out.Bytes(), []byte(`"compliance"`)) {
		t.Errorf("JSON says a compliance:\n%s", out.Bytes())
	}
}

func TestCrawlers(t *testing.T) {
	ptr := func(s string) *string { return &s }
	var recs []audit.Record
	add := func(at int, change func(r *audit.Record)) {
		r := allowed(t0.Add(time.Duration(at) * time.Second))
		change(&r)
		recs = append(recs, r)
	}
	// A token crawler under three spellings, on two origins.
	add(0, func(r *audit.Record) {})
	add(1, func(r *audit.Record) { r.Token, r.Origin, r.UserAgent = "gptbot", "https://b.example", "gptbot/2" })
	add(2, func(r *audit.Record) { r.Token = "GPTBOT" })
	// A credential whose token is GPTBot too: the credential names the
	// crawler, not the token. Two of its requests claim another token.
	add(3, func(r *audit.Record) {
		r.Credential, r.UAToken, r.UAMismatch, r.UserAgent = "acme", ptr("Googlebot"), true, "Googlebot/2.1"
	})
	add(4, func(r *audit.Record) {
		r.Credential, r.UAToken, r.UAMismatch, r.UserAgent, r.Origin = "acme", ptr("Googlebot"), true, "Googlebot/2.1", "https://c.example"
	})
	add(5, func(r *audit.Record) { r.Credential, r.Token, r.UAToken = "acme", "AcmeBot", ptr("GPTBot") })
	// A mismatch with no claimed token (a browser's User-Agent).
	add(6, func(r *audit.Record) {
		r.Credential, r.UAToken, r.UAMismatch, r.UserAgent = "acme", ptr(""), true, "Mozilla/5.0 Firefox/121.0"
	})
	// Credentials are names as given: another case is another credential.
	add(7, func(r *audit.Record) { r.Credential = "ACME" })
	// A browser: no token, only "*" groups.
	add(8, func(r *audit.Record) {
		r.Token, r.UserAgent, r.Origin = "", "Mozilla/5.0 Firefox/121.0", "https://c.example"
	})
	// A request refused before its origin was known counts for its
	// crawler, not for any origin.
	add(9, func(r *audit.Record) { r.Token, r.UserAgent, r.Origin, r.Verdict = "", "curl/8", "", "error" })

	_, rep := readLogs(t, Options{}, encode(t, recs...))
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	gpt := "Mozilla/5.0 (compatible; GPTBot/1.0)"
	want := []Crawler{
		{Name: "acme", By: "credential",
			Counts:  Counts{Requests: 4, Allowed: 4, Compliance: rate(1), Bytes: 400, FirstSeen: at(3), LastSeen: at(6)},
			Origins: 2, Tokens: []Seen{{Value: "GPTBot", Count: 3}, {Value: "AcmeBot", Count: 1}},
			UserAgents:   []Seen{{Value: "Googlebot/2.1", Count: 2}, {Value: "Mozilla/5.0 (compatible; GPTBot/1.0)", Count: 1}, {Value: "Mozilla/5.0 Firefox/121.0", Count: 1}},
			UAMismatches: 3, ClaimedTokens: []Seen{{Value: "Googlebot", Count: 2}, {Value: "", Count: 1}}},
		{Name: "GPTBot", By: "token",
			Counts:  Counts{Requests: 3, Allowed: 3, Compliance: rate(1), Bytes: 300, FirstSeen: at(0), LastSeen: at(2)},
			Origins: 2, UserAgents: []Seen{{Value: gpt, Count: 2}, {Value: "gptbot/2", Count: 1}}, ClaimedTokens: []Seen{}},
		{Name: "", By: "token",
			Counts:  Counts{Requests: 2, Allowed: 1, Errors: 1, Compliance: rate(1), Bytes: 200, FirstSeen: at(8), LastSeen: at(9)},
			Origins: 1, UserAgents: []Seen{{Value: "Mozilla/5.0 Firefox/121.0", Count: 1}, {Value: "curl/8", Count: 1}}, ClaimedTokens: []Seen{}},
		{Name: "ACME", By: "credential",
			Counts:  Counts{Requests: 1, Allowed: 1, Compliance: rate(1), Bytes: 100, FirstSeen: at(7), LastSeen: at(7)},
			Origins: 1, Tokens: []Seen{{Value: "GPTBot", Count: 1}}, UserAgents: []Seen{{Value: gpt, Count: 1}}, ClaimedTokens: []Seen{}},
	}
	if !reflect.DeepEqual(rep.Crawlers, want) {
		got, _ := json.MarshalIndent(rep.Crawlers, "", " ")
		exp, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("crawlers:\n%s\nwant:\n%s", got, exp)
	}
	crawlersPerOrigin := map[string]int{}
	requestsPerOrigin := map[string]int64{}
	for _, o := range rep.Origins {
		crawlersPerOrigin[o.Origin], requestsPerOrigin[o.Origin] = o.Crawlers, o.Requests
	}
	// example.com: GPTBot, acme, ACME; b: GPTBot; c: acme and the browser.
	if want := map[string]int{"https://example.com": 3, "https://b.example": 1, "https://c.example": 2}; !reflect.DeepEqual(crawlersPerOrigin, want) {
		t.Errorf("crawlers per origin %v, want %v", crawlersPerOrigin, want)
	}
	if want := map[string]int64{"https://example.com": 6, "https://b.example": 1, "https://c.example": 2}; !reflect.DeepEqual(requestsPerOrigin, want) {
		t.Errorf("requests per origin %v, want %v", requestsPerOrigin, want)
	}
	if rep.Totals.Requests != 10 {
		t.Errorf("%d requests in all, want 10", rep.Totals.Requests)
	}
}

// A crawler that rotates its User-Agent at every request costs a bounded
// sketch, not a string per request.
func TestCrawlerRotatingUserAgents(t *testing.T) {
	const n = 10_000
	recs := make([]audit.Record, n)
	for i := range recs {
		recs[i] = allowed(t0.Add(time.Duration(i) * time.Millisecond))
		recs[i].UserAgent = fmt.Sprintf("Mozilla/5.0 (compatible; GPTBot/1.%d)", i)
	}
	// One User-Agent comes more often than n/crawlerValues times: the
	// sketch must keep it, first.
	for i := 0; i < n; i += 10 {
		recs[i].UserAgent = "GPTBot/heavy"
	}
	rd, rep := readLogs(t, Options{}, encode(t, recs...))
	if len(rep.Crawlers) != 1 {
		t.Fatalf("%d crawlers", len(rep.Crawlers))
	}
	c := rd.agg.crawlers[crawlerKey{name: "gptbot"}]
	if len(c.userAgents.heap) > crawlerValues || len(c.userAgents.index) > crawlerValues {
		t.Errorf("the sketch holds %d entries (%d indexed), want at most %d", len(c.userAgents.heap), len(c.userAgents.index), crawlerValues)
	}
	uas := rep.Crawlers[0].UserAgents
	if len(uas) != crawlerValuesShown {
		t.Errorf("%d User-Agents shown, want %d", len(uas), crawlerValuesShown)
	}
	if uas[0].Value != "GPTBot/heavy" || uas[0].Count-uas[0].Overcount > n/10 || uas[0].Count < n/10 {
		t.Errorf("first User-Agent %+v, want GPTBot/heavy counted %d within its overcount", uas[0], n/10)
	}
	if rep.Crawlers[0].Requests != n {
		t.Errorf("%d requests, want %d", rep.Crawlers[0].Requests, n)
	}
}

func TestIncidents(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	robotsTxt := func(s int, outcome string, status int, cache string) audit.Record {
		r := allowed(at(s))
		r.RobotsOutcome, r.RobotsStatus, r.RobotsCache = outcome, status, cache
		return r
	}
	recs := []audit.Record{
		robotsTxt(0, "ok", 200, "loaded"),
		robotsTxt(1, "unreachable", 503, "loaded"),
		robotsTxt(3, "unreachable", 500, "hit"),
		robotsTxt(2, "unreachable", 0, "hit"), // out of order, and a network error: no status; the last one seen stays
		robotsTxt(4, "ok", 200, "loaded"),
		robotsTxt(5, "ok", 200, "stale"), // as the proxy writes it: the obeyed copy's outcome and status
		robotsTxt(6, "unavailable", 404, "loaded"),
		robotsTxt(7, "", 0, ""),              // /robots.txt itself: no outcome, no incident
		robotsTxt(8, "unknown", 0, "loaded"), // an outcome this version does not know
		robotsTxt(9, "restricted", 401, "loaded"),
		robotsTxt(10, "restricted", 403, "hit"),
	}
	_, rep := readLogs(t, Options{}, encode(t, recs...))
	o := rep.Origins[0]
	wantIncidents := []Incident{
		{Outcome: "unreachable", From: at(1), To: at(3), Requests: 3, Status: 500},
		{Outcome: "stale", From: at(5), To: at(5), Requests: 1}, // the failure's status is not in the record
		{Outcome: "unavailable", From: at(6), To: at(6), Requests: 1, Status: 404},
		{Outcome: "restricted", From: at(9), To: at(10), Requests: 2, Status: 403},
	}
	if !reflect.DeepEqual(o.Incidents, wantIncidents) {
		t.Errorf("incidents\n got %+v\nwant %+v", o.Incidents, wantIncidents)
	}
	if want := (RobotsOutcomes{OK: 2, Unavailable: 1, Restricted: 2, Unreachable: 3, Stale: 1}); o.Robots != want {
		t.Errorf("robots outcomes %+v, want %+v", o.Robots, want)
	}
	if o.IncidentsOmitted != 0 {
		t.Errorf("%d incidents omitted", o.IncidentsOmitted)
	}
}

func TestIncidentsKeepTheLatest(t *testing.T) {
	const n = maxIncidents + 5
	var recs []audit.Record
	for i := range n {
		ok, down := allowed(t0.Add(time.Duration(2*i)*time.Second)), allowed(t0.Add(time.Duration(2*i+1)*time.Second))
		down.RobotsOutcome, down.RobotsStatus = "unreachable", 500+i
		recs = append(recs, ok, down)
	}
	_, rep := readLogs(t, Options{}, encode(t, recs...))
	o := rep.Origins[0]
	if len(o.Incidents) != maxIncidents || o.IncidentsOmitted != n-maxIncidents {
		t.Fatalf("%d incidents kept, %d omitted; want %d and %d", len(o.Incidents), o.IncidentsOmitted, maxIncidents, n-maxIncidents)
	}
	for k, in := range o.Incidents {
		i := n - maxIncidents + k // the earliest are the ones dropped
		want := Incident{Outcome: "unreachable", From: t0.Add(time.Duration(2*i+1) * time.Second), Requests: 1, Status: 500 + i}
		want.To = want.From
		if in != want {
			t.Errorf("incident %d: %+v, want %+v", k, in, want)
		}
	}
}

func TestFilterTime(t *testing.T) {
	var recs []audit.Record
	for s := -1; s <= 2; s++ {
		recs = append(recs, allowed(t0.Add(time.Duration(s)*time.Second)))
	}
	log := encode(t, recs...)
	for _, c := range []struct {
		name          string
		filter        Filter
		records, from int64 // from: the first second counted, after t0
	}{
		{"none", Filter{}, 4, -1},
		{"since is inclusive", Filter{Since: t0}, 3, 0},
		{"until is exclusive", Filter{Until: t0}, 1, -1},
		{"both", Filter{Since: t0, Until: t0.Add(2 * time.Second)}, 2, 0},
		{"since in another zone", Filter{Since: t0.In(time.FixedZone("X", 5*3600))}, 3, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, rep := readLogs(t, Options{Filter: c.filter}, log)
			if rep.Records != c.records || rep.FilteredOut != 4-c.records {
				t.Errorf("%d records, %d filtered out; want %d, %d", rep.Records, rep.FilteredOut, c.records, 4-c.records)
			}
			if want := t0.Add(time.Duration(c.from) * time.Second); !rep.From.Equal(want) {
				t.Errorf("from %v, want %v", rep.From, want)
			}
			if !reflect.DeepEqual(rep.Filter, c.filter) {
				t.Errorf("the report's filter %+v, want %+v", rep.Filter, c.filter)
			}
		})
	}
}

func TestFilterTokens(t *testing.T) {
	gpt, bing, acme := allowed(t0), allowed(t0), allowed(t0)
	bing.Token = "bingbot"
	acme.Credential, acme.Token = "acme", "AcmeBot"
	log := encode(t, gpt, bing, acme)
	for _, c := range []struct {
		tokens []string
		want   []string // the crawlers counted
	}{
		{[]string{"gptbot"}, []string{"GPTBot"}},
		{[]string{"GPTBOT", "BingBot"}, []string{"GPTBot", "bingbot"}},
		{[]string{"ACME"}, []string{"acme"}},    // a credential
		{[]string{"acmebot"}, []string{"acme"}}, // the token judged under a credential
		{[]string{"nobody"}, nil},
		{[]string{"gpt"}, nil}, // a whole token, not a part
	} {
		t.Run(fmt.Sprint(c.tokens), func(t *testing.T) {
			_, rep := readLogs(t, Options{Filter: Filter{Tokens: c.tokens}}, log)
			var got []string
			for _, cr := range rep.Crawlers {
				got = append(got, cr.Name)
			}
			if !reflect.DeepEqual(got, c.want) || rep.FilteredOut != int64(3-len(c.want)) {
				t.Errorf("crawlers %q (%d filtered out), want %q", got, rep.FilteredOut, c.want)
			}
		})
	}
}

func TestFilterOrigins(t *testing.T) {
	for _, c := range []struct {
		pattern, origin string
		match           bool
	}{
		{"https://example.com", "https://example.com", true},
		{"https://example.com/", "https://example.com", true}, // a trailing slash
		{"HTTPS://Example.COM", "https://example.com", true},
		{"http://example.com", "https://example.com", false}, // the wrong scheme
		{"https://example.com:8443", "https://example.com", false},
		{"https://example.com/a", "https://example.com", false},
		{"example.com", "https://example.com", true},
		{"example.com/", "https://example.com", true},
		{"Example.Com", "https://example.com", true},
		{"example.com", "https://example.com:8443", true}, // a host alone, any port
		{"example.com", "http://example.com:8080", true},
		{"example.com:8443", "https://example.com:8443", true},
		{"example.com:8080", "https://example.com:8443", false}, // the wrong port
		{"example.com:443", "https://example.com", true},        // the default port, which origins leave out
		{"example.com:80", "http://example.com", true},
		{"example.com:80", "https://example.com", false},
		{"[::1]:443", "https://[::1]", true},
		{"example.com:8443", "https://example.com", false},
		{"ample.com", "https://example.com", false},
		{"example.co", "https://example.com", false},
		{"www.example.com", "https://example.com", false},
		{"[::1]:8080", "http://[::1]:8080", true},
		{"[::1]", "http://[::1]:8080", true},
		{"::1", "http://[::1]:8080", true},
		{"[::1]", "http://[::1]", true},
		{"::1", "http://[::1]", true},
		{"[::1]:8081", "http://[::1]:8080", false},
		{"[::2]", "http://[::1]:8080", false},
		{"http://[::1]:8080/", "http://[::1]:8080", true},
		{"example.com", "", false}, // refused before its origin was known
	} {
		t.Run(c.pattern+" "+c.origin, func(t *testing.T) {
			r := allowed(t0)
			r.Origin = c.origin
			_, rep := readLogs(t, Options{Filter: Filter{Origins: []string{"nowhere.example", c.pattern}}}, encode(t, r))
			if got := rep.Records == 1; got != c.match || rep.Records+rep.FilteredOut != 1 {
				t.Errorf("%d counted, %d filtered out; want a match: %v", rep.Records, rep.FilteredOut, c.match)
			}
		})
	}
}

// Every filter must hold: a record counts when its time, its crawler and
// its origin all match.
func TestFiltersCombine(t *testing.T) {
	a, b, c := allowed(t0), allowed(t0), allowed(t0.Add(-time.Hour))
	b.Origin = "https://other.example"
	_, rep := readLogs(t, Options{Filter: Filter{Since: t0, Tokens: []string{"gptbot"}, Origins: []string{"example.com"}}}, encode(t, a, b, c))
	if rep.Records != 1 || rep.FilteredOut != 2 {
		t.Errorf("%d records, %d filtered out; want 1, 2", rep.Records, rep.FilteredOut)
	}
}

func TestTopRulesAndPaths(t *testing.T) {
	var recs []audit.Record
	refuse := func(n int, origin, group, rule string, line int, url string, forwarded bool) {
		for range n {
			r := refused(t0)
			r.Origin, r.Group, r.Rule, r.RuleLine, r.URL, r.Forwarded = origin, group, rule, line, url, forwarded
			recs = append(recs, r)
		}
	}
	refuse(3, "https://example.com", "*", "/private/", 4, "https://example.com/private/1", false)
	refuse(2, "https://example.com", "*", "/private/", 4, "https://example.com/private/2", true) // would-be count too
	refuse(2, "https://example.com", "gptbot", "/", 9, "https://example.com/x", false)
	refuse(1, "https://b.example", "*", "/private/", 4, "https://b.example/private/1", false)
	// robots.txt failed: no rule, the reason names the refusal.
	down := refused(t0)
	down.Rule, down.RuleLine, down.Group, down.Reason = "", 0, "", "robots.txt 503: complete disallow"
	recs = append(recs, down, allowed(t0))

	_, rep := readLogs(t, Options{Top: 3}, encode(t, recs...))
	wantRules := []RuleCount{
		{Origin: "https://example.com", Group: "*", Rule: "/private/", Line: 4, Refused: 5},
		{Origin: "https://example.com", Group: "gptbot", Rule: "/", Line: 9, Refused: 2},
		{Origin: "https://b.example", Group: "*", Rule: "/private/", Line: 4, Refused: 1}, // ties by origin
	}
	if !reflect.DeepEqual(rep.TopRules, wantRules) {
		t.Errorf("top rules\n got %+v\nwant %+v", rep.TopRules, wantRules)
	}
	wantPaths := []PathCount{
		{URL: "https://example.com/private/1", Refused: 3},
		{URL: "https://example.com/private/2", Refused: 2},
		{URL: "https://example.com/x", Refused: 2},
	}
	if !reflect.DeepEqual(rep.TopPaths, wantPaths) {
		t.Errorf("top paths\n got %+v\nwant %+v", rep.TopPaths, wantPaths)
	}
	_, rep = readLogs(t, Options{}, encode(t, recs...))
	if last := rep.TopRules[len(rep.TopRules)-1]; last.Rule != "robots.txt 503: complete disallow" || last.Refused != 1 {
		t.Errorf("the refusal without a rule: %+v", last)
	}
}

// A report of 200,000 refusals, each of another URL and rule, over
// two months, one each 30s (10,000 buckets of 10 minutes): the sketches
// and the timeline stay within their bounds.
func TestMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("200,000 records")
	}
	const n = 200_000
	// One record made a format: encoding each would take most of the test.
	proto := refused(t0)
	proto.URL, proto.Rule = "https://example.com/private/%[2]d", "/private/%[2]d"
	format := strings.Replace(string(encode(t, proto)), t0.Format(time.RFC3339), "%[1]s", 1)
	var log []byte
	for i := range n {
		log = fmt.Appendf(log, format, t0.Add(time.Duration(i)*30*time.Second).Format(time.RFC3339), i)
	}
	rd, rep := readLogs(t, Options{}, log)
	a := rd.agg
	for name, s := range map[string]int{"rules": len(a.rules.heap), "rules index": len(a.rules.index), "paths": len(a.paths.heap), "paths index": len(a.paths.index)} {
		if s > sketchCapacity {
			t.Errorf("%s: %d entries, want at most %d", name, s, sketchCapacity)
		}
	}
	if len(a.timeline.buckets) > maxFineBuckets {
		t.Errorf("the timeline holds %d buckets, want at most %d", len(a.timeline.buckets), maxFineBuckets)
	}
	if rep.Records != n || len(rep.TopPaths) != DefaultTop || len(rep.TopRules) != DefaultTop {
		t.Errorf("%d records, %d top paths, %d top rules", rep.Records, len(rep.TopPaths), len(rep.TopRules))
	}
	var sum int64
	for _, b := range rep.Timeline.Buckets {
		sum += b.Requests
	}
	if sum != n {
		t.Errorf("the timeline counts %d requests, want %d", sum, n)
	}
}

// Without Options.Now a report is generated now; synctest's clock stands
// still, so "now" is one instant the test can name.
func TestGeneratedNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rd := NewReader(Options{})
		if err := rd.Read(t.Context(), "log", bytes.NewReader(encode(t, allowed(t0)))); err != nil {
			t.Fatal(err)
		}
		if rep := rd.Report(); !rep.Generated.Equal(time.Now()) {
			t.Errorf("generated %v, now is %v", rep.Generated, time.Now())
		}
		if rep := NewReader(Options{Now: t0}).Report(); !rep.Generated.Equal(t0) {
			t.Errorf("generated %v, want Options.Now %v", rep.Generated, t0)
		}
	})
}
