package integration

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// Issue 26, the operator's policy (ROBOTSGATE_POLICY): a sandbox per
// crawler, exceptions and rules per site. These tests run the real binary
// with a policy file and real origins on the loopback interface. A policy
// tells "127.0.0.1" and "localhost" apart though both reach the same
// listener: an origin reached as http://localhost:PORT is host localhost.

// policyText is the policy most tests here load; the lines the tests
// expect to see named are marked.
const policyText = `crawlers:
  - user: scoped
    allow_sites: ["127.0.0.1"]          # line 3: scoped's sites
  - token: TokenScoped
    allow_sites: ["127.0.0.1"]          # line 5: TokenScoped's sites
sites:
  - hosts: ["127.0.0.1"]
    users: [archiver]
    exceptions:
      - allow: /reports/                # line 10: archiver's exception
        reason: "written permission from ops@example.org, 2026-10-01"
  - hosts: ["127.0.0.1"]
    rules: ["Disallow: /shop/"]         # line 13: everyone's extra rule
    reason: "asked by mail to stay out of /shop/"
`

// The lines of policyText the findings name.
const (
	scopedLine      = 3
	tokenScopedLine = 5
	exceptionLine   = 10
	shopRuleLine    = 13
)

const (
	exceptionReason = "written permission from ops@example.org, 2026-10-01"
	shopReason      = "asked by mail to stay out of /shop/"
	// tokenScopedUA is a crawler the policy keeps to 127.0.0.1 by its
	// token, whoever sends it.
	tokenScopedUA = "TokenScoped/1.0"
	// archiverUA claims the token of the archiver credential without
	// the credential: it must not get the credential's exception.
	archiverUA = "archiver/1.0 (+https://example.org/archiver)"
)

// policyRobots disallows what the policy's exception allows (/reports/)
// and more (/private/); /shop/ it allows.
const policyRobots = "User-agent: *\nDisallow: /reports/\nDisallow: /private/\n"

// writePolicy writes text to name in a new directory and returns its
// path.
func writePolicy(t testing.TB, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// policyVersion is the version robotsgate gives a policy file: the first
// 12 hexadecimal digits of the SHA-256 of its bytes.
func policyVersion(data string) string {
	sum := sha256.Sum256([]byte(data))
	return hex.EncodeToString(sum[:])[:12]
}

// findingWant is what a page, header and record must say of the policy
// line that decided.
type findingWant struct {
	file   string // the policy file's path
	line   int
	kind   string // destination, exception, rule, min-delay, max-concurrency
	reason string // "" when not checked
}

// checkDecisionHeader checks that X-Robotsgate-Decision begins with
// verdict and names the policy line of want.
func checkDecisionHeader(t *testing.T, what string, r reply, verdict string, want findingWant) {
	t.Helper()
	h := r.header.Get("X-Robotsgate-Decision")
	if !strings.HasPrefix(h, verdict+";") {
		t.Errorf("%s: X-Robotsgate-Decision %q, want it to begin with %q", what, h, verdict+";")
	}
	for _, param := range []string{
		"; policy-line=" + strconv.Itoa(want.line) + ";",
		`; policy-kind="` + want.kind + `"`,
		filepath.Base(want.file),
	} {
		if !strings.Contains(h+";", param) {
			t.Errorf("%s: X-Robotsgate-Decision %q lacks %q", what, h, param)
		}
	}
	if want.reason != "" && !strings.Contains(h, `policy-reason="`+want.reason+`"`) {
		t.Errorf("%s: X-Robotsgate-Decision %q does not give the reason %q", what, h, want.reason)
	}
}

// checkPolicyPage checks that a refusal's page names the policy line as
// "pol.yaml line N: KIND: …".
func checkPolicyPage(t *testing.T, what string, r reply, want findingWant) {
	t.Helper()
	named := fmt.Sprintf("%s line %d: %s: ", filepath.Base(want.file), want.line, want.kind)
	if !strings.Contains(string(r.body), named) {
		t.Errorf("%s: the page does not name %q:\n%s", what, named, r.body)
	}
	if want.reason != "" && !strings.Contains(string(r.body), want.reason) {
		t.Errorf("%s: the page does not give the reason %q:\n%s", what, want.reason, r.body)
	}
}

// checkPolicyRecord checks a record's policy object and policy_version;
// a zero want means the record must name no policy line.
func checkPolicyRecord(t *testing.T, what string, rec auditRecord, version string, want findingWant) {
	t.Helper()
	if got, _ := rec.raw["policy_version"].(string); got != version {
		t.Errorf("%s: audit policy_version %q, want %q", what, got, version)
	}
	raw, ok := rec.raw["policy"]
	if want == (findingWant{}) {
		if ok {
			t.Errorf("%s: audit policy %v, want none: the policy did not decide", what, raw)
		}
		return
	}
	f, _ := raw.(map[string]any)
	if f == nil {
		t.Errorf("%s: audit record has no policy object (%v); want %s line %d", what, raw, want.kind, want.line)
		return
	}
	if f["file"] != want.file || f["line"] != float64(want.line) || f["kind"] != want.kind {
		t.Errorf("%s: audit policy %v, want file %s, line %d, kind %s", what, f, want.file, want.line, want.kind)
	}
	if want.reason != "" && f["reason"] != want.reason {
		t.Errorf("%s: audit policy reason %v, want %q", what, f["reason"], want.reason)
	}
}

// untouchable is a site the proxy must never connect to: a listener on
// 127.0.0.1, and on ::1 at the same port when it can, that counts the
// connections it accepts and closes them. Reached as localhost:PORT.
type untouchable struct {
	port     string
	accepted atomic.Int64
}

func newUntouchable(t *testing.T) *untouchable {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	u := &untouchable{port: port}
	listeners := []net.Listener{ln}
	// localhost may resolve to ::1 first: a connection there counts too.
	if ln6, err := net.Listen("tcp", "[::1]:"+port); err == nil {
		listeners = append(listeners, ln6)
	}
	for _, l := range listeners {
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				u.accepted.Add(1)
				conn.Close()
			}
		}()
	}
	return u
}

