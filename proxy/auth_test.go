package proxy

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"robotsgate/proxy/audit"
	"robotsgate/proxy/identity"
)

const browserUA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"

// newGate builds an identity gate over a credentials file of
// name:password:token entries.
func newGate(t testing.TB, opts identity.Options, entries ...string) *identity.Gate {
	t.Helper()
	if len(entries) > 0 {
		opts.CredentialsFile = filepath.Join(t.TempDir(), "credentials")
		writeCredentials(t, opts.CredentialsFile, entries...)
	}
	g, err := identity.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// writeCredentials writes a credentials file of name:password:token entries.
func writeCredentials(t testing.TB, path string, entries ...string) {
	t.Helper()
	var file strings.Builder
	for _, e := range entries {
		name, rest, _ := strings.Cut(e, ":")
		password, token, _ := strings.Cut(rest, ":")
		hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		file.WriteString(name + ":" + string(hash) + ":" + token + "\n")
	}
	if err := os.WriteFile(path, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func basicAuth(name, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(name+":"+password))
}

// startEchoOrigin is an origin whose /echo says which proxy credentials
// reached it.
func startEchoOrigin(t *testing.T, useTLS bool) *origin {
	o := startOrigin(t, originConfig{robots: testRobots, tls: useTLS})
	o.mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "proxy-authorization="+r.Header.Get("Proxy-Authorization"))
	})
	return o
}

// rawClient is one client connection to the proxy, driven by hand so that
// a test sees what happens on the same connection after a 407.
type rawClient struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dialProxy(t *testing.T, p *testProxy) *rawClient {
	t.Helper()
	conn, err := net.DialTimeout("tcp", p.addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(testTimeout))
	return &rawClient{t: t, conn: conn, r: bufio.NewReader(conn)}
}

// send writes req and reads the whole answer.
func (c *rawClient) send(req *http.Request) (*http.Response, string) {
	c.t.Helper()
	if err := req.WriteProxy(c.conn); err != nil {
		c.t.Fatal(err)
	}
	resp, err := http.ReadResponse(c.r, req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	if req.Method == http.MethodConnect && resp.StatusCode == 200 {
		return resp, ""
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, string(body)
}

func proxyRequest(t *testing.T, method, target, userAgent, credentials string) *http.Request {
	t.Helper()
	var req *http.Request
	if method == http.MethodConnect {
		req = &http.Request{Method: method, URL: &url.URL{Host: target}, Host: target, Header: http.Header{}}
	} else {
		var err error
		if req, err = http.NewRequest(method, target, nil); err != nil {
			t.Fatal(err)
		}
	}
	req.Header.Set("User-Agent", userAgent)
	if credentials != "" {
		req.Header.Set("Proxy-Authorization", credentials)
	}
	return req
}

func check407(t *testing.T, resp *http.Response, body, secret string) {
	t.Helper()
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Fatalf("status %d, want 407; body %q", resp.StatusCode, body)
	}
	if got := resp.Header.Values("Proxy-Authenticate"); len(got) != 1 || got[0] != `Basic realm="robotsgate"` {
		t.Errorf("Proxy-Authenticate = %q", got)
	}
	if secret != "" && strings.Contains(body, secret) {
		t.Errorf("the 407 echoes the credentials: %q", body)
	}
}

// TestAuthRequiredPlain: without a valid credential a plain request gets
// 407 and the origin nothing; the client may try again on the same
// connection; the credential's token is judged, and the header never
// reaches the origin.
func TestAuthRequiredPlain(t *testing.T) {
	o := startEchoOrigin(t, false)
	p := startProxy(t, proxyConfig{identity: newGate(t, identity.Options{}, "acme:right:badbot", "curler:pw:curl")})
	good := basicAuth("acme", "right")

	c := dialProxy(t, p)
	resp, body := c.send(proxyRequest(t, "GET", o.URL+"/page", curlUA, ""))
	check407(t, resp, body, "")
	resp, body = c.send(proxyRequest(t, "GET", o.URL+"/page", curlUA, basicAuth("acme", "wrong")))
	check407(t, resp, body, basicAuth("acme", "wrong"))
	if o.saw("/page") {
		t.Fatal("an unauthenticated request reached the origin")
	}
	// Same connection, now with the right credential: badbot may fetch
	// nothing, whatever the User-Agent says.
	resp, body = c.send(proxyRequest(t, "GET", o.URL+"/page", browserUA, good))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `product token "badbot", of proxy credential "acme"`) {
		t.Fatalf("a browser User-Agent with badbot's credential: %d\n%s", resp.StatusCode, body)
	}
	if strings.Contains(body, good) {
		t.Error("the 403 echoes the credentials")
	}
	resp, body = c.send(proxyRequest(t, "GET", o.URL+"/echo", curlUA, basicAuth("curler", "pw")))
	if resp.StatusCode != 200 || body != "proxy-authorization=" {
		t.Errorf("an allowed request with a credential: %d %q; the origin must see no Proxy-Authorization", resp.StatusCode, body)
	}

	recs := p.records()
	var statuses []int
	for _, r := range recs {
		if r.URL == o.URL+"/page" {
			statuses = append(statuses, r.Status)
		}
	}
	if len(statuses) != 3 || statuses[0] != 407 || statuses[1] != 407 || statuses[2] != 403 {
		t.Fatalf("records for /page have statuses %v, want 407, 407, 403", statuses)
	}
	for _, r := range recs {
		if r.Status == 407 && (r.Verdict != "error" || r.Forwarded || r.Credential != "" || !strings.HasPrefix(r.Reason, "proxy authentication required: ")) {
			t.Errorf("407 record: %+v", r)
		}
		if r.Status == 403 {
			checkIdentity(t, r, "acme", "badbot", "", true)
		}
		if r.URL == o.URL+"/echo" {
			checkIdentity(t, r, "curler", "curl", "curl", false)
		}
	}
}

