package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"robotsgate/proxy/audit"
	"robotsgate/proxy/policy"
)

// usageRobots states a training opt-out for the whole site but /open/, in
// both robots.txt forms. Line numbers matter: pages and records cite them.
const usageRobots = `User-agent: *
Content-Usage: train-ai=n
Content-Usage: /open/ train-ai=y
Disallow: /private/
Allow: /
`

// usagePolicy declares each test crawler's purposes.
const usagePolicy = `crawlers:
  - token: trainer
    purposes: [ai-train]
  - token: searcher
    purposes: [search]
`

// usageOrigin serves usageRobots, and pages whose response headers state
// preferences: /hdr/usage (Content-Usage: train-ai=n), /hdr/tdm
// (tdm-reservation: 1), /hdr/noai (X-Robots-Tag: noai).
func usageOrigin(t *testing.T) *origin {
	o := startOrigin(t, originConfig{robots: usageRobots})
	for path, header := range map[string][2]string{
		"/open/hdr/usage": {"Content-Usage", "train-ai=n"},
		"/open/hdr/tdm":   {"Tdm-Reservation", "1"},
		"/open/hdr/noai":  {"X-Robots-Tag", "noai"},
	} {
		o.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(header[0], header[1])
			io.WriteString(w, "protected page "+r.URL.Path+"\n")
		})
	}
	return o
}

