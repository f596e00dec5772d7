package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"robotsgate/proxy/audit"
	"robotsgate/robots"
)

func TestNewValidatesOptions(t *testing.T) {
	p := newTestServer(t, proxyConfig{})
	valid := Options{Rules: p.rules, Audit: p.auditW}
	tests := []struct {
		name    string
		change  func(*Options)
		wantErr string
	}{
		{"no rules", func(o *Options) { o.Rules = nil }, "Options.Rules and Options.Audit are required"},
		{"no audit", func(o *Options) { o.Audit = nil }, "Options.Rules and Options.Audit are required"},
		{"unknown mode", func(o *Options) { o.Mode = "observe" }, `unknown mode "observe"`},
		{"empty mode is enforce", func(o *Options) { o.Mode = "" }, ""},
		{"audit mode", func(o *Options) { o.Mode = ModeAudit }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := valid
			tt.change(&opts)
			s, err := New(opts)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if opts.Mode == "" && s.opts.Mode != ModeEnforce {
					t.Errorf("mode %q, want enforce by default", s.opts.Mode)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// binaryBody is every byte value, repeated: any re-encoding on the way
// would show.
func binaryBody(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

// TestAllowedRequestsPassThrough checks that an allowed request reaches
// the origin and its answer comes back untouched, whatever its status and
// whether it has a body, and that each gets a complete audit record.
func TestAllowedRequestsPassThrough(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots})
	page := binaryBody(10 << 10)
	o.mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(page)))
		w.Header().Set("X-Origin", "page")
		w.Write(page)
	})
	o.mux.HandleFunc("/no-content", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	o.mux.HandleFunc("/cached", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		io.WriteString(w, "fresh copy\n")
	})
	o.mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not here", http.StatusNotFound)
	})
	o.mux.HandleFunc("/teapot", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "short and stout\n")
	})
	o.mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "part one\n")
		w.(http.Flusher).Flush()
		io.WriteString(w, "part two\n")
	})

	p := startProxy(t, proxyConfig{})
	c := p.client()
	// The first request loads robots.txt; the others find it cached.
	if resp, body := do(t, c, "GET", o.URL+"/first", ua(curlUA)); resp.StatusCode != 200 || body != "origin page /first\n" {
		t.Fatalf("GET /first = %d %q", resp.StatusCode, body)
	}

	tests := []struct {
		method, path string
		header       http.Header
		wantStatus   int
		wantBody     string
		wantHeader   [2]string
	}{
		{"GET", "/page", nil, 200, string(page), [2]string{"X-Origin", "page"}},
		{"HEAD", "/page", nil, 200, "", [2]string{"Content-Length", strconv.Itoa(len(page))}},
		{"GET", "/no-content", nil, 204, "", [2]string{}},
		{"GET", "/cached", http.Header{"If-None-Match": {`"v1"`}}, 304, "", [2]string{"Etag", `"v1"`}},
		{"GET", "/missing", nil, 404, "not here\n", [2]string{}},
		{"GET", "/teapot", nil, 418, "short and stout\n", [2]string{}},
		{"GET", "/stream", nil, 200, "part one\npart two\n", [2]string{}},
		{"GET", "/page?query=private/", nil, 200, string(page), [2]string{}},
	}
	for _, tt := range tests {
		h := ua(curlUA)
		for k, v := range tt.header {
			h[k] = v
		}
		resp, body := do(t, c, tt.method, o.URL+tt.path, h)
		if resp.StatusCode != tt.wantStatus || body != tt.wantBody {
			t.Errorf("%s %s = %d, %d bytes; want %d, %d bytes", tt.method, tt.path, resp.StatusCode, len(body), tt.wantStatus, len(tt.wantBody))
		}
		if k := tt.wantHeader[0]; k != "" && resp.Header.Get(k) != tt.wantHeader[1] {
			t.Errorf("%s %s: %s = %q, want %q", tt.method, tt.path, k, resp.Header.Get(k), tt.wantHeader[1])
		}
		if d := resp.Header.Get(decisionHeader); d != "" {
			t.Errorf("%s %s: allowed response carries %s: %q", tt.method, tt.path, decisionHeader, d)
		}
	}

	recs := p.records()
	if len(recs) != len(tests)+1 {
		t.Fatalf("got %d audit records, want %d", len(recs), len(tests)+1)
	}
	first := recordFor(t, recs, "GET", o.URL+"/first")
	if first.RobotsCache != "loaded" {
		t.Errorf("first request: robots_cache %q, want loaded", first.RobotsCache)
	}
	for _, tt := range tests {
		rec := recordFor(t, recs, tt.method, o.URL+tt.path)
		want := audit.Record{
			Decision: robots.Decision{
				URL:           o.URL + tt.path,
				UserAgent:     curlUA,
				Token:         "curl",
				Verdict:       "allow",
				Reason:        "no matching rule",
				Group:         "curl",
				RobotsOutcome: "ok",
				RobotsStatus:  200,
			},
			Method:       tt.method,
			Origin:       o.URL,
			PathsChecked: true,
			RobotsCache:  "hit",
			Mode:         "enforce",
			Forwarded:    true,
			Status:       tt.wantStatus,
			Upstream:     tt.wantStatus,
			Bytes:        int64(len(tt.wantBody)),
		}
		checkRecord(t, rec, want)
	}
}

