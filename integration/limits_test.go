package integration

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTunnelsCarryingPlainHTTP: a tunnel that carries plain HTTP is read
// and judged request by request, whether interception is on or off; with
// it off, a TLS tunnel is still relayed blind.
func TestTunnelsCarryingPlainHTTP(t *testing.T) {
	t.Parallel()
	for _, mitm := range []string{"true", "false"} {
		t.Run("MITM="+mitm, func(t *testing.T) {
			t.Parallel()
			o := newRecorder(t, false)
			p := startProxy(t, "ROBOTSGATE_MITM="+mitm)
			conn, answer := p.connect(t, o.addr, crawlerUA)
			if answer.status != http.StatusOK {
				t.Fatalf("CONNECT: status %d, want 200", answer.status)
			}
			for _, c := range []struct {
				path   string
				status int
			}{{"/private/x", 403}, {"/x/../private/x", 403}, {"/open/page", 200}, {"/private/y", 403}} {
				r, _ := exchange(t, conn, "GET "+c.path+" HTTP/1.1\r\nHost: "+o.addr+"\r\nUser-Agent: "+crawlerUA+"\r\n\r\n", false)
				if r.status != c.status {
					t.Errorf("GET %s through the tunnel: status %d, want %d; body %q", c.path, r.status, c.status, r.body)
				}
			}
			r, _ := exchange(t, conn, "GET /open/other HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", false)
			if r.status != http.StatusMisdirectedRequest {
				t.Errorf("another Host through the tunnel: status %d, want 421", r.status)
			}
			// A request sent in the same write as its CONNECT is not lost.
			pipelined := p.dial(t)
			pipelined.SetDeadline(time.Now().Add(requestTimeout))
			io.WriteString(pipelined, "CONNECT "+o.addr+" HTTP/1.1\r\nHost: "+o.addr+"\r\n\r\n"+
				"GET /open/pipelined HTTP/1.1\r\nHost: "+o.addr+"\r\nUser-Agent: "+crawlerUA+"\r\n\r\n")
			br := bufio.NewReader(pipelined)
			tp := textproto.NewReader(br)
			if line, err := tp.ReadLine(); err != nil || !strings.Contains(line, " 200 ") {
				t.Fatalf("CONNECT: %q, %v", line, err)
			}
			if _, err := tp.ReadMIMEHeader(); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("the request sent with its CONNECT: %v, %v", resp, err)
			}
			resp.Body.Close()
			if got := o.targets(); !slices.Equal(got, []string{"/open/page", "/open/pipelined"}) {
				t.Errorf("the origin received %q, want /open/page and /open/pipelined", got)
			}
			if code := p.stop(); code != 0 {
				t.Fatalf("exit %d", code)
			}
			rec := auditFor(t, p.audit(), "http://"+o.addr+"/private/x")
			if rec.Tunnel != o.addr || rec.Status != 403 || !rec.PathsChecked {
				t.Errorf("record of a request in the tunnel: %+v", rec.raw)
			}
		})
	}
}