// checkIdentity checks who a record says was judged.
func checkIdentity(t *testing.T, r audit.Record, credential, token, uaToken string, mismatch bool) {
	t.Helper()
	if r.Credential != credential || r.Token != token || r.UAToken == nil || *r.UAToken != uaToken || r.UAMismatch != mismatch {
		got := "<nil>"
		if r.UAToken != nil {
			got = *r.UAToken
		}
		t.Errorf("%s %s: credential %q token %q ua_token %q ua_mismatch %v; want %q %q %q %v",
			r.Method, r.URL, r.Credential, r.Token, got, r.UAMismatch, credential, token, uaToken, mismatch)
	}
}

// TestAuthRequiredConnect: a CONNECT without credentials gets 407 and may
// try again on its connection; the credential it opens the tunnel with
// binds every request inside, whatever they carry themselves.
func TestAuthRequiredConnect(t *testing.T) {
	o := startEchoOrigin(t, true)
	p := startProxy(t, proxyConfig{mitm: true, roots: o.roots, identity: newGate(t, identity.Options{}, "acme:right:badbot", "curler:pw:curl")})

	c := dialProxy(t, p)
	resp, body := c.send(proxyRequest(t, http.MethodConnect, o.host(), curlUA, ""))
	check407(t, resp, body, "")
	resp, _ = c.send(proxyRequest(t, http.MethodConnect, o.host(), curlUA, basicAuth("curler", "pw")))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT with a credential after a 407 on the same connection: %d", resp.StatusCode)
	}
	tn := openTLS(t, &tunnelConn{Conn: c.conn, r: c.r}, "127.0.0.1", p.caPool())
	inner := func(path, userAgent, credentials string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "https://"+o.host()+path, nil)
		req.Header.Set("User-Agent", userAgent)
		if credentials != "" {
			req.Header.Set("Proxy-Authorization", credentials)
		}
		if err := req.Write(tn.conn); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(tn.r, req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	// curl's rules, from the tunnel's credential, for a browser.
	if resp, body := inner("/private/x", browserUA, ""); resp.StatusCode != 403 || !strings.Contains(body, `of proxy credential "curler"`) {
		t.Errorf("inside the tunnel, /private/x for curler: %d\n%s", resp.StatusCode, body)
	}
	// A credential inside the tunnel changes nothing and goes nowhere.
	if resp, body := inner("/echo", browserUA, basicAuth("acme", "right")); resp.StatusCode != 200 || body != "proxy-authorization=" {
		t.Errorf("inside the tunnel, /echo with another credential: %d %q", resp.StatusCode, body)
	}

	recs := p.records()
	checkIdentity(t, recordFor(t, recs, "GET", o.URL+"/private/x"), "curler", "curl", "", true)
	checkIdentity(t, recordFor(t, recs, "GET", o.URL+"/echo"), "curler", "curl", "", true)
	connect := recordFor(t, recs, http.MethodConnect, o.host())
	if connect.Status != 407 || connect.Verdict != "error" || connect.PathsChecked {
		t.Errorf("the refused CONNECT's record: %+v", connect)
	}
}

