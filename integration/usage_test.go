package integration

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Issue 27, sites' AI usage preferences judged by each crawler's purpose.
// These tests run the real binary against origins on the loopback
// interface that state each form (robots.txt Content-Usage and
// Content-Signal lines, response headers, tdmrep.json): a training crawler
// is refused or withheld where the site says no and passes where it says
// nothing, a search crawler is not affected by a training opt-out, audit
// forwards and records, and "robotsgate check -purpose" agrees.

// The crawlers: usagePolicy gives Trainer and Searcher their purposes;
// crawlerUA (ExampleBot) declares none.
const (
	trainerUA  = "Trainer/1.0 (+https://example.com/trainer)"
	searcherUA = "Searcher/1.0 (+https://example.com/searcher)"
)

const usagePolicy = `crawlers:
  - token: trainer
    purposes: [ai-train]
  - token: searcher
    purposes: [search]
`

// The robots.txt of each form.
const (
	// Line 3 refuses training everywhere, line 4 allows it under /open/.
	contentUsageRobots = "User-agent: *\nAllow: /\nContent-Usage: train-ai=n\nContent-Usage: /open/ train-ai=y\n"
	// Cloudflare's default, line 2, for every path.
	contentSignalRobots = "User-Agent: *\nContent-Signal: search=yes, ai-train=no\nAllow: /\n"
	// Says nothing of usage.
	silentRobots = "User-agent: *\nDisallow: /private/\n"
)

// usageWant is what the decision header, the page and the audit record
// must say of the preference that refused a purpose.
type usageWant struct {
	form    string
	line    int    // robots.txt line; 0 for a header or tdmrep.json
	header  string // response header, or "tdmrep.json"
	label   string
	value   string
	text    string // the line or header as written; "" when not checked
	purpose string
	verdict string // refused, withheld, recorded
}

// contentUsageRefusal is what refuses the trainer outside /open/ on a site
// serving contentUsageRobots.
var contentUsageRefusal = usageWant{form: "content-usage", line: 3, label: "train-ai", value: "n",
	text: "Content-Usage: train-ai=n", purpose: "ai-train", verdict: "refused"}

// usageGet GETs rawURL through p as userAgent: on a connection of its own
// for http, in a tunnel opened and intercepted as userAgent for https.
func usageGet(t *testing.T, p *proxyProcess, rawURL, userAgent string) reply {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme == "https" {
		tun := p.interceptAs(t, u.Host, userAgent, "")
		defer tun.conn.Close()
		return tun.get(t, rawURL, userAgent, "")
	}
	r, _ := sendProxied(t, p, rawURL, userAgent, "")
	return r
}

// checkUsageDecision checks that X-Robotsgate-Decision is
// `usage-VERDICT; token="TOKEN"; purpose=…; form=…; line=N; …` for want.
func checkUsageDecision(t *testing.T, what string, r reply, token string, want usageWant) {
	t.Helper()
	h := r.header.Get("X-Robotsgate-Decision")
	if !strings.HasPrefix(h, "usage-"+want.verdict+";") {
		t.Errorf("%s: X-Robotsgate-Decision %q, want it to begin with %q", what, h, "usage-"+want.verdict+";")
		return
	}
	params := []string{
		`; token="` + token + `";`,
		`; purpose="` + want.purpose + `";`,
		`; form="` + want.form + `";`,
		`; label="` + want.label + `";`,
	}
	if want.value != "" {
		params = append(params, `; value="`+want.value+`";`)
	}
	if want.line > 0 {
		params = append(params, "; line="+strconv.Itoa(want.line)+";")
	}
	if want.header != "" && want.header != "tdmrep.json" {
		params = append(params, `; header="`+want.header+`";`)
	}
	if want.text != "" {
		params = append(params, `; usage="`+want.text+`"`)
	}
	for _, param := range params {
		if !strings.Contains(h+";", param) {
			t.Errorf("%s: X-Robotsgate-Decision %q lacks %q", what, h, param)
		}
	}
}

// checkUsageRecord checks a record's usage object; nil want means the
// record must have none.
func checkUsageRecord(t *testing.T, what string, rec auditRecord, want *usageWant) {
	t.Helper()
	raw, ok := rec.raw["usage"]
	if want == nil {
		if ok {
			t.Errorf("%s: audit usage %v, want none: no preference refused the crawler's purposes", what, raw)
		}
		return
	}
	wantFinding := usageFinding{Form: want.form, Line: want.line, Header: want.header, Label: want.label,
		Value: want.value, Purpose: want.purpose, Verdict: want.verdict}
	if rec.Usage != wantFinding {
		t.Errorf("%s: audit usage %+v (raw %v), want %+v", what, rec.Usage, raw, wantFinding)
	}
}

// checkStated checks a record's usage_stated; nil want means none.
func checkStated(t *testing.T, what string, rec auditRecord, want []string) {
	t.Helper()
	if want == nil {
		if raw, ok := rec.raw["usage_stated"]; ok {
			t.Errorf("%s: audit usage_stated %v, want none", what, raw)
		}
		return
	}
	if !slices.Equal(rec.UsageStated, want) {
		t.Errorf("%s: audit usage_stated %q, want %q", what, rec.UsageStated, want)
	}
}