// hostPort is the site as the crawler names it: localhost:PORT.
func (u *untouchable) hostPort() string { return "localhost:" + u.port }

func (u *untouchable) checkUntouched(t *testing.T) {
	t.Helper()
	if n := u.accepted.Load(); n != 0 {
		t.Errorf("the site outside the crawler's was connected to %d times, want never", n)
	}
}

// policyCounts are the report's totals the policy touches.
type policyCounts struct {
	Requests               int64 `json:"requests"`
	Allowed                int64 `json:"allowed"`
	Refused                int64 `json:"refused"`
	WouldBeRefused         int64 `json:"would_be_refused"`
	RefusedByPolicy        int64 `json:"refused_by_policy"`
	WouldBeRefusedByPolicy int64 `json:"would_be_refused_by_policy"`
	AllowedByException     int64 `json:"allowed_by_exception"`
	PacedByPolicy          int64 `json:"paced_by_policy"`
}

// policyReport is the part of "robotsgate report -format json" about the
// policy.
type policyReport struct {
	Totals     policyCounts `json:"totals"`
	Exceptions []struct {
		File     string `json:"file"`
		Line     int    `json:"line"`
		Rule     string `json:"rule"`
		Reason   string `json:"reason"`
		Requests int64  `json:"requests"`
	} `json:"exceptions"`
	PolicyVersions []struct {
		Version  string `json:"version"`
		Requests int64  `json:"requests"`
	} `json:"policy_versions"`
}

func runPolicyReport(t *testing.T, auditLog string) policyReport {
	t.Helper()
	stdout, stderr, exit := runReport(t, "-format", "json", auditLog)
	if exit != 0 {
		t.Fatalf("report: exit %d\n%s", exit, stderr)
	}
	var rep policyReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("report -format json: %v\n%s", err, stdout)
	}
	return rep
}

