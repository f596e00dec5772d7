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

// startTimeout bounds how long a redis-server may take to answer PING.
const startTimeout = 10 * time.Second

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
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (.ci/run installs it)")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), port: freePort(t)}
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
	s.Start()
	return s
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
// until it answers PING. Its data is gone: nothing was saved.
func (s *Server) Start() {
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
		s.t.Fatalf("redistest: redis-server on %s did not answer PING within %v: %v\n%s", s.Addr(), startTimeout, err, s.log())
	}
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

// waitReady polls the server until it answers PING, the process exits, or
// startTimeout passes. It waits for the port to accept connections first,
// as go-redis logs each connection refused.
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
		select {
		case <-ctx.Done():
			return err
		case <-s.waited:
			return errors.New("redis-server exited")
		case <-tick.C:
		}
	}
	rdb := redis.NewClient(s.options(0))
	defer rdb.Close()
	for {
		err := rdb.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-s.waited:
			return errors.New("redis-server exited")
		case <-tick.C:
		}
	}
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
