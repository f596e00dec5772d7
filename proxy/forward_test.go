package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"robotsgate/proxy/audit"
	"robotsgate/robots"
)

// TestOriginDownAfterRobotsAllowed checks the 502 a crawler gets when
// robots.txt (cached) allows a request but the origin is gone: a short
// reason, for plain HTTP and inside an intercepted tunnel, where the
// client must get a response rather than a dropped connection.
func TestOriginDownAfterRobotsAllowed(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"http", false}, {"mitm", true}} {
		t.Run(tc.name, func(t *testing.T) {
			o := startOrigin(t, originConfig{robots: testRobots, tls: tc.tls})
			p := startProxy(t, proxyConfig{mitm: tc.tls, roots: o.roots})
			c := p.client()
			if resp, _ := do(t, c, "GET", o.URL+"/warm", ua(curlUA)); resp.StatusCode != 200 {
				t.Fatalf("warming robots.txt: status %d", resp.StatusCode)
			}
			host := o.host()
			o.Close() // robots.txt stays cached; the origin refuses connections from now on

			resp, body := do(t, c, "GET", o.URL+"/page", ua(curlUA))
			want := "robotsgate could not get " + host + ": connection refused\n"
			if resp.StatusCode != http.StatusBadGateway || body != want {
				t.Fatalf("status %d, body %q; want 502 %q", resp.StatusCode, body, want)
			}
			// The tunnel survives the 502: the next request on it is answered.
			if resp, _ := do(t, c, "GET", o.URL+"/private/x", ua(curlUA)); resp.StatusCode != 403 {
				t.Errorf("next request on the same connection: status %d, want 403", resp.StatusCode)
			}

			recs := p.records()
			want502 := audit.Record{
				Decision: robots.Decision{
					URL:           o.URL + "/page",
					UserAgent:     curlUA,
					Token:         "curl",
					Verdict:       "allow",
					Reason:        "no matching rule",
					Group:         "curl",
					RobotsOutcome: "ok",
					RobotsStatus:  200,
				},
				Method:       "GET",
				Origin:       o.URL,
				PathsChecked: true,
				RobotsCache:  "hit",
				Mode:         "enforce",
				Forwarded:    false, // the origin refused the connection: nothing reached it
				Status:       http.StatusBadGateway,
				Error:        "connection refused",
			}
			if tc.tls {
				want502.Tunnel = host
			}
			checkRecord(t, recordFor(t, recs, "GET", o.URL+"/page"), want502)
		})
	}
}

// TestOriginBreaksMidBody checks the audit record of a response whose
// origin hangs up halfway: the bytes relayed and what went wrong.
func TestOriginBreaksMidBody(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots})
	o.mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		io.WriteString(w, "ten bytes!")
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	p := startProxy(t, proxyConfig{})
	resp, err := p.client().Get(o.URL + "/broken")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || string(body) != "ten bytes!" {
		t.Fatalf("client read %q, err %v; want the 10 bytes sent, then an error", body, err)
	}
	rec := recordFor(t, p.records(), "GET", o.URL+"/broken")
	if rec.Status != 200 || rec.Upstream != 200 || rec.Bytes != 10 || !rec.Forwarded ||
		rec.Error != "reading the response body: connection closed early" {
		t.Errorf("record %+v: want status 200, 10 bytes and the origin closing the connection", rec)
	}
}

// TestStreamedResponseRelayedAsItComes checks that a body of unknown
// length reaches the client as the origin sends it, headers first, rather
// than once the origin has finished, plainly and inside a tunnel.
func TestStreamedResponseRelayedAsItComes(t *testing.T) {
	for _, mitm := range []bool{false, true} {
		slow := startSlowOrigin(t, mitm)
		p := startProxy(t, proxyConfig{mitm: mitm, roots: slow.roots})
		// Bounded by the client's timeout: the origin holds the second
		// half until the first has reached the client.
		resp, err := p.client().Get(slow.URL + "/slow")
		if err != nil {
			t.Fatalf("mitm=%v: no response headers while the origin streams: %v", mitm, err)
		}
		first := make([]byte, len(slowFirst))
		if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != slowFirst {
			t.Fatalf("mitm=%v: first half = %q, %v", mitm, first, err)
		}
		slow.releaseOnce()
		if rest, err := io.ReadAll(resp.Body); err != nil || string(rest) != slowSecond {
			t.Errorf("mitm=%v: second half = %q, %v", mitm, rest, err)
		}
		resp.Body.Close()
		if rec := recordFor(t, p.records(), "GET", slow.URL+"/slow"); rec.Bytes != int64(len(slowFirst+slowSecond)) {
			t.Errorf("mitm=%v: record counts %d bytes, want %d", mitm, rec.Bytes, len(slowFirst+slowSecond))
		}
	}
}