// checkRecord compares rec with want, ignoring Time and Duration, which
// it checks for plausibility, and Client, which must be a 127.0.0.1
// address.
func checkRecord(t *testing.T, rec, want audit.Record) {
	t.Helper()
	if rec.Time.IsZero() || rec.Duration <= 0 {
		t.Errorf("%s %s: time %v, duration_ms %v: want both set", rec.Method, rec.URL, rec.Time, rec.Duration)
	}
	if !strings.HasPrefix(rec.Client, "127.0.0.1:") {
		t.Errorf("%s %s: client %q, want the client's 127.0.0.1 address", rec.Method, rec.URL, rec.Client)
	}
	// The group's lines come from the parser, tested there; here they
	// must be there when a group is, and the robots.txt named on refusals.
	if (rec.Group != "") != (len(rec.GroupLines) > 0) {
		t.Errorf("%s %s: group %q with lines %v", rec.Method, rec.URL, rec.Group, rec.GroupLines)
	}
	wantRobotsTxt := ""
	if rec.Verdict == robots.VerdictDisallow && rec.RobotsOutcome != "" {
		wantRobotsTxt = rec.Origin + "/robots.txt"
	}
	if rec.RobotsTxt != wantRobotsTxt {
		t.Errorf("%s %s: robots_txt %q, want %q", rec.Method, rec.URL, rec.RobotsTxt, wantRobotsTxt)
	}
	rec.Time, rec.Duration, rec.Client = want.Time, want.Duration, want.Client
	rec.GroupLines, rec.RobotsTxt = want.GroupLines, want.RobotsTxt
	if !reflect.DeepEqual(rec, want) {
		t.Errorf("audit record for %s %s\n got %+v\nwant %+v", want.Method, want.URL, rec, want)
	}
}