// checkPurposes checks a record's purposes; nil want means none.
func checkPurposes(t *testing.T, what string, rec auditRecord, want []string) {
	t.Helper()
	if want == nil {
		if raw, ok := rec.raw["purposes"]; ok {
			t.Errorf("%s: audit purposes %v, want none: the crawler declares none", what, raw)
		}
		return
	}
	if !slices.Equal(rec.Purposes, want) {
		t.Errorf("%s: audit purposes %q, want %q", what, rec.Purposes, want)
	}
}

// checkJSON is one line of "robotsgate check -json".
type checkJSON struct {
	URL         string       `json:"url"`
	Token       string       `json:"token"`
	Verdict     string       `json:"verdict"`
	Reason      string       `json:"reason"`
	Purposes    []string     `json:"purposes"`
	Usage       usageFinding `json:"usage"`
	UsageStated []string     `json:"usage_stated"`
}

// runCheckJSON runs "robotsgate check -json args…" on one URL and returns
// its exit code and its one line.
func runCheckJSON(t *testing.T, env []string, args ...string) (int, checkJSON) {
	t.Helper()
	code, stdout, stderr := runBinary(t, "", env, append([]string{"check", "-json"}, args...)...)
	var out checkJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("check -json %q: exit %d, %v; stdout %q\nstderr:\n%s", args, code, err, stdout, stderr)
	}
	return code, out
}

