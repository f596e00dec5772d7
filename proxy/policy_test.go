package proxy

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"robotsgate/proxy/audit"
	"robotsgate/proxy/live"
	"robotsgate/proxy/pace"
	"robotsgate/proxy/policy"
)

// testPolicy is the operator's policy the tests judge by. Line numbers
// matter: pages, headers and records cite them.
const testPolicy = `crawlers:
  - token: scoped
    allow_sites: ["localhost"]
  - token: fenced
    deny_sites: ["127.0.0.1"]
  - token: paced
    purposes: [search]
    min_delay: 30s
  - token: limited
    purposes: [archive, ai-train]
    max_concurrency: 1
sites:
  - hosts: ["127.0.0.1"]
    rules: ["Disallow: /shop/", "Disallow: /secret"]
    reason: "asked by mail"
    exceptions:
      - allow: /private/
        reason: "written permission"
`

// The findings of testPolicy, as pages, headers and records name them.
var (
	scopedFinding = audit.PolicyFinding{File: "pol.yaml", Line: 3, Kind: "destination",
		Rule: "allow_sites: localhost", Reason: "scoped may visit only the sites allow_sites names"}
	fencedFinding = audit.PolicyFinding{File: "pol.yaml", Line: 5, Kind: "destination",
		Rule: "deny_sites: 127.0.0.1", Reason: "the policy keeps fenced away from 127.0.0.1"}
	exceptionFinding = audit.PolicyFinding{File: "pol.yaml", Line: 17, Kind: "exception",
		Rule: "allow: /private/", Reason: "written permission"}
	shopFinding = audit.PolicyFinding{File: "pol.yaml", Line: 14, Kind: "rule",
		Rule: "Disallow: /shop/", Reason: "asked by mail"}
	minDelayFinding = audit.PolicyFinding{File: "pol.yaml", Line: 8, Kind: "min-delay",
		Rule: "min_delay: 30s", Reason: "the policy's floor on paced's pace per site"}
	maxConcFinding = audit.PolicyFinding{File: "pol.yaml", Line: 11, Kind: "max-concurrency",
		Rule: "max_concurrency: 1", Reason: "the policy's bound on limited's requests in flight per site"}
)

// fixedPolicy is a policy source that never reloads; its policy may be
// nil, as a source's may.
type fixedPolicy struct{ p *policy.Policy }

func (f fixedPolicy) Current() *policy.Policy { return f.p }

// swappedPolicy is a policy source whose policy a test replaces, as a
// reload does.
type swappedPolicy struct{ p atomic.Pointer[policy.Policy] }

func (s *swappedPolicy) Current() *policy.Policy { return s.p.Load() }

