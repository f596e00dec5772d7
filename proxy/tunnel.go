package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/elazarl/goproxy"

	"robotsgate/proxy/identity"
	"robotsgate/proxy/pace"
	"robotsgate/robots"
	"robotsgate/robots/fetch"
)

// tunnel is one CONNECT: where it leads and, once its first byte is seen,
// what it carries.
type tunnel struct {
	authority string // the CONNECT target as sent: host:port
	// host and port are canonical (robots.CanonicalHost: one spelling of
	// an address), an IPv6 address without brackets.
	host, port string
	// hostPort is the canonical host:port: where the tunnel connects, and
	// the authority of its origin.
	hostPort string
	// scheme is "https" for an intercepted TLS tunnel and "http" for one
	// that carries plain HTTP: the scheme of every request inside.
	scheme string
	// cred is the credential the CONNECT presented, nil for none.
	cred *identity.Credential
}

// credentialKey is the context key of a CONNECT's *identity.Credential.
type credentialKey struct{}

// tlsRecordHandshake starts every TLS connection (a ClientHello record).
const tlsRecordHandshake = 0x16

// parseConnectTarget checks a CONNECT's request target: host:port, with
// the port required and nothing else. Every spelling of one address leads
// to the same place.
func parseConnectTarget(raw string) (*tunnel, *requestError) {
	if strings.IndexByte(raw, '@') >= 0 {
		return nil, badRequest("the CONNECT target carries user information, which is not allowed; use host:port")
	}
	host, port, err := splitAuthority(raw)
	if err != nil {
		return nil, badRequest("the CONNECT target " + quoteClip(raw) + " is not a valid host:port: " + err.Error())
	}
	if port == "" {
		return nil, badRequest("the CONNECT target " + quoteClip(raw) + " has no port; use host:port")
	}
	hostPort := raw
	if !isCanonical(raw, host, port, true, "") {
		hostPort = net.JoinHostPort(host, port)
	}
	return &tunnel{authority: raw, host: host, port: port, hostPort: hostPort}, nil
}

// handleConnect takes a CONNECT from goproxy: it refuses a malformed one
// or one to a denied destination, judges the host when the tunnel will
// not be intercepted, and otherwise takes the connection over.
func (s *Server) handleConnect(_ string, pctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	r := pctx.Req
	d := s.newDecision(r, nil)
	d.asked.url = redactUserinfo(r.RequestURI)
	d.asked.blind = true // a CONNECT names a host, no path: only that is judged here
	reject := func(p *page) (*goproxy.ConnectAction, string) {
		pctx.Resp = p.response(r)
		return &goproxy.ConnectAction{Action: goproxy.ConnectReject}, r.RequestURI
	}
	tun, perr := parseConnectTarget(r.RequestURI)
	if perr != nil {
		return reject(d.failPage(perr.status, perr.why, nil))
	}
	tun.cred, _ = r.Context().Value(credentialKey{}).(*identity.Credential)
	// A tunnel only ever relays TLS unless plain HTTP turns out to be in
	// it, whose requests are judged one by one: its origin is HTTPS's.
	origin, err := robots.OriginOf("https://" + tun.hostPort)
	if err != nil {
		return reject(d.failPage(http.StatusBadRequest, "the CONNECT target is not a host:port", err))
	}
	d.asked.origin = origin
	if s.stopping.Load() {
		return reject(d.failPage(http.StatusServiceUnavailable, "robotsgate is shutting down", nil))
	}
	if p := d.auditUnwritable(); p != nil {
		return reject(p)
	}
	if err := s.opts.Destinations.Check(tun.host); err != nil {
		return reject(d.destinationPage(err))
	}
	// The policy judges the host by the CONNECT's identity before the
	// tunnel opens; an intercepted tunnel's requests are judged again, each
	// by its own.
	d.identify(tun.cred)
	if p := d.applyPolicy(r, tun.host); p != nil {
		return reject(p)
	}
	if s.opts.Issuer == nil {
		if p := s.judgeTunnel(d, r, tun); p != nil {
			return reject(p)
		}
	} else {
		d = nil // an intercepted tunnel is no decision: each request inside is one
	}
	return &goproxy.ConnectAction{
		Action: goproxy.ConnectHijack,
		Hijack: func(r *http.Request, conn net.Conn, _ *goproxy.ProxyCtx) { s.serveTunnel(r, conn, tun, d) },
	}, tun.authority
}