// TestClientLimits: past ROBOTSGATE_MAX_CONNECTIONS a new client gets a
// quick 503 and the clients already in are unharmed; a TLS handshake or
// request headers that never finish, inside a tunnel too, are cut at
// their timeouts.
func TestClientLimits(t *testing.T) {
	t.Parallel()
	o := newRecorder(t, false)
	// Every client here is 127.0.0.1: its share is the whole bound.
	p := startProxy(t, "ROBOTSGATE_MAX_CONNECTIONS=3", "ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT=3",
		"ROBOTSGATE_CLIENT_TLS_TIMEOUT=1s", "ROBOTSGATE_CLIENT_HEADER_TIMEOUT=1s")
	get := func(conn net.Conn, path string) reply {
		r, _ := exchange(t, conn, "GET http://"+o.addr+path+" HTTP/1.1\r\nHost: "+o.addr+"\r\nUser-Agent: "+crawlerUA+"\r\n\r\n", false)
		return r
	}

	t.Run("connection bound", func(t *testing.T) {
		// The start-up health check's connection may take a moment to be
		// gone; until then a slot is taken.
		var kept []net.Conn
		deadline := time.Now().Add(requestTimeout)
		for len(kept) < 3 {
			c := p.dial(t)
			if r := get(c, "/open/kept"); r.status == 200 {
				kept = append(kept, c)
				continue
			}
			c.Close()
			if time.Now().After(deadline) {
				t.Fatalf("only %d clients got in under a bound of 3", len(kept))
			}
			time.Sleep(50 * time.Millisecond)
		}
		start := time.Now()
		r, closed := exchange(t, p.dial(t), "GET http://"+o.addr+"/open/over HTTP/1.1\r\nHost: "+o.addr+"\r\n\r\n", true)
		if r.status != http.StatusServiceUnavailable || !bytes.Contains(r.body, []byte("ROBOTSGATE_MAX_CONNECTIONS")) || !closed {
			t.Errorf("a client over the bound: status %d, body %q, closed %v; want 503 naming the setting, then closed", r.status, r.body, closed)
		}
		if waited := time.Since(start); waited > 5*time.Second {
			t.Errorf("the refusal took %v", waited)
		}
		for i, c := range kept {
			if r := get(c, "/open/kept"); r.status != 200 {
				t.Errorf("client %d within the bound after the refusal: status %d", i, r.status)
			}
			c.Close()
		}
		// Once clients leave there is room again.
		deadline = time.Now().Add(requestTimeout)
		for {
			c := p.dial(t)
			r, _ := exchange(t, c, "GET http://"+o.addr+"/open/again HTTP/1.1\r\nHost: "+o.addr+"\r\nUser-Agent: "+crawlerUA+"\r\nConnection: close\r\n\r\n", false)
			c.Close()
			if r.status == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("still refused after the clients left: %d", r.status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("stalled TLS handshake", func(t *testing.T) {
		start := time.Now()
		conn, answer := p.connect(t, o.addr, crawlerUA)
		if answer.status != 200 {
			t.Fatalf("CONNECT: %d", answer.status)
		}
		conn.Write([]byte{0x16, 0x03, 0x01}) // the start of a ClientHello, never finished
		assertCutWithin(t, conn, start, 1*time.Second)
	})

	t.Run("stalled headers inside a tunnel", func(t *testing.T) {
		conn := p.intercept(t, o.addr, crawlerUA)
		start := time.Now()
		io.WriteString(conn, "GET /open/slow HTTP/1.1\r\nHost: "+o.addr+"\r\nX-Drip: ")
		assertCutWithin(t, conn, start, 1*time.Second)
	})

	t.Run("silent tunnel", func(t *testing.T) {
		start := time.Now()
		conn, answer := p.connect(t, o.addr, crawlerUA)
		if answer.status != 200 {
			t.Fatalf("CONNECT: %d", answer.status)
		}
		assertCutWithin(t, conn, start, 1*time.Second)
	})

	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, target := range o.targets() {
		if target == "/open/slow" || target == "/open/over" {
			t.Errorf("the origin received %s", target)
		}
	}
}

// assertCutWithin checks that the proxy closes conn about timeout after
// start: not before half of it, and well before the test would give up.
// start is taken before the client's last move, so the proxy's clock
// starts after it: a test descheduled on a loaded machine between its
// last write and this call cannot see the cut as early.
func assertCutWithin(t *testing.T, conn net.Conn, start time.Time, timeout time.Duration) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(requestTimeout))
	_, err := io.Copy(io.Discard, conn)
	took := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the proxy kept the connection open for %v", took)
	}
	if took < timeout/2 || took > timeout+5*time.Second {
		t.Errorf("the connection was cut after %v, want about %v", took, timeout)
	}
}

// TestDeniedDestinations: an address in ROBOTSGATE_DENY_DESTINATIONS is
// never connected to, however it is named: by address, by a host name
// that resolves to it, in a tunnel or not; the refusal names the policy.
func TestDeniedDestinations(t *testing.T) {
	t.Parallel()
	o := newRecorder(t, false)
	secure := newRecorder(t, true)
	_, port, _ := net.SplitHostPort(o.addr)
	_, securePort, _ := net.SplitHostPort(secure.addr)
	p := startProxy(t, "ROBOTSGATE_DENY_DESTINATIONS=127.0.0.0/8,::1", upstreamCA(t, &origin{Server: secure.Server}))

	for _, c := range []struct{ name, raw string }{
		{"by address", "GET http://" + o.addr + "/open HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"by name", "GET http://localhost:" + port + "/open HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"robots.txt by name", "GET http://localhost:" + port + "/robots.txt HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"CONNECT by address", "CONNECT " + o.addr + " HTTP/1.1\r\nHost: x\r\n\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := exchange(t, p.dial(t), c.raw, false)
			if r.status != http.StatusForbidden || !bytes.Contains(r.body, []byte("ROBOTSGATE_DENY_DESTINATIONS")) {
				t.Errorf("status %d, body %q; want 403 naming ROBOTSGATE_DENY_DESTINATIONS", r.status, r.body)
			}
		})
	}
	t.Run("intercepted tunnel by name", func(t *testing.T) {
		conn, answer := p.connect(t, "localhost:"+securePort, crawlerUA)
		if answer.status != 200 {
			t.Fatalf("CONNECT: %d", answer.status)
		}
		tlsConn := tls.Client(conn, &tls.Config{ServerName: "localhost", RootCAs: p.caPool()})
		r, _ := exchange(t, tlsConn, "GET /open HTTP/1.1\r\nHost: localhost:"+securePort+"\r\n\r\n", false)
		if r.status != http.StatusForbidden || !bytes.Contains(r.body, []byte("ROBOTSGATE_DENY_DESTINATIONS")) {
			t.Errorf("status %d, body %q; want 403 naming ROBOTSGATE_DENY_DESTINATIONS", r.status, r.body)
		}
	})
	if n := o.count() + secure.count(); n != 0 {
		t.Errorf("the origins received %d requests, robots.txt included; want none", n)
	}
}

