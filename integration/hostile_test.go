package integration

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// A crawler that wants past the gate tries everything. Each row below is
// one trick, sent as raw bytes through the real binary to real local
// origins that record every request-target they receive; at the end no
// origin may have received anything but robots.txt and the requests the
// rows expect to reach it.

// hostileRobots disallows /private/ but for /private/open/ and every PDF,
// and everything to GPTBot.
const hostileRobots = "User-agent: *\nDisallow: /private/\nAllow: /private/open/\nDisallow: /*.pdf$\n\nUser-agent: GPTBot\nDisallow: /\n"

// recorder is an origin that records the request-target, Host and header
// of every request it receives, byte for byte.
type recorder struct {
	*httptest.Server
	addr string

	mu  sync.Mutex
	got []*http.Request
}

func newRecorder(t *testing.T, useTLS bool) *recorder {
	t.Helper()
	o := &recorder{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen := r.Clone(r.Context())
		seen.Body = io.NopCloser(bytes.NewReader(body))
		o.mu.Lock()
		o.got = append(o.got, seen)
		o.mu.Unlock()
		switch r.RequestURI {
		case "/robots.txt":
			io.WriteString(w, hostileRobots)
		case "/hop-by-hop":
			w.Header().Set("Connection", "X-Origin-Hop")
			w.Header().Set("X-Origin-Hop", "1")
			w.Header().Set("Keep-Alive", "timeout=5")
			w.Header().Set("Proxy-Authenticate", `Basic realm="origin"`)
			io.WriteString(w, "hop\n")
		default:
			fmt.Fprintf(w, "secret page %s body %q\n", r.RequestURI, body)
		}
	}))
	if useTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	o.Server, o.addr = srv, srv.Listener.Addr().String()
	return o
}

// targets returns every request-target received but those of GET and
// HEAD /robots.txt.
func (o *recorder) targets() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, r := range o.got {
		if r.RequestURI != "/robots.txt" || r.Method != http.MethodGet && r.Method != http.MethodHead {
			out = append(out, r.RequestURI)
		}
	}
	return out
}

// requests returns every request received, in order.
func (o *recorder) requests() []*http.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.got)
}

// count is how many requests arrived, robots.txt's included.
func (o *recorder) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.got)
}

// request returns the one request received for target.
func (o *recorder) request(t *testing.T, target string) *http.Request {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	var found []*http.Request
	for _, r := range o.got {
		if r.RequestURI == target {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the origin received %s %d times, want once", target, len(found))
	}
	return found[0]
}

// exchange writes raw to conn and reads one response; with waitClose it
// also waits for the proxy to close the connection, and says whether it
// did.
func exchange(t *testing.T, conn net.Conn, raw string, waitClose bool) (reply, bool) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(requestTimeout))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatalf("writing %q: %v", clip(raw), err)
	}
	br := bufio.NewReader(conn)
	method, _, _ := strings.Cut(raw, " ")
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", clip(raw), err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the body of the answer to %q: %v", clip(raw), err)
	}
	r := reply{status: resp.StatusCode, header: resp.Header, body: body}
	if !waitClose {
		return r, false
	}
	_, err = br.ReadByte()
	return r, errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed)
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// dialProxy opens a plain connection to the proxy.
func (p *proxyProcess) dial(t *testing.T) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial the proxy: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// pathRows are paths an origin may read otherwise than as sent, and paths
// that must reach the origin exactly as sent. Each runs plainly and in a
// tunnel.
var pathRows = []struct {
	target string
	status int
	reads  string // for a refusal: the reading the 403 names
}{
	{"/private/x", 403, ""},
	{"/x/../private/x", 403, "/private/x"},
	{"/./private/x", 403, "/private/x"},
	{"//private/x", 403, "/private/x"},
	{"/private%2Fx", 403, "/private/x"},
	{"/private%2fx", 403, "/private/x"},
	{"/x/%2E%2E/private/x", 403, "/private/x"},
	{"/private;x/y", 403, "/private/y"},
	{"/private/open/../x", 403, "/private/x"},
	{"/private%2F..%2Fprivate%2Fx|", 403, "/private/../private/x|"},
	{`/private\x`, 403, "/private/x"},
	{"/private%5Cx", 403, "/private/x"},
	{"/a/..;/private/x", 403, "/private/x"},
	{"/x//..//private/y", 403, "/private/y"},
	// A static server ignores the query, and one that cleans paths as
	// path.Clean does serves the file for a trailing dot segment.
	{"/doc.pdf", 403, ""},
	{"/doc.pdf?x=1", 403, "/doc.pdf"},
	{"/doc.pdf?", 403, "/doc.pdf"},
	{"/doc.pdf/.", 403, "/doc.pdf"},
	{"/doc.pdf/%2e", 403, "/doc.pdf"},
	{"/a/../doc.pdf/.?x", 403, "/doc.pdf"},
	{"/doc.pdf/x/..", 403, "/doc.pdf"},
	// Allowed: the origin must get these bytes exactly, never a
	// re-encoding.
	{"/private/open/page|x", 200, ""},
	{"/open%7cpage?q=a;b|c&d=%zz&e=%2F", 200, ""},
	{"/a%2Fb/..%2f", 200, ""},
	{"/", 200, ""},
	{"/doc.pdf/", 200, ""}, // a trailing slash names no file (not judged: see robots/README.md)
	{"/doc.pdfx?y", 200, ""},
}

