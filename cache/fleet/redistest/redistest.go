// Package redistest runs a real redis-server (Debian's binary) for tests:
// on a free port of 127.0.0.1, in a temporary directory, with nothing
// saved to disk, and stopped when the test ends. A test may stop it and
// start it again on the same port, to see a Redis die and come back.
package redistest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startTimeout bounds how long a redis-server may take to answer.
const startTimeout = 10 * time.Second

// askTimeout bounds each INFO to a starting server: what holds the port
// may be another process that never answers, and the wait must notice the
// server's exit in between.
const askTimeout = 250 * time.Millisecond

// startTries bounds the ports Start tries: a port free a moment ago may be
// taken, by a test running in parallel, before redis-server binds it.
const startTries = 5

// Option changes how the server runs.
type Option func(*config)

type config struct {
	password string
	tls      bool
}

// WithPassword makes the server require password (requirepass).
func WithPassword(password string) Option {
	return func(c *config) { c.password = password }
}

// WithTLS makes the server speak TLS only, with a certificate for
// 127.0.0.1 signed by a CA made for the test (Server.CAs).
func WithTLS() Option {
	return func(c *config) { c.tls = true }
}

// Server is a redis-server run for one test.
type Server struct {
	t       testing.TB
	bin     string
	dir     string
	port    int
	conf    config
	cas     *x509.CertPool
	tlsArgs []string

	cmd    *exec.Cmd
	waited chan struct{} // closed when cmd has exited
}

// Start runs a redis-server for t, stopped when t ends. It skips t when
// redis-server is not installed.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	return start(t, freePort, opts...)
}

// start is Start, trying the ports nextPort returns until redis-server
// runs on one, startTries at most.
func start(t testing.TB, nextPort func(testing.TB) int, opts ...Option) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (.ci/run installs it)")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	for _, o := range opts {
		o(&s.conf)
	}
	if s.conf.tls {
		s.makeCerts()
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("redistest: the log of redis-server:\n%s", s.log())
		}
	})
	for try := 1; ; try++ {
		s.port = nextPort(t)
		err := s.run()
		if err == nil {
			return s
		}
		if try == startTries {
			t.Fatalf("redistest: redis-server did not start on any of %d ports, the last %s: %v\n%s", startTries, s.Addr(), err, s.log())
		}
		t.Logf("redistest: redis-server did not start on %s, trying another port: %v", s.Addr(), err)
	}
}

// URL is the redis:// (or rediss://) URL of the server, with its password.
func (s *Server) URL() string {
	u := url.URL{Scheme: "redis", Host: s.Addr()}
	if s.conf.tls {
		u.Scheme = "rediss"
	}
	if s.conf.password != "" {
		u.User = url.UserPassword("", s.conf.password)
	}
	return u.String()
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// CAs verify the server's certificate; nil without WithTLS.
func (s *Server) CAs() *x509.CertPool { return s.cas }

// Start starts the server again after Stop, on the same port, and waits
// until it answers. Its data is gone: nothing was saved.
func (s *Server) Start() {
	s.t.Helper()
	if err := s.run(); err != nil {
		s.t.Fatalf("redistest: redis-server did not start again on %s: %v\n%s", s.Addr(), err, s.log())
	}
}

// run starts redis-server on s.port and waits until it answers; if it
// does not, run stops it and says why.
func (s *Server) run() error {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatal("redistest: Start while the server runs")
	}
	port := []string{"--port", strconv.Itoa(s.port)}
	if s.conf.tls {
		port = append([]string{"--port", "0", "--tls-port", strconv.Itoa(s.port)}, s.tlsArgs...)
	}
	args := append([]string{
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--logfile", s.logFile(),
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
	}, port...)
	if s.conf.password != "" {
		args = append(args, "--requirepass", s.conf.password)
	}
	cmd := exec.CommandContext(s.t.Context(), s.bin, args...)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redistest: starting %s: %v", s.bin, err)
	}
	s.cmd, s.waited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(s.waited)
	}()
	if err := s.waitReady(); err != nil {
		s.Stop()
		return err
	}
	return nil
}

func (s *Server) logFile() string { return filepath.Join(s.dir, "redis.log") }

// log returns what the server logged, or why it cannot be read.
func (s *Server) log() []byte {
	b, err := os.ReadFile(s.logFile())
	if err != nil {
		return []byte(err.Error())
	}
	return b
}

// Stop kills the server, as a crash would, and waits until it has exited.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.waited
	s.cmd = nil
}

