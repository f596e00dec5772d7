// Package proxy is robotsgate's HTTP face: a forward proxy, built on
// goproxy, that judges every request against the target origin's
// robots.txt and answers 403 for what the crawler may not fetch.
//
// Plain HTTP requests are judged by their URL. HTTPS is intercepted with
// robotsgate's own CA (package mitm) so every request inside a tunnel is
// judged by its path and by its own Host and User-Agent; with interception
// off, a tunnel is judged by host alone. Requests addressed to the proxy
// itself serve /ca.pem, /healthz and /metrics. Every decision becomes one
// audit record.
package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elazarl/goproxy"

	"robotsgate/cache"
	"robotsgate/proxy/audit"
	"robotsgate/proxy/mitm"
	"robotsgate/robots"
)

// Mode says what a disallowed request gets.
type Mode string

const (
	// ModeEnforce answers 403 and never contacts the origin.
	ModeEnforce Mode = "enforce"
	// ModeAudit records the verdict and forwards the request anyway.
	ModeAudit Mode = "audit"
)

// RulesCache gives the robots.txt of an origin, fetched once and kept
// (package cache does this).
type RulesCache interface {
	Get(ctx context.Context, origin string) (*robots.FetchResult, cache.Info, error)
}

// Options configure a Server. Rules and Audit are required.
type Options struct {
	Mode  Mode
	Rules RulesCache
	Audit *audit.Writer
	// Issuer intercepts HTTPS; nil tunnels CONNECT blind, judged by host.
	Issuer *mitm.Issuer
	// CA is offered at /ca.pem; nil when interception is off.
	CA       *mitm.CA
	Upstream UpstreamOptions
	// ClientIdleTimeout closes a client connection, tunnels included,
	// after this long without a byte either way.
	ClientIdleTimeout time.Duration
	Logger            *slog.Logger
	Metrics           *Metrics // nil: no /metrics
	Version           string
}

// UpstreamOptions bound every connection to an origin.
type UpstreamOptions struct {
	DialTimeout           time.Duration
	TLSHandshakeTimeout   time.Duration
	ResponseHeaderTimeout time.Duration
	IdleConnTimeout       time.Duration
	// RootCAs verify origins; nil means the system roots.
	RootCAs *x509.CertPool
}

// Server is the proxy. Serve it on a listener; stop it with Shutdown.
type Server struct {
	opts      Options
	log       *slog.Logger
	goproxy   *goproxy.ProxyHttpServer
	transport *http.Transport
	http      *http.Server
	conns     *connTracker

	inflight  inflightRequests
	stopping  atomic.Bool
	auditErrs atomic.Bool // the audit log failed once; said so
}

// New builds a Server.
func New(opts Options) (*Server, error) {
	if opts.Rules == nil || opts.Audit == nil {
		return nil, errors.New("proxy: Options.Rules and Options.Audit are required")
	}
	switch opts.Mode {
	case ModeEnforce, ModeAudit:
	case "":
		opts.Mode = ModeEnforce
	default:
		return nil, fmt.Errorf("proxy: unknown mode %q", opts.Mode)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ClientIdleTimeout <= 0 {
		opts.ClientIdleTimeout = 2 * time.Minute
	}
	s := &Server{opts: opts, log: opts.Logger, conns: newConnTracker(opts.ClientIdleTimeout)}
	s.transport = newTransport(opts.Upstream)

	gp := goproxy.NewProxyHttpServer()
	// goproxy's defaults read the process's HTTP(S)_PROXY and skip TLS
	// verification; replace both.
	gp.Tr = s.transport
	gp.ConnectDial = nil
	gp.ConnectDialWithReq = nil
	gp.Logger = goproxyLogger{s.log}
	gp.NonproxyHandler = s.endpoints()
	gp.OnRequest().HandleConnectFunc(s.handleConnect)
	gp.OnRequest().DoFunc(s.handleRequest)
	s.goproxy = gp

	s.http = &http.Server{
		Handler:           gp,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       opts.ClientIdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// Serve accepts proxy clients on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	err := s.http.Serve(s.conns.listen(ln))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve proxy: %w", err)
}

// Shutdown stops accepting clients and lets requests in flight, inside
// tunnels too, finish until ctx ends; then it closes every connection.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopping.Store(true)
	err := s.http.Shutdown(ctx)
	select {
	case <-s.inflight.idle():
		s.conns.drain(ctx)
	case <-ctx.Done():
		err = errors.Join(err, fmt.Errorf("requests still in flight at the end of the grace period: %w", ctx.Err()))
	}
	s.conns.closeAll()
	s.transport.CloseIdleConnections()
	return err
}

// inflightRequests counts the requests being handled so that Shutdown can
// wait for them. A sync.WaitGroup does not fit: requests inside open
// tunnels keep arriving while Shutdown waits, and WaitGroup panics when an
// Add from zero races with Wait. The zero value is ready to use.
type inflightRequests struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // made by idle while n > 0, closed when n drops to 0
}

func (r *inflightRequests) add() {
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
}

func (r *inflightRequests) done() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n--
	if r.n == 0 && r.zero != nil {
		close(r.zero)
		r.zero = nil
	}
}

// idle returns a channel closed once no request is in flight.
func (r *inflightRequests) idle() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.zero == nil {
		r.zero = make(chan struct{})
	}
	zero := r.zero
	if r.n == 0 {
		close(zero)
		r.zero = nil
	}
	return zero
}

func newTransport(o UpstreamOptions) *http.Transport {
	dialer := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 nil, // never the process's own HTTP_PROXY: that could be this proxy
		DialContext:           dialer.DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   o.TLSHandshakeTimeout,
		ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		IdleConnTimeout:       o.IdleConnTimeout,
		ExpectContinueTimeout: time.Second,
		MaxIdleConnsPerHost:   32,
		ForceAttemptHTTP2:     true,
	}
}

// goproxyLogger routes goproxy's own messages to slog. They are mostly
// about clients going away, so debug, except failed handshakes with
// intercepting clients, which usually mean the client does not trust the
// CA.
type goproxyLogger struct{ log *slog.Logger }

func (l goproxyLogger) Printf(format string, args ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	if strings.Contains(msg, "Cannot handshake client") {
		l.log.Warn("TLS handshake with an intercepted client failed; does it trust the robotsgate CA (GET /ca.pem)?", "detail", msg)
		return
	}
	l.log.Debug("goproxy", "detail", msg)
}
