package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 23, one address, one origin: every spelling of an address
// (IPv6's many, IPv4-mapped IPv6, IPv4 in the forms browsers and
// inet_aton read, a DNS name with its final dot) is one origin to
// robotsgate: one robots.txt fetch, one Crawl-delay schedule, one
// connection count. What is not an address (1.2.3.999) is refused, and
// the destination policy sees the address whatever its spelling.

// spellingRobots asks every crawler to wait 5 s between requests.
const spellingRobots = "User-agent: *\nCrawl-delay: 5\n"

// spellingDelay is the delay spellingRobots sets.
var spellingDelay = crawlDelay(5, 2)

// spellingOrigin serves spellingRobots on one address and records the
// request-target and Host of every request it receives.
type spellingOrigin struct {
	port string

	mu  sync.Mutex
	got []seenRequest
}

type seenRequest struct{ target, host string }

// newSpellingOrigin serves on ln.
func newSpellingOrigin(t *testing.T, ln net.Listener) *spellingOrigin {
	t.Helper()
	o := &spellingOrigin{}
	_, o.port, _ = net.SplitHostPort(ln.Addr().String())
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.got = append(o.got, seenRequest{r.RequestURI, r.Host})
		o.mu.Unlock()
		if r.RequestURI == "/robots.txt" {
			robotsTxt(spellingRobots)(w, r)
			return
		}
		fmt.Fprintf(w, "page %s\n", r.RequestURI)
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return o
}

// robotsFetches is how many times robots.txt was asked for, and with
// which Host headers.
func (o *spellingOrigin) robotsFetches() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var hosts []string
	for _, r := range o.got {
		if r.target == "/robots.txt" {
			hosts = append(hosts, r.host)
		}
	}
	return hosts
}

// pages is every request received but robots.txt.
func (o *spellingOrigin) pages() []seenRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []seenRequest
	for _, r := range o.got {
		if r.target != "/robots.txt" {
			out = append(out, r)
		}
	}
	return out
}

// sendTimed writes raw to a new connection to the proxy and reads the
// answer, noting when.
func sendTimed(t *testing.T, p *proxyProcess, raw string) timedReply {
	t.Helper()
	sent := time.Now()
	r, _ := exchange(t, p.dial(t), raw, false)
	return timedReply{r, sent, time.Now()}
}

// getVia is a plain proxy request for http://authority+path, its Host the
// same authority.
func getVia(authority, path string) string {
	return "GET http://" + authority + path + " HTTP/1.1\r\nHost: " + authority + "\r\nUser-Agent: " + crawlerUA + "\r\n\r\n"
}

// paceSpellings sends one request through each authority in turn, all
// spellings of the address whose canonical origin is canonical: the
// first is answered 200, every later one 429 as too early by the origin's
// one Crawl-delay, whatever its spelling. It returns the URLs sent and the
// first answer.
func paceSpellings(t *testing.T, p *proxyProcess, canonical string, authorities []string) (urls []string, first timedReply) {
	t.Helper()
	for i, authority := range authorities {
		path := "/spelling/" + strconv.Itoa(i) + "?q=a|b"
		urls = append(urls, "http://"+authority+path)
		r := sendTimed(t, p, getVia(authority, path))
		if i == 0 {
			if r.status != http.StatusOK {
				t.Fatalf("%s: status %d, want 200; body %q", authority, r.status, r.body)
			}
			first = r
			continue
		}
		mustBeEarly(t, authority, r, first, 5*time.Second)
		checkTooEarly(t, authority+" after "+authorities[0], r, first, spellingDelay, "ExampleBot", canonical+"/robots.txt")
	}
	return urls, first
}