// TestPolicyVerdicts runs a proxy with policyText, in enforce mode with
// interception, and checks each kind of policy decision end to end: on
// the wire, in the audit log, in "robotsgate report", and that "robotsgate
// check -policy" agrees.
//
//   - A scoped crawler (a credential user, and a token entry) is refused a
//     site outside its allow_sites with a 403 naming the policy line, over
//     plain HTTP and at the CONNECT of a tunnel, and the site sees no
//     connection at all; inside its sites it is served.
//   - An exception allows what robots.txt disallows for the credential it
//     names, not for an anonymous client sending the same name.
//   - An extra rule refuses what robots.txt allows.
func TestPolicyVerdicts(t *testing.T) {
	t.Parallel()
	scoped := newCredential("scoped", "ScopedBot")
	archiver := newCredential("archiver", "")
	creds := credentialsFile(t, scoped, archiver)
	polFile := writePolicy(t, "pol.yaml", policyText)
	version := policyVersion(policyText)
	pages := map[string]http.HandlerFunc{"/robots.txt": robotsTxt(policyRobots)}
	site, secure := newOrigin(t, false, pages), newOrigin(t, true, pages)
	outside, outsideTLS := newUntouchable(t), newUntouchable(t)
	p := startProxy(t, "ROBOTSGATE_CREDENTIALS_FILE="+creds, "ROBOTSGATE_AUTH=optional",
		"ROBOTSGATE_POLICY="+polFile, upstreamCA(t, secure))

	scopedDest := findingWant{file: polFile, line: scopedLine, kind: "destination"}
	tokenDest := findingWant{file: polFile, line: tokenScopedLine, kind: "destination"}
	exception := findingWant{file: polFile, line: exceptionLine, kind: "exception", reason: exceptionReason}
	shopRule := findingWant{file: polFile, line: shopRuleLine, kind: "rule", reason: shopReason}

	// What each request must be recorded with, by URL.
	type expect struct {
		what    string
		status  int
		finding findingWant
	}
	records := map[string]expect{}

	outsideURL := "http://" + outside.hostPort() + "/page"
	t.Run("destination", func(t *testing.T) {
		for _, c := range []struct {
			name, ua, auth string
			want           findingWant
		}{
			{"credential user", crawlerUA, scoped.proxyAuth(), scopedDest},
			{"token entry", tokenScopedUA, "", tokenDest},
		} {
			r, _ := sendProxied(t, p, outsideURL, c.ua, c.auth)
			what := c.name + ": GET " + outsideURL
			if r.status != http.StatusForbidden {
				t.Fatalf("%s: status %d, want 403; body %q", what, r.status, r.body)
			}
			checkDecisionHeader(t, what, r, "deny-destination", c.want)
			checkPolicyPage(t, what, r, c.want)

			conn, answer := connectAs(t, p, outsideTLS.hostPort(), c.ua, c.auth)
			conn.Close()
			what = c.name + ": CONNECT " + outsideTLS.hostPort()
			if answer.status != http.StatusForbidden {
				t.Fatalf("%s: status %d, want 403; body %q", what, answer.status, answer.body)
			}
			checkDecisionHeader(t, what, answer, "deny-destination", c.want)
			checkPolicyPage(t, what, answer, c.want)
		}
		outside.checkUntouched(t)
		outsideTLS.checkUntouched(t)
	})

	t.Run("inside its sites", func(t *testing.T) {
		for _, c := range []struct{ name, ua, auth string }{
			{"credential user", crawlerUA, scoped.proxyAuth()},
			{"token entry", tokenScopedUA, ""},
		} {
			path := "/inside/" + strings.ReplaceAll(c.name, " ", "-")
			r, _ := sendProxied(t, p, site.base()+path, c.ua, c.auth)
			if r.status != http.StatusOK || string(r.body) != site.page(path) {
				t.Errorf("%s: GET %s: status %d, body %q; want the origin's page", c.name, site.base()+path, r.status, r.body)
			}
			records[site.base()+path] = expect{c.name + " inside", http.StatusOK, findingWant{}}
			tun := p.interceptAs(t, secure.addr, c.ua, c.auth)
			r = tun.get(t, secure.base()+path, c.ua, "")
			if r.status != http.StatusOK || string(r.body) != secure.page(path) {
				t.Errorf("%s: GET %s in a tunnel: status %d, body %q; want the origin's page", c.name, secure.base()+path, r.status, r.body)
			}
			tun.conn.Close()
			records[secure.base()+path] = expect{c.name + " inside, tunnel", http.StatusOK, findingWant{}}
		}
	})

	t.Run("exception", func(t *testing.T) {
		for _, o := range []*origin{site, secure} {
			u := o.base() + "/reports/2026.pdf"
			var r reply
			if o.TLS == nil {
				r, _ = sendProxied(t, p, u, crawlerUA, archiver.proxyAuth())
			} else {
				tun := p.interceptAs(t, o.addr, crawlerUA, archiver.proxyAuth())
				r = tun.get(t, u, crawlerUA, "")
				tun.conn.Close()
			}
			if r.status != http.StatusOK || string(r.body) != o.page("/reports/2026.pdf") {
				t.Fatalf("archiver: GET %s: status %d, body %q; want the page the exception allows", u, r.status, r.body)
			}
			checkDecisionHeader(t, "archiver: GET "+u, r, "allow", exception)
			records[u] = expect{"archiver's exception", http.StatusOK, exception}
		}
		// The same name as a User-Agent, without the credential: robots.txt
		// decides.
		u := site.base() + "/reports/anonymous"
		r, _ := sendProxied(t, p, u, archiverUA, "")
		if r.status != http.StatusForbidden {
			t.Errorf("anonymous %q: GET %s: status %d, want 403: the exception is the credential's", archiverUA, u, r.status)
		}
		if h := r.header.Get("X-Robotsgate-Decision"); strings.Contains(h, "policy") {
			t.Errorf("anonymous %q: X-Robotsgate-Decision %q names the policy; robots.txt refused", archiverUA, h)
		}
		records[u] = expect{"anonymous archiver", http.StatusForbidden, findingWant{}}
		// The exception covers /reports/ only.
		u = site.base() + "/private/x"
		if r, _ := sendProxied(t, p, u, crawlerUA, archiver.proxyAuth()); r.status != http.StatusForbidden {
			t.Errorf("archiver: GET %s: status %d, want 403: no exception covers it", u, r.status)
		}
		records[u] = expect{"archiver outside its exception", http.StatusForbidden, findingWant{}}
		for _, path := range []string{"/reports/anonymous", "/private/x"} {
			if n := site.count(path); n != 0 {
				t.Errorf("the origin received %s %d times, want 0", path, n)
			}
		}
	})

	t.Run("rule", func(t *testing.T) {
		u := site.base() + "/shop/cart"
		r, _ := sendProxied(t, p, u, crawlerUA, "")
		if r.status != http.StatusForbidden {
			t.Fatalf("GET %s: status %d, want 403 by the policy's rule; body %q", u, r.status, r.body)
		}
		checkDecisionHeader(t, "GET "+u, r, "disallow", shopRule)
		checkPolicyPage(t, "GET "+u, r, shopRule)
		if !strings.Contains(string(r.body), "Disallow: /shop/") {
			t.Errorf("GET %s: the page does not give the rule:\n%s", u, r.body)
		}
		if n := site.count("/shop/cart"); n != 0 {
			t.Errorf("the origin received /shop/cart %d times, want 0", n)
		}
		records[u] = expect{"the shop rule", http.StatusForbidden, shopRule}
	})

	t.Run("check agrees", func(t *testing.T) {
		for _, c := range []struct {
			user, ua, url string
			allowed       bool
			want          findingWant
		}{
			{"scoped", "ScopedBot", outsideURL, false, scopedDest},
			{"", tokenScopedUA, outsideURL, false, tokenDest},
			{"scoped", "ScopedBot", site.base() + "/inside/x", true, findingWant{}},
			{"archiver", "archiver", site.base() + "/reports/2026.pdf", true, exception},
			{"", archiverUA, site.base() + "/reports/anonymous", false, findingWant{}},
			{"", crawlerUA, site.base() + "/shop/cart", false, shopRule},
		} {
			args := []string{"check", "-json", "-policy", polFile, "-user-agent", c.ua}
			if c.user != "" {
				args = append(args, "-user", c.user)
			}
			code, stdout, stderr := runBinary(t, "", nil, append(args, c.url)...)
			what := fmt.Sprintf("check -user %q -user-agent %q %s", c.user, c.ua, c.url)
			wantCode, wantVerdict := 1, "disallow"
			if c.allowed {
				wantCode, wantVerdict = 0, "allow"
			}
			var out struct {
				Verdict string         `json:"verdict"`
				Policy  map[string]any `json:"policy"`
			}
			if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != wantCode || out.Verdict != wantVerdict {
				t.Errorf("%s: exit %d, %v, stdout %q; want exit %d and verdict %s\nstderr:\n%s",
					what, code, err, stdout, wantCode, wantVerdict, stderr)
				continue
			}
			switch {
			case c.want == (findingWant{}) && out.Policy != nil:
				t.Errorf("%s: policy %v, want none: the proxy's verdict is robots.txt's", what, out.Policy)
			case c.want != (findingWant{}) &&
				(out.Policy["file"] != c.want.file || out.Policy["line"] != float64(c.want.line) || out.Policy["kind"] != c.want.kind):
				t.Errorf("%s: policy %v, want %s line %d, kind %s, as the proxy said", what, out.Policy, c.want.file, c.want.line, c.want.kind)
			}
		}
		// check refuses by site before it fetches robots.txt, as the proxy.
		outside.checkUntouched(t)
	})

	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	recs := p.audit()
	for u, want := range records {
		rec := auditFor(t, recs, u)
		if rec.Status != want.status {
			t.Errorf("%s: audit status %d, want %d", want.what, rec.Status, want.status)
		}
		checkPolicyRecord(t, want.what, rec, version, want.finding)
	}
	// The refusals at the site outside: two GETs and two CONNECTs.
	var destinations int
	for _, rec := range recs {
		if strings.Contains(rec.URL, outside.hostPort()) || strings.Contains(rec.URL, outsideTLS.hostPort()) {
			destinations++
			want := scopedDest
			if rec.Credential == "" {
				want = tokenDest
			}
			if rec.Status != http.StatusForbidden || rec.Forwarded {
				t.Errorf("refusal of %s: audit status %d, forwarded %v; want 403, not forwarded", rec.URL, rec.Status, rec.Forwarded)
			}
			checkPolicyRecord(t, "refusal of "+rec.URL, rec, version, want)
		}
	}
	if destinations != 4 {
		t.Errorf("%d audit records of the site outside, want 4 (2 GETs, 2 CONNECTs)", destinations)
	}

	rep := runPolicyReport(t, p.auditLog)
	// Refused by the policy: 4 outside the sites, 1 by the rule; by
	// robots.txt: the anonymous archiver and /private/.
	if c := rep.Totals; c.RefusedByPolicy != 5 || c.Refused-c.RefusedByPolicy != 2 || c.AllowedByException != 2 {
		t.Errorf("report totals: refused %d, of which by policy %d; allowed by exception %d; want 7, 5, 2", c.Refused, c.RefusedByPolicy, c.AllowedByException)
	}
	if len(rep.Exceptions) != 1 {
		t.Fatalf("report lists %d exceptions used, want 1: %+v", len(rep.Exceptions), rep.Exceptions)
	}
	if e := rep.Exceptions[0]; e.File != polFile || e.Line != exceptionLine || e.Rule != "allow: /reports/" || e.Reason != exceptionReason || e.Requests != 2 {
		t.Errorf("report exception %+v, want %s line %d, allow: /reports/, %q, 2 requests", e, polFile, exceptionLine, exceptionReason)
	}
	if !slices.ContainsFunc(rep.PolicyVersions, func(v struct {
		Version  string `json:"version"`
		Requests int64  `json:"requests"`
	}) bool {
		return v.Version == version
	}) {
		t.Errorf("report policy versions %+v lack %s", rep.PolicyVersions, version)
	}
	stdout, stderr, exit := runReport(t, p.auditLog)
	if exit != 0 {
		t.Fatalf("report: exit %d\n%s", exit, stderr)
	}
	if !regexp.MustCompile(`(?s)EXCEPTIONS USED.*pol\.yaml.*\b10\b.*allow: /reports/`).MatchString(stdout) {
		t.Errorf("the text report does not list the exception used (pol.yaml line 10, allow: /reports/):\n%s", stdout)
	}
}

