package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// pipeListener hands the Server in-memory connections, so a test can run
// it inside a synctest bubble, where time is fake. It is the queue the
// Server itself feeds tunnels through.
type pipeListener struct{ *connQueue }

// dial opens a connection to the Server.
func (l pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.push(server)
	return client
}

// startPipeProxy serves a Server on a pipeListener until the test ends.
func startPipeProxy(t *testing.T, cfg proxyConfig) (*testProxy, pipeListener) {
	t.Helper()
	p := newTestServer(t, cfg)
	ln := pipeListener{newConnQueue()}
	go func() { p.served <- p.srv.Serve(ln) }()
	t.Cleanup(func() { p.shutdown(context.Background()) })
	return p, ln
}

// watchClose reads from c in the background and reports when the read
// ends, which for an idle connection means the proxy closed it.
func watchClose(c net.Conn) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		done <- err
	}()
	return done
}

// assertClosedAt advances fake time to just before the idle timeout,
// checks that c is still open, then to the timeout and checks that the
// proxy closed it.
func assertClosedAt(t *testing.T, closed <-chan error, idle time.Duration) {
	t.Helper()
	time.Sleep(idle - time.Millisecond)
	synctest.Wait()
	select {
	case err := <-closed:
		t.Fatalf("connection closed %v before the idle timeout: %v", time.Millisecond, err)
	default:
	}
	time.Sleep(time.Millisecond)
	synctest.Wait()
	select {
	case err := <-closed:
		if !errors.Is(err, io.EOF) {
			t.Errorf("idle connection ended with %v, want EOF", err)
		}
	default:
		t.Fatal("connection still open at the idle timeout")
	}
}

// TestClientIdleTimeoutKeepAlive checks that a keep-alive connection is
// closed after ClientIdleTimeout without traffic, not before, and that
// traffic pushes the timeout back.
func TestClientIdleTimeoutKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 200 * time.Millisecond
		_, ln := startPipeProxy(t, proxyConfig{idle: idle})
		c := ln.dial()
		defer c.Close()
		br := bufio.NewReader(c)
		healthz := func() {
			t.Helper()
			req, _ := http.NewRequest("GET", "http://pipe/healthz", nil)
			if err := req.Write(c); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("GET /healthz = %d", resp.StatusCode)
			}
		}
		healthz()
		time.Sleep(idle * 3 / 4)
		healthz() // traffic: the clock starts again
		assertClosedAt(t, watchClose(c), idle)
	})
}

// TestClientIdleTimeoutMITMTunnel checks that an intercepted tunnel, which
// net/http no longer watches once goproxy hijacks it, is closed after
// ClientIdleTimeout without traffic: right after CONNECT, and after the
// TLS handshake.
func TestClientIdleTimeoutMITMTunnel(t *testing.T) {
	for _, handshake := range []bool{false, true} {
		name := "after CONNECT"
		if handshake {
			name = "after TLS handshake"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const idle = 200 * time.Millisecond
				p, ln := startPipeProxy(t, proxyConfig{idle: idle, mitm: true})
				c := ln.dial()
				defer c.Close()
				io.WriteString(c, "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n")
				br := bufio.NewReader(c)
				resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("CONNECT = %v, %v; want 200", resp, err)
				}
				var conn net.Conn = &tunnelConn{Conn: c, r: br}
				if handshake {
					tc := tls.Client(conn, &tls.Config{ServerName: "127.0.0.1", RootCAs: p.caPool()})
					if err := tc.Handshake(); err != nil {
						t.Fatalf("TLS inside the tunnel: %v", err)
					}
					conn = tc
				}
				assertClosedAt(t, watchClose(conn), idle)
			})
		})
	}
}

// TestClientIdleTimeoutBlindTunnel checks that a tunnel the proxy does not
// intercept is closed once idle too. It needs a real origin to dial, so it
// runs on real time: the read deadline only bounds the wait, far above
// the idle timeout.
func TestClientIdleTimeoutBlindTunnel(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots, tls: true})
	p := startProxy(t, proxyConfig{idle: 200 * time.Millisecond, roots: o.roots})
	conn, resp := connect(t, p.addr, o.host(), curlUA)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT = %d, want 200", resp.StatusCode)
	}
	conn.SetReadDeadline(time.Now().Add(testTimeout))
	_, err := conn.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("read from an idle blind tunnel = %v; want the proxy to close it", err)
	}
}

