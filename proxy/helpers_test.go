package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"robotsgate/cache"
	"robotsgate/proxy/audit"
	"robotsgate/proxy/destination"
	"robotsgate/proxy/egress"
	"robotsgate/proxy/identity"
	"robotsgate/proxy/live"
	"robotsgate/proxy/mitm"
	"robotsgate/proxy/pace"
	"robotsgate/robots/fetch"
)

// testRobots is the robots.txt test origins serve unless told otherwise.
// Line numbers matter: the 403 tests cite them.
const testRobots = "User-agent: curl\n" + // 1
	"Disallow: /private/\n" + // 2
	"\n" +
	"User-agent: *\n" + // 4
	"Disallow: /secret\n" + // 5
	"\n" +
	"User-agent: badbot\n" + // 7
	"Disallow: /\n" // 8

const (
	curlUA   = "curl/8.5.0" // token "curl"
	gptbotUA = "Mozilla/5.0 (compatible; GPTBot/1.0; +https://openai.com/gptbot)"
	badbotUA = "badbot/2.0"  // token "badbot": may fetch nothing
	noTokUA  = "Mozilla/5.0" // no product token: the "*" group applies
)

// testTimeout bounds every network wait in these tests; nothing is meant to
// come near it.
const testTimeout = 10 * time.Second

// lockedBuffer is an io.Writer that tests read while servers write to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// origin is a real HTTP(S) server on 127.0.0.1 serving a robots.txt and
// whatever handlers a test adds to its mux.
type origin struct {
	*httptest.Server
	mux   *http.ServeMux
	roots *x509.CertPool // trusts this origin's certificate (TLS origins)

	mu     sync.Mutex
	seen   []string // request URIs received, robots.txt fetches included
	robots int      // robots.txt requests received
}

type originConfig struct {
	robots       string // body of /robots.txt
	robotsStatus int    // 0 means 200
	tls          bool
	http2        bool // a TLS origin offers HTTP/2 by ALPN too
}

func startOrigin(t testing.TB, cfg originConfig) *origin {
	t.Helper()
	o := &origin{mux: http.NewServeMux()}
	o.mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.robots++
		o.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		if cfg.robotsStatus != 0 {
			w.WriteHeader(cfg.robotsStatus)
		}
		io.WriteString(w, cfg.robots)
	})
	o.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "origin page "+r.URL.Path+"\n")
	})
	o.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.seen = append(o.seen, r.RequestURI)
		o.mu.Unlock()
		o.mux.ServeHTTP(w, r)
	}))
	// Tests refuse this origin's certificate or break connections on
	// purpose; the origin need not log each time.
	o.Config.ErrorLog = log.New(io.Discard, "", 0)
	o.EnableHTTP2 = cfg.http2
	if cfg.tls {
		o.StartTLS()
		o.roots = x509.NewCertPool()
		o.roots.AddCert(o.Certificate())
	} else {
		o.Start()
	}
	t.Cleanup(o.Close)
	return o
}

// host is the origin's host:port.
func (o *origin) host() string { return o.Listener.Addr().String() }

// robotsURL is where the proxy fetches this origin's robots.txt.
func (o *origin) robotsURL() string { return o.URL + "/robots.txt" }

func (o *origin) saw(requestURI string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.seen {
		if s == requestURI {
			return true
		}
	}
	return false
}

func (o *origin) robotsFetches() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.robots
}

// proxyConfig is what a test varies about the Server under test.
type proxyConfig struct {
	mode  Mode
	mitm  bool
	roots *x509.CertPool // origins the proxy (and its robots.txt fetcher) trusts
	idle  time.Duration
	audit io.Writer // nil: a buffer the test reads with records()
	// onAuditError and client, when set, go to Options as they are.
	onAuditError AuditOnError
	client       ClientLimits
	destinations *destination.Policy
	identity     *identity.Gate
	pacer        *pace.Pacer
	pacePolicy   pace.Policy
	paceGroups   *pace.Grouper
	// policy and files go to Options.Policy and Options.Files.
	policy PolicySource
	files  []func() live.State
	// usage goes to Options.Usage; tdmrep makes the fetcher get
	// tdmrep.json too.
	usage  UsageOptions
	tdmrep bool
	// signing goes to Options.Signing.
	signing SigningOptions

	// upstreamIdle and upstreamIdlePerOrigin go to UpstreamOptions'
	// MaxIdleConns and MaxIdleConnsPerOrigin.
	upstreamIdle, upstreamIdlePerOrigin int

	// upstream is the upstream proxy of the Server and its robots.txt
	// fetcher, which destinations judges too.
	upstream *url.URL
	// upstreamHeaderTimeout bounds the wait for response headers, and
	// for the upstream proxy's answer to a blind CONNECT; 0 for no bound.
	upstreamHeaderTimeout time.Duration
	// resolver, when set, resolves the names the Server judges before the
	// upstream proxy gets them; the fetcher resolves its own as usual.
	resolver egress.Resolver
}

