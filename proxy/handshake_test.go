package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// openTunnel CONNECTs to target through p and returns the tunnel once the
// proxy has answered 200.
func openTunnel(t *testing.T, p *testProxy, target string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", p.addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(testTimeout))
	if _, err := io.WriteString(conn, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nUser-Agent: "+curlUA+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK || br.Buffered() != 0 {
		t.Fatalf("CONNECT %s: %v %v", target, resp, err)
	}
	return conn
}

// hangUpOnFirstRead is a client connection that closes itself as soon as
// the server's first flight arrives, the way a client that refuses the
// certificate without an alert does.
type hangUpOnFirstRead struct{ net.Conn }

func (c hangUpOnFirstRead) Read(p []byte) (int, error) {
	if _, err := c.Conn.Read(p); err != nil {
		return 0, err
	}
	c.Conn.Close()
	return 0, errors.New("hung up on purpose")
}

// TestClientHandshakeFailures makes intercepted clients fail their TLS
// handshake in each way a cause names, for real, and checks that each is
// counted under its cause and warned about once, the warnings about trust
// with the CA's address.
func TestClientHandshakeFailures(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots, tls: true})
	p := startProxy(t, proxyConfig{mitm: true, roots: o.roots, client: ClientLimits{TLSTimeout: 200 * time.Millisecond}})
	host, _, _ := net.SplitHostPort(o.host())
	trustHint := "does the client trust ca.pem? download it from http://" + p.addr + "/ca.pem"

	tests := []struct {
		name   string
		cause  handshakeCause
		client func(conn net.Conn) error
		warn   string // in the warning's message
	}{
		{"client without the CA", handshakeUntrustedCA, func(conn net.Conn) error {
			return tls.Client(conn, &tls.Config{ServerName: host, RootCAs: o.roots}).Handshake()
		}, trustHint},
		{"client hangs up on the certificate", handshakeHungUp, func(conn net.Conn) error {
			return tls.Client(hangUpOnFirstRead{conn}, &tls.Config{ServerName: host, RootCAs: p.caPool()}).Handshake()
		}, trustHint},
		{"client stops after a byte", handshakeTimeout, func(conn net.Conn) error {
			_, err := conn.Write([]byte{tlsRecordHandshake})
			if err == nil {
				_, err = conn.Read(make([]byte, 1)) // the proxy hangs up at its deadline
			}
			return err
		}, "ROBOTSGATE_CLIENT_TLS_TIMEOUT"},
		{"client offers TLS 1.0 only", handshakeOther, func(conn net.Conn) error {
			return tls.Client(conn, &tls.Config{ServerName: host, RootCAs: p.caPool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS10}).Handshake()
		}, "the TLS handshake with an intercepted client failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counter := p.srv.metrics.handshakeFailures[tt.cause]
			for i := range 3 {
				conn := openTunnel(t, p, o.host())
				if err := tt.client(conn); err == nil {
					t.Fatal("the handshake succeeded")
				}
				want := float64(i + 1)
				waitFor(t, func() bool { return testutil.ToFloat64(counter) == want },
					"robotsgate_mitm_client_handshake_failures_total{cause=%q} to reach %v", tt.cause, want)
			}
			var warns []string
			for line := range strings.Lines(p.logs.String()) {
				if strings.Contains(line, `"cause":"`+tt.cause.String()+`"`) {
					warns = append(warns, line)
				}
			}
			if len(warns) != 1 {
				t.Fatalf("%d warnings for cause %s, want 1 (three failures within a minute):\n%s", len(warns), tt.cause, p.logs)
			}
			for _, want := range []string{`"level":"WARN"`, tt.warn, `"client":"127.0.0.1:`, `"host":"` + host + `"`} {
				if !strings.Contains(warns[0], want) {
					t.Errorf("the warning lacks %s:\n%s", want, warns[0])
				}
			}
		})
	}
	for c := range handshakeCauses {
		if got := testutil.ToFloat64(p.srv.metrics.handshakeFailures[c]); got != 3 {
			t.Errorf("cause %s counted %v times, want 3: each failure under its own cause only", c, got)
		}
	}
}

