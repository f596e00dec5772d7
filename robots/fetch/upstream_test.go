package fetch

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"robotsgate/proxy/egress"
	"robotsgate/robots"
)

// testUpstream is a forward proxy on 127.0.0.1 for fetches to go through:
// proxy requests and CONNECT tunnels, behind Basic credentials. It records
// what it was asked, and adds its Via to what it forwards.
type testUpstream struct {
	addr           string
	user, password string

	mu    sync.Mutex
	asked []string // "METHOD target Proxy-Authorization", in order
}

func startUpstream(t *testing.T, user, password string) *testUpstream {
	t.Helper()
	u := &testUpstream{user: user, password: password}
	forward := &http.Transport{Proxy: nil}
	t.Cleanup(forward.CloseIdleConnections)
	u.addr = rawListener(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			u.mu.Lock()
			u.asked = append(u.asked, req.Method+" "+req.RequestURI+" "+req.Header.Get("Proxy-Authorization"))
			u.mu.Unlock()
			switch {
			case req.Header.Get("Proxy-Authorization") != basicAuth(user, password):
				writeAnswer(c, http.StatusProxyAuthRequired, http.Header{"Proxy-Authenticate": {`Basic realm="test"`}})
			case req.Method == http.MethodConnect:
				tunnel(c, br, req.Host)
				return
			default:
				req.RequestURI = ""
				req.Header.Del("Proxy-Authorization")
				req.Header.Add("Via", "1.1 test-upstream")
				resp, err := forward.RoundTrip(req)
				if err != nil {
					writeAnswer(c, http.StatusBadGateway, nil)
					return
				}
				err = resp.Write(c)
				resp.Body.Close()
				if err != nil {
					return
				}
			}
		}
	})
	return u
}

func writeAnswer(c net.Conn, code int, header http.Header) {
	(&http.Response{StatusCode: code, ProtoMajor: 1, ProtoMinor: 1, Header: header}).Write(c)
}

// tunnel answers a CONNECT to target and relays bytes both ways until
// either side closes.
func tunnel(c net.Conn, br *bufio.Reader, target string) {
	origin, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		writeAnswer(c, http.StatusBadGateway, nil)
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

// proxyURL is the proxy's URL with the given password.
func (u *testUpstream) proxyURL(password string) *url.URL {
	return &url.URL{Scheme: "http", User: url.UserPassword(u.user, password), Host: u.addr}
}

func (u *testUpstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.asked)
}

func basicAuth(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// TestFetchThroughUpstreamProxy: http robots.txt is asked of the proxy,
// https robots.txt goes through a CONNECT tunnel, both with the proxy's
// credentials.
func TestFetchThroughUpstreamProxy(t *testing.T) {
	var via []string
	var mu sync.Mutex
	rules := func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		via = append(via, r.Header.Get("Via"))
		mu.Unlock()
		io.WriteString(w, testRules)
	}
	plain := serve(t, rules)
	secure, pool := serveTLS(t, rules)
	up := startUpstream(t, "crawler", "pw")
	f := newTestFetcher(t, Options{RootCAs: pool, UpstreamProxy: up.proxyURL("pw")})
	auth := basicAuth("crawler", "pw")

	for _, tt := range []struct {
		origin, asked, via string
	}{
		{plain.URL, "GET " + plain.URL + "/robots.txt " + auth, "1.1 test-upstream"},
		// Inside the tunnel the proxy sees nothing, and adds nothing.
		{secure.URL, "CONNECT " + secure.Listener.Addr().String() + " " + auth, ""},
	} {
		before := len(up.requests())
		res := f.Fetch(t.Context(), tt.origin)
		wantOutcome(t, res, robots.OutcomeOK, "")
		if got := up.requests()[before:]; !slices.Equal(got, []string{tt.asked}) {
			t.Errorf("%s: the upstream proxy was asked %q, want %q", tt.origin, got, tt.asked)
		}
		mu.Lock()
		if got := via[len(via)-1]; got != tt.via {
			t.Errorf("%s: the origin got Via %q, want %q", tt.origin, got, tt.via)
		}
		mu.Unlock()
	}
}

// TestFetchUpstreamProxyFailures: when the proxy refuses or cannot be
// reached, robots.txt is unreachable (complete disallow) with a detail
// naming the proxy, never its password. A 407 in particular is not taken
// for the origin's 4xx, which would mean no restrictions.
func TestFetchUpstreamProxyFailures(t *testing.T) {
	plain := serveBody(t, http.StatusOK, testRules)
	secure, pool := serveTLS(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, testRules) })
	up := startUpstream(t, "crawler", "pw")
	wrong := up.proxyURL("wr0ng")
	down := &url.URL{Scheme: "http", User: url.UserPassword("crawler", "wr0ng"), Host: freePort(t)}
	for _, tt := range []struct {
		name   string
		proxy  *url.URL
		origin string
		detail string
	}{
		{"wrong password, http", wrong, plain.URL,
			"robots.txt unreachable: the upstream proxy http://crawler:xxxxx@" + wrong.Host + " refused the request: 407 Proxy Authentication Required"},
		{"wrong password, https", wrong, secure.URL,
			"robots.txt unreachable: the upstream proxy http://crawler:xxxxx@" + wrong.Host + " refused the CONNECT: 407 Proxy Authentication Required"},
		{"proxy down", down, plain.URL,
			"robots.txt unreachable: cannot connect to the upstream proxy http://crawler:xxxxx@" + down.Host + ": connection refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := newTestFetcher(t, Options{RootCAs: pool, UpstreamProxy: tt.proxy}).Fetch(t.Context(), tt.origin)
			wantOutcome(t, res, robots.OutcomeUnreachable, tt.detail)
			if res.Status != 0 {
				t.Errorf("status %d: the proxy's answer passed for the origin's", res.Status)
			}
			if v := res.Check("bot", "/"); v.Allowed {
				t.Errorf("Check = allowed; want complete disallow")
			}
			if strings.Contains(res.Err.Error(), "wr0ng") {
				t.Errorf("the error shows the password: %v", res.Err)
			}
		})
	}
}