// Raw returns a go-redis client of database db, closed when the test ends:
// to look at what a test wrote, or to write what no Client would.
func (s *Server) Raw(db int) *redis.Client {
	rdb := redis.NewClient(s.options(db))
	s.t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func (s *Server) options(db int) *redis.Options {
	o := &redis.Options{Addr: s.Addr(), Password: s.conf.password, DB: db, Protocol: 2}
	if s.conf.tls {
		o.TLSConfig = &tls.Config{RootCAs: s.cas, MinVersion: tls.VersionTLS12}
	}
	return o
}

// Keys returns the keys of database 0 that start with prefix.
func (s *Server) Keys(prefix string) []string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 5*time.Second)
	defer cancel()
	rdb := redis.NewClient(s.options(0))
	defer rdb.Close()
	keys, err := rdb.Keys(ctx, escapeGlob(prefix)+"*").Result()
	if err != nil {
		s.t.Fatalf("redistest: KEYS %s*: %v", prefix, err)
	}
	return keys
}

// escapeGlob quotes the characters KEYS reads as a pattern.
func escapeGlob(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(s)
}

// waitReady polls the server until it answers INFO, the process exits, or
// startTimeout passes. It waits for the port to accept connections first,
// as go-redis logs each connection refused. What answers must be this
// redis-server: when another process holds the port, it exits, but the
// other may answer first.
func (s *Server) waitReady() error {
	ctx, cancel := context.WithTimeout(s.t.Context(), startTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var dialer net.Dialer
	for {
		conn, err := dialer.DialContext(ctx, "tcp", s.Addr())
		if err == nil {
			conn.Close()
			break
		}
		if stop := s.pause(ctx, tick); stop != nil {
			return fmt.Errorf("%w; the last dial: %w", stop, err)
		}
	}
	o := s.options(0)
	o.ContextTimeoutEnabled = true
	rdb := redis.NewClient(o)
	defer rdb.Close()
	for {
		askCtx, cancelAsk := context.WithTimeout(ctx, askTimeout)
		info, err := rdb.Info(askCtx, "server").Result()
		cancelAsk()
		if err == nil {
			return s.isOurs(info)
		}
		if stop := s.pause(ctx, tick); stop != nil {
			return fmt.Errorf("%w; the last INFO: %w", stop, err)
		}
	}
}

// pause waits for the next tick, and returns an error instead when the
// process has exited or ctx has ended.
func (s *Server) pause(ctx context.Context, tick *time.Ticker) error {
	select {
	case <-tick.C:
		return nil
	case <-s.waited:
	case <-ctx.Done():
	}
	select {
	case <-s.waited:
		return errors.New("redis-server exited")
	default:
		return ctx.Err()
	}
}

// isOurs returns an error unless this Server's process gave info, the
// answer to INFO server: another may hold the port.
func (s *Server) isOurs(info string) error {
	want := "process_id:" + strconv.Itoa(s.cmd.Process.Pid)
	for line := range strings.Lines(info) {
		if strings.TrimSpace(line) == want {
			return nil
		}
	}
	return fmt.Errorf("another process answers on %s", s.Addr())
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// makeCerts writes a CA and a server certificate for 127.0.0.1 into the
// server's directory, and keeps the CA in s.cas.
func (s *Server) makeCerts() {
	s.t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		s.t.Fatalf("redistest: CA key: %v", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		s.t.Fatalf("redistest: CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		s.t.Fatalf("redistest: CA certificate: %v", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		s.t.Fatalf("redistest: server key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		s.t.Fatalf("redistest: server certificate: %v", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		s.t.Fatalf("redistest: server key: %v", err)
	}
	caFile, certFile, keyFile := filepath.Join(s.dir, "ca.pem"), filepath.Join(s.dir, "server.pem"), filepath.Join(s.dir, "server-key.pem")
	for _, f := range []struct {
		path, kind string
		der        []byte
	}{{caFile, "CERTIFICATE", caDER}, {certFile, "CERTIFICATE", der}, {keyFile, "PRIVATE KEY", keyDER}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), 0o600); err != nil {
			s.t.Fatalf("redistest: %v", err)
		}
	}
	s.cas = x509.NewCertPool()
	s.cas.AddCert(ca)
	s.tlsArgs = []string{
		"--tls-cert-file", certFile,
		"--tls-key-file", keyFile,
		"--tls-ca-cert-file", caFile,
		"--tls-auth-clients", "no",
	}
}
