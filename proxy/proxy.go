// Package proxy is robotsgate's HTTP face: a forward proxy that judges
// every request against the target origin's robots.txt and answers 403 for
// what the crawler may not fetch.
//
// Every request, read plainly or inside a tunnel, becomes one canonical
// target (target.go) that is judged and then forwarded byte for byte, never
// re-encoded: the request the gate judges is the request the origin gets.
// Requests are read by net/http servers with bounded headers and timeouts.
// goproxy (github.com/elazarl/goproxy) does one thing here: it takes each
// CONNECT, asks handleConnect what to do, and hijacks the connection,
// either to write handleConnect's refusal and close it, or to hand it to
// serveTunnel, which answers the CONNECT itself; it never dials, forwards
// or intercepts anything. HTTPS is intercepted
// with robotsgate's own CA (package mitm) and the requests inside are
// served like plain ones; with interception off a TLS tunnel is judged by
// host alone, and plain HTTP inside a tunnel is always read and judged.
// Requests addressed to the proxy itself serve /ca.pem, /healthz and
// /metrics. Every decision becomes one audit record.
package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elazarl/goproxy"
	"github.com/prometheus/client_golang/prometheus"

	"robotsgate/cache"
	"robotsgate/proxy/audit"
	"robotsgate/proxy/destination"
	"robotsgate/proxy/identity"
	"robotsgate/proxy/live"
	"robotsgate/proxy/mitm"
	"robotsgate/proxy/pace"
	"robotsgate/proxy/signing"
	"robotsgate/robots/fetch"
)

// RulesCache gives the robots.txt of an origin, fetched once and kept
// (package cache does this), and collects its own metrics, named with
// RulesMetricsPrefix.
type RulesCache interface {
	Get(ctx context.Context, origin string) (*fetch.Result, cache.Info, error)
	prometheus.Collector
}

// RulesMetricsPrefix starts the names of the rules cache's metrics
// (cache.Options.MetricsPrefix), as README.md documents them.
const RulesMetricsPrefix = "robotsgate_robots_cache"

// Options configure a Server. Rules and Audit are required. The metrics
// of Rules and Issuer are served at /metrics with the proxy's own.
type Options struct {
	Mode  Mode
	Rules RulesCache
	Audit *audit.Writer
	// AuditOnError: "" means AuditRefuse.
	AuditOnError AuditOnError
	// Issuer intercepts HTTPS, its CA offered at /ca.pem; nil tunnels
	// TLS blind, judged by host.
	Issuer *mitm.Issuer
	// Identity decides whose rules apply to a request: a credential, a
	// pinned token or the User-Agent's; its metrics are served too. nil
	// judges every request by its User-Agent.
	Identity *identity.Gate
	// Pacer holds crawlers to the pace robots.txt asks, as PacePolicy
	// reads it; nil paces nothing. Its metrics are served too.
	Pacer      *pace.Pacer
	PacePolicy pace.Policy
	// PaceGroups says which hosts share a pace; nil: each origin alone.
	PaceGroups *pace.Grouper
	// Policy is the operator's policy: per crawler scope, rules and pace
	// bounds, per site rules and exceptions; nil judges by robots.txt
	// alone.
	Policy PolicySource
	// Usage says how sites' usage preferences are judged against the
	// crawlers' purposes.
	Usage UsageOptions
	// Signing says which forwarded requests are signed, and how.
	Signing SigningOptions
	// Files are the files put in force live (credentials, policy): /healthz
	// shows which version of each is in force, and since when.
	Files []func() live.State
	// Destinations are never connected to, for forwarded requests and
	// tunnels alike; nil denies nothing.
	Destinations *destination.Policy
	Upstream     UpstreamOptions
	Client       ClientLimits
	// Fleet is the state this instance shares with a fleet (Redis): its
	// health is shown at /healthz and its metrics are served; nil for an
	// instance that works alone.
	Fleet   FleetState
	Logger  *slog.Logger
	Version string
}