func TestOneAddressOneOrigin(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	v4 := newSpellingOrigin(t, ln)
	port := v4.port
	canonical := "http://127.0.0.1:" + port
	p := startProxy(t)

	// The first spelling is an odd one: the origin must get the canonical
	// Host and the request-target as sent.
	authorities := []string{
		"[::ffff:7f00:1]:" + port,
		"127.0.0.1:" + port,
		"[::ffff:127.0.0.1]:" + port,
		"[0:0:0:0:0:FFFF:7F00:0001]:" + port,
		"127.1:" + port,
		"127.0.1:" + port,
		"0x7f.0.0.1:" + port,
		"0X7F.1:" + port,
		"0177.0.0.1:" + port,
		"2130706433:" + port,
		"127.000.000.001:" + port,
		"127.0.0.1.:" + port,
		"127.0.0.1:0" + port,
	}
	urls, first := paceSpellings(t, p, canonical, authorities)

	// Inside a tunnel: the tunnel's key is canonical, and a Host that is
	// another spelling of its address is the same authority (not a 421),
	// paced with all the others.
	for _, c := range []struct{ connect, host string }{
		{"[::ffff:127.0.0.1]:" + port, "127.1:" + port},
		{"2130706433:" + port, "127.0.0.1:" + port},
	} {
		conn, answer := p.connect(t, c.connect, crawlerUA)
		if answer.status != http.StatusOK {
			t.Fatalf("CONNECT %s: status %d, want 200; body %q", c.connect, answer.status, answer.body)
		}
		sent := time.Now()
		reply, _ := exchange(t, conn, "GET /spelling/tunnel HTTP/1.1\r\nHost: "+c.host+"\r\nUser-Agent: "+crawlerUA+"\r\n\r\n", false)
		r := timedReply{reply, sent, time.Now()}
		mustBeEarly(t, "CONNECT "+c.connect, r, first, 5*time.Second)
		if r.status != http.StatusTooManyRequests {
			t.Errorf("CONNECT %s, Host %s: status %d, want 429 (the origin's Crawl-delay); body %q", c.connect, c.host, r.status, r.body)
		} else if _, params := parseDecision(r.header.Get("X-Robotsgate-Decision")); params["robots"] != canonical+"/robots.txt" {
			t.Errorf("CONNECT %s, Host %s: X-Robotsgate-Decision %q, want robots %s/robots.txt", c.connect, c.host, r.header.Get("X-Robotsgate-Decision"), canonical)
		}
	}

	// Another name is another origin, even for the same address; its final
	// dot and case are not.
	localhost, _ := paceSpellings(t, p, "http://localhost:"+port, []string{"localhost:" + port, "LocalHost.:" + port})

	// Not an address, though it ends in a number: refused, never resolved.
	for _, c := range []struct{ authority, say string }{
		{"127.0.0.256:" + port, "IPv4"},
		{"1.2.3.999:" + port, "IPv4"},
		{"127.0.0.1.2.3:" + port, "IPv4"},
		{"08.0.0.1:" + port, "IPv4"},
		{"localhost.123:" + port, "IPv4"},
		{"127.0.0.1..:" + port, "empty label"},
		{"local..host:" + port, "empty label"},
		// net/http refuses this one before robotsgate sees it.
		{"[::ffff:127.1]:" + port, "Bad Request"},
	} {
		r := sendTimed(t, p, getVia(c.authority, "/refused"))
		if r.status != http.StatusBadRequest || !bytes.Contains(r.body, []byte(c.say)) {
			t.Errorf("%s: status %d, body %q; want 400 saying %q", c.authority, r.status, r.body, c.say)
		}
	}
	r, _ := exchange(t, p.dial(t), "CONNECT 127.0.0.256:"+port+" HTTP/1.1\r\nHost: x\r\n\r\n", false)
	if r.status != http.StatusBadRequest {
		t.Errorf("CONNECT 127.0.0.256: status %d, want 400; body %q", r.status, r.body)
	}

	// The destination policy sees the address, however it is spelt
	// (169.254.169.254 and 0.0.0.0 are denied by default).
	for _, raw := range []string{
		getVia("0xa9.0xfe.0xa9.0xfe", "/latest/meta-data/"),
		getVia("0251.0376.0251.0376", "/latest/meta-data/"),
		getVia("169.254.43518", "/latest/meta-data/"),
		getVia("2852039166", "/latest/meta-data/"),
		getVia("[::ffff:a9fe:a9fe]", "/latest/meta-data/"),
		getVia("0:"+port, "/"),
		"CONNECT 0xa9fea9fe:443 HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		r, _ := exchange(t, p.dial(t), raw, false)
		if r.status != http.StatusForbidden || !bytes.Contains(r.body, []byte("ROBOTSGATE_DENY_DESTINATIONS")) {
			t.Errorf("%q: status %d, body %q; want 403 naming ROBOTSGATE_DENY_DESTINATIONS", clip(raw), r.status, r.body)
		}
	}

	// IPv6 loopback, where the machine has it: its spellings are one
	// origin of their own.
	var v6 *spellingOrigin
	var v6URLs []string
	var v6Origin string
	if ln6, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		v6 = newSpellingOrigin(t, ln6)
		v6Origin = "http://[::1]:" + v6.port
		v6URLs, _ = paceSpellings(t, p, v6Origin, []string{
			"[::1]:" + v6.port, "[0:0:0:0:0:0:0:1]:" + v6.port, "[0000::0001]:" + v6.port, "[::0:0:1]:" + v6.port,
		})
	} else {
		t.Logf("no IPv6 loopback here (%v): the [::1] rows did not run", err)
	}

	// One robots.txt fetch per origin, with the canonical Host.
	if got := v4.robotsFetches(); !slices.Equal(got, []string{"127.0.0.1:" + port, "localhost:" + port}) {
		t.Errorf("robots.txt fetched with Host %q; want once as 127.0.0.1:%s and once as localhost:%s", got, port, port)
	}
	// The first request of each origin alone reached it: its path and
	// query as sent, the canonical Host.
	want := []seenRequest{{"/spelling/0?q=a|b", "127.0.0.1:" + port}, {"/spelling/0?q=a|b", "localhost:" + port}}
	if got := v4.pages(); !slices.Equal(got, want) {
		t.Errorf("the origin received %q, want %q", got, want)
	}
	if v6 != nil {
		if got := v6.robotsFetches(); !slices.Equal(got, []string{"[::1]:" + v6.port}) {
			t.Errorf("[::1]: robots.txt fetched with Host %q; want once as [::1]:%s", got, v6.port)
		}
		if got := v6.pages(); !slices.Equal(got, []seenRequest{{"/spelling/0?q=a|b", "[::1]:" + v6.port}}) {
			t.Errorf("[::1] received %q, want only the first request", got)
		}
	}

	// The record keeps the URL as sent; its origin is canonical.
	recs := stopAndAudit(t, p)
	for _, c := range []struct {
		urls   []string
		origin string
	}{{urls, canonical}, {localhost, "http://localhost:" + port}, {v6URLs, v6Origin}} {
		for _, u := range c.urls {
			if rec := auditFor(t, recs, u); rec.Origin != c.origin {
				t.Errorf("%s: audit origin %q, want %q", u, rec.Origin, c.origin)
			}
		}
	}
}