// TestUsageRobotsTxt: the robots.txt lines of both forms, over plain HTTP
// and in an intercepted tunnel, with purposes from the policy. A training
// crawler is refused (403 naming the line and label; the origin never sees
// the path) where the site says no, passes where a path-scoped line says
// yes and where the site says nothing; a search crawler passes; a crawler
// without purposes passes with the preferences recorded. check -purpose
// and check -policy agree with the proxy, and /metrics counts the
// refusals.
func TestUsageRobotsTxt(t *testing.T) {
	t.Parallel()
	signal := usageWant{form: "content-signal", line: 2, label: "ai-train", value: "no",
		text: "Content-Signal: search=yes, ai-train=no", purpose: "ai-train", verdict: "refused"}
	signalStated := []string{"content-signal search=yes (line 2)", "content-signal ai-train=no (line 2)"}
	cases := []struct {
		name, robots string
		refusal      *usageWant // what refuses the trainer at /a/; nil: nothing
		openRefusal  *usageWant // and at /open/
		stated       []string   // usage_stated at /a/, as check -json says it
		openStated   []string   // and at /open/
	}{
		{"content-usage", contentUsageRobots, &contentUsageRefusal, nil,
			[]string{"content-usage train-ai=n (line 3)"}, []string{"content-usage train-ai=y (line 4)"}},
		{"content-signal", contentSignalRobots, &signal, &signal, signalStated, signalStated},
		{"silent", silentRobots, nil, nil, nil, nil},
	}
	type site struct {
		name   string
		o      *origin
		scheme string
	}
	var sites []site
	var secure []*origin
	for _, c := range cases {
		pages := map[string]http.HandlerFunc{"/robots.txt": robotsTxt(c.robots)}
		plain, tls := newOrigin(t, false, pages), newOrigin(t, true, pages)
		sites = append(sites, site{c.name, plain, "http"}, site{c.name, tls, "https"})
		secure = append(secure, tls)
	}
	polFile := writePolicy(t, "pol.yaml", usagePolicy)
	p := startProxy(t, "ROBOTSGATE_POLICY="+polFile, upstreamCA(t, secure...))

	// The paths each crawler asks for, one URL each so that each has one
	// record.
	const (
		trainerPath  = "/a/trainer"
		trainerOpen  = "/open/trainer"
		searcherPath = "/a/searcher"
		plainPath    = "/a/plain"
	)
	for i, s := range sites {
		c := cases[i/2]
		what := func(ua, path string) string { return fmt.Sprintf("%s over %s: %s GET %s", s.name, s.scheme, ua, path) }
		for _, step := range []struct {
			ua, path string
			refusal  *usageWant
		}{
			{trainerUA, trainerPath, c.refusal},
			{trainerUA, trainerOpen, c.openRefusal},
			{searcherUA, searcherPath, nil},
			{crawlerUA, plainPath, nil},
		} {
			w := what(step.ua, step.path)
			r := usageGet(t, p, s.o.base()+step.path, step.ua)
			if step.refusal == nil {
				if r.status != http.StatusOK || string(r.body) != s.o.page(step.path) {
					t.Errorf("%s: status %d, body %q; want the origin's page (X-Robotsgate-Decision %q)",
						w, r.status, r.body, r.header.Get("X-Robotsgate-Decision"))
				}
				if h := r.header.Get("X-Robotsgate-Decision"); strings.HasPrefix(h, "usage-") {
					t.Errorf("%s: X-Robotsgate-Decision %q; nothing refused", w, h)
				}
				continue
			}
			if r.status != http.StatusForbidden {
				t.Errorf("%s: status %d, want 403; body %q", w, r.status, r.body)
				continue
			}
			checkUsageDecision(t, w, r, "Trainer", *step.refusal)
			for _, named := range []string{step.refusal.text, "line " + strconv.Itoa(step.refusal.line), "ai-train"} {
				if !strings.Contains(string(r.body), named) {
					t.Errorf("%s: the page does not name %q:\n%s", w, named, r.body)
				}
			}
			if n := s.o.count(step.path); n != 0 {
				t.Errorf("%s: the origin received the path %d times, want never", w, n)
			}
		}
	}

	t.Run("metrics", func(t *testing.T) {
		// The trainer's refusals: /a/ on both content-usage origins; /a/
		// and /open/ on both content-signal origins.
		for label, want := range map[string]float64{
			`form="content-usage",verdict="refused"`:  2,
			`form="content-signal",verdict="refused"`: 4,
		} {
			if got := labelledValue(t, p, "robotsgate_usage_decisions_total", label); got != want {
				t.Errorf("robotsgate_usage_decisions_total{%s} = %v, want %v", label, got, want)
			}
		}
	})

	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	recs := p.audit()
	for i, s := range sites {
		c := cases[i/2]
		for _, step := range []struct {
			ua, path string
			refusal  *usageWant
			purposes []string
			stated   []string
		}{
			{trainerUA, trainerPath, c.refusal, []string{"ai-train"}, c.stated},
			{trainerUA, trainerOpen, c.openRefusal, []string{"ai-train"}, c.openStated},
			{searcherUA, searcherPath, nil, []string{"search"}, c.stated},
			{crawlerUA, plainPath, nil, nil, c.stated},
		} {
			w := fmt.Sprintf("%s over %s: %s GET %s", s.name, s.scheme, step.ua, step.path)
			rec := auditFor(t, recs, s.o.base()+step.path)
			checkUsageRecord(t, w, rec, step.refusal)
			checkPurposes(t, w, rec, step.purposes)
			checkStated(t, w, rec, step.stated)
			wantVerdict, wantStatus, wantForwarded := "allow", http.StatusOK, true
			if step.refusal != nil {
				wantVerdict, wantStatus, wantForwarded = "disallow", http.StatusForbidden, false
				wantReason := "usage: " + step.refusal.text + " (robots.txt line " + strconv.Itoa(step.refusal.line) + ") refuses ai-train"
				if rec.Reason != wantReason {
					t.Errorf("%s: audit reason %q, want %q", w, rec.Reason, wantReason)
				}
			}
			if rec.Verdict != wantVerdict || rec.Status != wantStatus || rec.Forwarded != wantForwarded {
				t.Errorf("%s: audit verdict %q, status %d, forwarded %v; want %s, %d, %v",
					w, rec.Verdict, rec.Status, rec.Forwarded, wantVerdict, wantStatus, wantForwarded)
			}
		}
	}

	// check judges the plain-HTTP origins as the proxy did: by -purpose,
	// and by the policy's purposes.
	t.Run("check agrees", func(t *testing.T) {
		for i, s := range sites {
			if s.scheme != "http" {
				continue
			}
			c := cases[i/2]
			for _, step := range []struct {
				path    string
				refusal *usageWant
				stated  []string
			}{
				{trainerPath, c.refusal, c.stated},
				{trainerOpen, c.openRefusal, c.openStated},
			} {
				u := s.o.base() + step.path
				rec := auditFor(t, recs, u)
				for _, args := range [][]string{
					{"-purpose", "ai-train", "-user-agent", "trainer", u},
					{"-policy", polFile, "-user-agent", trainerUA, u},
				} {
					w := fmt.Sprintf("%s: check -json %q", s.name, args)
					code, out := runCheckJSON(t, nil, args...)
					wantCode := 0
					if step.refusal != nil {
						wantCode = 1
					}
					if code != wantCode || out.Verdict != rec.Verdict {
						t.Errorf("%s: exit %d, verdict %q; want exit %d and the proxy's verdict %q", w, code, out.Verdict, wantCode, rec.Verdict)
					}
					if step.refusal != nil && out.Reason != rec.Reason {
						t.Errorf("%s: reason %q, want the proxy's %q", w, out.Reason, rec.Reason)
					}
					if out.Usage != rec.Usage {
						t.Errorf("%s: usage %+v, want the proxy's %+v", w, out.Usage, rec.Usage)
					}
					if !slices.Equal(out.Purposes, []string{"ai-train"}) {
						t.Errorf("%s: purposes %q, want [ai-train]", w, out.Purposes)
					}
					if !slices.Equal(out.UsageStated, step.stated) {
						t.Errorf("%s: usage_stated %q, want %q", w, out.UsageStated, step.stated)
					}
					if !slices.Equal(out.UsageStated, rec.UsageStated) {
						t.Errorf("%s: usage_stated %q, but the proxy's record of %s says %q", w, out.UsageStated, u, rec.UsageStated)
					}
				}
			}
		}
	})

	// The text form: exit status and the fifth column, the preferences
	// that apply.
	t.Run("check text", func(t *testing.T) {
		cu := sites[0].o // content-usage over http
		refused, open := cu.base()+trainerPath, cu.base()+trainerOpen
		code, stdout, stderr := runBinary(t, "", nil, "check", "-purpose", "ai-train", "-user-agent", "trainer", refused, open)
		if code != 1 {
			t.Errorf("check %s %s: exit %d, want 1: one is refused\nstderr:\n%s", refused, open, code, stderr)
		}
		want := "disallowed\ttrainer\t" + refused + "\tusage: Content-Usage: train-ai=n (robots.txt line 3) refuses ai-train\tcontent-usage train-ai=n (line 3)\n" +
			"allowed\ttrainer\t" + open + "\t"
		if !strings.HasPrefix(stdout, want) || !strings.HasSuffix(stdout, "\tcontent-usage train-ai=y (line 4)\n") || strings.Count(stdout, "\n") != 2 {
			t.Errorf("check %s %s:\n%s\nwant it to begin %q and end with the fifth column %q", refused, open, stdout, want, "content-usage train-ai=y (line 4)")
		}
		code, stdout, stderr = runBinary(t, "", nil, "check", "-purpose", "ai-train", "-user-agent", "trainer", open)
		if code != 0 {
			t.Errorf("check %s: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", open, code, stdout, stderr)
		}
		silent := sites[4].o.base() + trainerPath
		code, stdout, stderr = runBinary(t, "", nil, "check", "-purpose", "ai-train", "-user-agent", "trainer", silent)
		if code != 0 || !strings.HasPrefix(stdout, "allowed\t") || !strings.HasSuffix(stdout, "\t-\n") {
			t.Errorf("check %s on a silent site: exit %d, %q; want exit 0, allowed, fifth column -\nstderr:\n%s", silent, code, stdout, stderr)
		}
	})
}

