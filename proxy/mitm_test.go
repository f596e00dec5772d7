package proxy

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"

	"robotsgate/proxy/audit"
	"robotsgate/robots"
)

// TestMITMJudgesEveryRequest checks interception end to end: the client
// trusts only robotsgate's CA, the proxy trusts the origin, and each
// request inside the tunnel is judged by its path.
func TestMITMJudgesEveryRequest(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots, tls: true})
	p := startProxy(t, proxyConfig{mitm: true, roots: o.roots})
	c := p.client()

	resp, body := do(t, c, "GET", o.URL+"/page", ua(curlUA))
	if resp.StatusCode != 200 || body != "origin page /page\n" {
		t.Fatalf("allowed GET inside the tunnel = %d %q", resp.StatusCode, body)
	}
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 ||
		resp.TLS.PeerCertificates[0].Issuer.String() != p.ca.Certificate().Subject.String() {
		t.Fatal("the client did not talk to a leaf signed by robotsgate's CA")
	}
	resp, body = do(t, c, "GET", o.URL+"/private/x", ua(curlUA))
	want := `disallow; token="curl"; rule="/private/"; line=2; robots="https://` + o.host() + `/robots.txt"`
	if resp.StatusCode != 403 || resp.Header.Get(decisionHeader) != want {
		t.Fatalf("disallowed GET inside the tunnel = %d, %s %q; want 403, %q", resp.StatusCode, decisionHeader, resp.Header.Get(decisionHeader), want)
	}
	if !strings.Contains(body, "Rule:        Disallow: /private/ (line 2)") {
		t.Errorf("403 body inside the tunnel lacks the rule:\n%s", body)
	}
	if resp, _ := do(t, c, "HEAD", o.URL+"/page", ua(curlUA)); resp.StatusCode != 200 {
		t.Errorf("HEAD inside the tunnel = %d, want 200", resp.StatusCode)
	}
	if o.saw("/private/x") {
		t.Error("the origin received the disallowed request")
	}

	recs := p.records()
	base := audit.Record{
		Decision: robots.Decision{
			UserAgent:     curlUA,
			Token:         "curl",
			Group:         "curl",
			RobotsOutcome: "ok",
			RobotsStatus:  200,
		},
		Origin:       o.URL,
		Tunnel:       o.host(),
		PathsChecked: true,
		Mode:         "enforce",
	}
	allowed := base
	allowed.Method, allowed.URL, allowed.Verdict, allowed.Reason = "GET", o.URL+"/page", "allow", "no matching rule"
	allowed.RobotsCache, allowed.Forwarded, allowed.Status, allowed.Upstream = "loaded", true, 200, 200
	allowed.Bytes = int64(len("origin page /page\n"))
	checkRecord(t, recordFor(t, recs, "GET", o.URL+"/page"), allowed)

	denied := base
	denied.Method, denied.URL, denied.Verdict, denied.Reason = "GET", o.URL+"/private/x", "disallow", "disallow: /private/ (line 2)"
	denied.Rule, denied.RuleLine, denied.RobotsCache, denied.Status = "/private/", 2, "hit", 403
	checkRecord(t, recordFor(t, recs, "GET", o.URL+"/private/x"), denied)
}