// TestOneAddressOneConnectionSlot: with ROBOTSGATE_MAX_CONNS_PER_ORIGIN=1,
// a request in flight to 127.0.0.1 holds the slot of every spelling of
// that address; another name (localhost) has a slot of its own.
func TestOneAddressOneConnectionSlot(t *testing.T) {
	t.Parallel()
	slow, entered, release := blockingPage()
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots), "/slow": slow})
	t.Cleanup(release) // before the origin closes: cleanups run last first
	_, port, _ := net.SplitHostPort(o.addr)
	p := startProxy(t, "ROBOTSGATE_MAX_CONNS_PER_ORIGIN=1")

	client := p.client(t)
	firstDone := make(chan error, 1)
	go func() {
		r, err := tryFetch(context.Background(), client, "http://127.0.0.1:"+port+"/slow", crawlerUA, "")
		if err == nil && r.status != http.StatusOK {
			err = fmt.Errorf("status %d, want 200; body %q", r.status, r.body)
		}
		firstDone <- err
	}()
	waitEntered(t, entered)
	for _, authority := range []string{"[::ffff:7f00:1]:" + port, "127.1:" + port, "0x7f000001:" + port} {
		r, _ := exchange(t, p.dial(t), getVia(authority, "/second"), false)
		if h := r.header.Get("X-Robotsgate-Decision"); r.status != http.StatusTooManyRequests || !strings.HasPrefix(h, "busy") {
			t.Errorf("%s while 127.0.0.1 has a request in flight: status %d, X-Robotsgate-Decision %q; want 429 busy", authority, r.status, h)
		}
	}
	if r, _ := exchange(t, p.dial(t), getVia("localhost:"+port, "/other-name"), false); r.status != http.StatusOK {
		t.Errorf("localhost while 127.0.0.1 has a request in flight: status %d, want 200 (another origin); body %q", r.status, r.body)
	}
	release()
	select {
	case err := <-firstDone:
		if err != nil {
			t.Fatalf("the request in flight: %v", err)
		}
	case <-time.After(requestTimeout):
		t.Fatal("the request in flight got no answer")
	}
	if n := o.count("/second"); n != 0 {
		t.Errorf("/second reached the origin %d times while the slot was taken", n)
	}
}
