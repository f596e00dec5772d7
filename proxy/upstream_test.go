package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"robotsgate/proxy/destination"
	"robotsgate/proxy/identity"
)

// upstreamAuth is what the test upstream proxy accepts: crawler:pw.
var upstreamAuth = basicAuth("crawler", "pw")

// testUpstream is a forward proxy on 127.0.0.1 standing for a corporate
// one: proxy requests and CONNECT tunnels, behind Basic credentials
// (crawler:pw). It records what it is asked.
type testUpstream struct {
	addr string

	mu    sync.Mutex
	asked []string // "METHOD target Proxy-Authorization,...", in order
}

// startUpstream starts a test upstream proxy. answer, when set, may answer
// the n-th request (counted from 1) itself: with its status, or, for -1,
// never; 0 lets the proxy serve it.
func startUpstream(t *testing.T, answer func(n int, req *http.Request) int) *testUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &testUpstream{addr: ln.Addr().String()}
	forward := &http.Transport{Proxy: nil}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				u.serve(c, answer, forward)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		forward.CloseIdleConnections()
	})
	return u
}

func (u *testUpstream) serve(c net.Conn, answer func(int, *http.Request) int, forward *http.Transport) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		u.mu.Lock()
		u.asked = append(u.asked, req.Method+" "+req.RequestURI+" "+strings.Join(req.Header.Values("Proxy-Authorization"), ","))
		n := len(u.asked)
		u.mu.Unlock()
		status := 0
		if answer != nil {
			status = answer(n, req)
		}
		switch {
		case status < 0:
			io.Copy(io.Discard, c) // silent until the client gives up
			return
		case status > 0:
			writeStatus(c, status, nil)
		case req.Header.Get("Proxy-Authorization") != upstreamAuth:
			writeStatus(c, http.StatusProxyAuthRequired, http.Header{"Proxy-Authenticate": {`Basic realm="corporate"`}})
		case req.Method == http.MethodConnect:
			relayTunnel(c, br, req.Host)
			return
		default:
			req.RequestURI = ""
			req.Header.Del("Proxy-Authorization")
			req.Header.Add("Via", "1.1 test-upstream")
			resp, err := forward.RoundTrip(req)
			if err != nil {
				writeStatus(c, http.StatusBadGateway, nil)
				return
			}
			err = resp.Write(c)
			resp.Body.Close()
			if err != nil {
				return
			}
		}
	}
}

func writeStatus(c net.Conn, code int, header http.Header) {
	(&http.Response{StatusCode: code, ProtoMajor: 1, ProtoMinor: 1, Header: header}).Write(c)
}

// relayTunnel answers a CONNECT to target and relays bytes both ways until
// either side closes.
func relayTunnel(c net.Conn, br *bufio.Reader, target string) {
	origin, err := net.DialTimeout("tcp", target, testTimeout)
	if err != nil {
		writeStatus(c, http.StatusBadGateway, nil)
		return
	}
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{})
	go func() {
		io.Copy(origin, br)
		origin.Close()
		close(done)
	}()
	io.Copy(c, origin)
	c.Close()
	<-done
}

// url is the proxy's URL for robotsgate, with password.
func (u *testUpstream) url(password string) *url.URL {
	return &url.URL{Scheme: "http", User: url.UserPassword("crawler", password), Host: u.addr}
}

func (u *testUpstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.asked)
}