// FleetState is what an instance shares with the rest of its fleet
// (package cache/fleet keeps it in Redis).
type FleetState interface {
	// HealthDetail is one line for /healthz saying whether the state is
	// shared right now or this instance works alone, and since when.
	HealthDetail() string
	prometheus.Collector
}

// ClientLimits bound what one client can make the proxy hold. Zero values
// take the defaults named beside each field.
type ClientLimits struct {
	// IdleTimeout closes a client connection, tunnels included, after
	// this long without a byte either way (2m).
	IdleTimeout time.Duration
	// HeaderTimeout bounds reading a request's headers, and the wait for
	// the first byte through a new tunnel (10s).
	HeaderTimeout time.Duration
	// TLSTimeout bounds the TLS handshake of an intercepted tunnel (10s).
	TLSTimeout time.Duration
	// MaxHeaderBytes bounds a request's header section, request line
	// included (64 KiB); past it the client gets 431.
	MaxHeaderBytes int
	// MaxURLBytes bounds the request target (8 KiB); past it, 414.
	MaxURLBytes int
	// MaxConnections bounds the client connections open at once, tunnels
	// included; past it new clients get a quick 503. 0 means no bound.
	MaxConnections int
	// MaxConnectionsPerClient bounds those of one client (its IP address,
	// an IPv6 one by its /64) likewise, so that no client can take them
	// all. 0 means DefaultMaxConnectionsPerClient(MaxConnections), or no
	// bound when MaxConnections is 0.
	MaxConnectionsPerClient int
}

func (l *ClientLimits) setDefaults() {
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 2 * time.Minute
	}
	if l.HeaderTimeout <= 0 {
		l.HeaderTimeout = 10 * time.Second
	}
	if l.TLSTimeout <= 0 {
		l.TLSTimeout = 10 * time.Second
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 64 << 10
	}
	if l.MaxURLBytes <= 0 {
		l.MaxURLBytes = 8 << 10
	}
	if l.MaxConnectionsPerClient <= 0 && l.MaxConnections > 0 {
		l.MaxConnectionsPerClient = DefaultMaxConnectionsPerClient(l.MaxConnections)
	}
}

// UpstreamOptions bound every connection to an origin.
type UpstreamOptions struct {
	// DialTimeout bounds connecting, to the origin or to Proxy, and
	// resolving an origin's name for the destination policy when Proxy is
	// set.
	DialTimeout         time.Duration
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for an origin's response
	// headers, and for Proxy's answer to a blind tunnel's CONNECT.
	ResponseHeaderTimeout time.Duration
	IdleConnTimeout       time.Duration
	// MaxIdleConns bounds the idle connections to origins kept for reuse,
	// all origins together (1024); one origin may hold them all, so that
	// a burst of as many concurrent requests to it finds them open.
	MaxIdleConns int
	// MaxIdleConnsPerOrigin, when above zero, bounds one origin's share
	// of them: no more are kept than may be in flight to it at once.
	MaxIdleConnsPerOrigin int
	// RootCAs verify origins; nil means the system roots.
	RootCAs *x509.CertPool
	// Proxy, when set, is the HTTP proxy (http://host:port) every
	// connection to an origin goes through, with Basic credentials from
	// its user information; nil connects to origins directly.
	// Destinations judge the origin then, by the addresses its name
	// resolves to (a name that does not resolve is refused, unless they
	// deny nothing and no name is resolved), and never the proxy's own
	// address.
	Proxy *url.URL
}