// TestUsageResponseHeaders: a response whose Content-Usage,
// tdm-reservation or X-Robots-Tag: noai header refuses training is
// delivered and recorded by default (ROBOTSGATE_USAGE_RESPONSES=record),
// and withheld with withhold: a 403 naming the header, the body never
// delivered. A search crawler gets every page in both.
func TestUsageResponseHeaders(t *testing.T) {
	t.Parallel()
	secretPage := func(name, value string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(name, value)
			fmt.Fprintf(w, "SECRET body of %s\n", r.URL.Path)
		}
	}
	pages := map[string]http.HandlerFunc{
		"/robots.txt": robotsTxt("User-agent: *\nAllow: /\n"),
		"/cu":         secretPage("Content-Usage", "train-ai=n"),
		"/tdm":        secretPage("tdm-reservation", "1"),
		"/noai":       secretPage("X-Robots-Tag", "noai"),
	}
	headers := []struct {
		path   string
		want   usageWant
		stated string
	}{
		{"/cu", usageWant{form: "content-usage", header: "Content-Usage", label: "train-ai", value: "n", purpose: "ai-train"}, "content-usage train-ai=n (header Content-Usage)"},
		{"/tdm", usageWant{form: "tdmrep", header: "Tdm-Reservation", label: "tdm-reservation", value: "1", purpose: "ai-train"}, "tdmrep tdm-reservation=1 (header Tdm-Reservation)"},
		{"/noai", usageWant{form: "x-robots-tag", header: "X-Robots-Tag", label: "noai", purpose: "ai-train"}, "x-robots-tag noai (header X-Robots-Tag)"},
	}
	plain, secure := newOrigin(t, false, pages), newOrigin(t, true, pages)
	polFile := writePolicy(t, "pol.yaml", usagePolicy)
	for _, mode := range []struct {
		name    string
		env     []string
		verdict string
	}{
		{"record", nil, "recorded"},
		{"withhold", []string{"ROBOTSGATE_USAGE_RESPONSES=withhold"}, "withheld"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			p := startProxy(t, append(mode.env, "ROBOTSGATE_POLICY="+polFile, upstreamCA(t, secure))...)
			for _, o := range []*origin{plain, secure} {
				for _, h := range headers {
					want := h.want
					want.verdict = mode.verdict
					u := o.base() + h.path + "?by=trainer"
					w := fmt.Sprintf("%s: trainer GET %s", mode.name, u)
					r := usageGet(t, p, u, trainerUA)
					if mode.verdict == "withheld" {
						if r.status != http.StatusForbidden {
							t.Errorf("%s: status %d, want 403", w, r.status)
						}
						if strings.Contains(string(r.body), "SECRET") {
							t.Errorf("%s: the withheld body was delivered:\n%s", w, r.body)
						}
						if !strings.Contains(string(r.body), "(response header)") {
							t.Errorf("%s: the page does not name the response header:\n%s", w, r.body)
						}
					} else if r.status != http.StatusOK || !strings.HasPrefix(string(r.body), "SECRET body of "+h.path) {
						t.Errorf("%s: status %d, body %q; want the page, delivered", w, r.status, r.body)
					}
					checkUsageDecision(t, w, r, "Trainer", want)

					u = o.base() + h.path + "?by=searcher"
					if r := usageGet(t, p, u, searcherUA); r.status != http.StatusOK || !strings.HasPrefix(string(r.body), "SECRET body of "+h.path) {
						t.Errorf("%s: searcher GET %s: status %d, body %q; want the page: a training opt-out", mode.name, u, r.status, r.body)
					}
				}
			}
			if mode.verdict == "withheld" {
				if got := labelledValue(t, p, "robotsgate_usage_decisions_total", `form="tdmrep",verdict="withheld"`); got != 2 {
					t.Errorf(`robotsgate_usage_decisions_total{form="tdmrep",verdict="withheld"} = %v, want 2`, got)
				}
			}
			if code := p.stop(); code != 0 {
				t.Fatalf("exit %d after SIGTERM, want 0", code)
			}
			recs := p.audit()
			for _, o := range []*origin{plain, secure} {
				for _, h := range headers {
					want := h.want
					want.verdict = mode.verdict
					u := o.base() + h.path + "?by=trainer"
					rec := auditFor(t, recs, u)
					checkUsageRecord(t, mode.name+": trainer "+u, rec, &want)
					checkStated(t, mode.name+": trainer "+u, rec, []string{h.stated})
					wantStatus := http.StatusOK
					if mode.verdict == "withheld" {
						wantStatus = http.StatusForbidden
					}
					if rec.Status != wantStatus || !rec.Forwarded {
						t.Errorf("%s: trainer %s: audit status %d, forwarded %v; want %d, forwarded", mode.name, u, rec.Status, rec.Forwarded, wantStatus)
					}
					u = o.base() + h.path + "?by=searcher"
					rec = auditFor(t, recs, u)
					checkUsageRecord(t, mode.name+": searcher "+u, rec, nil)
					checkStated(t, mode.name+": searcher "+u, rec, []string{h.stated})
				}
			}
		})
	}
}