// TestUpstreamProxyCarriesEveryConnection sends a plain request, one in an
// intercepted tunnel and one in a blind tunnel, each from a client that
// authenticates to robotsgate, and checks that robots.txt and the request
// went through the upstream proxy with the proxy's credentials only, that
// the client's never went further, and that a disallowed request went
// nowhere.
func TestUpstreamProxyCarriesEveryConnection(t *testing.T) {
	for _, tt := range []struct {
		name      string
		tls, mitm bool
	}{{"plain", false, false}, {"intercepted", true, true}, {"blind", true, false}} {
		t.Run(tt.name, func(t *testing.T) {
			o := startEchoOrigin(t, tt.tls)
			up := startUpstream(t, nil)
			p := startProxy(t, proxyConfig{mitm: tt.mitm, roots: o.roots, upstream: up.url("pw"), identity: newGate(t, identity.Options{}, "acme:right:curl")})

			var want []string
			var echo string
			if tt.name == "blind" {
				c := dialProxy(t, p)
				if resp, _ := c.send(proxyRequest(t, http.MethodConnect, o.host(), curlUA, basicAuth("acme", "right"))); resp.StatusCode != 200 {
					t.Fatalf("CONNECT: %d, want 200", resp.StatusCode)
				}
				tn := openTLS(t, &tunnelConn{Conn: c.conn, r: c.r}, "127.0.0.1", o.roots)
				_, echo = tn.do("GET", o.host(), "/echo", curlUA)
				// robots.txt, then the tunnel.
				want = []string{"CONNECT " + o.host() + " " + upstreamAuth, "CONNECT " + o.host() + " " + upstreamAuth}
			} else {
				client := p.client()
				client.Transport.(*http.Transport).Proxy = http.ProxyURL(&url.URL{Scheme: "http", User: url.UserPassword("acme", "right"), Host: p.addr})
				header := ua(curlUA)
				if tt.mitm {
					// Inside the tunnel the credential rides on the
					// request itself too.
					header.Set("Proxy-Authorization", basicAuth("acme", "right"))
				}
				var resp *http.Response
				resp, echo = do(t, client, "GET", o.URL+"/echo", header)
				if resp.StatusCode != 200 {
					t.Fatalf("GET /echo: %d %q", resp.StatusCode, echo)
				}
				if resp, _ := do(t, client, "GET", o.URL+"/private/x", ua(curlUA)); resp.StatusCode != http.StatusForbidden {
					t.Errorf("GET /private/x: %d, want 403", resp.StatusCode)
				}
				want = []string{"GET " + o.URL + "/robots.txt " + upstreamAuth, "GET " + o.URL + "/echo " + upstreamAuth}
				if tt.mitm {
					// The fetcher's tunnel, then the forwarder's.
					want = []string{"CONNECT " + o.host() + " " + upstreamAuth, "CONNECT " + o.host() + " " + upstreamAuth}
				}
			}
			if echo != "proxy-authorization=" {
				t.Errorf("the origin got %q; want no Proxy-Authorization", echo)
			}
			if got := up.requests(); !slices.Equal(got, want) {
				t.Errorf("the upstream proxy was asked\n%q\nwant\n%q", got, want)
			}
			for _, rec := range p.records() {
				if rec.Error != "" || rec.Status != 200 && rec.Status != 403 {
					t.Errorf("record %s %s: status %d, error %q", rec.Method, rec.URL, rec.Status, rec.Error)
				}
			}
		})
	}
}

// TestUpstreamProxyGetsTheTargetByteForByte: a plain request reaches the
// upstream proxy in absolute form, its path and query as the client sent
// them, a path starting with "//" included.
func TestUpstreamProxyGetsTheTargetByteForByte(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots})
	up := startUpstream(t, nil)
	p := startProxy(t, proxyConfig{upstream: up.url("pw")})
	for _, target := range []string{"/a%2fb/./%7c?q=%41&&x", "//twice/..//x?", "/robots.txt"} {
		c := dialProxy(t, p)
		io.WriteString(c.conn, "GET http://"+o.host()+target+" HTTP/1.1\r\nHost: "+o.host()+"\r\nUser-Agent: "+curlUA+"\r\n\r\n")
		resp, err := http.ReadResponse(c.r, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusBadGateway {
			t.Errorf("GET %s: 502", target)
		}
		if got, want := up.requests(), "GET http://"+o.host()+target+" "+upstreamAuth; got[len(got)-1] != want {
			t.Errorf("the upstream proxy was asked %q, want %q", got[len(got)-1], want)
		}
	}
}