// Server is the proxy. Run it on a listener until a context ends, or
// Serve it and stop it with Shutdown.
type Server struct {
	opts        Options
	log         *slog.Logger
	goproxy     *goproxy.ProxyHttpServer
	dialer      *net.Dialer    // to origins directly, judging their addresses
	upstream    *upstreamProxy // nil: origins are reached directly
	transport   *http.Transport
	endpoints   http.Handler
	metrics     *Metrics
	errorLog    *log.Logger // net/http's own complaints, at debug level
	copyBuffers bufferPool
	costly      *costlyGate
	signer      signing.Signer
	directories directoryCache
	// warnings holds back repeats of the warnings a client or an origin
	// can cause over and over (handshakes, untrusted origins).
	warnings *warnLimiter

	// clients reads requests from clients; tunnels reads the requests
	// inside tunnels, whose connections tunnelQueue hands it.
	clients     *http.Server
	tunnels     *http.Server
	tunnelQueue *connQueue
	conns       *connTracker

	stopping  atomic.Bool
	auditErrs atomic.Bool // a record was dropped once; said so
	records   sync.Pool   // *audit.Record, lent to finish
}

// New builds a Server.
func New(opts Options) (*Server, error) {
	if opts.Rules == nil || opts.Audit == nil {
		return nil, errors.New("proxy: Options.Rules and Options.Audit are required")
	}
	if opts.Usage.Mode == "" {
		opts.Usage.Mode = UsageEnforce
	}
	if opts.Usage.Responses == "" {
		opts.Usage.Responses = ResponsesRecord
	}
	if opts.Signing.TTL <= 0 {
		opts.Signing.TTL = time.Minute
	}
	switch opts.Mode {
	case ModeEnforce, ModeAudit:
	case "":
		opts.Mode = ModeEnforce
	default:
		return nil, fmt.Errorf("proxy: unknown mode %q", opts.Mode)
	}
	switch opts.AuditOnError {
	case AuditRefuse, AuditContinue:
	case "":
		opts.AuditOnError = AuditRefuse
	default:
		return nil, fmt.Errorf("proxy: unknown audit error policy %q", opts.AuditOnError)
	}
	var upstream *upstreamProxy
	if opts.Upstream.Proxy != nil {
		var err error
		if upstream, err = newUpstreamProxy(opts.Upstream, opts.Destinations, nil); err != nil {
			return nil, err
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Client.setDefaults()
	s := &Server{opts: opts, log: opts.Logger, upstream: upstream, costly: newCostlyGate(), warnings: newWarnLimiter(warnEvery),
		signer: signing.Signer{TTL: opts.Signing.TTL}}
	collected := []prometheus.Collector{opts.Rules}
	if opts.Issuer != nil { // a nil *Issuer in an interface is not nil
		collected = append(collected, opts.Issuer)
	}
	if opts.Identity != nil {
		collected = append(collected, opts.Identity)
	}
	if opts.Pacer != nil {
		collected = append(collected, opts.Pacer)
	}
	if opts.Fleet != nil {
		collected = append(collected, opts.Fleet)
	}
	if c, ok := opts.Policy.(prometheus.Collector); ok {
		collected = append(collected, c)
	}
	if opts.PaceGroups != nil && opts.PaceGroups.By() == pace.ByAddress {
		collected = append(collected, opts.PaceGroups)
	}
	s.metrics = newMetrics(opts.Version, collected...)
	opts.Audit.Watch(s.auditStateChanged)
	s.conns = newConnTracker(opts.Client.IdleTimeout, opts.Client.MaxConnections, opts.Client.MaxConnectionsPerClient)
	s.dialer = opts.Destinations.Dialer(net.Dialer{Timeout: opts.Upstream.DialTimeout, KeepAlive: 30 * time.Second})
	s.transport = newTransport(opts.Upstream, s.dialer)
	if s.upstream != nil {
		s.upstream.route(s.transport)
	}
	s.endpoints = s.newEndpoints()

	// goproxy's transport and dialers, and their defaults (the process's
	// HTTP(S)_PROXY, TLS unverified), serve only requests that are not
	// CONNECT and CONNECTs it accepts or intercepts itself: it gets
	// neither, handleConnect refuses or hijacks every one.
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = goproxyLogger{s.log}
	gp.OnRequest().HandleConnectFunc(s.handleConnect)
	s.goproxy = gp

	s.errorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)
	errorLog := s.errorLog
	s.clients = &http.Server{
		Handler:           http.HandlerFunc(s.serveClient),
		ReadHeaderTimeout: opts.Client.HeaderTimeout,
		IdleTimeout:       opts.Client.IdleTimeout,
		MaxHeaderBytes:    opts.Client.MaxHeaderBytes,
		ErrorLog:          errorLog,
	}
	s.tunnelQueue = newConnQueue()
	s.tunnels = &http.Server{
		Handler:           http.HandlerFunc(s.serveTunneled),
		ReadHeaderTimeout: opts.Client.HeaderTimeout,
		IdleTimeout:       opts.Client.IdleTimeout,
		MaxHeaderBytes:    opts.Client.MaxHeaderBytes,
		ErrorLog:          errorLog,
		ConnContext:       tunnelContext,
	}
	s.metrics.registerServer(s)
	return s, nil
}

// Serve accepts proxy clients on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	tunnelsDone := make(chan error, 1)
	go func() { tunnelsDone <- s.tunnels.Serve(s.tunnelQueue) }()
	err := s.clients.Serve(s.conns.listen(ln))
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	} else {
		s.tunnelQueue.Close()
	}
	if terr := <-tunnelsDone; terr != nil && !errors.Is(terr, http.ErrServerClosed) && !errors.Is(terr, net.ErrClosed) {
		err = errors.Join(err, terr)
	}
	if err != nil {
		return fmt.Errorf("serve proxy: %w", err)
	}
	return nil
}