func parsePolicy(t testing.TB, yaml string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("pol.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// params renders f as the decision header's policy parameters, written
// out here apart from the code under test.
func params(f audit.PolicyFinding) string {
	return `; policy="` + f.File + `"; policy-line=` + strconv.Itoa(f.Line) + `; policy-kind="` + f.Kind +
		`"; policy-rule="` + f.Rule + `"; policy-reason="` + f.Reason + `"`
}

// findingText is f as the pages and reasons say it.
func findingText(f audit.PolicyFinding) string {
	return f.File + " line " + strconv.Itoa(f.Line) + ": " + f.Kind + ": " + f.Rule + " (" + f.Reason + ")"
}

// checkPolicyRecord checks the policy fields of rec.
func checkPolicyRecord(t *testing.T, rec audit.Record, version string, want audit.PolicyFinding, purposes []string) {
	t.Helper()
	if rec.PolicyVersion != version || rec.Policy != want || !slices.Equal(rec.Purposes, purposes) {
		t.Errorf("%s %s: policy_version %q, policy %+v, purposes %q;\nwant %q, %+v, %q",
			rec.Method, rec.URL, rec.PolicyVersion, rec.Policy, rec.Purposes, version, want, purposes)
	}
}

// TestPolicyDestination: a crawler outside its sites is refused before
// any robots.txt fetch, in every mode, for a plain request, a CONNECT
// (intercepted or blind) and a request inside a tunnel another crawler
// opened; the 403 (text or JSON), the decision header and the record name
// the policy's line.
func TestPolicyDestination(t *testing.T) {
	pol := parsePolicy(t, testPolicy)
	tests := []struct {
		name string
		mode Mode
		mitm bool
		// how: "plain" a request through the proxy, "connect" a CONNECT,
		// "inner" a request inside a tunnel curl opened.
		how   string
		token string
		json  bool
		want  audit.PolicyFinding
	}{
		{"plain text", ModeEnforce, false, "plain", "scoped", false, scopedFinding},
		{"plain JSON", ModeEnforce, false, "plain", "fenced", true, fencedFinding},
		{"audit mode", ModeAudit, false, "plain", "scoped", false, scopedFinding},
		{"blind CONNECT", ModeEnforce, false, "connect", "scoped", false, scopedFinding},
		{"intercepted CONNECT", ModeEnforce, true, "connect", "fenced", false, fencedFinding},
		{"audit mode CONNECT", ModeAudit, false, "connect", "fenced", false, fencedFinding},
		{"inside an intercepted tunnel", ModeEnforce, true, "inner", "scoped", false, scopedFinding},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := startOrigin(t, originConfig{robots: testRobots, tls: tt.how != "plain"})
			p := startProxy(t, proxyConfig{mode: tt.mode, mitm: tt.mitm, roots: o.roots, policy: fixedPolicy{pol}})
			userAgent := tt.token + "/1.0"
			var resp *http.Response
			var body, url string
			switch tt.how {
			case "plain":
				url = o.URL + "/page"
				h := ua(userAgent)
				if tt.json {
					h.Set("Accept", "application/json")
				}
				resp, body = do(t, p.client(), "GET", url, h)
			case "connect":
				url = o.host()
				var conn *tunnelConn
				conn, resp = connect(t, p.addr, url, userAgent)
				if resp.StatusCode != http.StatusForbidden {
					t.Fatalf("CONNECT: %d, want 403", resp.StatusCode)
				}
				b, _ := io.ReadAll(resp.Body)
				body = string(b)
				conn.Close()
			case "inner":
				conn, cr := connect(t, p.addr, o.host(), curlUA)
				if cr.StatusCode != 200 {
					t.Fatalf("curl's CONNECT: %d", cr.StatusCode)
				}
				url = "https://" + o.host() + "/page"
				resp, body = openTLS(t, conn, "127.0.0.1", p.caPool()).do("GET", o.host(), "/page", userAgent)
			}
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("status %d, want 403:\n%s", resp.StatusCode, body)
			}
			wantHeader := `deny-destination; token="` + tt.token + `"` + params(tt.want)
			if got := resp.Header.Get(decisionHeader); got != wantHeader {
				t.Errorf("%s: %s\nwant %s", decisionHeader, got, wantHeader)
			}
			wantReason := "the operator's policy keeps this crawler off this site: " + findingText(tt.want)
			if tt.json {
				var page struct {
					Status  int                 `json:"status"`
					Verdict string              `json:"verdict"`
					Reason  string              `json:"reason"`
					Token   string              `json:"token"`
					Policy  audit.PolicyFinding `json:"policy"`
				}
				if err := json.Unmarshal([]byte(body), &page); err != nil {
					t.Fatalf("JSON 403: %v\n%s", err, body)
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
				if page.Status != 403 || page.Verdict != "disallow" || page.Reason != wantReason || page.Token != tt.token || page.Policy != tt.want {
					t.Errorf("JSON 403: %+v", page)
				}
			} else if tt.how != "connect" {
				for _, want := range []string{
					"403 Forbidden: the operator's policy keeps this crawler off this site; robotsgate does not connect there.",
					"URL:         " + url + "\n",
					"Policy:      " + findingText(tt.want) + "\n",
				} {
					if !strings.Contains(body, want) {
						t.Errorf("the 403 page does not say %q:\n%s", want, body)
					}
				}
			}
			if n := o.robotsFetches(); n != 0 {
				t.Errorf("robots.txt fetched %d times: a refused destination must see no traffic", n)
			}
			if o.saw("/page") {
				t.Error("the origin saw the refused request")
			}
			method := "GET"
			if tt.how == "connect" {
				method = "CONNECT"
			}
			rec := recordFor(t, p.records(), method, url)
			checkPolicyRecord(t, rec, pol.Version(), tt.want, nil)
			if rec.Verdict != "disallow" || rec.Reason != wantReason || rec.Status != 403 || rec.Forwarded ||
				rec.RobotsCache != "" || rec.RobotsOutcome != "" || rec.DeniedDestination || rec.Mode != string(tt.mode) {
				t.Errorf("record: %+v", rec)
			}
			// A refused CONNECT names the origin it was for, so that the
			// report lists it by origin and rule.
			if wantOrigin := "https://" + o.host(); tt.how == "connect" && rec.Origin != wantOrigin {
				t.Errorf("the CONNECT's record names origin %q, want %q", rec.Origin, wantOrigin)
			}
		})
	}
}

