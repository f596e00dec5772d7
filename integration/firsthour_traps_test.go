package integration

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"robotsgate/cache/fleet/redistest"
)

// Issue 24, "what a newcomer met": each trap of the first hour says what
// to do about it.

// TestUntrustingClientWarned: a client that does not trust robotsgate's CA
// fails its handshake in the tunnel; robotsgate counts it and warns, with
// where to download ca.pem, the client and the host.
func TestUntrustingClientWarned(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, true, map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: *\nAllow: /\n")})
	p := startProxy(t, upstreamCA(t, o))
	const failures = `robotsgate_mitm_client_handshake_failures_total{cause="untrusted_ca"}`
	if n := metricValue(t, p, failures); n != 0 {
		t.Fatalf("%s = %v before any client, want 0", failures, n)
	}

	for range 2 {
		conn, answer := p.connect(t, o.addr, crawlerUA)
		if answer.status != http.StatusOK {
			t.Fatalf("CONNECT %s: status %d", o.addr, answer.status)
		}
		// Trusts the origin's own certificate, not robotsgate's CA.
		roots := x509.NewCertPool()
		roots.AddCert(o.Certificate())
		err := tls.Client(conn, &tls.Config{ServerName: "127.0.0.1", RootCAs: roots}).Handshake()
		conn.Close()
		if err == nil {
			t.Fatal("a client without robotsgate's CA completed the handshake")
		}
	}

	rec, err := p.output.waitForJSON(requestTimeout, p.exited, func(rec map[string]any) bool {
		msg, _ := rec["msg"].(string)
		return rec["level"] == "WARN" && strings.Contains(msg, "does the client trust ca.pem?")
	})
	if err != nil {
		t.Fatalf("no warning about the CA: %v\noutput:\n%s", err, p.output)
	}
	msg, _ := rec["msg"].(string)
	if want := "download it from " + p.url.String() + "/ca.pem"; !strings.Contains(msg, want) {
		t.Errorf("the warning %q does not say %q", msg, want)
	}
	if client, _ := rec["client"].(string); !strings.HasPrefix(client, "127.0.0.1:") || rec["host"] != "127.0.0.1" || rec["cause"] != "untrusted_ca" {
		t.Errorf("the warning names client %v, host %v, cause %v; want the client's address, 127.0.0.1, untrusted_ca", rec["client"], rec["host"], rec["cause"])
	}
	deadline := time.Now().Add(requestTimeout)
	for metricValue(t, p, failures) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want 2", failures, metricValue(t, p, failures))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The second failure, within the minute, is counted but not warned
	// about again.
	if n := strings.Count(p.output.String(), "does the client trust ca.pem?"); n != 1 {
		t.Errorf("%d warnings for two failures within a minute, want 1", n)
	}
}