// TestDisallowedAnswered403 checks the 403 page and decision header for
// each way a rule can refuse, and that the origin never sees the request.
func TestDisallowedAnswered403(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots})
	p := startProxy(t, proxyConfig{})
	c := p.client()
	robotsTxt := o.robotsURL()

	tests := []struct {
		method, path, userAgent string
		wantHeader              string
		wantBody                []string
		want                    audit.Record
	}{
		{
			method: "GET", path: "/private/report.pdf", userAgent: curlUA,
			wantHeader: `disallow; token="curl"; rule="/private/"; line=2; robots="` + robotsTxt + `"`,
			wantBody: []string{
				"403 Forbidden: robots.txt does not allow this crawler to fetch this URL.",
				"URL:         " + o.URL + "/private/report.pdf\n",
				`Crawler:     product token "curl", from User-Agent "curl/8.5.0"`,
				"robots.txt:  " + robotsTxt + "\n",
				"Group:       User-agent: curl (line 1)\n",
				"Rule:        Disallow: /private/ (line 2)\n",
			},
			want: audit.Record{Decision: robots.Decision{Token: "curl", Reason: "disallow: /private/ (line 2)", Rule: "/private/", RuleLine: 2, Group: "curl"}},
		},
		{
			method: "GET", path: "/secret/plans", userAgent: noTokUA,
			wantHeader: `disallow; token=""; rule="/secret"; line=5; robots="` + robotsTxt + `"`,
			wantBody: []string{
				`Crawler:     no product token in User-Agent "Mozilla/5.0", so the "User-agent: *" group applies`,
				"Group:       User-agent: * (line 4)\n",
				"Rule:        Disallow: /secret (line 5)\n",
			},
			want: audit.Record{Decision: robots.Decision{Token: "", Reason: "disallow: /secret (line 5)", Rule: "/secret", RuleLine: 5, Group: "*"}},
		},
		{
			method: "GET", path: "/index.html", userAgent: badbotUA,
			wantHeader: `disallow; token="badbot"; rule="/"; line=8; robots="` + robotsTxt + `"`,
			wantBody:   []string{"Group:       User-agent: badbot (line 7)\n", "Rule:        Disallow: / (line 8)\n"},
			want:       audit.Record{Decision: robots.Decision{Token: "badbot", Reason: "disallow: / (line 8)", Rule: "/", RuleLine: 8, Group: "badbot"}},
		},
		{
			method: "HEAD", path: "/private/head", userAgent: curlUA,
			wantHeader: `disallow; token="curl"; rule="/private/"; line=2; robots="` + robotsTxt + `"`,
			want:       audit.Record{Decision: robots.Decision{Token: "curl", Reason: "disallow: /private/ (line 2)", Rule: "/private/", RuleLine: 2, Group: "curl"}},
		},
	}
	for _, tt := range tests {
		resp, body := do(t, c, tt.method, o.URL+tt.path, ua(tt.userAgent))
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s as %q: status %d, want 403", tt.method, tt.path, tt.userAgent, resp.StatusCode)
		}
		if got := resp.Header.Get(decisionHeader); got != tt.wantHeader {
			t.Errorf("%s %s: %s\n got %s\nwant %s", tt.method, tt.path, decisionHeader, got, tt.wantHeader)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
			t.Errorf("%s %s: Content-Type %q, want text/plain", tt.method, tt.path, ct)
		}
		if tt.method == "HEAD" && body != "" {
			t.Errorf("HEAD %s: got a body %q", tt.path, body)
		}
		for _, want := range tt.wantBody {
			if !strings.Contains(body, want) {
				t.Errorf("%s %s: body lacks %q:\n%s", tt.method, tt.path, want, body)
			}
		}
		if o.saw(tt.path) {
			t.Errorf("the origin received the disallowed %s", tt.path)
		}
	}

	recs := p.records()
	for i, tt := range tests {
		want := tt.want
		want.Method, want.URL, want.Origin, want.UserAgent = tt.method, o.URL+tt.path, o.URL, tt.userAgent
		want.Verdict, want.PathsChecked, want.RobotsOutcome, want.RobotsStatus = "disallow", true, "ok", 200
		want.Mode, want.Status = "enforce", http.StatusForbidden
		want.RobotsCache = "hit"
		if i == 0 {
			want.RobotsCache = "loaded" // the first request fetched robots.txt
		}
		checkRecord(t, recordFor(t, recs, tt.method, o.URL+tt.path), want)
	}
}

// TestForbiddenJSONOrText checks that only a client accepting JSON and no
// text gets the JSON 403 body.
func TestForbiddenJSONOrText(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots})
	p := startProxy(t, proxyConfig{})
	c := p.client()
	for _, tt := range []struct {
		accept   string
		wantJSON bool
	}{
		{"application/json", true},
		{"application/problem+json", true},
		{"application/json; charset=utf-8", true},
		{"application/json, */*;q=0.1", false},
		{"text/html, application/json", false},
		{"text/*", false},
		{"*/*", false},
		{"", false},
	} {
		h := ua(curlUA)
		if tt.accept != "" {
			h.Set("Accept", tt.accept)
		}
		resp, body := do(t, c, "GET", o.URL+"/private/x", h)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("Accept %q: status %d, want 403", tt.accept, resp.StatusCode)
		}
		ct := resp.Header.Get("Content-Type")
		if !tt.wantJSON {
			if ct != "text/plain; charset=utf-8" || !strings.HasPrefix(body, "403 Forbidden: ") {
				t.Errorf("Accept %q: got %s %q, want the text page", tt.accept, ct, body)
			}
			continue
		}
		if ct != "application/json" {
			t.Errorf("Accept %q: Content-Type %q, want application/json", tt.accept, ct)
		}
		var got forbiddenJSON
		dec := json.NewDecoder(strings.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("Accept %q: body is not the JSON 403: %v\n%s", tt.accept, err, body)
		}
		want := forbiddenJSON{Status: 403, Decision: robots.Decision{
			URL: o.URL + "/private/x", Token: "curl", UserAgent: curlUA, Verdict: "disallow",
			Reason: "disallow: /private/ (line 2)", Rule: "/private/", RuleLine: 2,
			Group: "curl", GroupLines: []int{1}, RobotsTxt: o.robotsURL(), RobotsOutcome: "ok", RobotsStatus: 200,
		}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Accept %q: JSON 403\n got %+v\nwant %+v", tt.accept, got, want)
		}
	}
}