// TestPolicyJudges: an exception allows what a robots.txt rule refuses,
// a policy rule refuses what robots.txt allows, and where robots.txt
// refuses too it is robots.txt's refusal; in audit mode the rule's
// refusal is forwarded and said.
func TestPolicyJudges(t *testing.T) {
	pol := parsePolicy(t, testPolicy)
	robotsDecided := `disallow; token=""; rule="/secret"; line=5; robots="`
	tests := []struct {
		name       string
		mode       Mode
		path, ua   string
		json       bool
		wantStatus int
		// wantHeader is the decision header's start; wantPage what the
		// body says.
		wantHeader, wantPage string
		want                 audit.PolicyFinding
		wantVerdict          string
		wantReason           string
	}{
		{"exception", ModeEnforce, "/private/report", curlUA, false, 200,
			`allow; token="curl"` + params(exceptionFinding) + `; rule="/private/"; line=2; robots="`,
			"origin page /private/report\n", exceptionFinding, "allow", "policy: " + findingText(exceptionFinding)},
		{"rule", ModeEnforce, "/shop/cart", noTokUA, false, 403,
			`disallow; token=""` + params(shopFinding) + `; reason="no matching rule"; robots="`,
			"the operator's policy does not allow this crawler to fetch this URL", shopFinding, "disallow", "policy: " + findingText(shopFinding)},
		{"rule JSON", ModeEnforce, "/shop/cart", noTokUA, true, 403,
			`disallow; token=""` + params(shopFinding), `"kind": "rule"`, shopFinding, "disallow", "policy: " + findingText(shopFinding)},
		{"robots.txt disallows too", ModeEnforce, "/secret/x", noTokUA, false, 403,
			robotsDecided, "Rule:        Disallow: /secret (line 5)\n", audit.PolicyFinding{}, "disallow", "disallow: /secret (line 5)"},
		{"audit mode rule", ModeAudit, "/shop/cart", noTokUA, false, 200,
			`disallow; token=""` + params(shopFinding), "origin page /shop/cart\n", shopFinding, "disallow", "policy: " + findingText(shopFinding)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := startOrigin(t, originConfig{robots: testRobots})
			p := startProxy(t, proxyConfig{mode: tt.mode, policy: fixedPolicy{pol}})
			h := ua(tt.ua)
			if tt.json {
				h.Set("Accept", "application/json")
			}
			resp, body := do(t, p.client(), "GET", o.URL+tt.path, h)
			if resp.StatusCode != tt.wantStatus || !strings.Contains(body, tt.wantPage) {
				t.Errorf("status %d, want %d, with %q:\n%s", resp.StatusCode, tt.wantStatus, tt.wantPage, body)
			}
			got := resp.Header.Get(decisionHeader)
			if !strings.HasPrefix(got, tt.wantHeader) {
				t.Errorf("%s: %s\nwant %s…", decisionHeader, got, tt.wantHeader)
			}
			if wantAudit := tt.mode == ModeAudit; strings.HasSuffix(got, "; mode=audit") != wantAudit {
				t.Errorf("%s: %s; mode=audit wanted: %v", decisionHeader, got, wantAudit)
			}
			if tt.want == (audit.PolicyFinding{}) && strings.Contains(got+body, "policy") {
				t.Errorf("robots.txt decided, yet the answer names the policy: %s\n%s", got, body)
			}
			if forwarded := tt.wantStatus == 200; o.saw(tt.path) != forwarded {
				t.Errorf("the origin saw %s: %v, want %v", tt.path, !forwarded, forwarded)
			}
			rec := recordFor(t, p.records(), "GET", o.URL+tt.path)
			checkPolicyRecord(t, rec, pol.Version(), tt.want, nil)
			if rec.Verdict != tt.wantVerdict || rec.Reason != tt.wantReason || rec.Status != tt.wantStatus || rec.Forwarded != (tt.wantStatus == 200) {
				t.Errorf("record: %+v", rec)
			}
		})
	}
}