// TestAuthOptional: clients without credentials are judged by their
// User-Agent; wrong credentials are still refused.
func TestAuthOptional(t *testing.T) {
	o := startEchoOrigin(t, false)
	p := startProxy(t, proxyConfig{identity: newGate(t, identity.Options{Mode: identity.ModeOptional}, "acme:right:badbot")})
	c := p.client()
	if resp, _ := do(t, c, "GET", o.URL+"/page", ua(curlUA)); resp.StatusCode != 200 {
		t.Errorf("anonymous curl at /page: %d, want 200", resp.StatusCode)
	}
	if resp, _ := do(t, c, "GET", o.URL+"/private/x", ua(curlUA)); resp.StatusCode != 403 {
		t.Errorf("anonymous curl at /private/x: %d, want 403 by curl's rules", resp.StatusCode)
	}
	resp, body := do(t, c, "GET", o.URL+"/page", http.Header{"User-Agent": {curlUA}, "Proxy-Authorization": {basicAuth("acme", "nope")}})
	check407(t, resp, body, "")
	recs := p.records()
	if r := recordFor(t, recs, "GET", o.URL+"/private/x"); r.Credential != "" || r.UAToken != nil || r.Token != "curl" {
		t.Errorf("an anonymous record: %+v", r)
	}
}

// TestPinnedToken: every request is judged as the operator's token; the
// User-Agent's is kept beside it; Proxy-Authorization, unused, is still
// not forwarded.
func TestPinnedToken(t *testing.T) {
	o := startEchoOrigin(t, false)
	p := startProxy(t, proxyConfig{identity: newGate(t, identity.Options{Token: "badbot"})})
	c := p.client()
	resp, body := do(t, c, "GET", o.URL+"/page", ua(curlUA))
	if resp.StatusCode != 403 || !strings.Contains(body, `product token "badbot", set by the proxy's operator`) {
		t.Errorf("curl pinned as badbot: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := do(t, c, "GET", o.URL+"/robots.txt", http.Header{"Proxy-Authorization": {basicAuth("a", "b")}}); resp.StatusCode != 200 {
		t.Errorf("robots.txt: %d", resp.StatusCode)
	}
	checkIdentity(t, recordFor(t, p.records(), "GET", o.URL+"/page"), "", "badbot", "curl", true)
}

// TestAuthBlindTunnel: without interception the tunnel's host is judged
// by the credential's token.
func TestAuthBlindTunnel(t *testing.T) {
	o := startEchoOrigin(t, true)
	p := startProxy(t, proxyConfig{roots: o.roots, identity: newGate(t, identity.Options{}, "acme:right:badbot", "curler:pw:curl")})
	c := dialProxy(t, p)
	if resp, _ := c.send(proxyRequest(t, http.MethodConnect, o.host(), curlUA, basicAuth("acme", "right"))); resp.StatusCode != 403 {
		t.Errorf("CONNECT for badbot, who may fetch nothing: %d, want 403", resp.StatusCode)
	}
	c = dialProxy(t, p)
	resp, _ := c.send(proxyRequest(t, http.MethodConnect, o.host(), browserUA, basicAuth("curler", "pw")))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT for curl: %d, want 200", resp.StatusCode)
	}
	tc := tls.Client(&tunnelConn{Conn: c.conn, r: c.r}, &tls.Config{ServerName: "127.0.0.1", RootCAs: o.roots})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS to the origin through the blind tunnel: %v", err)
	}
	tc.Close()
	recs := p.records()
	var tokens []string
	for _, r := range recs {
		if r.Method == http.MethodConnect {
			tokens = append(tokens, r.Credential+"/"+r.Token)
		}
	}
	if strings.Join(tokens, ",") != "acme/badbot,curler/curl" {
		t.Errorf("CONNECT records speak for %v", tokens)
	}
}

