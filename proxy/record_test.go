package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unsafe"

	"robotsgate/proxy/destination"
	"robotsgate/proxy/pace"
	"robotsgate/robots"
)

// TestRecordOutcomes drives each way a request can end through a real
// proxy to real origins, and checks what its audit record says of it by
// record's rules: status is what robotsgate answered the client with (a
// CONNECT's 200 even when the tunnel then fails), forwarded whether the
// request went to the origin, error the cause of a failure and nothing
// else.
func TestRecordOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  proxyConfig
		tls  bool // a TLS origin, its robots.txt trusted
		// drive sends the request and returns the method and URL of the
		// record to check.
		drive     func(t *testing.T, p *testProxy, o *origin) (method, url string)
		verdict   string
		status    int
		forwarded bool
		upstream  int
		err       string // the error, or its start when it ends in "…"
	}{
		{
			name:  "judged 403",
			drive: get("/private/x", http.StatusForbidden),
			// A verdict is no failure.
			verdict: "disallow", status: 403,
		},
		{
			name:    "audit mode forwards what enforcement refuses",
			cfg:     proxyConfig{mode: ModeAudit},
			drive:   get("/private/x", http.StatusOK),
			verdict: "disallow", status: 200, forwarded: true, upstream: 200,
		},
		{
			name:    "forwarded 200",
			drive:   get("/page", http.StatusOK),
			verdict: "allow", status: 200, forwarded: true, upstream: 200,
		},
		{
			name: "origin refuses the connection: 502, not forwarded",
			drive: func(t *testing.T, p *testProxy, o *origin) (string, string) {
				warm(t, p, o)
				o.Close()
				return get("/page", http.StatusBadGateway)(t, p, o)
			},
			verdict: "allow", status: 502, err: "connection refused",
		},
		{
			name: "origin hangs up on the request: 502, forwarded",
			drive: func(t *testing.T, p *testProxy, o *origin) (string, string) {
				o.mux.HandleFunc("/hangup", func(w http.ResponseWriter, r *http.Request) {
					if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
						conn.Close()
					}
				})
				return get("/hangup", http.StatusBadGateway)(t, p, o)
			},
			verdict: "allow", status: 502, forwarded: true, err: "connection closed early",
		},
		{
			name: "origin breaks off after its 200: the 200 stays",
			drive: func(t *testing.T, p *testProxy, o *origin) (string, string) {
				o.mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Length", "1000")
					io.WriteString(w, "ten bytes!")
					w.(http.Flusher).Flush()
					if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
						conn.Close()
					}
				})
				resp, err := p.client().Get(o.URL + "/broken")
				if err != nil {
					t.Fatal(err)
				}
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || err == nil {
					t.Fatalf("status %d, body read with %v; want 200 and a body cut off", resp.StatusCode, err)
				}
				return "GET", o.URL + "/broken"
			},
			verdict: "allow", status: 200, forwarded: true, upstream: 200, err: "reading the response body: connection closed early",
		},
		{
			name:    "Max-Forwards: 0 answered by robotsgate",
			drive:   send("OPTIONS", "/page", http.Header{"Max-Forwards": {"0"}}, http.StatusOK),
			verdict: "allow", status: 200,
		},
		{
			name: "pace refusal",
			cfg: proxyConfig{pacer: pace.New(pace.Options{}),
				pacePolicy: pace.Policy{Default: time.Hour, Max: time.Hour}},
			drive: func(t *testing.T, p *testProxy, o *origin) (string, string) {
				get("/page", http.StatusOK)(t, p, o)
				return get("/again", http.StatusTooManyRequests)(t, p, o)
			},
			// Too early is robots.txt's pace, no failure.
			verdict: "allow", status: 429,
		},
		{
			name:    "denied destination",
			cfg:     proxyConfig{destinations: destination.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})},
			drive:   get("/page", http.StatusForbidden),
			verdict: "disallow", status: 403,
		},
		{
			name: "bad request",
			drive: func(t *testing.T, p *testProxy, o *origin) (string, string) {
				if _, resp := connect(t, p.addr, "example.com", curlUA); resp.StatusCode != http.StatusBadRequest {
					t.Fatalf("CONNECT without a port: %d, want 400", resp.StatusCode)
				}
				return "CONNECT", "example.com"
			},
			verdict: "error", status: 400,
		},
		{
			name: "MITM",
			cfg:  proxyConfig{mitm: true},
			tls:  true,
			drive: func(t *testing.T, p *testProxy, o *origin) (string, string) {
				return get("/page", http.StatusOK)(t, p, o)
			},
			verdict: "allow", status: 200, forwarded: true, upstream: 200,
		},
		{
			name: "blind tunnel",
			tls:  true,
			drive: func(t *testing.T, p *testProxy, o *origin) (string, string) {
				conn := openConnect(t, p, o.host())
				tn := openTLS(t, conn, "127.0.0.1", o.roots)
				if resp, _ := tn.do("GET", o.host(), "/private/x", curlUA); resp.StatusCode != http.StatusOK {
					t.Fatalf("GET through the blind tunnel: %d, want the origin's 200", resp.StatusCode)
				}
				return "CONNECT", o.host()
			},
			verdict: "allow", status: 200, forwarded: true,
		},
		{
			name: "blind tunnel whose origin cannot be reached",
			tls:  true,
			drive: func(t *testing.T, p *testProxy, o *origin) (string, string) {
				warm(t, p, o)
				o.Close()
				hangsUp(t, openConnect(t, p, o.host()))
				return "CONNECT", o.host()
			},
			verdict: "allow", status: 200, err: "connecting to the origin: connection refused",
		},
		{
			name: "blind tunnel to an origin without robots.txt",
			tls:  true,
			drive: func(t *testing.T, p *testProxy, o *origin) (string, string) {
				o.Close() // robots.txt unreachable: complete disallow, said by hanging up on TLS
				hangsUp(t, openConnect(t, p, o.host()))
				return "CONNECT", o.host()
			},
			verdict: "disallow", status: 200, err: "TLS tunnel closed unopened: robots.txt could not be fetched",
		},
		{
			name: "blind tunnel carrying plain HTTP",
			drive: func(t *testing.T, p *testProxy, o *origin) (string, string) {
				conn := openConnect(t, p, o.host())
				io.WriteString(conn, "GET /page HTTP/1.1\r\nHost: "+o.host()+"\r\nUser-Agent: "+curlUA+"\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("GET inside the tunnel: %v, %v", resp, err)
				}
				resp.Body.Close()
				// The request inside went to the origin, with a record
				// of its own; the CONNECT itself did not.
				return "CONNECT", o.host()
			},
			verdict: "allow", status: 200,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := startOrigin(t, originConfig{robots: testRobots, tls: tc.tls})
			cfg := tc.cfg
			cfg.roots = o.roots
			p := startProxy(t, cfg)
			method, url := tc.drive(t, p, o)
			rec := recordFor(t, p.records(), method, url)
			if rec.Verdict != tc.verdict || rec.Status != tc.status || rec.Forwarded != tc.forwarded || rec.Upstream != tc.upstream {
				t.Errorf("verdict %q, status %d, forwarded %v, upstream_status %d; want %q, %d, %v, %d",
					rec.Verdict, rec.Status, rec.Forwarded, rec.Upstream, tc.verdict, tc.status, tc.forwarded, tc.upstream)
			}
			if rec.Error != tc.err {
				t.Errorf("error %q, want %q", rec.Error, tc.err)
			}
		})
	}
}