// TestAuditLogThatCannotBeWritten: with the audit log on a full disk
// (/dev/full) robotsgate refuses to serve by default, serves on with
// ROBOTSGATE_AUDIT_ON_ERROR=continue, says so in its log either way, and
// exits 1 because records were lost.
func TestAuditLogThatCannotBeWritten(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Fatalf("this test needs /dev/full: %v", err)
	}
	for _, c := range []struct {
		policy, logSays string
		status          int
	}{
		{"refuse", "refusing every request with 503", http.StatusServiceUnavailable},
		{"continue", "SERVING ON WITHOUT A WORKING AUDIT LOG", http.StatusOK},
	} {
		t.Run(c.policy, func(t *testing.T) {
			t.Parallel()
			o := newRecorder(t, false)
			p := startProxy(t, "ROBOTSGATE_AUDIT_LOG=/dev/full", "ROBOTSGATE_AUDIT_ON_ERROR="+c.policy)
			p.wantExit = 1
			client := p.client(t)
			// The first record fails to reach the disk at the first flush;
			// from then on the policy applies.
			deadline := time.Now().Add(requestTimeout)
			for {
				get(t, client, "http://"+o.addr+"/open/page", crawlerUA)
				if strings.Contains(p.output.String(), c.logSays) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the log never said %q:\n%s", c.logSays, p.output)
				}
				time.Sleep(100 * time.Millisecond)
			}
			last := get(t, client, "http://"+o.addr+"/open/page", crawlerUA)
			if last.status != c.status {
				t.Errorf("status %d once the log failed, want %d; body %q", last.status, c.status, last.body)
			}
			if code := p.stop(); code != 1 {
				t.Errorf("exit %d after SIGTERM with records lost, want 1", code)
			}
		})
	}
}

// TestExposedCAKey: a CA key that group or others may read stops the
// start, with exit 2 and the chmod that fixes it.
func TestExposedCAKey(t *testing.T) {
	t.Parallel()
	p := startProxy(t)
	if code := p.stop(); code != 0 {
		t.Fatalf("first start: exit %d", code)
	}
	key := filepath.Join(p.caDir, "ca-key.pem")
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, env := range [][]string{
		{"ROBOTSGATE_CA_DIR=" + p.caDir},
		{"ROBOTSGATE_CA_CERT=" + filepath.Join(p.caDir, "ca.pem"), "ROBOTSGATE_CA_KEY=" + key},
	} {
		code, _, stderr := runBinary(t, "", append(env, "ROBOTSGATE_LISTEN=127.0.0.1:0", "ROBOTSGATE_AUDIT_LOG="+filepath.Join(t.TempDir(), "a.log")))
		if code != 2 || !strings.Contains(stderr, "chmod 600 "+key) {
			t.Errorf("%v: exit %d, want 2 and the chmod that fixes it:\n%s", env, code, stderr)
		}
		if strings.Contains(stderr, "robotsgate listening") {
			t.Errorf("%v: robotsgate started with an exposed CA key", env)
		}
	}
}

// TestRobotsRedirectToDeniedDestination: an origin whose robots.txt
// redirects to a cloud metadata address does not get robotsgate to fetch
// it; its pages are refused, naming the policy.
func TestRobotsRedirectToDeniedDestination(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, false, map[string]http.HandlerFunc{
		"/robots.txt": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/robots.txt", http.StatusFound)
		},
	})
	p := startProxy(t)
	r := get(t, p.client(t), o.base()+"/page", crawlerUA)
	if r.status != http.StatusForbidden || !bytes.Contains(r.body, []byte("ROBOTSGATE_DENY_DESTINATIONS")) {
		t.Errorf("status %d, body %q; want 403 naming ROBOTSGATE_DENY_DESTINATIONS", r.status, r.body)
	}
	if n := o.count("/page"); n != 0 {
		t.Errorf("the origin received /page %d times", n)
	}
}