// TestMITMInnerRequestDecides checks that inside a tunnel each request's
// User-Agent picks the token, not the CONNECT's, and that a request for
// another origin than the tunnel's gets 421 and goes nowhere.
func TestMITMInnerRequestDecides(t *testing.T) {
	other := startOrigin(t, originConfig{robots: "User-agent: *\nAllow: /\n", tls: true})
	open := startOrigin(t, originConfig{robots: testRobots, tls: true})
	p := startProxy(t, proxyConfig{mitm: true, roots: open.roots})

	// The CONNECT speaks for curl.
	conn, resp := connect(t, p.addr, open.host(), curlUA)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT = %d, want 200", resp.StatusCode)
	}
	tn := openTLS(t, conn, "127.0.0.1", p.caPool())

	// GPTBot falls in the "*" group, which allows /private/.
	resp, body := tn.do("GET", open.host(), "/private/x", gptbotUA)
	if resp.StatusCode != 200 || body != "origin page /private/x\n" {
		t.Errorf("GPTBot: %d %q; want the origin's page", resp.StatusCode, body)
	}
	resp, _ = tn.do("GET", open.host(), "/private/y", curlUA)
	want := `disallow; token="curl"; rule="/private/"; line=2; robots="` + open.URL + `/robots.txt"`
	if resp.StatusCode != 403 || resp.Header.Get(decisionHeader) != want {
		t.Errorf("curl: %d %q; want 403 %q", resp.StatusCode, resp.Header.Get(decisionHeader), want)
	}
	resp, body = tn.do("GET", other.host(), "/page", gptbotUA)
	if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(body, "needs a tunnel of its own") {
		t.Errorf("Host %s inside a tunnel to %s: %d %q; want 421", other.host(), open.host(), resp.StatusCode, body)
	}
	if !open.saw("/private/x") || open.saw("/private/y") || other.saw("/page") {
		t.Error("the origins did not receive exactly the allowed requests")
	}

	recs := p.records()
	for _, tc := range []struct {
		url, token, verdict string
		status              int
	}{
		{open.URL + "/private/x", "GPTBot", "allow", 200},
		{open.URL + "/private/y", "curl", "disallow", 403},
		{other.URL + "/page", "", "error", 421},
	} {
		rec := recordFor(t, recs, "GET", tc.url)
		if rec.Token != tc.token || rec.Verdict != tc.verdict || rec.Status != tc.status || rec.Tunnel != open.host() {
			t.Errorf("record for %s: token %q, verdict %q, status %d, tunnel %q; want %q, %q, %d, %q",
				tc.url, rec.Token, rec.Verdict, rec.Status, rec.Tunnel, tc.token, tc.verdict, tc.status, open.host())
		}
	}
}

// TestConnectWithoutMITM checks blind tunnels: refused when the crawler
// may fetch nothing on the host (or robots.txt is unreachable), let
// through otherwise, and recorded as judged by host only.
func TestConnectWithoutMITM(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots, tls: true})
	failing := startOrigin(t, originConfig{robots: "", robotsStatus: 503, tls: true})
	p := startProxy(t, proxyConfig{roots: o.roots})

	// badbot may fetch nothing: refused, with the rule.
	_, resp := connect(t, p.addr, o.host(), badbotUA)
	want := `disallow; token="badbot"; rule="/"; line=8; robots="https://` + o.host() + `/robots.txt"`
	if resp.StatusCode != 403 || resp.Header.Get(decisionHeader) != want {
		t.Errorf("CONNECT as badbot = %d, %s %q; want 403, %q", resp.StatusCode, decisionHeader, resp.Header.Get(decisionHeader), want)
	}

	// curl may fetch something: the tunnel opens, and what goes through
	// it is not judged (the proxy cannot see it).
	conn, resp := connect(t, p.addr, o.host(), curlUA)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT as curl = %d, want 200", resp.StatusCode)
	}
	tn := openTLS(t, conn, "127.0.0.1", o.roots) // the origin's own certificate: no interception
	if resp, body := tn.do("GET", o.host(), "/private/x", curlUA); resp.StatusCode != 200 || body != "origin page /private/x\n" {
		t.Errorf("GET through the blind tunnel = %d %q, want the origin's page", resp.StatusCode, body)
	}

	// robots.txt unreachable: complete disallow, even for a blind tunnel.
	_, resp = connect(t, p.addr, failing.host(), curlUA)
	want = `disallow; token="curl"; reason="robots.txt 503: complete disallow"; robots="https://` + failing.host() + `/robots.txt"`
	if resp.StatusCode != 403 || resp.Header.Get(decisionHeader) != want {
		t.Errorf("CONNECT with robots.txt 503 = %d, %q; want 403, %q", resp.StatusCode, resp.Header.Get(decisionHeader), want)
	}

	recs := p.records()
	var badbot, curl audit.Record
	for _, r := range recs {
		if r.Method == http.MethodConnect && r.URL == o.host() {
			switch r.Token {
			case "badbot":
				badbot = r
			case "curl":
				curl = r
			}
		}
	}
	checkRecord(t, badbot, audit.Record{
		Decision: robots.Decision{
			URL:           o.host(),
			UserAgent:     badbotUA,
			Token:         "badbot",
			Verdict:       "disallow",
			Reason:        "disallow: / (line 8)",
			Rule:          "/",
			RuleLine:      8,
			Group:         "badbot",
			RobotsOutcome: "ok",
			RobotsStatus:  200,
		},
		Method:       "CONNECT",
		Origin:       o.URL,
		PathsChecked: false,
		RobotsCache:  "loaded",
		Mode:         "enforce",
		Status:       403,
	})
	checkRecord(t, curl, audit.Record{
		Decision: robots.Decision{
			URL:           o.host(),
			UserAgent:     curlUA,
			Token:         "curl",
			Verdict:       "allow",
			Reason:        "tunnel not intercepted: only the host was judged: no matching rule",
			RobotsOutcome: "ok",
			RobotsStatus:  200,
		},
		Method:       "CONNECT",
		Origin:       o.URL,
		PathsChecked: false,
		RobotsCache:  "hit",
		Mode:         "enforce",
		Forwarded:    true,
		Status:       200,
	})
	if rec := recordFor(t, recs, "CONNECT", failing.host()); rec.Verdict != "disallow" || rec.Status != 403 || rec.RobotsOutcome != "unreachable" {
		t.Errorf("record for the unreachable robots.txt: %+v", rec)
	}
	if len(recs) != 3 {
		t.Errorf("got %d records, want 3: one per CONNECT, none for what the blind tunnel carried", len(recs))
	}
}