// TestPolicyPace: a crawler's min_delay refuses its second request as
// too early, and its max_concurrency refuses a request past its bound
// while another is in flight, each named by the policy's line; the
// records carry the crawler's purposes.
func TestPolicyPace(t *testing.T) {
	pol := parsePolicy(t, testPolicy)
	o := startOrigin(t, originConfig{robots: testRobots})
	release, arrived := make(chan struct{}), make(chan struct{})
	o.mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
	})
	p := pacedProxy(t, pace.ModeEnforce, proxyConfig{policy: fixedPolicy{pol}})
	c := p.client()

	if resp, body := do(t, c, "GET", o.URL+"/a", ua("paced/1.0")); resp.StatusCode != 200 {
		t.Fatalf("paced's first request: %d %s", resp.StatusCode, body)
	}
	resp, body := do(t, c, "GET", o.URL+"/b", ua("paced/1.0"))
	wantHeader := `too-early; token="paced"; crawl-delay=30; source="policy"` + params(minDelayFinding) + "; retry-after="
	if got := resp.Header.Get(decisionHeader); resp.StatusCode != 429 || !strings.HasPrefix(got, wantHeader) || strings.Contains(got, "robots=") {
		t.Errorf("paced's second request: %d %s\nwant 429 %s…, naming no robots.txt", resp.StatusCode, got, wantHeader)
	}
	if !strings.Contains(body, "the operator's policy's min_delay for this crawler ("+findingText(minDelayFinding)+")") {
		t.Errorf("the 429 page does not name the min_delay:\n%s", body)
	}
	resp, body = do(t, c, "GET", o.URL+"/c", http.Header{"User-Agent": {"paced"}, "Accept": {"application/json"}})
	var page map[string]any
	if err := json.Unmarshal([]byte(body), &page); err != nil || resp.StatusCode != 429 ||
		page["crawl_delay"] != 30.0 || page["crawl_delay_source"] != "policy" || page["pace"] != "too_early" {
		t.Errorf("JSON 429: %d %v\n%s", resp.StatusCode, err, body)
	}

	done := make(chan int)
	go func() {
		req, _ := http.NewRequest("GET", o.URL+"/slow", nil)
		req.Header.Set("User-Agent", "limited/1.0")
		resp, err := c.Do(req)
		if err != nil {
			done <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	select {
	case <-arrived:
	case <-time.After(testTimeout):
		t.Fatal("the slow request did not reach the origin")
	}
	resp, body = do(t, c, "GET", o.URL+"/d", ua("limited/1.0"))
	wantHeader = `busy; token="limited"; max-concurrency=1; scope="crawler"` + params(maxConcFinding) + "; retry-after="
	if got := resp.Header.Get(decisionHeader); resp.StatusCode != 429 || !strings.HasPrefix(got, wantHeader) {
		t.Errorf("limited past its bound: %d %s\nwant 429 %s…", resp.StatusCode, got, wantHeader)
	}
	if !strings.Contains(body, "as the operator's policy lets it (max_concurrency: 1, "+findingText(maxConcFinding)+")") {
		t.Errorf("the busy page does not name max_concurrency:\n%s", body)
	}
	// Another crawler is not bound by limited's max_concurrency.
	if resp, body := do(t, c, "GET", o.URL+"/e", ua(curlUA)); resp.StatusCode != 200 {
		t.Errorf("curl while limited is at its bound: %d %s", resp.StatusCode, body)
	}
	close(release)
	if code := <-done; code != 200 {
		t.Fatalf("the slow request: %d", code)
	}

	recs := p.records()
	version := pol.Version()
	first := recordFor(t, recs, "GET", o.URL+"/a")
	checkPolicyRecord(t, first, version, audit.PolicyFinding{}, []string{"search"})
	if first.CrawlDelay != 30 || first.CrawlDelaySource != "policy" || !first.Forwarded {
		t.Errorf("paced's first record: %+v", first)
	}
	early := recordFor(t, recs, "GET", o.URL+"/b")
	checkPolicyRecord(t, early, version, minDelayFinding, []string{"search"})
	if early.Status != 429 || early.Pace != "too_early" || early.CrawlDelaySource != "policy" || early.Verdict != "allow" || early.Forwarded {
		t.Errorf("too early's record: %+v", early)
	}
	busy := recordFor(t, recs, "GET", o.URL+"/d")
	checkPolicyRecord(t, busy, version, maxConcFinding, []string{"archive", "ai-train"})
	if busy.Status != 429 || busy.Pace != "busy" || busy.Forwarded {
		t.Errorf("busy's record: %+v", busy)
	}
	slow := recordFor(t, recs, "GET", o.URL+"/slow")
	checkPolicyRecord(t, slow, version, audit.PolicyFinding{}, []string{"archive", "ai-train"})
	checkPolicyRecord(t, recordFor(t, recs, "GET", o.URL+"/e"), version, audit.PolicyFinding{}, nil)
}

// TestNoPolicy: without a policy, or with a source that has none in
// force, robots.txt alone decides and no record carries a policy field.
func TestNoPolicy(t *testing.T) {
	for name, src := range map[string]PolicySource{"no source": nil, "source without a policy": fixedPolicy{}} {
		t.Run(name, func(t *testing.T) {
			o := startOrigin(t, originConfig{robots: testRobots})
			p := startProxy(t, proxyConfig{policy: src})
			c := p.client()
			for path, want := range map[string]int{"/shop/cart": 200, "/private/report": 403} {
				if resp, body := do(t, c, "GET", o.URL+path, ua(curlUA)); resp.StatusCode != want || strings.Contains(body, "policy") {
					t.Errorf("%s: %d, want %d:\n%s", path, resp.StatusCode, want, body)
				}
			}
			if resp, _ := do(t, c, "GET", o.URL+"/a", ua("fenced")); resp.StatusCode != 200 {
				t.Errorf("fenced without a policy: %d", resp.StatusCode)
			}
			p.records() // closes the log
			if log := p.auditTo.String(); strings.Contains(log, `"policy`) || strings.Contains(log, `"purposes"`) {
				t.Errorf("records without a policy carry policy fields:\n%s", log)
			}
		})
	}
}

// TestPolicyInFlight: a request keeps the policy it started with while a
// reload puts another in force; the next request is judged by the new
// one.
func TestPolicyInFlight(t *testing.T) {
	old := parsePolicy(t, testPolicy)
	// The new policy drops the site entry: no exception for /private/, no
	// rule on /shop/.
	next := parsePolicy(t, testPolicy[:strings.Index(testPolicy, "\nsites:")+1])
	if old.Version() == next.Version() {
		t.Fatal("the two policies have one version")
	}
	src := &swappedPolicy{}
	src.p.Store(old)
	o := startOrigin(t, originConfig{robots: testRobots})
	release, arrived := make(chan struct{}), make(chan struct{})
	o.mux.HandleFunc("/private/held", func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		io.WriteString(w, "held\n")
	})
	p := startProxy(t, proxyConfig{policy: src})
	c := p.client()

	type answer struct {
		status int
		header string
	}
	done := make(chan answer)
	go func() {
		req, _ := http.NewRequest("GET", o.URL+"/private/held", nil)
		req.Header.Set("User-Agent", curlUA)
		resp, err := c.Do(req)
		if err != nil {
			done <- answer{}
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- answer{resp.StatusCode, resp.Header.Get(decisionHeader)}
	}()
	select {
	case <-arrived:
	case <-time.After(testTimeout):
		t.Fatal("the held request did not reach the origin")
	}
	src.p.Store(next)
	// Judged by the new policy while the first is in flight.
	if resp, body := do(t, c, "GET", o.URL+"/private/next", ua(curlUA)); resp.StatusCode != 403 || strings.Contains(body, "policy") {
		t.Errorf("/private/next under the new policy: %d, want robots.txt's 403:\n%s", resp.StatusCode, body)
	}
	if resp, _ := do(t, c, "GET", o.URL+"/shop/next", ua(curlUA)); resp.StatusCode != 200 {
		t.Errorf("/shop/next under the new policy: %d, want 200", resp.StatusCode)
	}
	close(release)
	held := <-done
	// The header is written once the origin answers, after the reload:
	// it still names the exception the request was let through by.
	if held.status != 200 || !strings.Contains(held.header, params(exceptionFinding)) {
		t.Errorf("the held request: %d %q; want 200 naming its exception", held.status, held.header)
	}

	recs := p.records()
	rec := recordFor(t, recs, "GET", o.URL+"/private/held")
	checkPolicyRecord(t, rec, old.Version(), exceptionFinding, nil)
	if rec.Verdict != "allow" || !strings.HasPrefix(rec.Reason, "policy: ") {
		t.Errorf("the held request's record: %+v", rec)
	}
	for _, path := range []string{"/private/next", "/shop/next"} {
		checkPolicyRecord(t, recordFor(t, recs, "GET", o.URL+path), next.Version(), audit.PolicyFinding{}, nil)
	}
}

// TestPolicyHealthz: /healthz shows each live file's version, from a real
// live.File that is also the policy source; a file never set shows
// nothing.
func TestPolicyHealthz(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pol.yaml")
	if err := os.WriteFile(path, []byte(testPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	file, err := live.New(live.Options[*policy.Policy]{Name: "policy", Path: path, Load: policy.Parse})
	if err != nil {
		t.Fatal(err)
	}
	unset := func() live.State { return live.State{Name: "credentials"} }
	p := startProxy(t, proxyConfig{policy: file, files: []func() live.State{file.State, unset}})
	_, body := do(t, p.direct(), "GET", p.url.String()+"/healthz", nil)
	want := "ok\npolicy: " + path + " version " + file.Current().Version() + " loaded "
	if !strings.HasPrefix(body, want) || strings.Count(body, "\n") != 2 || strings.Contains(body, "credentials") {
		t.Errorf("/healthz:\n%s\nwant %s…", body, want)
	}
	// The live file is the Server's policy, its metrics served.
	_, metrics := do(t, p.direct(), "GET", p.url.String()+"/metrics", nil)
	if !strings.Contains(metrics, `robotsgate_policy_info{file="`+path+`",version="`+file.Current().Version()+`"} 1`) {
		t.Errorf("metrics lack the policy's version:\n%s", grep(metrics, "policy"))
	}

	// A reload that fails keeps the version and says why.
	if err := os.WriteFile(path, []byte("crawlers:\n  - tokn: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if file.Reload() == nil {
		t.Fatal("a broken policy reloaded")
	}
	_, body = do(t, p.direct(), "GET", p.url.String()+"/healthz", nil)
	if !strings.HasPrefix(body, want) || !strings.Contains(body, "; not reloaded at ") || !strings.Contains(body, "pol.yaml:2") {
		t.Errorf("/healthz after a failed reload:\n%s", body)
	}
}

// TestPolicyAllocatesNothingWithout: without a policy in force, the
// policy's glue allocates nothing and leaves the decision without a
// policyState; with one, the request's policy state is its only cost.
func TestPolicyAllocatesNothingWithout(t *testing.T) {
	r, err := http.NewRequest("GET", "http://127.0.0.1:1/shop/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("User-Agent", curlUA)
	pol := parsePolicy(t, testPolicy)
	for _, tt := range []struct {
		name   string
		src    PolicySource
		allocs float64
	}{
		{"no source", nil, 0},
		{"source without a policy", fixedPolicy{}, 0},
		{"a policy", fixedPolicy{pol}, 1},
	} {
		p := newTestServer(t, proxyConfig{policy: tt.src})
		d := p.srv.newDecision(r, nil)
		d.who.token = "curl"
		run := func() {
			d.policy = nil
			if d.applyPolicy(r, "127.0.0.1") != nil {
				t.Fatalf("%s: curl refused", tt.name)
			}
			d.judgePolicy("/shop/x")
			var who pace.Identity
			d.paceByPolicy(&who)
			var rec audit.Record
			d.policyRecord(&rec)
		}
		if n := testing.AllocsPerRun(100, run); n != tt.allocs {
			t.Errorf("%s: %v allocations per request, want %v", tt.name, n, tt.allocs)
		}
		if (d.policy != nil) != (tt.allocs > 0) {
			t.Errorf("%s: policy state %+v", tt.name, d.policy)
		}
	}
	// A whole decision on an allowed request (BenchmarkDecision's
	// "allow") costs the same without a policy as with a source that has
	// none in force, and one allocation more, the policy state, with one.
	origin := startOrigin(t, originConfig{robots: testRobots})
	decideAllocs := func(src PolicySource) float64 {
		p := newTestServer(t, proxyConfig{audit: io.Discard, policy: src})
		req := httptest.NewRequest("GET", origin.URL+"/page?id=42", nil)
		req.Header.Set("User-Agent", gptbotUA)
		if _, answer := p.srv.decide(req, nil, nil); answer != nil {
			t.Fatalf("the allowed request answered %d", answer.status)
		}
		return testing.AllocsPerRun(100, func() { p.srv.decide(req, nil, nil) })
	}
	none, empty, loaded := decideAllocs(nil), decideAllocs(fixedPolicy{}), decideAllocs(fixedPolicy{pol})
	if empty != none || loaded != none+1 {
		t.Errorf("allocations per allowed decision: %v without a policy, %v with a source without one, %v with one; want %v, %v, %v",
			none, empty, loaded, none, none, none+1)
	}

	// The record of a decision judged by no policy has none of its
	// fields.
	var rec audit.Record
	(&decision{}).policyRecord(&rec)
	if !reflect.DeepEqual(rec, audit.Record{}) {
		t.Errorf("no policy, yet the record has %+v", rec)
	}
}

// TestPolicyPathNotShown: the crawler learns the policy file's name, never
// where it lies on the server; the audit record keeps the whole path.
func TestPolicyPathNotShown(t *testing.T) {
	const path = "/etc/robotsgate/secret-dir/pol.yaml"
	pol, err := policy.Parse(path, []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	o := startOrigin(t, originConfig{robots: testRobots})
	p := startProxy(t, proxyConfig{policy: fixedPolicy{pol}})
	for _, accept := range []string{"text/plain", "application/json"} {
		h := ua(noTokUA)
		h.Set("Accept", accept)
		resp, body := do(t, p.client(), "GET", o.URL+"/shop/cart", h)
		header := resp.Header.Get(decisionHeader)
		if resp.StatusCode != http.StatusForbidden || strings.Contains(header+body, "secret-dir") ||
			!strings.Contains(header, `policy="pol.yaml"`) || !strings.Contains(body, "pol.yaml") {
			t.Errorf("Accept %s: %d %s\n%s", accept, resp.StatusCode, header, body)
		}
	}
	for _, rec := range p.records() {
		if rec.Policy.File != path {
			t.Errorf("the record names %q, want %q", rec.Policy.File, path)
		}
	}
}

// TestPolicyBlindTunnelRefusedWhole: a tunnel robotsgate does not look into
// is refused when a rule of the policy refuses every path on its site, as
// when robots.txt does; a narrower rule cannot be enforced there and lets
// it open.
func TestPolicyBlindTunnelRefusedWhole(t *testing.T) {
	pol := parsePolicy(t, `crawlers:
  - token: walled
    rules: ["Disallow: /"]
  - token: narrow
    rules: ["Disallow: /private/"]
`)
	o := startOrigin(t, originConfig{robots: testRobots, tls: true})
	p := startProxy(t, proxyConfig{roots: o.roots, policy: fixedPolicy{pol}})
	for _, tt := range []struct {
		token string
		want  int
	}{{"walled", http.StatusForbidden}, {"narrow", http.StatusOK}} {
		conn, resp := connect(t, p.addr, o.host(), tt.token+"/1.0")
		header := resp.Header.Get(decisionHeader)
		conn.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s: CONNECT %d, want %d", tt.token, resp.StatusCode, tt.want)
		}
		if tt.want == http.StatusForbidden && !strings.Contains(header, `policy-kind="rule"; policy-rule="Disallow: /"`) {
			t.Errorf("%s: %s", tt.token, header)
		}
	}
	if !slices.ContainsFunc(p.records(), func(rec audit.Record) bool {
		return rec.Policy.Kind == "rule" && rec.Verdict == "disallow" && rec.Origin == "https://"+o.host()
	}) {
		t.Errorf("no record of the refused tunnel with its origin and the policy's rule: %+v", p.records())
	}
}

// TestPolicyBlindTunnelCarryingPlainHTTP: in audit mode a tunnel the policy
// would refuse whole opens; once it turns out to carry plain HTTP, the
// policy speaks for each request in it, not for the tunnel, whose record
// names no policy finding. (The origin speaks TLS, so that its robots.txt
// is read and the policy, not an unreachable robots.txt, judges the
// tunnel.)
func TestPolicyBlindTunnelCarryingPlainHTTP(t *testing.T) {
	pol := parsePolicy(t, "crawlers:\n  - token: walled\n    rules: [\"Disallow: /\"]\n")
	o := startOrigin(t, originConfig{robots: testRobots, tls: true})
	p := startProxy(t, proxyConfig{mode: ModeAudit, roots: o.roots, policy: fixedPolicy{pol}})
	conn, resp := connect(t, p.addr, o.host(), "walled/1.0")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT in audit mode: %d, want 200", resp.StatusCode)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /page HTTP/1.1\r\nHost: "+o.host()+"\r\nUser-Agent: walled/1.0\r\n\r\n")
	inner, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	inner.Body.Close()
	records := p.records()
	tunnel := recordFor(t, records, "CONNECT", o.host())
	if tunnel.Verdict != "allow" || tunnel.Policy != (audit.PolicyFinding{}) || tunnel.PolicyVersion != pol.Version() {
		t.Errorf("the tunnel's record: verdict %q, policy %+v, version %q", tunnel.Verdict, tunnel.Policy, tunnel.PolicyVersion)
	}
	if rec := recordFor(t, records, "GET", "http://"+o.host()+"/page"); rec.Policy.Kind != "rule" || rec.Verdict != "disallow" {
		t.Errorf("the request inside: verdict %q, policy %+v", rec.Verdict, rec.Policy)
	}
}