// auditStateChanged logs the audit log failing (err) and working again
// (nil), saying what the proxy does meanwhile.
func (s *Server) auditStateChanged(err error) {
	switch {
	case err == nil:
		s.log.Info("the audit log can be written again")
	case s.opts.AuditOnError == AuditContinue:
		s.log.Error("the audit log cannot be written; SERVING ON WITHOUT A WORKING AUDIT LOG (ROBOTSGATE_AUDIT_ON_ERROR=continue): records are kept in memory, within a bound, until it can", "err", err)
	default:
		s.log.Error("the audit log cannot be written; refusing every request with 503 until it can (ROBOTSGATE_AUDIT_ON_ERROR=refuse)", "err", err)
	}
}

// Run serves clients on ln until ctx ends, then shuts down, letting
// requests in flight finish within grace (see Shutdown).
func (s *Server) Run(ctx context.Context, ln net.Listener, grace time.Duration) error {
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down", "grace", grace.String())
	graceCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := s.Shutdown(graceCtx); err != nil {
		// Requests cut at the end of the grace period are the operator's
		// choice of grace, not a failure of the proxy.
		s.log.Warn("shutdown was not clean", "err", err)
	}
	return <-served
}

// Shutdown stops accepting clients, closes idle connections and lets
// requests in flight, inside tunnels too, finish until ctx ends; then it
// closes every connection, blind tunnels and upgraded ones included.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopping.Store(true)
	var wg sync.WaitGroup
	var clientsErr, tunnelsErr error
	wg.Go(func() { clientsErr = s.clients.Shutdown(ctx) })
	wg.Go(func() { tunnelsErr = s.tunnels.Shutdown(ctx) })
	wg.Wait()
	err := errors.Join(clientsErr, tunnelsErr)
	if ctx.Err() != nil {
		err = fmt.Errorf("requests still in flight at the end of the grace period: %w", ctx.Err())
	} else {
		s.conns.drain(ctx)
	}
	s.conns.closeAll()
	s.transport.CloseIdleConnections()
	return err
}