// TestConnectWithoutMITMAuditMode checks that audit mode opens the tunnel
// enforcement would refuse, and records the verdict.
func TestConnectWithoutMITMAuditMode(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots, tls: true})
	p := startProxy(t, proxyConfig{mode: ModeAudit, roots: o.roots})
	conn, resp := connect(t, p.addr, o.host(), badbotUA)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT as badbot in audit mode = %d, want 200", resp.StatusCode)
	}
	tn := openTLS(t, conn, "127.0.0.1", o.roots)
	if resp, _ := tn.do("GET", o.host(), "/", badbotUA); resp.StatusCode != 200 {
		t.Errorf("GET through the tunnel = %d, want 200", resp.StatusCode)
	}
	rec := recordFor(t, p.records(), "CONNECT", o.host())
	if rec.Verdict != "disallow" || !rec.Forwarded || rec.Mode != "audit" || rec.Status != 200 || rec.Rule != "/" || rec.PathsChecked {
		t.Errorf("audit-mode CONNECT record: %+v", rec)
	}
}

// TestInterceptedSessionsResumed checks that a crawler that keeps TLS
// sessions resumes its session on a new tunnel to the same host: no
// certificate to sign, send or verify again.
func TestInterceptedSessionsResumed(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots, tls: true})
	p := startProxy(t, proxyConfig{mitm: true, roots: o.roots})
	tr := &http.Transport{
		Proxy:             http.ProxyURL(p.url),
		TLSClientConfig:   &tls.Config{RootCAs: p.caPool(), ClientSessionCache: tls.NewLRUClientSessionCache(4)},
		DisableKeepAlives: true, // a new tunnel for every request
	}
	c := &http.Client{Transport: tr, Timeout: testTimeout}
	for i, want := range []bool{false, true, true} {
		resp, body := do(t, c, "GET", o.URL+"/page", ua(curlUA))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d %q", i+1, resp.StatusCode, body)
		}
		if resp.TLS.DidResume != want {
			t.Errorf("tunnel %d: resumed %v, want %v", i+1, resp.TLS.DidResume, want)
		}
	}
}