// TestUsageTDMRep: with ROBOTSGATE_TDMREP=true the origin's
// /.well-known/tdmrep.json refuses training where it reserves the rights
// and allows it where it does not; without it, the file is never asked
// for.
func TestUsageTDMRep(t *testing.T) {
	t.Parallel()
	const tdmrep = `[{"location":"/open/","tdm-reservation":0},{"location":"/","tdm-reservation":1}]`
	pages := map[string]http.HandlerFunc{
		"/robots.txt": robotsTxt("User-agent: *\nAllow: /\n"),
		"/.well-known/tdmrep.json": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, tdmrep)
		},
	}
	polFile := writePolicy(t, "pol.yaml", usagePolicy)

	t.Run("on", func(t *testing.T) {
		t.Parallel()
		o := newOrigin(t, false, pages)
		p := startProxy(t, "ROBOTSGATE_TDMREP=true", "ROBOTSGATE_POLICY="+polFile)
		want := usageWant{form: "tdmrep", header: "tdmrep.json", label: "tdm-reservation", value: "1", purpose: "ai-train", verdict: "refused"}
		r := usageGet(t, p, o.base()+"/x", trainerUA)
		if r.status != http.StatusForbidden {
			t.Fatalf("trainer GET /x: status %d, want 403: tdmrep.json reserves /; body %q", r.status, r.body)
		}
		checkUsageDecision(t, "trainer GET /x", r, "Trainer", want)
		if !strings.Contains(string(r.body), "/.well-known/tdmrep.json") {
			t.Errorf("trainer GET /x: the page does not name tdmrep.json:\n%s", r.body)
		}
		if n := o.count("/x"); n != 0 {
			t.Errorf("the origin received /x %d times, want never", n)
		}
		if r := usageGet(t, p, o.base()+"/open/y", trainerUA); r.status != http.StatusOK || string(r.body) != o.page("/open/y") {
			t.Errorf("trainer GET /open/y: status %d, body %q; want the page: tdmrep.json does not reserve /open/", r.status, r.body)
		}
		if r := usageGet(t, p, o.base()+"/s", searcherUA); r.status != http.StatusOK || string(r.body) != o.page("/s") {
			t.Errorf("searcher GET /s: status %d, body %q; want the page: TDMRep does not refuse search", r.status, r.body)
		}
		if n := o.count("/.well-known/tdmrep.json"); n != 1 {
			t.Errorf("tdmrep.json was fetched %d times, want once: it is cached with robots.txt", n)
		}
		if code := p.stop(); code != 0 {
			t.Fatalf("exit %d after SIGTERM, want 0", code)
		}
		recs := p.audit()
		rec := auditFor(t, recs, o.base()+"/x")
		checkUsageRecord(t, "trainer /x", rec, &want)
		if rec.Verdict != "disallow" || rec.Forwarded || rec.Status != http.StatusForbidden {
			t.Errorf("trainer /x: audit verdict %q, forwarded %v, status %d; want disallow, not forwarded, 403", rec.Verdict, rec.Forwarded, rec.Status)
		}
		checkUsageRecord(t, "trainer /open/y", auditFor(t, recs, o.base()+"/open/y"), nil)
		checkUsageRecord(t, "searcher /s", auditFor(t, recs, o.base()+"/s"), nil)
	})

	t.Run("off", func(t *testing.T) {
		t.Parallel()
		o := newOrigin(t, false, pages)
		p := startProxy(t, "ROBOTSGATE_POLICY="+polFile)
		if r := usageGet(t, p, o.base()+"/x", trainerUA); r.status != http.StatusOK || string(r.body) != o.page("/x") {
			t.Errorf("trainer GET /x without ROBOTSGATE_TDMREP: status %d, body %q; want the page", r.status, r.body)
		}
		if n := o.count("/.well-known/tdmrep.json"); n != 0 {
			t.Errorf("without ROBOTSGATE_TDMREP, tdmrep.json was fetched %d times, want never", n)
		}
	})
}