// judgeTunnel decides, before it opens, a tunnel the proxy may not look
// into: refused when the crawler may fetch nothing on the origin. It
// returns the refusal, or nil with d's verdict noted and its record left
// open until what the tunnel carries is known.
func (s *Server) judgeTunnel(d *decision, r *http.Request, tun *tunnel) *page {
	// A blind tunnel only ever relays TLS: it is judged as HTTPS (its
	// origin, set by handleConnect) whatever its port. Plain HTTP in it is
	// read and judged request by request.
	result, info, err := s.opts.Rules.Get(d.fetchContext(r), d.asked.origin)
	if err != nil {
		return d.failPage(http.StatusGatewayTimeout, "the client went away before robots.txt was fetched", err)
	}
	if p := d.noFetchSlot(result); p != nil {
		return p
	}
	d.noteRobots(result, info)
	if denied := deniedDestination(result.Err); denied != nil {
		return d.destinationPage(denied)
	}
	if v, all := disallowsAll(result, d.who.token); all {
		d.verdict = v
	} else {
		d.verdict = robots.Verdict{Allowed: true, Cause: robots.CauseNoMatchingRule, Detail: "tunnel not intercepted: only the host was judged"}
	}
	d.ruling = judged
	byPolicy := d.verdict.Allowed && d.policyDisallowsAll()
	if d.verdict.Allowed && !byPolicy {
		if p := d.judgeTunnelUsage(r, result); p != nil {
			return p
		}
	}
	if d.verdict.Allowed || s.opts.Mode != ModeEnforce {
		// The requests inside cannot be seen: the tunnel is paced as one.
		return d.pace(r, result)
	}
	if !byPolicy && result.Outcome == robots.OutcomeUnreachable && result.Status == 0 {
		// No HTTPS answered on this port: it may well carry plain HTTP,
		// whose requests are judged one by one. What the first byte
		// says decides.
		return nil
	}
	d.outcome.status = http.StatusForbidden
	d.finish()
	return forbiddenPage(r, d)
}

// disallowsAll reports whether token may fetch nothing on the origin.
func disallowsAll(result *fetch.Result, token string) (robots.Verdict, bool) {
	if v := result.Check(token, "/"); v.Cause == robots.CauseUnreachable {
		return v, true
	}
	if result.Robots == nil {
		return robots.Verdict{}, false
	}
	return result.Robots.DisallowsAll(token)
}

// serveTunnel runs an accepted tunnel: it answers the CONNECT, looks at the
// first byte the client sends, and then intercepts TLS, relays it blind
// (blind is the host's decision, when interception is off), or reads plain
// HTTP; what is read is served like any client's requests.
func (s *Server) serveTunnel(r *http.Request, conn net.Conn, tun *tunnel, blind *decision) {
	status := "HTTP/1.1 200 Connection established\r\n\r\n"
	if r.ProtoMajor == 1 && r.ProtoMinor == 0 {
		status = "HTTP/1.0 200 Connection established\r\n\r\n"
	}
	wait := s.opts.Client.HeaderTimeout
	if s.opts.Issuer != nil {
		wait = s.opts.Client.TLSTimeout
	}
	deadline := time.Now().Add(wait)
	conn.SetDeadline(deadline)
	first := make([]byte, 1)
	if blind != nil {
		// The CONNECT's answer, whatever the tunnel then carries.
		blind.outcome.status = http.StatusOK
	}
	if _, err := io.WriteString(conn, status); err != nil {
		s.endTunnel(conn, blind, "the client went away")
		return
	}
	if _, err := io.ReadFull(conn, first); err != nil {
		s.endTunnel(conn, blind, "the client sent nothing through the tunnel")
		return
	}
	client := &prefixConn{Conn: conn, prefix: first}
	switch {
	case first[0] == tlsRecordHandshake && s.opts.Issuer != nil:
		tlsConn, err := s.interceptTLS(client, tun, deadline)
		if err != nil {
			conn.Close()
			return
		}
		conn.SetDeadline(time.Time{})
		tun.scheme = "https"
		s.queueTunnel(tlsConn, tun)
	case first[0] == tlsRecordHandshake && !blind.verdict.Allowed && s.opts.Mode == ModeEnforce:
		// robots.txt could not be fetched over HTTPS and this is HTTPS:
		// complete disallow, now that it can only be said by hanging up.
		s.endTunnel(conn, blind, "TLS tunnel closed unopened: robots.txt could not be fetched")
	case first[0] == tlsRecordHandshake:
		conn.SetDeadline(time.Time{})
		s.relay(client, tun, blind)
	default:
		// Plain HTTP, intercepted or not: every request in it is read and
		// judged. Anything else fails as malformed HTTP.
		conn.SetDeadline(time.Time{})
		tun.scheme = "http"
		if blind != nil {
			blind.carriesPlainHTTP(tun)
		}
		s.queueTunnel(client, tun)
	}
}

// carriesPlainHTTP records a blind CONNECT whose tunnel turned out to
// carry plain HTTP: what was judged of its host over HTTPS does not apply,
// each request inside has a record of its own, and goes to the origin or
// not by its own verdict.
func (d *decision) carriesPlainHTTP(tun *tunnel) {
	d.admission.Undo()                                            // the requests inside are paced one by one
	d.asked.origin, _ = robots.OriginOf("http://" + tun.hostPort) // checked as host:port already
	d.asked.blind = false
	d.lookup, d.delay, d.admission = lookup{}, pace.Delay{}, pace.Admission{}
	if d.policy != nil { // nor does the policy speak for the tunnel: it does for each request
		d.policy.finding, d.policy.paceFinding, d.policy.concurrencyFinding = nil, nil, nil
	}
	d.ruling, d.why = passedUnjudged, "the tunnel carries plain HTTP: each request in it is judged"
	d.finish()
}