var errDeniedForTest = errors.New("denied by the test's DialControl")

// TestFetchUpstreamProxyJudgesTheOrigin: through a proxy, DialControl sees
// the addresses the origin's name resolves to, never the proxy's, and a
// refused origin is never asked of the proxy.
func TestFetchUpstreamProxyJudgesTheOrigin(t *testing.T) {
	plain := serveBody(t, http.StatusOK, testRules)
	_, originPort, _ := net.SplitHostPort(plain.Listener.Addr().String())
	up := startUpstream(t, "crawler", "pw")
	_, proxyPort, _ := net.SplitHostPort(up.addr)

	var mu sync.Mutex
	var judged []string
	allow := func(_ context.Context, _, address string, _ syscall.RawConn) error {
		mu.Lock()
		defer mu.Unlock()
		judged = append(judged, address)
		return nil
	}
	res := newTestFetcher(t, Options{DialControl: allow, UpstreamProxy: up.proxyURL("pw")}).Fetch(t.Context(), "http://localhost:"+originPort)
	wantOutcome(t, res, robots.OutcomeOK, "")
	mu.Lock()
	if !slices.Contains(judged, "127.0.0.1:"+originPort) || slices.ContainsFunc(judged, func(a string) bool { return strings.HasSuffix(a, ":"+proxyPort) }) {
		t.Errorf("DialControl judged %q; want the origin's 127.0.0.1:%s and not the proxy's port %s", judged, originPort, proxyPort)
	}
	mu.Unlock()

	before := len(up.requests())
	deny := func(context.Context, string, string, syscall.RawConn) error { return errDeniedForTest }
	for _, origin := range []string{"http://localhost:" + originPort, plain.URL, "http://robotsgate-test.invalid"} {
		res := newTestFetcher(t, Options{DialControl: deny, UpstreamProxy: up.proxyURL("pw")}).Fetch(t.Context(), origin)
		if res.Outcome != robots.OutcomeUnreachable {
			t.Errorf("%s: outcome %v, want unreachable", origin, res.Outcome)
		}
		if origin != "http://robotsgate-test.invalid" && !errors.Is(res.Err, errDeniedForTest) {
			t.Errorf("%s: err %v, want the DialControl's refusal", origin, res.Err)
		}
	}
	if got := up.requests()[before:]; len(got) != 0 {
		t.Errorf("refused origins were asked of the upstream proxy: %q", got)
	}
}

// servfailResolver fails every lookup, as a resolver whose DNS an attacker
// makes fail would; it counts them.
type servfailResolver struct{ lookups atomic.Int32 }

func (r *servfailResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.lookups.Add(1)
	return nil, &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
}

// TestFetchUpstreamProxyNameNotResolvedHere: with a DialControl, a name
// that does not resolve here is refused before the proxy sees it, where
// it could resolve to any address; the failure is this instance's and
// is not shared. With no DialControl no name is resolved: it is handed
// on.
func TestFetchUpstreamProxyNameNotResolvedHere(t *testing.T) {
	up := startUpstream(t, "crawler", "pw")
	_, port, _ := net.SplitHostPort(serveBody(t, http.StatusOK, testRules).Listener.Addr().String())
	origin := "http://localhost:" + port // the upstream proxy resolves it
	allow := func(context.Context, string, string, syscall.RawConn) error { return nil }
	r := &servfailResolver{}
	loaded := newResolvingFetcher(t, Options{DialControl: allow, UpstreamProxy: up.proxyURL("pw"), Share: true}, r).Load(t.Context(), origin)
	res := loaded.Value
	if res.Outcome != robots.OutcomeUnreachable || !strings.Contains(res.Detail, "cannot resolve localhost here (DNS failure)") ||
		!strings.Contains(res.Detail, "ROBOTSGATE_DENY_DESTINATIONS=none hands every name on unchecked") {
		t.Errorf("outcome %v, detail %q; want unreachable, saying the name must resolve here", res.Outcome, res.Detail)
	}
	if got := up.requests(); len(got) != 0 || r.lookups.Load() == 0 {
		t.Errorf("after %d lookups the upstream proxy was asked %q; want nothing", r.lookups.Load(), got)
	}
	if loaded.Shared != nil {
		t.Errorf("a name this instance could not check is shared: %q", loaded.Shared)
	}

	r = &servfailResolver{}
	res = newResolvingFetcher(t, Options{UpstreamProxy: up.proxyURL("pw")}, r).Fetch(t.Context(), origin)
	wantOutcome(t, res, robots.OutcomeOK, "")
	if got := up.requests(); len(got) != 1 || !strings.HasPrefix(got[0], "GET "+origin+"/robots.txt ") || r.lookups.Load() != 0 {
		t.Errorf("with no DialControl, after %d lookups the upstream proxy was asked %q; want no lookup, the request handed on", r.lookups.Load(), got)
	}
}

// newResolvingFetcher is newTestFetcher with the resolver that judges
// names before the upstream proxy gets them.
func newResolvingFetcher(t *testing.T, opts Options, resolver egress.Resolver) *Fetcher {
	t.Helper()
	f := newFetcher(opts, resolver)
	t.Cleanup(f.Close)
	return f
}
