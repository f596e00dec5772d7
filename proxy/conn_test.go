package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
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