func TestUsagePreferences(t *testing.T) {
	pol, err := policy.Parse("pol.yaml", []byte(usagePolicy))
	if err != nil {
		t.Fatal(err)
	}
	o := usageOrigin(t)
	for _, tt := range []struct {
		name      string
		mode      Mode
		usage     UsageOptions
		userAgent string
		path      string
		// status and body the crawler gets; reached: the origin saw the
		// path.
		status  int
		body    string
		reached bool
		// header is the start of X-Robotsgate-Decision, "" for none.
		header string
		// verdict, finding and stated are the record's.
		verdict string
		finding audit.UsageFinding
		stated  []string
	}{
		{"a training crawler is refused before the fetch", ModeEnforce, UsageOptions{}, "trainer/1.0", "/article",
			http.StatusForbidden, "Content-Usage: train-ai=n", false,
			`usage-refused; token="trainer"; purpose="ai-train"; form="content-usage"; line=2;`, "disallow",
			audit.UsageFinding{Form: "content-usage", Line: 2, Label: "train-ai", Value: "n", Purpose: "ai-train", Verdict: "refused"},
			[]string{"content-usage train-ai=n (line 2)"}},
		{"the longest path scope allows it", ModeEnforce, UsageOptions{}, "trainer/1.0", "/open/page",
			http.StatusOK, "origin page /open/page", true, "", "allow", audit.UsageFinding{}, []string{"content-usage train-ai=y (line 3)"}},
		{"a search crawler is not affected by a training opt-out", ModeEnforce, UsageOptions{}, "searcher/1.0", "/article",
			http.StatusOK, "origin page /article", true, "", "allow", audit.UsageFinding{}, []string{"content-usage train-ai=n (line 2)"}},
		{"a crawler without purposes is recorded, never refused", ModeEnforce, UsageOptions{}, "other/1.0", "/article",
			http.StatusOK, "origin page /article", true, "", "allow", audit.UsageFinding{}, []string{"content-usage train-ai=n (line 2)"}},
		{"robots.txt still decides first", ModeEnforce, UsageOptions{}, "searcher/1.0", "/private/x",
			http.StatusForbidden, "robots.txt does not allow", false, "disallow;", "disallow", audit.UsageFinding{}, nil},
		{"usage audit forwards and records", ModeEnforce, UsageOptions{Mode: UsageAudit}, "trainer/1.0", "/article",
			http.StatusOK, "origin page /article", true, `usage-recorded; token="trainer"; purpose="ai-train"`, "disallow",
			audit.UsageFinding{Form: "content-usage", Line: 2, Label: "train-ai", Value: "n", Purpose: "ai-train", Verdict: "recorded"},
			[]string{"content-usage train-ai=n (line 2)"}},
		{"audit mode forwards and records", ModeAudit, UsageOptions{}, "trainer/1.0", "/article",
			http.StatusOK, "origin page /article", true, `usage-recorded;`, "disallow",
			audit.UsageFinding{Form: "content-usage", Line: 2, Label: "train-ai", Value: "n", Purpose: "ai-train", Verdict: "recorded"},
			[]string{"content-usage train-ai=n (line 2)"}},
		{"usage off reads nothing", ModeEnforce, UsageOptions{Mode: UsageOff}, "trainer/1.0", "/article",
			http.StatusOK, "origin page /article", true, "", "allow", audit.UsageFinding{}, nil},
		{"a response's Content-Usage is recorded", ModeEnforce, UsageOptions{}, "trainer/1.0", "/open/hdr/usage",
			http.StatusOK, "protected page", true, `usage-recorded; token="trainer"; purpose="ai-train"; form="content-usage"; header="Content-Usage"`, "allow",
			audit.UsageFinding{Form: "content-usage", Header: "Content-Usage", Label: "train-ai", Value: "n", Purpose: "ai-train", Verdict: "recorded"},
			[]string{"content-usage train-ai=y (line 3)", "content-usage train-ai=n (header Content-Usage)"}},
		{"a response's Content-Usage is withheld", ModeEnforce, UsageOptions{Responses: ResponsesWithhold}, "trainer/1.0", "/open/hdr/usage",
			http.StatusForbidden, "withheld the body", true, `usage-withheld; token="trainer"; purpose="ai-train"; form="content-usage"; header="Content-Usage"`, "allow",
			audit.UsageFinding{Form: "content-usage", Header: "Content-Usage", Label: "train-ai", Value: "n", Purpose: "ai-train", Verdict: "withheld"},
			[]string{"content-usage train-ai=y (line 3)", "content-usage train-ai=n (header Content-Usage)"}},
		{"tdm-reservation is withheld", ModeEnforce, UsageOptions{Responses: ResponsesWithhold}, "trainer/1.0", "/open/hdr/tdm",
			http.StatusForbidden, "withheld the body", true, `usage-withheld; token="trainer"; purpose="ai-train"; form="tdmrep"`, "allow",
			audit.UsageFinding{Form: "tdmrep", Header: "Tdm-Reservation", Label: "tdm-reservation", Value: "1", Purpose: "ai-train", Verdict: "withheld"},
			nil},
		{"X-Robots-Tag: noai is withheld", ModeEnforce, UsageOptions{Responses: ResponsesWithhold}, "trainer/1.0", "/open/hdr/noai",
			http.StatusForbidden, "withheld the body", true, `usage-withheld; token="trainer"; purpose="ai-train"; form="x-robots-tag"`, "allow",
			audit.UsageFinding{Form: "x-robots-tag", Header: "X-Robots-Tag", Label: "noai", Purpose: "ai-train", Verdict: "withheld"},
			nil},
		{"a search crawler gets what a training opt-out header withholds", ModeEnforce, UsageOptions{Responses: ResponsesWithhold}, "searcher/1.0", "/open/hdr/usage",
			http.StatusOK, "protected page", true, "", "allow", audit.UsageFinding{}, nil},
		{"withhold is not enforced in audit mode", ModeAudit, UsageOptions{Responses: ResponsesWithhold}, "trainer/1.0", "/open/hdr/noai",
			http.StatusOK, "protected page", true, `usage-recorded;`, "allow",
			audit.UsageFinding{Form: "x-robots-tag", Header: "X-Robots-Tag", Label: "noai", Purpose: "ai-train", Verdict: "recorded"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := startProxy(t, proxyConfig{mode: tt.mode, policy: fixedPolicy{pol}, usage: tt.usage})
			url := o.URL + tt.path + "?" + strings.ReplaceAll(tt.name, " ", "-") // a path of its own
			resp, body := do(t, p.client(), http.MethodGet, url, ua(tt.userAgent))
			if resp.StatusCode != tt.status || !strings.Contains(body, tt.body) {
				t.Fatalf("status %d, body %q; want %d with %q", resp.StatusCode, body, tt.status, tt.body)
			}
			if got := o.saw(strings.TrimPrefix(url, o.URL)); got != tt.reached {
				t.Errorf("the origin saw the request: %v, want %v", got, tt.reached)
			}
			if got := resp.Header.Get(decisionHeader); !strings.HasPrefix(got, tt.header) || (tt.header == "") != (got == "") {
				t.Errorf("%s = %q, want it to start with %q", decisionHeader, got, tt.header)
			}
			if tt.status == http.StatusForbidden && tt.finding.Verdict == "withheld" && strings.Contains(body, "protected page") {
				t.Error("the withheld body reached the crawler")
			}
			rec := recordFor(t, p.records(), http.MethodGet, url)
			if rec.Verdict != tt.verdict {
				t.Errorf("record verdict %q (%s), want %q", rec.Verdict, rec.Reason, tt.verdict)
			}
			if rec.Usage != tt.finding {
				t.Errorf("record usage %+v, want %+v", rec.Usage, tt.finding)
			}
			for _, s := range tt.stated {
				if !slices.Contains(rec.UsageStated, s) {
					t.Errorf("usage_stated %q lacks %q", rec.UsageStated, s)
				}
			}
			if tt.finding.Verdict == "refused" && !strings.Contains(rec.Reason, "robots.txt line 2") {
				t.Errorf("reason %q does not name the line", rec.Reason)
			}
			if tt.finding.Verdict == "withheld" && !strings.HasSuffix(rec.Reason, "refuses ai-train: the response was withheld") {
				t.Errorf("record reason %q does not say why the response was withheld", rec.Reason)
			}
			if tt.finding.Verdict == "refused" && (rec.Rule != "" || rec.RuleLine != 0) {
				t.Errorf("record rule %q line %d: robots.txt's Allow did not refuse", rec.Rule, rec.RuleLine)
			}
		})
	}
}