// send returns a drive that sends method path to the origin through the
// proxy and expects status.
func send(method, path string, header http.Header, status int) func(*testing.T, *testProxy, *origin) (string, string) {
	return func(t *testing.T, p *testProxy, o *origin) (string, string) {
		t.Helper()
		h := ua(curlUA)
		for k, v := range header {
			h[k] = v
		}
		if resp, body := do(t, p.client(), method, o.URL+path, h); resp.StatusCode != status {
			t.Fatalf("%s %s: %d %q, want %d", method, path, resp.StatusCode, body, status)
		}
		return method, o.URL + path
	}
}

func get(path string, status int) func(*testing.T, *testProxy, *origin) (string, string) {
	return send("GET", path, nil, status)
}

// warm has the proxy fetch the origin's robots.txt, as the blind tunnel
// to it would.
func warm(t *testing.T, p *testProxy, o *origin) {
	t.Helper()
	origin := o.URL
	if o.TLS != nil {
		origin = "https://" + o.host()
	}
	if result, _, err := p.rules.Get(t.Context(), origin); err != nil || result.Outcome != robots.OutcomeOK {
		t.Fatalf("robots.txt of %s: %v, %v", origin, result, err)
	}
}

// openConnect opens a tunnel to target, which robotsgate answers 200.
func openConnect(t *testing.T, p *testProxy, target string) net.Conn {
	t.Helper()
	conn, resp := connect(t, p.addr, target, curlUA)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT %s: %d, want 200", target, resp.StatusCode)
	}
	return conn
}

// hangsUp starts TLS in the tunnel and waits for robotsgate to close it,
// its record written first.
func hangsUp(t *testing.T, conn net.Conn) {
	t.Helper()
	io.WriteString(conn, "\x16\x03\x01\x00\x05hello")
	if rest, err := io.ReadAll(conn); err != nil && !strings.Contains(err.Error(), "reset") || len(rest) > 0 {
		t.Fatalf("the tunnel gave %q, %v; want robotsgate to hang up", rest, err)
	}
}

// TestDecisionSize keeps a decision, which every request allocates, within
// the 1152-byte size class it has always had: facts added to it must not
// cost each request a larger allocation. The runtime puts an 8-byte header
// before an object of more than 512 bytes that holds pointers, so 1144
// bytes of decision fill the class.
func TestDecisionSize(t *testing.T) {
	if size := unsafe.Sizeof(decision{}); size > 1152-8 {
		t.Errorf("a decision takes %d bytes, past the 1152-byte size class with its 8-byte malloc header", size)
	}
}
