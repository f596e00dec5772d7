package integration

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// shareRobotsTxt is the robots.txt of TestConnShare's origins.
const shareRobotsTxt = "User-agent: *\nDisallow: /private/\n"

// TestConnShare: one client (a source address) holds at most
// ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT client connections, tunnels
// included, intercepted or blind: past its share its new connections get
// a quick 503 naming the setting, counted in /metrics, while its open
// connections are unharmed and another client still connects and gets its
// pages; once it closes one it may connect again.
func TestConnShare(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		mitm bool
	}{
		{"intercepted", true},
		{"blind", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testConnShare(t, c.mitm)
		})
	}
}

func testConnShare(t *testing.T, mitm bool) {
	const hostile, other = "127.0.0.2", "127.0.0.3"
	pages := map[string]http.HandlerFunc{"/robots.txt": robotsTxt(shareRobotsTxt)}
	o := newOrigin(t, false, pages)
	secure := newOrigin(t, true, pages)
	p := startProxy(t, "ROBOTSGATE_MAX_CONNECTIONS=8", "ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT=3",
		fmt.Sprintf("ROBOTSGATE_MITM=%t", mitm), upstreamCA(t, secure))

	// The hostile client's share, three connections: a plain keep-alive
	// one and two TLS tunnels, each proven open by a page.
	plainGet := func(path string) string {
		return "GET http://" + o.addr + path + " HTTP/1.1\r\nHost: " + o.addr + "\r\nUser-Agent: " + crawlerUA + "\r\n\r\n"
	}
	tunneledGet := func(path string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: " + secure.addr + "\r\nUser-Agent: " + crawlerUA + "\r\n\r\n"
	}
	kept := []struct {
		name string
		conn net.Conn
		get  func(path string) string // the request for path on conn
		want func(path string) string // the page it gets
	}{
		{"keep-alive", dialFrom(t, p, hostile), plainGet, o.page},
		{"TLS tunnel", tlsTunnelFrom(t, p, hostile, secure, mitm), tunneledGet, secure.page},
		{"another TLS tunnel", tlsTunnelFrom(t, p, hostile, secure, mitm), tunneledGet, secure.page},
	}
	for _, k := range kept {
		if r, _ := exchange(t, k.conn, k.get("/page"), false); r.status != http.StatusOK || string(r.body) != k.want("/page") {
			t.Fatalf("%s of the hostile client: status %d, body %q; want the page", k.name, r.status, r.body)
		}
	}

	// Past its share: a request and a CONNECT alike get a quick 503.
	for _, raw := range []string{
		plainGet("/over"),
		"CONNECT " + o.addr + " HTTP/1.1\r\nHost: " + o.addr + "\r\nUser-Agent: " + crawlerUA + "\r\n\r\n",
	} {
		start := time.Now()
		r, closed := exchange(t, dialFrom(t, p, hostile), raw, true)
		if r.status != http.StatusServiceUnavailable || !bytes.Contains(r.body, []byte("(ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT)")) ||
			r.header.Get("Retry-After") == "" || !closed {
			t.Errorf("%q of the hostile client past its share: status %d, Retry-After %q, body %q, closed %v; want 503 naming the setting, then closed",
				clip(raw), r.status, r.header.Get("Retry-After"), r.body, closed)
		}
		if waited := time.Since(start); waited > 5*time.Second {
			t.Errorf("the refusal took %v", waited)
		}
	}

	// Another client connects and gets its answers.
	otherClient := p.clientFrom(t, other)
	for path, want := range map[string]int{"/page": http.StatusOK, "/private/x": http.StatusForbidden} {
		r := get(t, otherClient, "http://"+o.addr+path, crawlerUA)
		if r.status != want || want == http.StatusOK && string(r.body) != o.page(path) {
			t.Errorf("the other client's GET %s: status %d, body %q; want %d", path, r.status, r.body, want)
		}
	}

	// The hostile client's open connections are unharmed.
	for _, k := range kept {
		if r, _ := exchange(t, k.conn, k.get("/again"), false); r.status != http.StatusOK || string(r.body) != k.want("/again") {
			t.Errorf("%s of the hostile client after its refusals: status %d, body %q; want the page", k.name, r.status, r.body)
		}
	}

	metrics := get(t, directClient(t), p.url.String()+"/metrics", "")
	for _, line := range []string{
		`robotsgate_client_connections_refused_total{bound="per_client"} 2`,
		`robotsgate_client_connections_refused_total{bound="total"} 0`,
	} {
		if !bytes.Contains(metrics.body, []byte(line+"\n")) {
			t.Errorf("/metrics lacks %q", line)
		}
	}

	// Once it closes one, it may connect again: as soon as robotsgate has
	// seen the connection close.
	kept[0].conn.Close()
	deadline := time.Now().Add(requestTimeout)
	for {
		conn := dialFrom(t, p, hostile)
		r, _ := exchange(t, conn, plainGet("/back"), false)
		conn.Close()
		if r.status == http.StatusOK {
			break
		}
		if r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("the hostile client, one connection closed, connecting again: status %d, body %q", r.status, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dialFrom connects to the proxy from source address src.
func dialFrom(t *testing.T, p *proxyProcess, src string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", p.addr)
	if err != nil {
		t.Fatalf("dial the proxy from %s: %v", src, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// connectFrom opens a tunnel to target from source address src.
func connectFrom(t *testing.T, p *proxyProcess, src, target string) net.Conn {
	t.Helper()
	conn := dialFrom(t, p, src)
	conn.SetDeadline(time.Now().Add(requestTimeout))
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n\r\n", target, target, crawlerUA)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s from %s: reading the answer: %v", target, src, err)
	}
	// A 200 is followed by the tunnel itself, not a body.
	if resp.StatusCode != http.StatusOK || br.Buffered() > 0 {
		t.Fatalf("CONNECT %s from %s: status %d and %d bytes more; want 200 and the tunnel", target, src, resp.StatusCode, br.Buffered())
	}
	return conn
}

// tlsTunnelFrom opens a tunnel to the HTTPS origin o from source address
// src and starts TLS in it: with robotsgate when it intercepts, else with
// o itself.
func tlsTunnelFrom(t *testing.T, p *proxyProcess, src string, o *origin, intercepted bool) net.Conn {
	t.Helper()
	roots := x509.NewCertPool()
	if intercepted {
		roots = p.caPool()
	} else {
		roots.AddCert(o.Certificate())
	}
	host, _, _ := net.SplitHostPort(o.addr)
	conn := tls.Client(connectFrom(t, p, src, o.addr), &tls.Config{ServerName: host, RootCAs: roots})
	if err := conn.Handshake(); err != nil {
		t.Fatalf("TLS in the tunnel to %s from %s: %v", o.addr, src, err)
	}
	return conn
}