// TestPolicyDestinationBlindTunnel: without interception
// (ROBOTSGATE_MITM=false) a scoped crawler's CONNECT outside its sites is
// refused with no connection to the site, and a tunnel inside them opens.
func TestPolicyDestinationBlindTunnel(t *testing.T) {
	t.Parallel()
	polFile := writePolicy(t, "pol.yaml", policyText)
	secure := newOrigin(t, true, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(policyRobots)})
	outside := newUntouchable(t)
	p := startProxy(t, "ROBOTSGATE_MITM=false", "ROBOTSGATE_POLICY="+polFile, upstreamCA(t, secure))

	conn, answer := p.connect(t, outside.hostPort(), tokenScopedUA)
	conn.Close()
	if answer.status != http.StatusForbidden {
		t.Fatalf("CONNECT %s: status %d, want 403; body %q", outside.hostPort(), answer.status, answer.body)
	}
	want := findingWant{file: polFile, line: tokenScopedLine, kind: "destination"}
	checkDecisionHeader(t, "CONNECT", answer, "deny-destination", want)
	checkPolicyPage(t, "CONNECT", answer, want)
	outside.checkUntouched(t)

	// Inside its sites, the tunnel reaches the origin itself.
	conn, answer = p.connect(t, secure.addr, tokenScopedUA)
	defer conn.Close()
	if answer.status != http.StatusOK {
		t.Fatalf("CONNECT %s: status %d, want 200; body %q", secure.addr, answer.status, answer.body)
	}
	pool := x509.NewCertPool()
	pool.AddCert(secure.Certificate())
	tlsConn := tls.Client(conn, &tls.Config{ServerName: "127.0.0.1", RootCAs: pool})
	r := newKeptConn(tlsConn, false).get(t, secure.base()+"/page", tokenScopedUA, "")
	if r.status != http.StatusOK || string(r.body) != secure.page("/page") {
		t.Errorf("GET /page in the blind tunnel: status %d, body %q; want the origin's page", r.status, r.body)
	}
	tlsConn.Close()

	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	for _, rec := range p.audit() {
		if strings.Contains(rec.URL, outside.hostPort()) {
			checkPolicyRecord(t, "the refused CONNECT", rec, policyVersion(policyText), want)
			return
		}
	}
	t.Errorf("no audit record of the refused CONNECT to %s", outside.hostPort())
}