// TestUpstreamProxyFailures checks what the crawler and the audit log are
// told when the upstream proxy cannot be reached, refuses, or does not
// answer: a 502 naming the proxy, never its password, and what it did.
func TestUpstreamProxyFailures(t *testing.T) {
	up := startUpstream(t, nil)
	down := &url.URL{Scheme: "http", User: url.UserPassword("crawler", "wr0ng"), Host: freeAddr(t)}
	named := func(proxy *url.URL) string { return "the upstream proxy http://crawler:xxxxx@" + proxy.Host }
	wrong := up.url("wr0ng")
	for _, tt := range []struct {
		name      string
		proxy     *url.URL
		tls, mitm bool
		why       string
	}{
		{"wrong password, plain", wrong, false, false, named(wrong) + " refused the request: 407 Proxy Authentication Required"},
		{"wrong password, intercepted", wrong, true, true, named(wrong) + " refused the CONNECT: 407 Proxy Authentication Required"},
		{"proxy down, plain", down, false, false, "cannot connect to " + named(down) + ": connection refused"},
		{"proxy down, intercepted", down, true, true, "cannot connect to " + named(down) + ": connection refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := startOrigin(t, originConfig{robots: testRobots, tls: tt.tls})
			p := startProxy(t, proxyConfig{mitm: tt.mitm, roots: o.roots, upstream: tt.proxy})
			c := p.client()
			// robots.txt itself is forwarded without a fetch first.
			resp, body := do(t, c, "GET", o.URL+"/robots.txt", ua(curlUA))
			if want := "robotsgate could not get " + o.host() + ": " + tt.why + "\n"; resp.StatusCode != http.StatusBadGateway || body != want {
				t.Errorf("GET /robots.txt: %d %q; want 502 %q", resp.StatusCode, body, want)
			}
			// Any other path waits for robots.txt, which cannot be fetched:
			// complete disallow, for the same reason.
			resp, body = do(t, c, "GET", o.URL+"/page", ua(curlUA))
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "robots.txt unreachable: "+tt.why) {
				t.Errorf("GET /page: %d %q; want 403 saying robots.txt is unreachable: %s", resp.StatusCode, body, tt.why)
			}
			recs := p.records()
			if rec := recordFor(t, recs, "GET", o.URL+"/robots.txt"); rec.Status != http.StatusBadGateway || rec.Error != tt.why || rec.Upstream != 0 {
				t.Errorf("robots.txt record: status %d, upstream_status %d, error %q; want 502, none, %q", rec.Status, rec.Upstream, rec.Error, tt.why)
			}
			if o.robotsFetches() != 0 {
				t.Errorf("the origin served robots.txt %d times through a failing proxy", o.robotsFetches())
			}
			if strings.Contains(p.auditTo.String(), "wr0ng") || strings.Contains(p.logs.String(), "wr0ng") {
				t.Error("the audit log or the log shows the upstream proxy's password")
			}
		})
	}
}

// TestUpstreamProxyBlindTunnelFails: robots.txt comes through the proxy,
// but the proxy refuses, or never answers, the tunnel's own CONNECT. The
// client's TLS fails, and the CONNECT's record says why.
func TestUpstreamProxyBlindTunnelFails(t *testing.T) {
	for _, tt := range []struct {
		name   string
		second int // what the proxy answers the second CONNECT, the tunnel's
		why    string
	}{
		{"refused", http.StatusProxyAuthRequired, " refused the CONNECT: 407 Proxy Authentication Required"},
		{"forbidden", http.StatusForbidden, " refused the CONNECT: 403 Forbidden"},
		{"unanswered", -1, " did not answer the CONNECT: timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := startOrigin(t, originConfig{robots: testRobots, tls: true})
			up := startUpstream(t, func(n int, _ *http.Request) int {
				if n == 2 {
					return tt.second
				}
				return 0
			})
			p := startProxy(t, proxyConfig{roots: o.roots, upstream: up.url("pw"), upstreamHeaderTimeout: 200 * time.Millisecond})
			conn, resp := connect(t, p.addr, o.host(), curlUA)
			if resp.StatusCode != 200 {
				t.Fatalf("CONNECT: %d, want 200", resp.StatusCode)
			}
			tc := tls.Client(conn, &tls.Config{ServerName: "127.0.0.1", RootCAs: o.roots})
			if err := tc.Handshake(); err == nil {
				t.Error("TLS through a tunnel the upstream proxy did not open succeeded")
			}
			rec := recordFor(t, p.records(), http.MethodConnect, o.host())
			if want := "connecting to the origin: the upstream proxy http://crawler:xxxxx@" + up.addr + tt.why; rec.Error != want || rec.Forwarded {
				t.Errorf("CONNECT record: error %q, forwarded %v; want %q, not forwarded", rec.Error, rec.Forwarded, want)
			}
		})
	}
}