func TestWantsJSON(t *testing.T) {
	tests := []struct {
		accept string
		want   bool
	}{
		{"", false},
		{"application/json", true},
		{"APPLICATION/JSON", true},
		{"application/json;q=0.9", true},
		{"application/ld+json", true},
		{"application/json, application/problem+json", true},
		{"application/json, text/plain", false},
		{"text/plain, application/json", false},
		{"application/json, */*", false},
		{"*/*", false},
		{"text/*", false},
		{"text/html", false},
		{"application/xml", false},
		{"image/png, application/json", true},
		{"application/json, ;;;garbage", true},
		{"garbage", false},
	}
	for _, tt := range tests {
		if got := wantsJSON(tt.accept); got != tt.want {
			t.Errorf("wantsJSON(%q) = %v, want %v", tt.accept, got, tt.want)
		}
	}
}

func TestQuoteHeader(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"/private/", `"/private/"`},
		{`/say "hi"`, `"/say \"hi\""`},
		{`C:\path`, `"C:\\path"`},
		{"/café/", `"/caf%C3%A9/"`},
		{"/日本", `"/%E6%97%A5%E6%9C%AC"`},
		{"tab\there", `"tab%09here"`},
		{"line\r\nbreak", `"line%0D%0Abreak"`},
		{"del\x7f", `"del%7F"`},
		{"~!#$%&'()*+,-./:;<=>?@[]^_`{|}", "\"~!#$%&'()*+,-./:;<=>?@[]^_`{|}\""},
	}
	for _, tt := range tests {
		got := quoteHeader(tt.in)
		if got != tt.want {
			t.Errorf("quoteHeader(%q) = %s, want %s", tt.in, got, tt.want)
		}
		for i := 0; i < len(got); i++ {
			if got[i] < 0x20 || got[i] > 0x7e {
				t.Errorf("quoteHeader(%q) = %q holds a byte a header value may not", tt.in, got)
			}
		}
	}
}

// TestDecisionHeaderNonASCIIRule checks end to end that a rule written in
// UTF-8 comes out of the decision header percent-encoded.
func TestDecisionHeaderNonASCIIRule(t *testing.T) {
	o := startOrigin(t, originConfig{robots: "User-agent: *\nDisallow: /café/\n"})
	p := startProxy(t, proxyConfig{})
	resp, _ := do(t, p.client(), "GET", o.URL+"/caf%C3%A9/menu", ua(curlUA))
	want := `disallow; token="curl"; rule="/caf%C3%A9/"; line=2; robots="` + o.robotsURL() + `"`
	if resp.StatusCode != 403 || resp.Header.Get(decisionHeader) != want {
		t.Fatalf("status %d, %s %q; want 403, %q", resp.StatusCode, decisionHeader, resp.Header.Get(decisionHeader), want)
	}
}