// TestWebSocketUpgradePassesThrough checks that an allowed WebSocket
// handshake is relayed and the upgraded connection then carries bytes
// both ways, plainly and inside an intercepted tunnel.
func TestWebSocketUpgradePassesThrough(t *testing.T) {
	for _, mitm := range []bool{false, true} {
		o := startOrigin(t, originConfig{robots: testRobots, tls: mitm})
		o.mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Upgrade") != "websocket" {
				http.Error(w, "not an upgrade", http.StatusBadRequest)
				return
			}
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			line, _ := brw.ReadString('\n')
			io.WriteString(conn, "echo: "+line)
		})
		p := startProxy(t, proxyConfig{mitm: mitm, roots: o.roots})

		var conn net.Conn
		target := o.URL + "/ws" // absolute form, to the proxy
		if mitm {
			tc, resp := connect(t, p.addr, o.host(), curlUA)
			if resp.StatusCode != 200 {
				t.Fatalf("CONNECT = %d", resp.StatusCode)
			}
			conn, target = openTLS(t, tc, "127.0.0.1", p.caPool()).conn, "/ws"
		} else {
			c, err := net.DialTimeout("tcp", p.addr, testTimeout)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			conn = c
		}
		conn.SetDeadline(time.Now().Add(testTimeout))
		io.WriteString(conn, "GET "+target+" HTTP/1.1\r\nHost: "+o.host()+"\r\nUser-Agent: "+curlUA+
			"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("mitm=%v: handshake through the proxy = %v, %v; want 101", mitm, resp, err)
		}
		io.WriteString(conn, "hello\n")
		if line, err := br.ReadString('\n'); err != nil || line != "echo: hello\n" {
			t.Fatalf("mitm=%v: over the upgraded connection: %q, %v; want the origin's echo", mitm, line, err)
		}
		conn.Close()
		rec := recordFor(t, p.records(), "GET", o.URL+"/ws")
		if rec.Verdict != "allow" || !rec.Forwarded || rec.Status != http.StatusSwitchingProtocols {
			t.Errorf("mitm=%v: record of the handshake: %+v", mitm, rec)
		}
	}
}

// TestInterimAnswersRelayedAndBounded checks that 1xx answers reach the
// client before the final one, and that an origin sending them without
// end gets the request ended with a 502 after maxInterim of them.
func TestInterimAnswersRelayedAndBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					hints := map[string]int{"/hints": 2, "/flood": maxInterim + 5}[req.URL.Path]
					for range hints {
						io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
					}
					if req.URL.Path == "/robots.txt" {
						io.WriteString(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
						continue
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}()
		}
	}()
	p := startProxy(t, proxyConfig{})
	for _, tc := range []struct {
		path          string
		interim, last int
	}{{"/hints", 2, http.StatusOK}, {"/flood", maxInterim, http.StatusBadGateway}} {
		conn, err := net.DialTimeout("tcp", p.addr, testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(testTimeout))
		io.WriteString(conn, "GET http://"+ln.Addr().String()+tc.path+" HTTP/1.1\r\nHost: x\r\nUser-Agent: "+curlUA+"\r\n\r\n")
		br := bufio.NewReader(conn)
		interim := 0
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s: reading answer %d: %v", tc.path, interim+1, err)
			}
			io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != http.StatusEarlyHints {
				if interim != tc.interim || resp.StatusCode != tc.last {
					t.Errorf("%s: %d interim answers then %d; want %d then %d", tc.path, interim, resp.StatusCode, tc.interim, tc.last)
				}
				break
			}
			if resp.Header.Get("Link") != "</a.css>; rel=preload" {
				t.Errorf("%s: interim answer without its Link: %v", tc.path, resp.Header)
			}
			interim++
		}
	}
}

// TestRewritesRequest: the families that rewrite a request are told by
// name in any case and with '_' for '-'; other fields, and names that only
// look alike, are kept.
func TestRewritesRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"X-Original-Url", true}, {"X-Original-Uri", true}, {"X-Rewrite-Url", true}, {"X_original_url", true},
		{"X-Http-Method-Override", true}, {"X-Http-Method", true}, {"X-Method-Override", true},
		{"Forwarded", true}, {"X-Forwarded", true}, {"X-Forwarded-For", true}, {"X-Forwarded-Prefix", true},
		{"X-Forwarded-" + string(make([]byte, 100)), true}, {"x_forwarded_host", true},
		{"X-Envoy-Original-Path", true}, {"X-Real-Ip", true}, {"True-Client-Ip", true}, {"Proxy-Url", true},
		{"X-Http-Host-Override", true}, {"Front-End-Https", true},
		{"User-Agent", false}, {"Accept", false}, {"Cookie", false}, {"X-Forwardedx", false},
		{"X-Real-Ip-Like-Header-That-Is-Long", false}, {"X-Originals", false}, {"Via", false}, {"", false},
	} {
		if got := rewritesRequest(tc.name); got != tc.want {
			t.Errorf("rewritesRequest(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	h := http.Header{"User-Agent": {"x"}, "X-Original-Url": {"/p"}, "Accept": {"*/*"}, "X-Forwarded-For": {"1"}}
	if allocs := testing.AllocsPerRun(100, func() {
		for name := range h {
			rewritesRequest(name)
		}
	}); allocs != 0 {
		t.Errorf("rewritesRequest allocates %v times per header", allocs)
	}
	removeRewriting(h)
	if len(h) != 2 || h.Get("User-Agent") != "x" || h.Get("Accept") != "*/*" {
		t.Errorf("after removeRewriting: %v", h)
	}
}