// TestUsageRefusalJSON: a client that accepts only JSON gets the refusal
// in the audit record's words, the usage object and purposes included;
// the record names the robots.txt whose line refused.
func TestUsageRefusalJSON(t *testing.T) {
	pol, err := policy.Parse("pol.yaml", []byte(usagePolicy))
	if err != nil {
		t.Fatal(err)
	}
	o := usageOrigin(t)
	p := startProxy(t, proxyConfig{policy: fixedPolicy{pol}})
	h := ua("trainer/1.0")
	h.Set("Accept", "application/json")
	resp, body := do(t, p.client(), http.MethodGet, o.URL+"/article", h)
	var got struct {
		Status   int                `json:"status"`
		Verdict  string             `json:"verdict"`
		Reason   string             `json:"reason"`
		Purposes []string           `json:"purposes"`
		Usage    audit.UsageFinding `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d, body %q: %v", resp.StatusCode, body, err)
	}
	want := audit.UsageFinding{Form: "content-usage", Line: 2, Label: "train-ai", Value: "n", Purpose: "ai-train", Verdict: "refused"}
	if got.Status != 403 || got.Verdict != "disallow" || got.Usage != want || !slices.Equal(got.Purposes, []string{"ai-train"}) ||
		got.Reason != "usage: Content-Usage: train-ai=n (robots.txt line 2) refuses ai-train" {
		t.Errorf("JSON refusal %+v, want usage %+v and purposes [ai-train]", got, want)
	}
	if rec := recordFor(t, p.records(), http.MethodGet, o.URL+"/article"); rec.RobotsTxt != o.robotsURL() {
		t.Errorf("record robots_txt %q, want %q", rec.RobotsTxt, o.robotsURL())
	}
}

// TestUsageMetadataNeverWithheld: robots.txt and tdmrep.json are what a
// crawler learns the rules from: a noai header on them is recorded, and
// the file delivered, even with ROBOTSGATE_USAGE_RESPONSES=withhold.
func TestUsageMetadataNeverWithheld(t *testing.T) {
	pol, err := policy.Parse("pol.yaml", []byte(usagePolicy))
	if err != nil {
		t.Fatal(err)
	}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Robots-Tag", "noai")
		io.WriteString(w, "User-agent: *\nAllow: /\n")
	}))
	t.Cleanup(origin.Close)
	p := startProxy(t, proxyConfig{policy: fixedPolicy{pol}, usage: UsageOptions{Responses: ResponsesWithhold}})
	paths := []string{"/robots.txt", "/.well-known/tdmrep.json", "/page"}
	for _, path := range paths {
		resp, body := do(t, p.client(), http.MethodGet, origin.URL+path, ua("trainer/1.0"))
		withheld := path == "/page"
		if got := resp.StatusCode == http.StatusForbidden; got != withheld || !withheld && !strings.HasPrefix(body, "User-agent: *") {
			t.Errorf("GET %s: status %d, body %q; withheld: %v, want %v", path, resp.StatusCode, body, got, withheld)
		}
	}
	recs := p.records()
	for _, path := range paths {
		if rec := recordFor(t, recs, http.MethodGet, origin.URL+path); rec.Usage.Verdict == "" {
			t.Errorf("GET %s: the noai header is not recorded", path)
		}
	}
}