// TestUnreachableRobotsTxt checks RFC 9309 §2.3.1: robots.txt that cannot
// be fetched means complete disallow, explained as such; a 4xx means no
// restrictions.
func TestUnreachableRobotsTxt(t *testing.T) {
	down := startOrigin(t, originConfig{})
	down.Close() // its port now refuses connections

	tests := []struct {
		name         string
		origin       *origin
		wantStatus   int
		wantReason   string
		robots       string
		robotsStatus int
	}{
		{"503", startOrigin(t, originConfig{robots: "ignored", robotsStatus: 503}), 403, "robots.txt 503: complete disallow", "unreachable", 503},
		{"429", startOrigin(t, originConfig{robots: "ignored", robotsStatus: 429}), 403, "robots.txt 429: complete disallow", "unreachable", 429},
		{"refused", down, 403, "robots.txt unreachable: connection refused: complete disallow", "unreachable", 0},
		{"404 allows all", startOrigin(t, originConfig{robots: "ignored", robotsStatus: 404}), 200, "robots.txt 404: no restrictions", "unavailable", 404},
	}
	p := startProxy(t, proxyConfig{})
	c := p.client()
	for _, tt := range tests {
		resp, body := do(t, c, "GET", tt.origin.URL+"/page", ua(curlUA))
		if resp.StatusCode != tt.wantStatus {
			t.Errorf("%s: status %d, want %d", tt.name, resp.StatusCode, tt.wantStatus)
		}
		if tt.wantStatus != 403 {
			if body != "origin page /page\n" {
				t.Errorf("%s: body %q, want the origin's page", tt.name, body)
			}
			continue
		}
		want := `disallow; token="curl"; reason="` + tt.wantReason + `"; robots="` + tt.origin.robotsURL() + `"`
		if got := resp.Header.Get(decisionHeader); got != want {
			t.Errorf("%s: %s\n got %s\nwant %s", tt.name, decisionHeader, got, want)
		}
		for _, s := range []string{"Reason:      " + tt.wantReason, "complete disallow", "RFC 9309"} {
			if !strings.Contains(body, s) {
				t.Errorf("%s: body lacks %q:\n%s", tt.name, s, body)
			}
		}
		if tt.origin.saw("/page") {
			t.Errorf("%s: the origin received a request robots.txt did not allow", tt.name)
		}
	}
	recs := p.records()
	for _, tt := range tests {
		want := audit.Record{
			Decision: robots.Decision{
				URL:           tt.origin.URL + "/page",
				UserAgent:     curlUA,
				Token:         "curl",
				Verdict:       "disallow",
				Reason:        tt.wantReason,
				RobotsOutcome: tt.robots,
				RobotsStatus:  tt.robotsStatus,
			},
			Method:       "GET",
			Origin:       tt.origin.URL,
			PathsChecked: true,
			RobotsCache:  "loaded",
			Mode:         "enforce",
			Status:       tt.wantStatus,
		}
		if tt.wantStatus == 200 {
			want.Verdict, want.Forwarded, want.Upstream, want.Bytes = "allow", true, 200, int64(len("origin page /page\n"))
		}
		checkRecord(t, recordFor(t, recs, "GET", tt.origin.URL+"/page"), want)
	}
}

// TestRobotsTxtAlwaysPasses checks that a GET of /robots.txt goes to the
// origin for every crawler, even one robots.txt refuses everything, without
// the proxy looking robots.txt up first. (Any other request to the path is
// judged: integration's TestRobotsTxtExemption.)
func TestRobotsTxtAlwaysPasses(t *testing.T) {
	ok := startOrigin(t, originConfig{robots: testRobots})
	failing := startOrigin(t, originConfig{robots: "try later\n", robotsStatus: 503})
	p := startProxy(t, proxyConfig{})
	c := p.client()

	tests := []struct {
		o          *origin
		path       string
		wantStatus int
		wantBody   string
	}{
		{ok, "/robots.txt", 200, testRobots},
		{failing, "/robots.txt", 503, "try later\n"},
	}
	for _, tt := range tests {
		resp, body := do(t, c, "GET", tt.o.URL+tt.path, ua(badbotUA))
		if resp.StatusCode != tt.wantStatus || body != tt.wantBody {
			t.Errorf("GET %s%s = %d %q, want %d %q", tt.o.URL, tt.path, resp.StatusCode, body, tt.wantStatus, tt.wantBody)
		}
	}
	if st := p.rules.Stats(); st.Hits+st.Misses != 0 || len(st.Loads) != 0 {
		t.Errorf("robots.txt requests consulted the cache: %+v", st)
	}
	if n := ok.robotsFetches(); n != 1 {
		t.Errorf("origin served robots.txt %d times, want 1 (the crawler's own request only)", n)
	}
	recs := p.records()
	for _, tt := range tests {
		checkRecord(t, recordFor(t, recs, "GET", tt.o.URL+tt.path), audit.Record{
			Decision: robots.Decision{
				URL:       tt.o.URL + tt.path,
				UserAgent: badbotUA,
				Token:     "badbot",
				Verdict:   "allow",
				Reason:    "robots.txt is always allowed",
			},
			Method:       "GET",
			Origin:       tt.o.URL,
			PathsChecked: true,
			Mode:         "enforce",
			Forwarded:    true,
			Status:       tt.wantStatus,
			Upstream:     tt.wantStatus,
			Bytes:        int64(len(tt.wantBody)),
		})
	}
}