func TestHostileRequests(t *testing.T) {
	t.Parallel()
	plain := newRecorder(t, false)
	secure := newRecorder(t, true)
	other := newRecorder(t, true)
	p := startProxy(t, upstreamCA(t, &origin{Server: secure.Server}, &origin{Server: other.Server}))
	allowedPlain, allowedSecure := []string{}, []string{}

	t.Run("plain", func(t *testing.T) {
		for _, row := range pathRows {
			t.Run(row.target, func(t *testing.T) {
				r, _ := exchange(t, p.dial(t), "GET http://"+plain.addr+row.target+" HTTP/1.1\r\nHost: "+plain.addr+"\r\nUser-Agent: "+crawlerUA+"\r\n\r\n", false)
				checkPathRow(t, r, row.status, row.reads)
			})
			if row.status == 200 {
				allowedPlain = append(allowedPlain, row.target)
			}
		}
	})
	t.Run("tunnel", func(t *testing.T) {
		for _, row := range pathRows {
			t.Run(row.target, func(t *testing.T) {
				conn := p.intercept(t, secure.addr, crawlerUA)
				r, _ := exchange(t, conn, "GET "+row.target+" HTTP/1.1\r\nHost: "+secure.addr+"\r\nUser-Agent: "+crawlerUA+"\r\n\r\n", false)
				checkPathRow(t, r, row.status, row.reads)
			})
			if row.status == 200 {
				allowedSecure = append(allowedSecure, row.target)
			}
		}
	})

	// Rows with a request of their own: raw is sent on a plain connection,
	// or inside a tunnel to secure when tunnel is set. host is replaced
	// by the origin's host:port.
	for _, c := range []struct {
		name    string
		tunnel  bool
		raw     string
		status  int
		say     string // in the body
		reaches string // the target the origin receives; "" for none
	}{
		{name: "user-info hides the host", raw: "GET http://;@host/private/x HTTP/1.1\r\nHost: host\r\n\r\n",
			status: 400, say: "user information"},
		{name: "user-info with a password", raw: "GET http://crawler:hunter2@host/open HTTP/1.1\r\nHost: host\r\n\r\n",
			status: 400, say: "RFC 9110"},
		{name: "fragment", raw: "GET http://host/open#x HTTP/1.1\r\nHost: host\r\n\r\n", status: 400, say: "fragment"},
		{name: "not http", raw: "GET ftp://host/open HTTP/1.1\r\nHost: host\r\n\r\n", status: 400, say: "only http and https"},
		{name: "port zero", raw: "GET http://127.0.0.1:0/open HTTP/1.1\r\nHost: 127.0.0.1:0\r\n\r\n", status: 400, say: "port"},
		{name: "port out of range", raw: "GET http://127.0.0.1:99999/open HTTP/1.1\r\nHost: x\r\n\r\n", status: 400, say: "port"},
		// OPTIONS * asks the server itself: net/http answers it, and it goes
		// nowhere.
		{name: "asterisk", raw: "OPTIONS * HTTP/1.1\r\nHost: host\r\n\r\n", status: 200},
		{name: "a lying Host beside an absolute URL is replaced",
			raw:    "GET http://host/open/lying-hdr HTTP/1.1\r\nHost: other.example\r\nUser-Agent: " + crawlerUA + "\r\n\r\n",
			status: 200, reaches: "/open/lying-hdr"},
		{name: "URL too long", raw: "GET http://host/" + strings.Repeat("a", 9<<10) + " HTTP/1.1\r\nHost: host\r\n\r\n", status: 414, say: "ROBOTSGATE_MAX_URL_BYTES"},
		{name: "header too large", raw: "GET http://host/open HTTP/1.1\r\nHost: host\r\nX-Big: " + strings.Repeat("b", 256<<10) + "\r\n\r\n", status: 431},
		{name: "TRACE stops at Max-Forwards 0", raw: "TRACE http://host/private/trace HTTP/1.1\r\nHost: host\r\nMax-Forwards: 0\r\nProxy-Authorization: Basic c2VjcmV0OnNlY3JldA==\r\n\r\n",
			status: 200, say: "TRACE http://"},
		{name: "OPTIONS counts Max-Forwards down", raw: "OPTIONS http://host/open/options HTTP/1.1\r\nHost: host\r\nMax-Forwards: 3\r\nUser-Agent: " + crawlerUA + "\r\n\r\n",
			status: 200, reaches: "/open/options"},
		{name: "bad Max-Forwards", raw: "TRACE http://host/open HTTP/1.1\r\nHost: host\r\nMax-Forwards: many\r\n\r\n", status: 400, say: "Max-Forwards"},
		{name: "metadata address", raw: "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n",
			status: 403, say: "ROBOTSGATE_DENY_DESTINATIONS"},
		{name: "metadata address as IPv6-mapped IPv4", raw: "GET http://[::ffff:169.254.169.254]/ HTTP/1.1\r\nHost: x\r\n\r\n",
			status: 403, say: "ROBOTSGATE_DENY_DESTINATIONS"},
		{name: "unspecified address", raw: "GET http://0.0.0.0:1/ HTTP/1.1\r\nHost: x\r\n\r\n", status: 403, say: "ROBOTSGATE_DENY_DESTINATIONS"},
		{name: "h2c upgrade is not relayed", raw: "GET http://host/open/h2c HTTP/1.1\r\nHost: host\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nUser-Agent: " + crawlerUA + "\r\n\r\n",
			status: 200, reaches: "/open/h2c"},

		{name: "CONNECT with a password", raw: "CONNECT alice:hunter2@host HTTP/1.1\r\nHost: host\r\n\r\n",
			status: 400, say: "user information"},
		{name: "upper-case host name", raw: "GET http://LOCALHOST:port/open/case HTTP/1.1\r\nHost: x\r\nUser-Agent: " + crawlerUA + "\r\n\r\n",
			status: 200, reaches: "/open/case"},
		{name: "request trailers are dropped", raw: "POST http://host/open/trailer HTTP/1.1\r\nHost: host\r\nUser-Agent: " + crawlerUA + "\r\n" +
			"Transfer-Encoding: chunked\r\nTrailer: Proxy-Authorization, X-Forwarded-For\r\n\r\n" +
			"2\r\nok\r\n0\r\nProxy-Authorization: Basic c2VjcmV0OnNlY3JldA==\r\nX-Forwarded-For: 10.9.9.9\r\n\r\n",
			status: 200, reaches: "/open/trailer"},
		{name: "tunnel: user-info hides the host", tunnel: true, raw: "GET https://;@host/private/x HTTP/1.1\r\nHost: host\r\n\r\n",
			status: 400, say: "user information"},
		{name: "tunnel: path in the Host", tunnel: true, raw: "GET /index.html HTTP/1.1\r\nHost: host/private/x#\r\n\r\n",
			status: 400, say: "Host"},
		{name: "tunnel: robots.txt with a path in the Host", tunnel: true, raw: "GET /robots.txt HTTP/1.1\r\nHost: host/private/x#\r\nUser-Agent: GPTBot/1.0\r\n\r\n",
			status: 400, say: "Host"},
		{name: "tunnel: user-info in the Host", tunnel: true, raw: "GET /open HTTP/1.1\r\nHost: me@host\r\n\r\n", status: 400},
		{name: "tunnel: another origin by Host", tunnel: true, raw: "GET /private/x HTTP/1.1\r\nHost: otherhost\r\n\r\n",
			status: 421, say: "needs a tunnel of its own"},
		{name: "tunnel: another origin by absolute URL", tunnel: true, raw: "GET https://otherhost/open HTTP/1.1\r\nHost: host\r\n\r\n",
			status: 421, say: "needs a tunnel of its own"},
		{name: "tunnel: plain http by absolute URL", tunnel: true, raw: "GET http://host/open HTTP/1.1\r\nHost: host\r\n\r\n",
			status: 421},
		{name: "tunnel: header too large", tunnel: true, raw: "GET /open HTTP/1.1\r\nHost: host\r\nX-Big: " + strings.Repeat("b", 256<<10) + "\r\n\r\n", status: 431},
		{name: "tunnel: CONNECT inside", tunnel: true, raw: "CONNECT host HTTP/1.1\r\nHost: host\r\n\r\n", status: 400},
		{name: "tunnel: an allowed request", tunnel: true,
			raw: "GET /open/in-tunnel HTTP/1.1\r\nHost: host\r\nUser-Agent: " + crawlerUA + "\r\n\r\n", status: 200, reaches: "/open/in-tunnel"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := plain
			if c.tunnel {
				o = secure
			}
			_, port, _ := net.SplitHostPort(o.addr)
			raw := strings.NewReplacer("otherhost", other.addr, "host", o.addr, ":port", ":"+port).Replace(c.raw)
			var conn net.Conn
			if c.tunnel {
				conn = p.intercept(t, o.addr, crawlerUA)
			} else {
				conn = p.dial(t)
			}
			r, closed := exchange(t, conn, raw, c.status == 400)
			if r.status != c.status || !bytes.Contains(r.body, []byte(c.say)) {
				t.Errorf("status %d, body %q; want %d saying %q", r.status, clip(string(r.body)), c.status, c.say)
			}
			if bytes.Contains(r.body, []byte("hunter2")) || bytes.Contains(r.body, []byte("c2VjcmV0")) {
				t.Errorf("the answer repeats a secret: %q", r.body)
			}
			if r.status == 400 && !closed {
				t.Error("the connection stayed open after a 400")
			}
			if c.reaches != "" {
				if c.tunnel {
					allowedSecure = append(allowedSecure, c.reaches)
				} else {
					allowedPlain = append(allowedPlain, c.reaches)
				}
			}
		})
	}

	t.Run("hop-by-hop fields go no further, Via is added", func(t *testing.T) {
		raw := "GET http://" + plain.addr + "/hop-by-hop HTTP/1.1\r\nHost: " + plain.addr + "\r\nUser-Agent: " + crawlerUA + "\r\n" +
			"Connection: keep-alive, X-Client-Hop\r\nX-Client-Hop: 1\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\n" +
			"TE: gzip\r\nProxy-Authorization: Basic c2VjcmV0OnNlY3JldA==\r\nVia: 1.1 upstream-cache\r\nX-End-To-End: kept\r\n\r\n"
		r, _ := exchange(t, p.dial(t), raw, false)
		allowedPlain = append(allowedPlain, "/hop-by-hop")
		if r.status != 200 {
			t.Fatalf("status %d, want 200", r.status)
		}
		got := plain.request(t, "/hop-by-hop").Header
		for _, gone := range []string{"X-Client-Hop", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Te"} {
			if v, ok := got[gone]; ok {
				t.Errorf("the origin received %s: %q", gone, v)
			}
		}
		if got.Get("X-End-To-End") != "kept" || !slices.Equal(got.Values("Via"), []string{"1.1 upstream-cache", "1.1 robotsgate"}) {
			t.Errorf("the origin received X-End-To-End %q and Via %q; want kept and the client's Via then robotsgate's", got.Get("X-End-To-End"), got.Values("Via"))
		}
		for _, gone := range []string{"X-Origin-Hop", "Keep-Alive", "Proxy-Authenticate"} {
			if v, ok := r.header[gone]; ok {
				t.Errorf("the client received %s: %q", gone, v)
			}
		}
		if v := r.header.Values("Via"); !slices.Equal(v, []string{"1.1 robotsgate"}) {
			t.Errorf("the client received Via %q, want robotsgate's", v)
		}
	})

	t.Run("Content-Length and Transfer-Encoding", func(t *testing.T) {
		// The chunked body ends after "ok"; what follows would be a second
		// request to a front end that trusted Content-Length.
		smuggled := "GET /private/smuggled HTTP/1.1\r\nHost: " + plain.addr + "\r\n\r\n"
		raw := "POST http://" + plain.addr + "/open/post HTTP/1.1\r\nHost: " + plain.addr + "\r\nUser-Agent: " + crawlerUA + "\r\n" +
			"Content-Length: " + fmt.Sprint(len("2\r\nok\r\n0\r\n\r\n")+len(smuggled)) + "\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"2\r\nok\r\n0\r\n\r\n" + smuggled
		r, closed := exchange(t, p.dial(t), raw, true)
		allowedPlain = append(allowedPlain, "/open/post")
		if r.status != 200 || !closed {
			t.Errorf("status %d, closed %v; want the request answered and the connection closed", r.status, closed)
		}
		if got := plain.request(t, "/open/post"); got.Header.Get("Content-Length") != "" {
			t.Errorf("the origin received Content-Length %q beside the chunked body", got.Header.Get("Content-Length"))
		}
	})

	t.Run("what the origin received", func(t *testing.T) {
		if got := plain.request(t, "/open/lying-hdr").Host; got != plain.addr {
			t.Errorf("the origin received Host %q, want %q", got, plain.addr)
		}
		if got := plain.request(t, "/open/options").Header.Get("Max-Forwards"); got != "2" {
			t.Errorf("the origin received Max-Forwards %q, want 2", got)
		}
		if got := plain.request(t, "/open/h2c").Header.Get("Upgrade"); got != "" {
			t.Errorf("the origin received Upgrade %q", got)
		}
		_, port, _ := net.SplitHostPort(plain.addr)
		if got := plain.request(t, "/open/case").Host; got != "localhost:"+port {
			t.Errorf("the origin received Host %q for LOCALHOST:%s, want the canonical localhost:%s robots.txt was fetched with", got, port, port)
		}
		if got := plain.request(t, "/open/trailer"); len(got.Trailer) != 0 || got.Header.Get("Trailer") != "" {
			t.Errorf("the origin received trailers %v (announced %q)", got.Trailer, got.Header.Get("Trailer"))
		}
	})

	// Nothing disallowed reached an origin: each received exactly the
	// allowed requests, byte for byte.
	for _, c := range []struct {
		name string
		o    *recorder
		want []string
	}{{"plain", plain, allowedPlain}, {"secure", secure, allowedSecure}, {"other", other, nil}} {
		got := c.o.targets()
		slices.Sort(got)
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) {
			t.Errorf("the %s origin received\n%q\nwant exactly\n%q", c.name, got, want)
		}
	}

	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	log, err := os.ReadFile(p.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"hunter2", "c2VjcmV0"} {
		if strings.Contains(string(log), secret) || strings.Contains(p.output.String(), secret) {
			t.Errorf("the audit log or the process log holds the secret %q", secret)
		}
	}
	recs := p.audit()
	if rec := auditFor(t, recs, "http://REDACTED@"+plain.addr+"/open"); rec.Status != 400 || rec.Verdict != "error" {
		t.Errorf("record of the request with a password: %+v", rec)
	}
	rec := auditFor(t, recs, "http://"+plain.addr+"/x/../private/x")
	if rec.Status != 403 || rec.raw["reading"] != "/private/x" || rec.raw["reading_steps"] != "dot segments removed" {
		t.Errorf("record of a dot-segment trick: %+v", rec.raw)
	}
}

// checkPathRow checks one pathRows answer: a 403 names the reading it
// refused, an allowed request shows the page the origin made of exactly
// the bytes sent.
func checkPathRow(t *testing.T, r reply, status int, reads string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %q", r.status, status, clip(string(r.body)))
	}
	if status == 403 && reads != "" {
		if !bytes.Contains(r.body, []byte("Read as:     "+reads+" (")) {
			t.Errorf("the 403 does not name the reading %q:\n%s", reads, r.body)
		}
		if h := r.header.Get("X-Robotsgate-Decision"); !strings.Contains(h, `reading="`+reads+`"`) {
			t.Errorf("X-Robotsgate-Decision %q does not name the reading %q", h, reads)
		}
	}
}