// TestUsagePinnedToken: ROBOTSGATE_PURPOSES gives purposes to the crawler
// ROBOTSGATE_TOKEN pins every request to, in the proxy and in check.
func TestUsagePinnedToken(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(contentUsageRobots)})
	env := []string{"ROBOTSGATE_TOKEN=Trainer", "ROBOTSGATE_PURPOSES=ai-train"}
	p := startProxy(t, env...)
	refused, open := o.base()+"/a/x", o.base()+"/open/x"
	r := usageGet(t, p, refused, crawlerUA)
	if r.status != http.StatusForbidden {
		t.Fatalf("GET %s judged as the pinned Trainer: status %d, want 403; body %q", refused, r.status, r.body)
	}
	checkUsageDecision(t, "GET "+refused, r, "Trainer", contentUsageRefusal)
	if r := usageGet(t, p, open, crawlerUA); r.status != http.StatusOK {
		t.Errorf("GET %s: status %d, want 200", open, r.status)
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	recs := p.audit()
	rec := auditFor(t, recs, refused)
	checkUsageRecord(t, refused, rec, &contentUsageRefusal)
	checkPurposes(t, refused, rec, []string{"ai-train"})
	checkPurposes(t, open, auditFor(t, recs, open), []string{"ai-train"})

	// check without -purpose takes the pinned crawler's purposes.
	code, out := runCheckJSON(t, env, "-user-agent", "Trainer", refused)
	if code != 1 || out.Usage != rec.Usage || !slices.Equal(out.Purposes, []string{"ai-train"}) {
		t.Errorf("check -json -user-agent Trainer %s with %q: exit %d, usage %+v, purposes %q; want exit 1, the proxy's %+v, [ai-train]",
			refused, env, code, out.Usage, out.Purposes, rec.Usage)
	}
}

// TestUsageModes: ROBOTSGATE_USAGE=audit and ROBOTSGATE_MODE=audit forward
// the request a preference refuses and record it as a would-be refusal;
// ROBOTSGATE_USAGE=off reads no preference at all.
func TestUsageModes(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(contentUsageRobots)})
	polFile := writePolicy(t, "pol.yaml", usagePolicy)
	recorded := contentUsageRefusal
	recorded.verdict = "recorded"
	for _, c := range []struct {
		name string
		env  string
		want *usageWant // nil: nothing read
	}{
		{"usage audit", "ROBOTSGATE_USAGE=audit", &recorded},
		{"mode audit", "ROBOTSGATE_MODE=audit", &recorded},
		{"usage off", "ROBOTSGATE_USAGE=off", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := startProxy(t, c.env, "ROBOTSGATE_POLICY="+polFile)
			u := o.base() + "/a/" + strings.ReplaceAll(c.name, " ", "-")
			r := usageGet(t, p, u, trainerUA)
			if r.status != http.StatusOK || string(r.body) != o.page(strings.TrimPrefix(u, o.base())) {
				t.Fatalf("%s: trainer GET %s: status %d, body %q; want the page, forwarded", c.name, u, r.status, r.body)
			}
			h := r.header.Get("X-Robotsgate-Decision")
			if c.want != nil {
				checkUsageDecision(t, c.name+": trainer GET "+u, r, "Trainer", *c.want)
				if !strings.Contains(h, "mode=audit") {
					t.Errorf("%s: X-Robotsgate-Decision %q does not say mode=audit", c.name, h)
				}
				// The metric is counted once the request is over, after
				// the client has its answer: wait for it.
				waitFor(t, "counted in robotsgate_usage_decisions_total", func() bool {
					return strings.Contains(string(get(t, directClient(t), p.url.String()+"/metrics", "test").body),
						`robotsgate_usage_decisions_total{form="content-usage",verdict="recorded"} 1`+"\n")
				})
			} else if strings.HasPrefix(h, "usage-") {
				t.Errorf("%s: X-Robotsgate-Decision %q; usage preferences are not read", c.name, h)
			}
			if code := p.stop(); code != 0 {
				t.Fatalf("exit %d after SIGTERM, want 0", code)
			}
			rec := auditFor(t, p.audit(), u)
			checkUsageRecord(t, c.name, rec, c.want)
			if !rec.Forwarded || rec.Status != http.StatusOK {
				t.Errorf("%s: audit forwarded %v, status %d; want forwarded, 200", c.name, rec.Forwarded, rec.Status)
			}
			if c.want == nil {
				checkStated(t, c.name, rec, nil)
				return
			}
			checkStated(t, c.name, rec, []string{"content-usage train-ai=n (line 3)"})
			if rec.Verdict != "disallow" {
				t.Errorf("%s: audit verdict %q, want disallow: a would-be refusal", c.name, rec.Verdict)
			}
		})
	}
}