// TestPolicyAuditMode: with ROBOTSGATE_MODE=audit a site outside a
// crawler's is still refused (a sandbox's boundary), while a request the
// policy's rule refuses is forwarded and recorded as would-be refused.
func TestPolicyAuditMode(t *testing.T) {
	t.Parallel()
	polFile := writePolicy(t, "pol.yaml", policyText)
	version := policyVersion(policyText)
	site := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(policyRobots)})
	outside := newUntouchable(t)
	p := startProxy(t, "ROBOTSGATE_MODE=audit", "ROBOTSGATE_POLICY="+polFile)
	client := p.client(t)

	outsideURL := "http://" + outside.hostPort() + "/page"
	r := get(t, client, outsideURL, tokenScopedUA)
	dest := findingWant{file: polFile, line: tokenScopedLine, kind: "destination"}
	if r.status != http.StatusForbidden {
		t.Fatalf("GET %s in audit mode: status %d, want 403: a boundary holds in every mode", outsideURL, r.status)
	}
	checkDecisionHeader(t, "GET "+outsideURL, r, "deny-destination", dest)
	outside.checkUntouched(t)

	shop := site.base() + "/shop/cart"
	r = get(t, client, shop, crawlerUA)
	if r.status != http.StatusOK || string(r.body) != site.page("/shop/cart") {
		t.Fatalf("GET %s in audit mode: status %d, body %q; want the page, forwarded", shop, r.status, r.body)
	}
	if n := site.count("/shop/cart"); n != 1 {
		t.Errorf("the origin received /shop/cart %d times, want 1", n)
	}

	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	recs := p.audit()
	rec := auditFor(t, recs, outsideURL)
	if rec.Status != http.StatusForbidden || rec.Forwarded {
		t.Errorf("the refusal outside: audit status %d, forwarded %v; want 403, not forwarded", rec.Status, rec.Forwarded)
	}
	checkPolicyRecord(t, "the refusal outside", rec, version, dest)
	rec = auditFor(t, recs, shop)
	if rec.Verdict != "disallow" || !rec.Forwarded || rec.Mode != "audit" || rec.Status != http.StatusOK {
		t.Errorf("the shop rule in audit mode: verdict %q, forwarded %v, mode %q, status %d; want disallow, forwarded, audit, 200",
			rec.Verdict, rec.Forwarded, rec.Mode, rec.Status)
	}
	checkPolicyRecord(t, "the shop rule in audit mode", rec, version, findingWant{file: polFile, line: shopRuleLine, kind: "rule", reason: shopReason})

	rep := runPolicyReport(t, p.auditLog)
	if c := rep.Totals; c.RefusedByPolicy != 1 || c.WouldBeRefusedByPolicy != 1 {
		t.Errorf("report totals: refused by policy %d, would be %d; want 1 (outside) and 1 (the rule)", c.RefusedByPolicy, c.WouldBeRefusedByPolicy)
	}
}