// testProxy is a real Server, over a real cache and robots.txt fetcher,
// serving on 127.0.0.1.
type testProxy struct {
	t       testing.TB
	srv     *Server
	addr    string
	url     *url.URL
	ca      *mitm.CA
	rules   *cache.Cache[*fetch.Result]
	auditW  *audit.Writer
	auditTo *lockedBuffer
	logs    *lockedBuffer
	ln      *notifyListener
	served  chan error

	stopOnce sync.Once
	stopErr  error
}

// newTestServer builds the Server (not serving) and its dependencies,
// released when the test ends.
func newTestServer(t testing.TB, cfg proxyConfig) *testProxy {
	t.Helper()
	p := &testProxy{t: t, logs: &lockedBuffer{}, served: make(chan error, 1)}
	fetchOpts := fetch.Options{UserAgent: "robotsgate-test", RootCAs: cfg.roots, Timeout: testTimeout, ConnectTimeout: testTimeout, UpstreamProxy: cfg.upstream, TDMRep: cfg.tdmrep}
	if cfg.destinations != nil {
		fetchOpts.DialControl = cfg.destinations.Control
	}
	fetcher := fetch.New(fetchOpts)
	t.Cleanup(fetcher.Close)
	cacheOpts := cache.DefaultOptions()
	cacheOpts.MetricsPrefix = RulesMetricsPrefix
	rules, err := cache.New(cacheOpts, fetcher.Load)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rules.Close)
	p.rules = rules

	sink := cfg.audit
	if sink == nil {
		p.auditTo = &lockedBuffer{}
		sink = p.auditTo
	}
	p.auditW = audit.NewWriter(sink, nil, audit.Options{})
	t.Cleanup(func() { p.auditW.Close() })

	opts := Options{
		Mode:  cfg.mode,
		Rules: rules,
		Audit: p.auditW,
		Upstream: UpstreamOptions{RootCAs: cfg.roots, Proxy: cfg.upstream, ResponseHeaderTimeout: cfg.upstreamHeaderTimeout,
			MaxIdleConns: cfg.upstreamIdle, MaxIdleConnsPerOrigin: cfg.upstreamIdlePerOrigin},
		Client:       cfg.client,
		AuditOnError: cfg.onAuditError,
		Destinations: cfg.destinations,
		Identity:     cfg.identity,
		Pacer:        cfg.pacer,
		PacePolicy:   cfg.pacePolicy,
		PaceGroups:   cfg.paceGroups,
		Policy:       cfg.policy,
		Files:        cfg.files,
		Usage:        cfg.usage,
		Signing:      cfg.signing,
		Logger:       slog.New(slog.NewJSONHandler(p.logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Version:      "test",
	}
	if cfg.mitm {
		ca, _, err := mitm.LoadOrCreateCA(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		issuer, err := mitm.NewIssuer(ca, mitm.IssuerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.ca, opts.Issuer = ca, issuer
	}
	if cfg.idle != 0 {
		opts.Client.IdleTimeout = cfg.idle
	}
	p.srv, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.resolver != nil {
		if p.srv.upstream, err = newUpstreamProxy(opts.Upstream, opts.Destinations, cfg.resolver); err != nil {
			t.Fatal(err)
		}
		p.srv.upstream.route(p.srv.transport)
	}
	return p
}

// startProxy builds a Server and serves it on a 127.0.0.1 port.
func startProxy(t testing.TB, cfg proxyConfig) *testProxy {
	t.Helper()
	p := newTestServer(t, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.ln = newNotifyListener(ln)
	p.addr = ln.Addr().String()
	p.url = &url.URL{Scheme: "http", Host: p.addr}
	go func() { p.served <- p.srv.Serve(p.ln) }()
	t.Cleanup(func() { p.shutdown(context.Background()) })
	return p
}

// shutdown stops the Server once, as main does, and reports Shutdown's
// error and Serve's.
func (p *testProxy) shutdown(ctx context.Context) error {
	p.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, testTimeout)
		defer cancel()
		p.stopErr = p.srv.Shutdown(ctx)
		select {
		case err := <-p.served:
			if err != nil {
				p.t.Errorf("Serve returned %v after Shutdown, want nil", err)
			}
		case <-time.After(testTimeout):
			p.t.Error("Serve did not return after Shutdown")
		}
	})
	return p.stopErr
}

// records stops the Server, closes the audit log and returns every record
// it holds, in order.
func (p *testProxy) records() []audit.Record {
	p.t.Helper()
	if err := p.shutdown(context.Background()); err != nil {
		p.t.Fatalf("Shutdown: %v", err)
	}
	if err := p.auditW.Close(); err != nil {
		p.t.Fatalf("closing the audit log: %v", err)
	}
	return decodeRecords(p.t, p.auditTo.String())
}

func decodeRecords(t testing.TB, s string) []audit.Record {
	t.Helper()
	var recs []audit.Record
	dec := json.NewDecoder(strings.NewReader(s))
	for dec.More() {
		var r audit.Record
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("audit log is not JSON lines: %v\n%s", err, s)
		}
		recs = append(recs, r)
	}
	return recs
}