// TestAuditModeForwards checks that audit mode forwards what enforce mode
// refuses and tells the crawler so in the decision header.
func TestAuditModeForwards(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots})
	failing := startOrigin(t, originConfig{robots: "", robotsStatus: 500})
	p := startProxy(t, proxyConfig{mode: ModeAudit})
	c := p.client()

	tests := []struct {
		o          *origin
		path       string
		wantHeader string
		verdict    string
	}{
		{o, "/private/x", `disallow; token="curl"; rule="/private/"; line=2; robots="` + o.robotsURL() + `"; mode=audit`, "disallow"},
		{o, "/page", "", "allow"},
		{failing, "/page", `disallow; token="curl"; reason="robots.txt 500: complete disallow"; robots="` + failing.robotsURL() + `"; mode=audit`, "disallow"},
	}
	for _, tt := range tests {
		resp, body := do(t, c, "GET", tt.o.URL+tt.path, ua(curlUA))
		if resp.StatusCode != 200 || body != "origin page "+tt.path+"\n" {
			t.Errorf("audit mode GET %s = %d %q, want the origin's page", tt.path, resp.StatusCode, body)
		}
		if got := resp.Header.Get(decisionHeader); got != tt.wantHeader {
			t.Errorf("audit mode GET %s: %s\n got %q\nwant %q", tt.path, decisionHeader, got, tt.wantHeader)
		}
		if !tt.o.saw(tt.path) {
			t.Errorf("audit mode GET %s: the origin never saw it", tt.path)
		}
	}
	recs := p.records()
	for _, tt := range tests {
		rec := recordFor(t, recs, "GET", tt.o.URL+tt.path)
		if rec.Verdict != tt.verdict || rec.Mode != "audit" || !rec.Forwarded || rec.Status != 200 || rec.Upstream != 200 ||
			rec.Bytes != int64(len("origin page "+tt.path+"\n")) {
			t.Errorf("audit mode record for %s: %+v", tt.path, rec)
		}
	}
	if rec := recordFor(t, recs, "GET", o.URL+"/private/x"); rec.Rule != "/private/" || rec.RuleLine != 2 || rec.Group != "curl" {
		t.Errorf("audit mode record does not cite the rule: %+v", rec)
	}
}

// failingWriter fails every write, like a full disk.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrShortWrite }

// TestAuditLogFailure checks that a log that cannot be written stops the
// proxy from serving (refuse, the default) within a flush interval, or
// does not (continue).
func TestAuditLogFailure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy AuditOnError
		status int
	}{{"default refuses", "", http.StatusServiceUnavailable}, {"continue", AuditContinue, http.StatusForbidden}} {
		t.Run(tc.name, func(t *testing.T) {
			o := startOrigin(t, originConfig{robots: testRobots})
			p := startProxy(t, proxyConfig{audit: failingWriter{}, onAuditError: tc.policy})
			c := p.client()
			if resp, _ := do(t, c, "GET", o.URL+"/private/0", ua(curlUA)); resp.StatusCode != 403 {
				t.Fatalf("first request: status %d, want 403 while the log has not failed yet", resp.StatusCode)
			}
			deadline := time.Now().Add(testTimeout)
			for p.auditW.Healthy() {
				if time.Now().After(deadline) {
					t.Fatal("the audit log still says it is healthy")
				}
				time.Sleep(audit.FlushInterval / 4)
			}
			resp, body := do(t, c, "GET", o.URL+"/private/1", ua(curlUA))
			if resp.StatusCode != tc.status {
				t.Fatalf("after the log failed: status %d, want %d; body %q", resp.StatusCode, tc.status, body)
			}
			if tc.status == http.StatusServiceUnavailable && !strings.Contains(body, "cannot write its audit log") {
				t.Errorf("the 503 does not say why: %q", body)
			}
			if o.saw("/private/1") {
				t.Error("the origin was contacted")
			}
		})
	}
}