// endTunnel closes a tunnel that never carried anything.
// The record comes first: shutdown waits for the connection, not for it.
func (s *Server) endTunnel(conn net.Conn, blind *decision, why string) {
	if blind != nil {
		blind.admission.Undo() // nothing reached the origin
		blind.outcome.cause = why
		blind.finish()
	}
	conn.Close()
}

// interceptTLS completes the client's TLS handshake with a leaf from
// robotsgate's CA, by the deadline. A failed handshake is counted and
// warned about (handshakeFailed): a client that does not trust the CA
// leaves no other trace.
func (s *Server) interceptTLS(client net.Conn, tun *tunnel, deadline time.Time) (*tls.Conn, error) {
	sent := &sentConn{Conn: client}
	tlsConn, err := s.opts.Issuer.Server(sent, tun.authority)
	if err != nil {
		s.log.Warn("cannot intercept a tunnel", "target", tun.authority, "err", err)
		return nil, err
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := tlsConn.HandshakeContext(ctx); err != nil {
		s.handshakeFailed(client, tun, err, sent.sent.Load())
		return nil, err
	}
	return tlsConn, nil
}

// queueTunnel hands a tunnel's connection to the server that reads
// requests inside tunnels; during shutdown it is closed instead.
func (s *Server) queueTunnel(c net.Conn, tun *tunnel) {
	if !s.tunnelQueue.push(&tunneledConn{Conn: c, tun: tun}) {
		c.Close()
	}
}

// relay connects a blind TLS tunnel to its target, directly or through
// the upstream proxy, and copies bytes both ways until either side is done.
func (s *Server) relay(client net.Conn, tun *tunnel, blind *decision) {
	defer client.Close()
	ctx := context.Background() // bounded by the upstream timeouts
	var upstream net.Conn
	var err error
	if s.upstream != nil {
		upstream, err = s.upstream.openTunnel(ctx, tun.host, tun.hostPort)
	} else {
		upstream, err = s.dialer.DialContext(ctx, "tcp", tun.hostPort)
	}
	if err != nil {
		if denied := deniedDestination(err); denied != nil {
			// The name resolved into a denied range only now: refused by
			// the policy like any other destination, by hanging up.
			blind.denyDestination(denied)
		} else {
			blind.outcome.cause = "connecting to the origin: " + upstreamProblem(err)
		}
		blind.finish()
		return
	}
	defer upstream.Close()
	blind.outcome.reached = true
	blind.finish()
	var wg sync.WaitGroup
	wg.Go(func() { pipe(upstream, client) })
	pipe(client, upstream)
	wg.Wait()
}

// pipe copies src to dst, then tells dst nothing more is coming.
func pipe(dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	if closeWrite(dst) != nil {
		dst.Close()
	}
}

// keepBuffered hands goproxy a connection that still gives the bytes a
// client sent right behind its CONNECT (a TLS ClientHello, a request):
// goproxy hijacks the connection and drops the reader that holds them.
type keepBuffered struct{ http.ResponseWriter }

func (k keepBuffered) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(k.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return withBuffered(conn, brw.Reader), brw, nil
}

// withBuffered returns conn, reading first what br, a reader of it, holds
// already: a hijacked connection's reader may hold bytes the client sent.
func withBuffered(conn net.Conn, br *bufio.Reader) net.Conn {
	n := br.Buffered()
	if n == 0 {
		return conn
	}
	early, _ := br.Peek(n)
	return &prefixConn{Conn: conn, prefix: bytes.Clone(early)}
}

// tunnelKey is the context key of a request's *tunnel.
type tunnelKey struct{}

// tunnelContext gives the requests read on a tunneled connection their
// tunnel.
func tunnelContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tunneledConn); ok {
		return context.WithValue(ctx, tunnelKey{}, tc.tun)
	}
	return ctx
}

// tunneledConn is a tunnel's client side, intercepted or plain, with its
// tunnel.
type tunneledConn struct {
	net.Conn
	tun *tunnel
}

// CloseWrite lets net/http end its side of the tunnel as it would a TCP
// connection's.
func (c *tunneledConn) CloseWrite() error { return closeWrite(c.Conn) }

// prefixConn gives back the bytes already read from a connection before
// reading on.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *prefixConn) CloseWrite() error { return closeWrite(c.Conn) }

// connQueue is the listener of the server that reads requests inside
// tunnels: connections are pushed to it once their tunnel is open.
type connQueue struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newConnQueue() *connQueue {
	return &connQueue{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (q *connQueue) push(c net.Conn) bool {
	select {
	case <-q.done:
		return false
	default:
	}
	select {
	case q.conns <- c:
		return true
	case <-q.done:
		return false
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return tunnelAddr{} }

type tunnelAddr struct{}

func (tunnelAddr) Network() string { return "tunnel" }
func (tunnelAddr) String() string  { return "tunnels" }