// TestSelfSignedOriginNamesTheSetting: an origin whose certificate
// robotsgate does not trust is refused (403, robots.txt unreachable) or
// fails (502, robots.txt itself), and both answers and the log name
// ROBOTSGATE_UPSTREAM_CA_FILE; the audit record keeps the short cause.
func TestSelfSignedOriginNamesTheSetting(t *testing.T) {
	t.Parallel()
	// httptest's certificate is self-signed, and the proxy gets no
	// upstreamCA. The origin need not log each refusal of its certificate.
	srv := httptest.NewUnstartedServer(robotsTxt("User-agent: *\nAllow: /\n"))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	o := &origin{Server: srv, addr: srv.Listener.Addr().String()}
	p := startProxy(t)
	client := p.client(t)

	for _, c := range []struct {
		path   string
		status int
	}{
		{"/page", http.StatusForbidden},
		{"/robots.txt", http.StatusBadGateway},
	} {
		r := get(t, client, o.base()+c.path, crawlerUA)
		if r.status != c.status || !strings.Contains(string(r.body), "ROBOTSGATE_UPSTREAM_CA_FILE") ||
			!strings.Contains(string(r.body), "TLS certificate not trusted") {
			t.Errorf("GET %s: status %d, want %d naming the cause and ROBOTSGATE_UPSTREAM_CA_FILE:\n%s", c.path, r.status, c.status, r.body)
		}
	}
	rec, err := p.output.waitForJSON(requestTimeout, p.exited, func(rec map[string]any) bool {
		msg, _ := rec["msg"].(string)
		return rec["level"] == "WARN" && strings.Contains(msg, "ROBOTSGATE_UPSTREAM_CA_FILE")
	})
	if err != nil {
		t.Fatalf("no warning naming ROBOTSGATE_UPSTREAM_CA_FILE: %v\noutput:\n%s", err, p.output)
	}
	if rec["origin"] != o.base() {
		t.Errorf("the warning names the origin %v, want %s", rec["origin"], o.base())
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	recs := p.audit()
	if r := auditFor(t, recs, o.base()+"/page"); r.Status != http.StatusForbidden || !strings.Contains(r.Reason, "TLS certificate not trusted") ||
		strings.Contains(r.Reason, "ROBOTSGATE_") {
		t.Errorf("record of /page: status %d, reason %q; want 403 and the short cause", r.Status, r.Reason)
	}
	if r := auditFor(t, recs, o.base()+"/robots.txt"); r.Status != http.StatusBadGateway || r.Error != "TLS certificate not trusted" {
		t.Errorf("record of /robots.txt: status %d, error %q; want 502 and the short cause", r.Status, r.Error)
	}
}

// TestPIDFile: ROBOTSGATE_PID_FILE holds the process's ID once it
// listens, so that README's logrotate line signals this process; it is
// gone after a clean stop.
func TestPIDFile(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "robotsgate.pid")
	p := startProxy(t, "ROBOTSGATE_PID_FILE="+pidFile)
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("no pid file once listening: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSuffix(string(data), "\n"))
	if err != nil || pid != p.cmd.Process.Pid || !strings.HasSuffix(string(data), "\n") {
		t.Fatalf("pid file holds %q, want %d and a newline", data, p.cmd.Process.Pid)
	}
	// kill -HUP "$(cat FILE)", as logrotate's postrotate does.
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if _, err := p.output.waitForJSON(requestTimeout, p.exited, func(rec map[string]any) bool {
		return rec["msg"] == "reopened the audit log"
	}); err != nil {
		t.Fatalf("SIGHUP to the pid in the file did not reopen the audit log: %v", err)
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Stat(pidFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file still there after a clean stop: %v", err)
	}

	// One that cannot be written stops the start, naming the variable.
	missing := filepath.Join(t.TempDir(), "no-such-dir", "robotsgate.pid")
	code, _, stderr := runBinary(t, "", []string{"ROBOTSGATE_LISTEN=127.0.0.1:0", "ROBOTSGATE_MITM=false", "ROBOTSGATE_PID_FILE=" + missing})
	if code != 2 || !strings.Contains(stderr, "ROBOTSGATE_PID_FILE") || !strings.Contains(stderr, "no-such-dir") {
		t.Errorf("with an unwritable pid file: exit %d, want 2 naming ROBOTSGATE_PID_FILE and the file\nstderr:\n%s", code, stderr)
	}
}

// TestRedisCredentialsRefused: robotsgate will not start on a Redis that
// refuses its password (exit 2, naming ROBOTSGATE_REDIS_URL); one whose
// password changes while it runs serves on alone, and /healthz says why.
func TestRedisCredentialsRefused(t *testing.T) {
	t.Parallel()
	const password = "right horse"
	redis := redistest.Start(t, redistest.WithPassword(password))
	wrong := url.URL{Scheme: "redis", User: url.UserPassword("", "wrong battery"), Host: redis.Addr()}
	code, _, stderr := runBinary(t, "", []string{"ROBOTSGATE_LISTEN=127.0.0.1:0", "ROBOTSGATE_MITM=false", "ROBOTSGATE_REDIS_URL=" + wrong.String()})
	if code != 2 || !strings.Contains(stderr, "ROBOTSGATE_REDIS_URL") || !strings.Contains(stderr, "WRONGPASS") {
		t.Errorf("with a wrong Redis password: exit %d, want 2 naming ROBOTSGATE_REDIS_URL and Redis's answer\nstderr:\n%s", code, stderr)
	}
	if strings.Contains(stderr, "battery") {
		t.Errorf("the message shows the password:\n%s", stderr)
	}
	if strings.Contains(stderr, "robotsgate listening") {
		t.Errorf("robotsgate listened before it stopped:\n%s", stderr)
	}

	// Unreachable at start is no error: it works alone and retries.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := "redis://" + closed.Addr().String()
	closed.Close()
	alone := startProxy(t, "ROBOTSGATE_REDIS_URL="+nowhere)
	if h := get(t, directClient(t), alone.url.String()+"/healthz", "test"); h.status != http.StatusOK || !strings.Contains(string(h.body), "redis: unreachable") {
		t.Errorf("/healthz with Redis unreachable: %d %q", h.status, h.body)
	}

	// The password changes on Redis while robotsgate runs.
	p := startProxy(t, "ROBOTSGATE_REDIS_URL="+redis.URL())
	admin := redis.Raw(0)
	if err := admin.ConfigSet(t.Context(), "requirepass", "new password").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(t.Context(), "CLIENT", "KILL", "TYPE", "normal").Err(); err != nil { // the admin's own is skipped
		t.Fatal(err)
	}
	deadline := time.Now().Add(requestTimeout)
	for {
		h := get(t, directClient(t), p.url.String()+"/healthz", "test")
		if h.status != http.StatusOK {
			t.Fatalf("/healthz: status %d, want 200: the instance serves alone", h.status)
		}
		if strings.Contains(string(h.body), "refuses robotsgate's credentials") && strings.Contains(string(h.body), "ROBOTSGATE_REDIS_URL") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz does not say Redis refuses the credentials: %q", h.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