// TestForbiddenNamesReading: a refusal of a reading other than the path
// as sent names it in the text page, the JSON page, the decision header
// and the audit record; in audit mode the header says it on the origin's
// answer.
func TestForbiddenNamesReading(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots})
	p := startProxy(t, proxyConfig{})
	c := p.client()
	target := o.URL + "/x/..%2Fsecret"
	resp, body := do(t, c, "GET", target, ua(noTokUA))
	if resp.StatusCode != 403 || !strings.Contains(body, "Read as:     /secret (%2F decoded, then dot segments removed), as an origin may read the path") {
		t.Errorf("text 403: %d\n%s", resp.StatusCode, body)
	}
	if h := resp.Header.Get(decisionHeader); !strings.Contains(h, `reading="/secret"`) {
		t.Errorf("%s %q does not name the reading", decisionHeader, h)
	}
	h := ua(noTokUA)
	h.Set("Accept", "application/json")
	_, body = do(t, c, "GET", target, h)
	var got forbiddenJSON
	if err := json.Unmarshal([]byte(body), &got); err != nil || got.Reading != "/secret" || got.ReadingSteps != "%2F decoded, then dot segments removed" {
		t.Errorf("JSON 403 reading %q, steps %q (%v):\n%s", got.Reading, got.ReadingSteps, err, body)
	}
	if o.saw("/x/..%2Fsecret") {
		t.Error("the origin received the refused request")
	}
	rec := p.records()[0]
	if rec.Reading != "/secret" || rec.ReadingSteps != "%2F decoded, then dot segments removed" ||
		rec.Reason != "disallow: /secret (line 5) when read as /secret (%2F decoded, then dot segments removed)" {
		t.Errorf("record: reading %q, steps %q, reason %q", rec.Reading, rec.ReadingSteps, rec.Reason)
	}

	audited := startProxy(t, proxyConfig{mode: ModeAudit})
	ac := audited.client()
	ac.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse } // the origin's mux redirects /a/../secret
	resp, _ = do(t, ac, "GET", o.URL+"/a/../secret", ua(noTokUA))
	if hv := resp.Header.Get(decisionHeader); !strings.Contains(hv, `reading="/secret"`) || !strings.Contains(hv, "mode=audit") {
		t.Errorf("audit mode: status %d, %s %q", resp.StatusCode, decisionHeader, hv)
	}
	if !o.saw("/a/../secret") {
		t.Error("audit mode did not forward the request as sent")
	}
}

// TestForbiddenAnswerBounded: a 403 repeats at most a bounded part of what
// a client chose, so a 60 KB User-Agent (and the 60 KB token made of it)
// costs a short answer, in text and in JSON, body and header alike.
func TestForbiddenAnswerBounded(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots})
	p := startProxy(t, proxyConfig{})
	c := p.client()
	long := strings.Repeat("é", 30_000) + "x" // 60,001 bytes, cut between characters
	for _, accept := range []string{"text/plain", "application/json"} {
		h := ua(long)
		h.Set("Accept", accept)
		resp, body := do(t, c, "GET", o.URL+"/secret", h)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s: status %d, want 403", accept, resp.StatusCode)
		}
		decision := resp.Header.Get("X-Robotsgate-Decision")
		if len(body) > 4<<10 || len(decision) > 2<<10 {
			t.Errorf("%s: a body of %d bytes and a decision header of %d for a 60 KB User-Agent", accept, len(body), len(decision))
		}
		if !strings.Contains(body, "[cut: 60001 bytes]") || !utf8.ValidString(body) {
			t.Errorf("%s: the body does not say the User-Agent was cut, or cuts a character:\n%s", accept, body)
		}
	}
}