// TestUpstreamProxyDestinations denies 127.0.0.0/8, where the upstream
// proxy listens: the proxy's own address is not judged (a request for a
// literal address outside the range reaches it), but an origin whose name
// resolves into the range is refused, plainly, intercepted and blind,
// before anything reaches the proxy.
func TestUpstreamProxyDestinations(t *testing.T) {
	const outside = "192.0.2.1" // TEST-NET-1: the proxy answers for it, nothing connects there
	up := startUpstream(t, func(_ int, req *http.Request) int {
		if strings.HasPrefix(req.Host, outside) {
			return http.StatusForbidden
		}
		return 0
	})
	policy := destination.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
	const denied = "destination 127.0.0.1 is in the denied range 127.0.0.0/8 (ROBOTSGATE_DENY_DESTINATIONS)"

	plain := startOrigin(t, originConfig{robots: testRobots})
	secure := startOrigin(t, originConfig{robots: testRobots, tls: true})
	_, plainPort, _ := net.SplitHostPort(plain.host())
	_, securePort, _ := net.SplitHostPort(secure.host())

	p := startProxy(t, proxyConfig{upstream: up.url("pw"), destinations: policy, roots: secure.roots})
	c := p.client()
	resp, _ := do(t, c, "GET", "http://"+outside+"/robots.txt", ua(curlUA))
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get(decisionHeader) != "" {
		t.Errorf("GET http://%s/robots.txt: %d, %s %q; want the upstream proxy's own 403", outside, resp.StatusCode, decisionHeader, resp.Header.Get(decisionHeader))
	}
	if got := up.requests(); len(got) != 1 || !strings.HasPrefix(got[0], "GET http://"+outside+"/robots.txt ") {
		t.Fatalf("the upstream proxy was asked %q; want the request for %s: its own address in a denied range must not stop it", got, outside)
	}

	for _, path := range []string{"/robots.txt", "/page"} {
		resp, body := do(t, c, "GET", "http://localhost:"+plainPort+path, ua(curlUA))
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, denied) {
			t.Errorf("GET http://localhost:%s%s: %d %q; want 403 %q", plainPort, path, resp.StatusCode, body, denied)
		}
	}
	if _, resp := connect(t, p.addr, "localhost:"+securePort, curlUA); resp.StatusCode != http.StatusForbidden {
		t.Errorf("blind CONNECT localhost:%s: %d, want 403", securePort, resp.StatusCode)
	}
	mitm := startProxy(t, proxyConfig{mitm: true, upstream: up.url("pw"), destinations: policy, roots: secure.roots})
	resp, body := do(t, mitm.client(), "GET", "https://localhost:"+securePort+"/robots.txt", ua(curlUA))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, denied) {
		t.Errorf("intercepted GET https://localhost:%s/robots.txt: %d %q; want 403 %q", securePort, resp.StatusCode, body, denied)
	}

	if got := up.requests(); len(got) != 1 {
		t.Errorf("the upstream proxy was asked %q; nothing for localhost should have reached it", got[1:])
	}
	for _, rec := range append(p.records(), mitm.records()...) {
		if strings.Contains(rec.URL, "localhost") && (!rec.DeniedDestination || rec.Forwarded) {
			t.Errorf("record %s %s: denied_destination %v, forwarded %v", rec.Method, rec.URL, rec.DeniedDestination, rec.Forwarded)
		}
	}
}

// testResolver resolves "localhost" to 127.0.0.1, or fails every lookup
// as a resolver whose DNS an attacker makes fail would; it counts them.
type testResolver struct {
	fail    bool
	lookups atomic.Int32
}