// TestClientIdleTimeoutBlockedWrite checks that a connection whose client
// never reads the answer is cut once the proxy's write has been blocked
// for ClientIdleTimeout, not before: a crawler cannot hold a connection
// open by not reading. (In-memory pipes have no buffer, so the answer's
// write blocks at once.)
func TestClientIdleTimeoutBlockedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 200 * time.Millisecond
		p, ln := startPipeProxy(t, proxyConfig{idle: idle})
		c := ln.dial()
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: pipe\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the answer's write is now blocked on the client
		if n := p.srv.conns.open(); n != 1 {
			t.Fatalf("%d client connections open after the request, want 1", n)
		}
		time.Sleep(idle - time.Millisecond)
		synctest.Wait()
		if n := p.srv.conns.open(); n != 1 {
			t.Fatalf("the connection was closed before the idle timeout (%d open)", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := p.srv.conns.open(); n != 0 {
			t.Errorf("%d connections still open with a write blocked for the idle timeout, want 0", n)
		}
	})
}

// TestClientKey: a peer is the client of its IP address, an IPv6 one by
// its /64 and an IPv4-mapped one as IPv4, spelt the same whether taken
// from a request's RemoteAddr (clientKey) or grouped by an accepted
// connection's address (remotePrefix).
func TestClientKey(t *testing.T) {
	for _, c := range []struct{ remote, want string }{
		{"127.0.0.2:40000", "127.0.0.2:"},
		{"127.0.0.2:1", "127.0.0.2:"},
		{"[::ffff:127.0.0.2]:443", "127.0.0.2:"},
		{"[2001:db8::1]:443", "2001:db8::/64:"},
		{"[2001:DB8:0:0:ffff:ffff:ffff:ffff]:443", "2001:db8::/64:"},
		{"[2001:db8:0:1::1]:443", "2001:db8:0:1::/64:"},
		{"[::1]:8080", "::/64:"},
		{"[fe80::1%eth0]:80", "fe80::/64:"},
	} {
		if got := clientKey(c.remote); got != c.want {
			t.Errorf("clientKey(%q) = %q, want %q", c.remote, got, c.want)
		}
		conn := addrConn{remote: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(c.remote))}
		if got := prefixKey(remotePrefix(conn)); got != c.want {
			t.Errorf("a connection from %s is client %q, want %q", c.remote, got, c.want)
		}
		conn.remote = otherAddr(c.remote)
		if got := prefixKey(remotePrefix(conn)); got != c.want {
			t.Errorf("a connection from %s, not TCP, is client %q, want %q", c.remote, got, c.want)
		}
	}
	// Not IP addresses: kept, the port cut.
	for remote, want := range map[string]string{"pipe": "pipe", "": "", "host:1": "host:", "[bad]:1": "[bad]:"} {
		if got := clientKey(remote); got != want {
			t.Errorf("clientKey(%q) = %q, want %q", remote, got, want)
		}
	}
	for _, remote := range []net.Addr{nil, otherAddr("pipe")} {
		if got := remotePrefix(addrConn{remote: remote}); got.IsValid() {
			t.Errorf("a connection from %v is client %v, want the zero Prefix", remote, got)
		}
	}
}

// otherAddr is an address of no network robotsgate knows.
type otherAddr string

func (otherAddr) Network() string  { return "other" }
func (a otherAddr) String() string { return string(a) }