// TestPolicyBrokenAtStart: a policy file that does not load stops
// robotsgate before it listens, with exit status 2 and a message naming
// ROBOTSGATE_POLICY and FILE:LINE; "robotsgate config" shows a good one's
// version and refuses a broken one the same way.
func TestPolicyBrokenAtStart(t *testing.T) {
	t.Parallel()
	bad := writePolicy(t, "bad.yaml", "crawlers:\n  - user: acme\n    deny_site: [\"example.com\"]\n")
	good := writePolicy(t, "pol.yaml", policyText)
	dir := t.TempDir()
	env := []string{
		"ROBOTSGATE_LISTEN=127.0.0.1:0",
		"ROBOTSGATE_CA_DIR=" + filepath.Join(dir, "ca"),
		"ROBOTSGATE_AUDIT_LOG=" + filepath.Join(dir, "audit.log"),
	}
	for _, args := range [][]string{nil, {"config"}} {
		code, stdout, stderr := runBinary(t, "", append(env, "ROBOTSGATE_POLICY="+bad), args...)
		if code != 2 {
			t.Errorf("robotsgate %q with a broken policy: exit %d, want 2\nstderr:\n%s", args, code, stderr)
		}
		for _, want := range []string{"ROBOTSGATE_POLICY", bad + ":3:", "deny_site"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("robotsgate %q with a broken policy: stderr lacks %q:\n%s", args, want, stderr)
			}
		}
		if strings.Contains(stderr+stdout, "robotsgate listening") {
			t.Errorf("robotsgate %q started with a broken policy", args)
		}
	}
	// As for any other invalid setting (TestInvalidConfiguration): the
	// file is checked before anything is created.
	t.Run("nothing created", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(dir, "ca")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("robotsgate created its CA despite the broken policy (%v)", err)
		}
	})

	code, stdout, stderr := runBinary(t, "", append(env, "ROBOTSGATE_POLICY="+good), "config")
	if code != 0 {
		t.Fatalf("robotsgate config: exit %d\nstderr:\n%s", code, stderr)
	}
	want := "policy: " + good + " version " + policyVersion(policyText)
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `\b`).MatchString(stdout) {
		t.Errorf("robotsgate config has no line %q...:\n%s", want, stdout)
	}
}

// TestPolicyReadmeExample: the policy manual's complete example is the
// file the tests load, byte for byte, and robotsgate starts with it.
func TestPolicyReadmeExample(t *testing.T) {
	t.Parallel()
	manual, err := os.ReadFile(filepath.Join("..", "proxy", "policy", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	example, err := filepath.Abs(filepath.Join("..", "proxy", "policy", "testdata", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?ms)^```yaml\n(.*?)^```$").FindSubmatch(manual)
	if block == nil {
		t.Fatal("proxy/policy/README.md has no ```yaml block")
	}
	if string(block[1]) != string(want) {
		t.Errorf("the README's example policy is not testdata/example.yaml:\n--- README\n%s\n--- example.yaml\n%s", block[1], want)
	}
	p := startProxy(t, "ROBOTSGATE_POLICY="+example)
	checkPolicyInForce(t, p, example, policyVersion(string(want)), "")
}