func (r *testResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.lookups.Add(1)
	if r.fail || host != "localhost" {
		return nil, &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// TestUpstreamProxyNamesResolvedHere: with a destination policy, a name
// robotsgate cannot resolve itself is refused before the upstream proxy
// sees it, forwarded or tunnelled, since the proxy could resolve it to any
// address; names that resolve are looked up once for many requests; with
// no policy, no name is looked up and every one is handed on.
func TestUpstreamProxyNamesResolvedHere(t *testing.T) {
	plain := startOrigin(t, originConfig{robots: testRobots})
	_, plainPort, _ := net.SplitHostPort(plain.host())
	robotsURL := "http://localhost:" + plainPort + "/robots.txt"
	linkLocal := destination.New([]netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")})

	t.Run("unresolved", func(t *testing.T) {
		up := startUpstream(t, nil)
		r := &testResolver{fail: true}
		p := startProxy(t, proxyConfig{upstream: up.url("pw"), destinations: linkLocal, resolver: r})
		const why = "cannot resolve localhost here (DNS failure), and robotsgate must, to check it against ROBOTSGATE_DENY_DESTINATIONS " +
			"before the upstream proxy gets it; ROBOTSGATE_DENY_DESTINATIONS=none hands every name on unchecked"
		resp, body := do(t, p.client(), "GET", robotsURL, ua(curlUA))
		if want := "robotsgate could not get localhost:" + plainPort + ": " + why + "\n"; resp.StatusCode != http.StatusBadGateway || body != want {
			t.Errorf("GET %s: %d %q; want 502 %q", robotsURL, resp.StatusCode, body, want)
		}
		if rec := recordFor(t, p.records(), "GET", robotsURL); rec.Status != http.StatusBadGateway || rec.Error != why {
			t.Errorf("GET record: status %d, error %q; want 502, %q", rec.Status, rec.Error, why)
		}
		// A blind tunnel, once robots.txt allowed it, is opened so too.
		if _, err := p.srv.upstream.openTunnel(t.Context(), "localhost", "localhost:443"); upstreamProblem(err) != why {
			t.Errorf("opening a blind tunnel: %v; want %q", err, why)
		}
		if got := up.requests(); len(got) != 0 {
			t.Errorf("the upstream proxy was asked %q; want nothing", got)
		}
	})

	for _, tt := range []struct {
		name         string
		destinations *destination.Policy
		lookups      int32
	}{
		{"resolved once", linkLocal, 1},
		{"no policy", destination.New(nil), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, nil)
			r := &testResolver{}
			p := startProxy(t, proxyConfig{upstream: up.url("pw"), destinations: tt.destinations, resolver: r})
			for range 3 {
				if resp, body := do(t, p.client(), "GET", robotsURL, ua(curlUA)); resp.StatusCode != http.StatusOK {
					t.Errorf("GET %s: %d %q", robotsURL, resp.StatusCode, body)
				}
			}
			if n := r.lookups.Load(); n != tt.lookups || len(up.requests()) != 3 {
				t.Errorf("%d lookups, the upstream proxy asked %q; want %d lookups, 3 requests", n, up.requests(), tt.lookups)
			}
		})
	}
}

// TestNewRefusesAnUnusableUpstreamProxy: New takes only http://host:port,
// and says so without the password.
func TestNewRefusesAnUnusableUpstreamProxy(t *testing.T) {
	valid := newTestServer(t, proxyConfig{})
	for _, raw := range []string{"https://u:s3cret@proxy.example:3128", "http://u:s3cret@proxy.example", "http://:3128", "socks5://proxy.example:1080"} {
		proxy, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(Options{Rules: valid.rules, Audit: valid.auditW, Upstream: UpstreamOptions{Proxy: proxy}})
		if err == nil || !strings.Contains(err.Error(), "is not http://host:port") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New with upstream proxy %s: %v; want an error saying http://host:port, without the password", raw, err)
		}
	}
}

// freeAddr is a 127.0.0.1 address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