// TestUsageSharedGate: a training crawler and a search crawler through
// one proxy at once, on the same origin: the searcher gets every page,
// the trainer is refused every one, and the trainer's refusals take no
// pace slot, neither its own nor the searcher's.
func TestUsageSharedGate(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(contentUsageRobots)})
	paced := newOrigin(t, false, map[string]http.HandlerFunc{
		"/robots.txt": robotsTxt("User-agent: *\nCrawl-delay: 30\nContent-Usage: train-ai=n\nContent-Usage: /open/ train-ai=y\n"),
	})
	polFile := writePolicy(t, "pol.yaml", usagePolicy)
	p := startProxy(t, "ROBOTSGATE_POLICY="+polFile)

	t.Run("at once", func(t *testing.T) {
		const n = 16
		client := p.client(t)
		var wg sync.WaitGroup
		errs := make(chan error, 2*n)
		for i := range n {
			for _, ua := range []string{trainerUA, searcherUA} {
				wg.Go(func() {
					path := fmt.Sprintf("/a/%s/%d", strings.ToLower(robotsToken(ua)), i)
					r, err := tryGet(client, o.base()+path, ua)
					switch {
					case err != nil:
						errs <- err
					case ua == searcherUA && (r.status != http.StatusOK || string(r.body) != o.page(path)):
						errs <- fmt.Errorf("searcher GET %s: status %d, body %q; want the page", path, r.status, r.body)
					case ua == trainerUA && (r.status != http.StatusForbidden || !strings.HasPrefix(r.header.Get("X-Robotsgate-Decision"), "usage-refused;")):
						errs <- fmt.Errorf("trainer GET %s: status %d, X-Robotsgate-Decision %q; want 403 usage-refused", path, r.status, r.header.Get("X-Robotsgate-Decision"))
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		for i := range n {
			if c := o.count(fmt.Sprintf("/a/trainer/%d", i)); c != 0 {
				t.Errorf("the origin received /a/trainer/%d %d times, want never", i, c)
			}
		}
	})

	t.Run("pace", func(t *testing.T) {
		// Crawl-delay 30: each crawler gets one request on time, the next
		// a 429. A refusal before the fetch is not a request to the
		// origin: it takes no slot.
		client := p.client(t)
		for _, step := range []struct {
			ua, path string
			status   int
		}{
			{trainerUA, "/a/t1", http.StatusForbidden},
			{trainerUA, "/a/t2", http.StatusForbidden},
			{trainerUA, "/open/t1", http.StatusOK},
			{searcherUA, "/a/s1", http.StatusOK},
			{searcherUA, "/a/s2", http.StatusTooManyRequests},
			{trainerUA, "/open/t2", http.StatusTooManyRequests},
			{trainerUA, "/a/t3", http.StatusForbidden},
		} {
			r := get(t, client, paced.base()+step.path, step.ua)
			if r.status != step.status {
				t.Errorf("%s GET %s: status %d, want %d; X-Robotsgate-Decision %q",
					robotsToken(step.ua), step.path, r.status, step.status, r.header.Get("X-Robotsgate-Decision"))
			}
		}
	})
}

// robotsToken is the product token of a User-Agent: its first word before
// the slash.
func robotsToken(ua string) string {
	token, _, _ := strings.Cut(ua, "/")
	return token
}

// TestUsageBlindTunnel: without interception (ROBOTSGATE_MITM=false) the
// proxy judges a tunnel by the preferences robots.txt states for every
// path: a training crawler's CONNECT to a site whose Content-Signal refuses
// training is refused; a search crawler's tunnel opens; a path-scoped
// Content-Usage, which does not speak for every path, refuses no tunnel.
func TestUsageBlindTunnel(t *testing.T) {
	t.Parallel()
	signalSite := newOrigin(t, true, map[string]http.HandlerFunc{
		"/robots.txt": robotsTxt("User-agent: *\nContent-Signal: ai-train=no\nAllow: /\n"),
	})
	scopedSite := newOrigin(t, true, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(contentUsageRobots)})
	polFile := writePolicy(t, "pol.yaml", usagePolicy)
	p := startProxy(t, "ROBOTSGATE_MITM=false", "ROBOTSGATE_POLICY="+polFile, upstreamCA(t, signalSite, scopedSite))
	want := usageWant{form: "content-signal", line: 2, label: "ai-train", value: "no",
		text: "Content-Signal: ai-train=no", purpose: "ai-train", verdict: "refused"}

	conn, answer := p.connect(t, signalSite.addr, trainerUA)
	conn.Close()
	if answer.status != http.StatusForbidden {
		t.Fatalf("trainer CONNECT %s: status %d, want 403; body %q", signalSite.addr, answer.status, answer.body)
	}
	checkUsageDecision(t, "trainer CONNECT", answer, "Trainer", want)

	for _, c := range []struct {
		who, ua string
		o       *origin
	}{
		{"searcher", searcherUA, signalSite},
		{"trainer on a path-scoped site", trainerUA, scopedSite},
	} {
		conn, answer := p.connect(t, c.o.addr, c.ua)
		if answer.status != http.StatusOK {
			t.Errorf("%s: CONNECT %s: status %d, want 200; X-Robotsgate-Decision %q, body %q",
				c.who, c.o.addr, answer.status, answer.header.Get("X-Robotsgate-Decision"), answer.body)
			conn.Close()
			continue
		}
		tlsConn := tlsToOrigin(t, conn, c.o)
		r := newKeptConn(tlsConn, false).get(t, c.o.base()+"/page", c.ua, "")
		if r.status != http.StatusOK || string(r.body) != c.o.page("/page") {
			t.Errorf("%s: GET /page in the blind tunnel: status %d, body %q; want the origin's page", c.who, r.status, r.body)
		}
		tlsConn.Close()
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	var found bool
	for _, rec := range p.audit() {
		if rec.Method == http.MethodConnect && rec.UserAgent == trainerUA && strings.Contains(rec.URL, signalSite.addr) {
			found = true
			checkUsageRecord(t, "trainer CONNECT", rec, &want)
			if rec.Verdict != "disallow" || rec.Status != http.StatusForbidden || rec.Forwarded {
				t.Errorf("trainer CONNECT: audit verdict %q, status %d, forwarded %v; want disallow, 403, not forwarded", rec.Verdict, rec.Status, rec.Forwarded)
			}
		}
	}
	if !found {
		t.Errorf("no audit record of the trainer's CONNECT to %s", signalSite.addr)
	}
}

// tlsToOrigin starts TLS in a blind tunnel to o, trusting o's own
// certificate: the proxy does not intercept.
func tlsToOrigin(t *testing.T, conn net.Conn, o *origin) *tls.Conn {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(o.Certificate())
	tlsConn := tls.Client(conn, &tls.Config{ServerName: "127.0.0.1", RootCAs: pool})
	if err := tlsConn.Handshake(); err != nil {
		t.Fatalf("TLS in the blind tunnel to %s: %v", o.addr, err)
	}
	return tlsConn
}

// TestUsageBlindTunnelEveryPath: a blind tunnel is refused to a training
// crawler by every form of a preference that speaks for the whole site:
// a line scoped to "/", and tdmrep.json's first rule on "/", whether or
// not robots.txt answered.
func TestUsageBlindTunnelEveryPath(t *testing.T) {
	t.Parallel()
	reserved := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `[{"location":"/","tdm-reservation":1}]`)
	}
	sites := []struct {
		name  string
		pages map[string]http.HandlerFunc
		form  string
	}{
		{"Content-Signal: / ai-train=no", map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: *\nContent-Signal: / ai-train=no\n")}, "content-signal"},
		{"Content-Usage: / train-ai=n", map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: *\nContent-Usage: / train-ai=n\n")}, "content-usage"},
		{"tdmrep.json reserving /", map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: *\nAllow: /\n"), "/.well-known/tdmrep.json": reserved}, "tdmrep"},
		{"tdmrep.json reserving /, robots.txt 404", map[string]http.HandlerFunc{"/robots.txt": http.NotFound, "/.well-known/tdmrep.json": reserved}, "tdmrep"},
	}
	origins := make([]*origin, len(sites))
	for i, s := range sites {
		origins[i] = newOrigin(t, true, s.pages)
	}
	polFile := writePolicy(t, "pol.yaml", usagePolicy)
	p := startProxy(t, "ROBOTSGATE_MITM=false", "ROBOTSGATE_TDMREP=true", "ROBOTSGATE_POLICY="+polFile, upstreamCA(t, origins...))
	for i, s := range sites {
		conn, answer := p.connect(t, origins[i].addr, trainerUA)
		conn.Close()
		h := answer.header.Get("X-Robotsgate-Decision")
		if answer.status != http.StatusForbidden || !strings.HasPrefix(h, "usage-refused;") || !strings.Contains(h, `form="`+s.form+`"`) {
			t.Errorf("%s: trainer CONNECT: status %d, X-Robotsgate-Decision %q; want 403 usage-refused by %s", s.name, answer.status, h, s.form)
		}
		conn, answer = p.connect(t, origins[i].addr, searcherUA)
		conn.Close()
		if answer.status != http.StatusOK {
			t.Errorf("%s: searcher CONNECT: status %d, want 200", s.name, answer.status)
		}
	}
}