func TestAuthMetrics(t *testing.T) {
	o := startEchoOrigin(t, false)
	p := startProxy(t, proxyConfig{identity: newGate(t, identity.Options{}, "acme:right:badbot")})
	do(t, p.client(), "GET", o.URL+"/page", http.Header{"Proxy-Authorization": {basicAuth("acme", "wrong")}})
	_, body := do(t, p.direct(), "GET", p.url.String()+"/metrics", nil)
	for _, want := range []string{`robotsgate_auth_failures_total{reason="wrong_password"} 1`, "robotsgate_auth_credentials 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestReloadReachesOpenTunnels: a reload that changes a credential's token
// applies to its open tunnels at once, one that only rehashes it leaves
// them be, one that removes it refuses and closes them.
func TestReloadReachesOpenTunnels(t *testing.T) {
	o := startEchoOrigin(t, true)
	file := filepath.Join(t.TempDir(), "credentials")
	writeCredentials(t, file, "acme:right:curl")
	gate := newGate(t, identity.Options{CredentialsFile: file})
	p := startProxy(t, proxyConfig{mitm: true, roots: o.roots, identity: gate})

	c := dialProxy(t, p)
	if resp, _ := c.send(proxyRequest(t, http.MethodConnect, o.host(), curlUA, basicAuth("acme", "right"))); resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	tn := openTLS(t, &tunnelConn{Conn: c.conn, r: c.r}, "127.0.0.1", p.caPool())
	if resp, _ := tn.do("GET", o.host(), "/page", browserUA); resp.StatusCode != 200 {
		t.Fatalf("/page as curl: %d", resp.StatusCode)
	}
	// Same password hashed anew (new salt), another token: the tunnel
	// speaks for it from now on.
	writeCredentials(t, file, "acme:right:badbot")
	if err := gate.Reload(); err != nil {
		t.Fatal(err)
	}
	if resp, _ := tn.do("GET", o.host(), "/page", browserUA); resp.StatusCode != 403 {
		t.Errorf("/page once acme speaks for badbot: %d, want 403", resp.StatusCode)
	}
	// Removed: refused, and the tunnel closes.
	writeCredentials(t, file, "other:pass:curl")
	if err := gate.Reload(); err != nil {
		t.Fatal(err)
	}
	resp, body := tn.do("GET", o.host(), "/page", browserUA)
	if resp.StatusCode != 403 || !strings.Contains(body, "no longer valid") || !resp.Close {
		t.Errorf("/page once acme was removed: %d close=%v\n%s", resp.StatusCode, resp.Close, body)
	}
	tn.conn.SetReadDeadline(time.Now().Add(testTimeout))
	if n, err := tn.r.Read(make([]byte, 1)); err == nil {
		t.Errorf("the tunnel stayed open (%d bytes more)", n)
	}
}

// TestAuthRequiredChunked: a chunked request refused with 407 still ends
// its connection, as every chunked request does: Content-Length beside it
// would be ambiguous.
func TestAuthRequiredChunked(t *testing.T) {
	o := startEchoOrigin(t, false)
	p := startProxy(t, proxyConfig{identity: newGate(t, identity.Options{}, "acme:right:curl")})
	c := dialProxy(t, p)
	req := proxyRequest(t, "POST", o.URL+"/page", curlUA, "")
	req.TransferEncoding = []string{"chunked"}
	req.Body = io.NopCloser(strings.NewReader("hello"))
	resp, body := c.send(req)
	check407(t, resp, body, "")
	if !resp.Close {
		t.Error("the connection of a chunked request stays open after its 407")
	}
}