// waitFor polls cond until it holds, failing the test after testTimeout.
func waitFor(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited "+testTimeout.String()+" for "+format, args...)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWarnLimiter checks a kind of warning goes through once per interval,
// the next one saying how many were held back, each kind on its own.
func TestWarnLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newWarnLimiter(time.Minute)
		type step struct {
			after time.Duration
			kind  string
			ok    bool
			held  int
		}
		for i, s := range []step{
			{0, "a", true, 0},
			{0, "a", false, 0},
			{0, "b", true, 0}, // another kind is not held back by a's
			{30 * time.Second, "a", false, 0},
			{29 * time.Second, "a", false, 0},
			{time.Second, "a", true, 3}, // a minute after the first: three held back
			{time.Second, "a", false, 0},
			{time.Minute, "a", true, 1},
			{time.Hour, "a", true, 0},
			{0, "b", true, 0},
		} {
			time.Sleep(s.after)
			if ok, held := l.allow(s.kind); ok != s.ok || held != s.held {
				t.Errorf("step %d: allow(%q) = %v, %d; want %v, %d", i, s.kind, ok, held, s.ok, s.held)
			}
		}
	})
}

// TestUntrustedOriginNamesTheFix: an origin whose certificate no trusted
// CA signed fails robots.txt (403, complete disallow) and forwarding (502);
// both answers and the log name ROBOTSGATE_UPSTREAM_CA_FILE, the audit
// record keeps the short cause.
func TestUntrustedOriginNamesTheFix(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots, tls: true})
	p := startProxy(t, proxyConfig{mitm: true, roots: x509.NewCertPool()}) // trusts no origin
	c := p.client()

	resp, body := do(t, c, "GET", o.URL+"/page", ua(curlUA))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "ROBOTSGATE_UPSTREAM_CA_FILE") ||
		!strings.Contains(body, "TLS certificate not trusted") {
		t.Errorf("GET /page of an untrusted origin = %d, want 403 naming the cause and ROBOTSGATE_UPSTREAM_CA_FILE:\n%s", resp.StatusCode, body)
	}
	// robots.txt itself is always forwarded: forwarding fails alike.
	resp, body = do(t, c, "GET", o.URL+"/robots.txt", ua(curlUA))
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "ROBOTSGATE_UPSTREAM_CA_FILE") ||
		!strings.Contains(body, "TLS certificate not trusted") {
		t.Errorf("GET /robots.txt of an untrusted origin = %d, want 502 naming the cause and ROBOTSGATE_UPSTREAM_CA_FILE:\n%s", resp.StatusCode, body)
	}
	// A trusted origin that fails otherwise gets no such hint.
	down := startOrigin(t, originConfig{robots: testRobots})
	down.Close()
	if resp, body := do(t, c, "GET", down.URL+"/page", ua(curlUA)); resp.StatusCode != http.StatusForbidden || strings.Contains(body, "ROBOTSGATE_UPSTREAM_CA_FILE") {
		t.Errorf("GET of an origin that is down = %d, want 403 without the CA hint:\n%s", resp.StatusCode, body)
	}

	logs := p.logs.String()
	var warns int
	for line := range strings.Lines(logs) {
		if strings.Contains(line, "does not trust an origin's TLS certificate") {
			warns++
			if !strings.Contains(line, "ROBOTSGATE_UPSTREAM_CA_FILE") || !strings.Contains(line, `"origin":"`+o.URL+`"`) {
				t.Errorf("the warning lacks the setting or the origin:\n%s", line)
			}
		}
	}
	if warns != 1 {
		t.Errorf("%d warnings about the origin's certificate, want 1 (the second within the minute held back):\n%s", warns, logs)
	}
	recs := p.records()
	if r := recordFor(t, recs, "GET", o.URL+"/page"); strings.Contains(r.Reason, "ROBOTSGATE_") || !strings.Contains(r.Reason, "TLS certificate not trusted") {
		t.Errorf("the record's reason is %q; want the short cause, without the hint", r.Reason)
	}
	if r := recordFor(t, recs, "GET", o.URL+"/robots.txt"); r.Error != "TLS certificate not trusted" {
		t.Errorf("the record's error is %q; want the short cause", r.Error)
	}
}