// addrConn is a connection from remote; Conn, when set, carries its bytes.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// TestConnShare: the tracker counts each client's open connections and
// refuses one over its share with 503 naming
// ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT (and one over the bound in all,
// which comes first, naming ROBOTSGATE_MAX_CONNECTIONS); a closed
// connection, closed once or twice, frees one place; an IPv6 client is
// its /64, an IPv4-mapped one its IPv4 address.
func TestConnShare(t *testing.T) {
	const (
		total = "ROBOTSGATE_MAX_CONNECTIONS)"
		share = "ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT)"
	)
	// A step opens a connection from from, wanting it refused naming
	// want (admitted when empty), or closes the close-th admitted one.
	type step struct {
		from, want string
		close      int
	}
	open := func(from, want string) step { return step{from: from, want: want, close: -1} }
	closeConn := func(i int) step { return step{close: i} }
	for _, c := range []struct {
		name                 string
		max, perClient       int
		steps                []step
		wantTotal, wantShare uint64 // refusals counted
	}{
		{"per client", 8, 2, []step{
			open("10.0.0.1:1", ""), open("10.0.0.1:2", ""), open("10.0.0.1:3", share),
			open("10.0.0.2:1", ""), open("10.0.0.2:2", ""), open("10.0.0.2:3", share),
			closeConn(0), closeConn(0), // the second Close frees nothing more
			open("10.0.0.1:4", ""), open("10.0.0.1:5", share), open("10.0.0.3:1", ""),
		}, 0, 3},
		{"IPv6 by its /64", 8, 2, []step{
			open("[2001:db8::1]:1", ""), open("[2001:db8::ffff:2]:1", ""), open("[2001:db8::3]:1", share),
			open("[2001:db8:0:1::1]:1", ""), open("[2001:db8:1::1]:1", ""),
		}, 0, 1},
		{"IPv4-mapped as IPv4", 8, 1, []step{
			open("10.0.0.1:1", ""), open("[::ffff:10.0.0.1]:2", share), open("10.0.0.2:1", ""),
			closeConn(0), open("[::ffff:10.0.0.1]:3", ""), open("10.0.0.1:4", share),
		}, 0, 2},
		{"the bound in all first", 3, 2, []step{
			open("10.0.0.1:1", ""), open("10.0.0.1:2", ""), open("10.0.0.2:1", ""),
			open("10.0.0.2:2", total), open("10.0.0.1:3", total),
			closeConn(2), open("10.0.0.1:4", share), open("10.0.0.3:1", ""),
		}, 2, 1},
		{"no share bound", 0, 0, []step{
			open("10.0.0.1:1", ""), open("10.0.0.1:2", ""), open("10.0.0.1:3", ""), open("10.0.0.1:4", ""),
		}, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := newConnTracker(time.Minute, c.max, c.perClient)
			var admitted []*idleConn
			counted := map[netip.Prefix]int{} // what the tracker should count, by client
			clientOf := func(from string) netip.Prefix { return clientPrefix(netip.MustParseAddrPort(from).Addr()) }
			for i, s := range c.steps {
				if s.close >= 0 {
					ic := admitted[s.close]
					if !ic.closed.Load() {
						counted[clientOf(ic.RemoteAddr().String())]--
					}
					ic.Close()
				} else {
					client, server := net.Pipe()
					defer client.Close()
					ic := tr.admit(addrConn{Conn: server, remote: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s.from))})
					switch {
					case s.want == "" && ic == nil:
						t.Fatalf("step %d: %s refused, want it admitted", i, s.from)
					case s.want == "":
						admitted = append(admitted, ic)
						counted[clientOf(s.from)]++
					case ic != nil:
						t.Fatalf("step %d: %s admitted, want it refused naming %s", i, s.from, s.want)
					default:
						assertRefused(t, client, s.want)
					}
				}
				if c.perClient == 0 {
					continue
				}
				tr.mu.Lock()
				for key, n := range counted {
					if tr.clients[key] != n {
						t.Errorf("step %d: client %s counted with %d connections, want %d", i, key, tr.clients[key], n)
					}
				}
				tr.mu.Unlock()
			}
			if got, got2 := tr.refused.Load(), tr.refusedShare.Load(); got != c.wantTotal || got2 != c.wantShare {
				t.Errorf("refusals counted: %d at the bound, %d at a share; want %d, %d", got, got2, c.wantTotal, c.wantShare)
			}
			for _, ic := range admitted {
				ic.Close()
			}
			tr.mu.Lock()
			defer tr.mu.Unlock()
			if len(tr.conns) != 0 || len(tr.clients) != 0 {
				t.Errorf("every connection closed, the tracker still counts %d, by client %v", len(tr.conns), tr.clients)
			}
		})
	}
}

// assertRefused reads from client the quick 503 of a connection refused
// at a bound, naming setting.
func assertRefused(t *testing.T, client net.Conn, setting string) {
	t.Helper()
	client.SetDeadline(time.Now().Add(testTimeout))
	resp, err := http.ReadResponse(bufio.NewReader(client), nil)
	if err != nil {
		t.Fatalf("a refused connection's answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("a refused connection's answer: %v", err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !resp.Close ||
		!strings.Contains(string(body), "("+setting) {
		t.Errorf("a refused connection got %d, Retry-After %q, close %v, %q; want 503 naming %s", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Close, body, setting)
	}
}

// TestConnShareDefault: a Server bounds one client's connections to what
// ClientLimits says, a quarter of the bound in all (at least 1) unless
// told, and not at all when nothing bounds them in all either.
func TestConnShareDefault(t *testing.T) {
	for _, c := range []struct {
		limits        ClientLimits
		wantPerClient int
	}{
		{ClientLimits{MaxConnections: 4096}, 1024},
		{ClientLimits{MaxConnections: 3}, 1},
		{ClientLimits{MaxConnections: 8, MaxConnectionsPerClient: 3}, 3},
		{ClientLimits{MaxConnectionsPerClient: 3}, 3},
		{ClientLimits{}, 0},
	} {
		p := newTestServer(t, proxyConfig{client: c.limits})
		if got := p.srv.conns.perClient; got != c.wantPerClient {
			t.Errorf("%+v: %d connections per client, want %d", c.limits, got, c.wantPerClient)
		}
	}
}