// serveClient takes every request a client sends the proxy directly:
// CONNECT goes to goproxy, a path to the proxy's own endpoints, an
// absolute URL through the gate. CONNECTs and absolute URLs authenticate
// first; a CONNECT's credential travels in its request's context to the
// tunnel it opens.
func (s *Server) serveClient(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.RequestURI, "/") && r.Method != http.MethodConnect {
		s.endpoints.ServeHTTP(w, r)
		return
	}
	closeIfChunked(w, r)
	cred, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	if r.Method == http.MethodConnect {
		if cred != nil {
			r = r.WithContext(context.WithValue(r.Context(), credentialKey{}, cred))
		}
		s.goproxy.ServeHTTP(keepBuffered{w}, r)
		return
	}
	s.serveProxied(w, r, nil, cred)
}

// serveTunneled takes every request read inside a tunnel: each speaks for
// the credential its CONNECT presented, as long as that credential is in
// force; once a reload removed it, the tunnel is refused and closed.
func (s *Server) serveTunneled(w http.ResponseWriter, r *http.Request) {
	tun, _ := r.Context().Value(tunnelKey{}).(*tunnel)
	if tun == nil {
		http.Error(w, "robotsgate: request outside any tunnel", http.StatusInternalServerError)
		return
	}
	closeIfChunked(w, r)
	cred := tun.cred
	if cred != nil {
		if cred = s.opts.Identity.Current(cred); cred == nil {
			d := s.newDecision(r, tun)
			d.asked.url = describeRequest(r, tun)
			d.who.credential = tun.cred.Name
			p := d.failPage(http.StatusForbidden, "the proxy credential this tunnel was opened with is no longer valid; open a new one", nil)
			p.header.Set("Connection", "close")
			p.write(w, r)
			return
		}
	}
	s.serveProxied(w, r, tun, cred)
}

// ListensBeyondLoopback reports whether clients other than this host's can
// reach addr, a listener's address: then anyone who can reach it can use
// the proxy.
func ListensBeyondLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return !ok || !tcp.IP.IsLoopback()
}

// defaultMaxIdleConns is UpstreamOptions.MaxIdleConns when unset.
const defaultMaxIdleConns = 1024

// originSessions is how many origins' TLS sessions are kept to resume.
const originSessions = 1024

func newTransport(o UpstreamOptions, dialer *net.Dialer) *http.Transport {
	maxIdle := o.MaxIdleConns
	if maxIdle <= 0 {
		maxIdle = defaultMaxIdleConns
	}
	perOrigin := maxIdle
	if o.MaxIdleConnsPerOrigin > 0 {
		perOrigin = min(o.MaxIdleConnsPerOrigin, maxIdle)
	}
	return &http.Transport{
		Proxy:       nil, // never the process's own HTTP_PROXY, which could be this proxy; Options.Upstream.Proxy only
		DialContext: dialer.DialContext,
		// A new connection to an origin seen before resumes its TLS
		// session: no certificate chain to send and verify again.
		TLSClientConfig: &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12,
			ClientSessionCache: tls.NewLRUClientSessionCache(originSessions)},
		TLSHandshakeTimeout:   o.TLSHandshakeTimeout,
		ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		// An origin can be hostile too: its header section is bounded like
		// a client's, if more generously.
		MaxResponseHeaderBytes: 1 << 20,
		IdleConnTimeout:        o.IdleConnTimeout,
		ExpectContinueTimeout:  time.Second,
		// Idle connections are kept for as many requests to one origin as
		// were in flight at once: with fewer, every burst past them opens
		// (and then closes) connections, and TLS handshakes, again.
		MaxIdleConns:        maxIdle,
		MaxIdleConnsPerHost: perOrigin,
		ForceAttemptHTTP2:   true,
		// The origin gets the Accept-Encoding the client sent, or none: the
		// transport neither adds gzip nor unpacks answers behind its back.
		DisableCompression: true,
	}
}

// goproxyLogger routes goproxy's own messages, which are about a
// connection it could not hijack or a refusal it could not write (the
// client went away), to slog at debug level.
type goproxyLogger struct{ log *slog.Logger }

func (l goproxyLogger) Printf(format string, args ...any) {
	l.log.Debug("goproxy", "detail", strings.TrimSpace(fmt.Sprintf(format, args...)))
}