// recordFor returns the only record for method and url.
func recordFor(t testing.TB, recs []audit.Record, method, url string) audit.Record {
	t.Helper()
	var found []audit.Record
	for _, r := range recs {
		if r.Method == method && r.URL == url {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one audit record for %s %s, got %d in %+v", method, url, len(found), recs)
	}
	return found[0]
}

// caPool trusts the proxy's CA.
func (p *testProxy) caPool() *x509.CertPool {
	pool := x509.NewCertPool()
	if p.ca != nil {
		pool.AddCert(p.ca.Certificate())
	}
	return pool
}

// client goes through the proxy and trusts its CA.
func (p *testProxy) client() *http.Client {
	tr := &http.Transport{
		Proxy:              http.ProxyURL(p.url),
		TLSClientConfig:    &tls.Config{RootCAs: p.caPool()},
		DisableCompression: true,
	}
	p.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: testTimeout}
}

// direct talks to the proxy's own endpoints.
func (p *testProxy) direct() *http.Client {
	tr := &http.Transport{Proxy: nil, DisableCompression: true}
	p.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: testTimeout}
}

// do sends a request and reads the whole response.
func do(t testing.TB, c *http.Client, method, url string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp, string(body)
}

func ua(userAgent string) http.Header { return http.Header{"User-Agent": {userAgent}} }

// notifyListener reports accepted connections and its own closing, which
// Shutdown does first.
type notifyListener struct {
	net.Listener
	accepted  chan net.Addr
	closed    chan struct{}
	closeOnce sync.Once
}

func newNotifyListener(ln net.Listener) *notifyListener {
	return &notifyListener{Listener: ln, accepted: make(chan net.Addr, 64), closed: make(chan struct{})}
}

func (l *notifyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		select {
		case l.accepted <- c.RemoteAddr():
		default:
		}
	}
	return c, err
}

func (l *notifyListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// clientTunnel is a CONNECT tunnel a test drives by hand, so it controls the
// CONNECT's User-Agent and each inner request's Host separately.
type clientTunnel struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
}

// connect sends CONNECT target with userAgent and returns the proxy's
// answer; on 200 the tunnel is open.
func connect(t testing.TB, proxyAddr, target, userAgent string) (*tunnelConn, *http.Response) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", proxyAddr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(testTimeout))
	req := &http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Host: target},
		Host:   target,
		Header: http.Header{"User-Agent": {userAgent}},
	}
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatalf("reading the answer to CONNECT %s: %v", target, err)
	}
	return &tunnelConn{Conn: conn, r: br}, resp
}

// tunnelConn reads what the CONNECT response reader may have buffered
// first.
type tunnelConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *tunnelConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// openTLS starts TLS inside an open tunnel, verifying serverName with roots.
func openTLS(t testing.TB, c net.Conn, serverName string, roots *x509.CertPool) *clientTunnel {
	t.Helper()
	tc := tls.Client(c, &tls.Config{ServerName: serverName, RootCAs: roots, NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS inside the tunnel: %v", err)
	}
	return &clientTunnel{t: t, conn: tc, r: bufio.NewReader(tc)}
}

// do sends one request with the given Host and User-Agent through the
// tunnel and reads the whole response.
func (tn *clientTunnel) do(method, host, path, userAgent string) (*http.Response, string) {
	tn.t.Helper()
	req, err := http.NewRequest(method, "https://"+host+path, nil)
	if err != nil {
		tn.t.Fatal(err)
	}
	req.Header.Set("User-Agent", userAgent)
	if err := req.Write(tn.conn); err != nil {
		tn.t.Fatalf("writing %s %s into the tunnel: %v", method, path, err)
	}
	resp, err := http.ReadResponse(tn.r, req)
	if err != nil {
		tn.t.Fatalf("reading the answer to %s %s%s from the tunnel: %v", method, host, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tn.t.Fatalf("reading the body of %s %s%s from the tunnel: %v", method, host, path, err)
	}
	return resp, string(body)
}
