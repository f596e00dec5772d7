package proxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"robotsgate/proxy/audit"
	"robotsgate/proxy/egress"
	"robotsgate/proxy/netcause"
	"robotsgate/proxy/pace"
)

// via is how robotsgate names itself in Via (RFC 9110 §7.6.3), by the
// protocol version the message was received with.
func via(major, minor int) string {
	switch {
	case major == 1 && minor == 0:
		return "1.0 robotsgate"
	case major == 2:
		return "2.0 robotsgate"
	case major == 3:
		return "3.0 robotsgate"
	}
	return "1.1 robotsgate"
}

// removeHopByHop removes the fields Connection names and those that
// concern one connection only (RFC 9110 §7.6.1), with the ones older
// specifications and clients add: never forwarded, in either direction.
func removeHopByHop(h http.Header) {
	for _, f := range h["Connection"] {
		for name := range strings.SplitSeq(f, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, f := range [...]string{
		"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade",
	} {
		delete(h, f)
	}
}

// removeRewriting removes the request fields that front ends and
// frameworks read as the request's "real" path, method, host, scheme or
// client, so that a request judged for one path and method is served as
// another: IIS URL Rewrite's X-Original-URL and ISAPI_Rewrite's
// X-Rewrite-URL (honoured by Symfony, Zend, ASP.NET apps), the
// X-HTTP-Method-Override family (Express's method-override, OData, Google
// APIs), Forwarded and every X-Forwarded-* (Spring's X-Forwarded-Prefix,
// Traefik's X-Forwarded-Uri, Werkzeug's ProxyFix...), the client-address
// fields (X-Real-IP, True-Client-IP, ...), any Proxy-* field, which is
// addressed to a proxy, never to an origin, and the client's own Web Bot
// Auth fields (Signature, Signature-Input, Signature-Agent): only the gate
// signs what it sends. Names are compared as CGI and PHP read them: case
// and '-' or '_' alike.
func removeRewriting(h http.Header) {
	for name := range h {
		if rewritesRequest(name) {
			delete(h, name)
		}
	}
}

// rewritesRequest reports whether a request field named name is one
// removeRewriting removes.
func rewritesRequest(name string) bool {
	// Every family is told by the first 20 bytes; a longer name is only
	// ever a member of a prefix family.
	var buf [20]byte
	n := min(len(name), len(buf))
	for i := range n {
		c := name[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c == '_':
			c = '-'
		}
		buf[i] = c
	}
	key := string(buf[:n]) // compared, never kept: no allocation
	for _, prefix := range [...]string{
		"x-forwarded-", "x-original-", "x-rewrite-", "x-http-method", "x-method-override",
		"x-envoy-original-", "proxy-",
	} {
		if strings.HasPrefix(key, prefix) {
			return true
		}
	}
	if len(name) > len(buf) {
		return false
	}
	switch key {
	case "forwarded", "x-forwarded", "x-override-url", "x-host", "x-http-host-override",
		"x-scheme", "x-url-scheme", "front-end-https", "x-script-name",
		"x-real-ip", "x-client-ip", "true-client-ip", "client-ip", "x-cluster-client-ip",
		"cf-connecting-ip", "fastly-client-ip", "x-originating-ip", "x-remote-ip", "x-remote-addr",
		// A client's signature fields in any spelling a CGI, WSGI or Rack
		// application reads as the gate's (Signature_Input...).
		"signature", "signature-input", "signature-agent":
		return true
	}
	return false
}

// upgradeType is the protocol a request or response asks to switch to,
// "" when it asks none.
func upgradeType(h http.Header) string {
	if !httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade") {
		return ""
	}
	return h.Get("Upgrade")
}

// forward sends an allowed request to the origin and relays the answer,
// doing a proxy's duties (RFC 9110 §7.6) as net/http/httputil's
// ReverseProxy does them: the hop-by-hop fields, those Connection names
// included, are removed in both directions, Via is added, 1xx answers and
// trailers are relayed, a WebSocket upgrade becomes a two-way relay, and
// the body streams as it comes. It is written out here because the
// request line must be the canonical target's, byte for byte, and because
// ReverseProxy's copy of every request cost a quarter of the throughput
// (BenchmarkThroughput).
// The audit record is written once the answer has been relayed.
func (d *decision) forward(w http.ResponseWriter, r *http.Request) {
	upgrade := upgradeType(r.Header)
	if upgrade != "" && !strings.EqualFold(upgrade, "websocket") {
		// Only WebSocket upgrades are relayed; another protocol (h2c, say)
		// would carry requests past the gate.
		upgrade = ""
	}
	relay := &d.relay
	relay.w = w
	out := d.outgoingRequest(r, upgrade, relay)
	if !d.sign(w, r, out) {
		d.finish()
		return
	}
	var sent time.Time
	if d.admission.Observes() {
		sent = time.Now()
	}
	resp, err := d.s.transport.RoundTrip(out)
	relay.stop1xx()
	// Sent whole, the request reached the origin, whether or not an
	// answer came.
	d.outcome.reached = relay.sent.Load()
	if err == nil {
		if err = d.s.upstream.refusal(resp); err != nil {
			resp.Body.Close()
			d.outcome.reached = false // the upstream proxy took it no further
		}
	}
	if !sent.IsZero() {
		d.observe(r, resp, err, sent)
	}
	if err != nil {
		d.upstreamFailed(w, r, err)
		d.finish()
		return
	}
	d.outcome.reached = true
	d.outcome.upstream = resp.StatusCode
	d.outcome.status = resp.StatusCode
	if resp.StatusCode == http.StatusSwitchingProtocols {
		d.switchProtocols(w, r, resp, upgrade)
		d.finish()
		return
	}
	if d.judgeResponse(w, r, resp) {
		return
	}
	removeHopByHop(resp.Header)
	resp.Header["Via"] = append(resp.Header["Via"], via(resp.ProtoMajor, resp.ProtoMinor))
	switch {
	case !d.verdict.Allowed:
		// Audit mode: tell the crawler what enforcement would have done.
		resp.Header.Set(decisionHeader, decisionValue(d))
	case d.usage != nil && d.usage.action == audit.UsageRecorded:
		resp.Header.Set(decisionHeader, usageValue(d))
	case d.admission.Outcome != pace.OnTime && d.admission.Outcome != pace.Waited:
		resp.Header.Set(decisionHeader, paceValue(d))
	case d.decidedByPolicy() != nil:
		// An exception let it through: the crawler learns whose word that is.
		resp.Header.Set(decisionHeader, decisionValue(d))
	}
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	if len(resp.Trailer) > 0 {
		// Announcing the trailers makes net/http send the body chunked,
		// with them at its end.
		names := make([]string, 0, len(resp.Trailer))
		for k := range resp.Trailer {
			names = append(names, k)
		}
		h.Add("Trailer", strings.Join(names, ", "))
	}
	w.WriteHeader(resp.StatusCode)
	readErr, writeErr := d.relayBody(w, resp.Body)
	resp.Body.Close() // fills resp.Trailer
	removeHopByHop(resp.Trailer)
	for k, v := range resp.Trailer {
		h[k] = v
	}
	switch {
	case readErr != nil:
		d.outcome.cause = "reading the response body: " + upstreamProblem(readErr)
	case writeErr != nil:
		d.outcome.cause = "the client stopped reading the response"
	}
	d.finish()
	if readErr != nil {
		// Cut the client's connection: a clean end would pass a truncated
		// body off as whole.
		panic(http.ErrAbortHandler)
	}
}

// outgoingRequest is the request sent to the origin: the canonical target
// and the origin's Host, and the client's header without the hop-by-hop
// fields and without the fields that rewrite a request (removeRewriting),
// with Via. The header is changed in place: net/http has read
// what it needs of it before calling a handler (golang.org/issue/14940),
// and copying it would cost every request.
func (d *decision) outgoingRequest(r *http.Request, upgrade string, relay *relayState) *http.Request {
	h := r.Header
	wantsTrailers := httpguts.HeaderValuesContainsToken(h["Te"], "trailers")
	removeHopByHop(h)
	removeRewriting(h) // a client's Signature fields with them: no bot speaks for the operator
	if wantsTrailers {
		h["Te"] = []string{"trailers"} // robotsgate relays them
	}
	if upgrade != "" {
		h["Connection"] = []string{"Upgrade"}
		h["Upgrade"] = []string{upgrade}
	}
	if d.maxForwards != "" {
		h["Max-Forwards"] = []string{d.maxForwards}
	}
	h["Via"] = append(h["Via"], via(r.ProtoMajor, r.ProtoMinor))
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // or net/http sends its own
	}
	relay.trace = httptrace.ClientTrace{GetConn: relay.getConn, GotConn: relay.gotConn, WroteRequest: relay.wroteRequest, Got1xxResponse: relay.got1xx}
	out := r.WithContext(httptrace.WithClientTrace(r.Context(), &relay.trace))
	d.s.upstream.toProxy(&d.outURL)
	out.URL = &d.outURL
	out.Host = d.target.hostHeader
	out.RequestURI = ""
	out.Close = false
	// Trailers from the client are dropped (RFC 9110 §6.5.1 lets a
	// recipient): they could carry the very fields stripped above.
	out.Trailer = nil
	if r.ContentLength == 0 {
		out.Body = nil
	} else {
		// The transport closes a body it gives up on; the client's must be
		// closed by the server only (closing a 100-continue body early
		// hangs).
		out.Body = noCloseBody{r.Body}
	}
	return out
}

// maxInterim bounds the interim (1xx) answers relayed for one request:
// net/http leaves bounding them to whoever asks to see them, and an origin
// could otherwise send them without end.
const maxInterim = 16

// errTooManyInterim ends a request whose origin sent more than maxInterim
// interim answers.
var errTooManyInterim = errors.New("too many interim (1xx) answers")

// relayState passes interim (1xx) answers on to the client while the
// final one is awaited, and notes whether the request was sent whole. A
// decision holds it, trace included: no allocation of their own.
type relayState struct {
	w       http.ResponseWriter
	trace   httptrace.ClientTrace
	mu      sync.Mutex
	done    bool
	interim int32
	// sent says the last attempt wrote the request whole to the origin's
	// connection (or the upstream proxy's). The transport may try again
	// on another connection after writing to one its origin had closed.
	sent atomic.Bool
	// remote is the address of the connection the last attempt got.
	remote net.Addr
}

func (s *relayState) gotConn(info httptrace.GotConnInfo) {
	s.mu.Lock()
	s.remote = info.Conn.RemoteAddr()
	s.mu.Unlock()
}

// answeredFrom reports whether the connection the answer came on is to
// addr, an IP address.
func (s *relayState) answeredFrom(addr string) bool {
	s.mu.Lock()
	remote := s.remote
	s.mu.Unlock()
	if remote == nil {
		return false
	}
	ap, err := netip.ParseAddrPort(remote.String())
	return err == nil && ap.Addr().Unmap().String() == addr
}

func (s *relayState) getConn(string) { s.sent.Store(false) }

func (s *relayState) wroteRequest(info httptrace.WroteRequestInfo) {
	s.sent.Store(info.Err == nil)
}

func (s *relayState) got1xx(code int, header textproto.MIMEHeader) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	if s.interim++; s.interim > maxInterim {
		return errTooManyInterim
	}
	h := s.w.Header()
	for k, v := range header {
		h[k] = v
	}
	s.w.WriteHeader(code)
	clear(h) // WriteHeader keeps a 1xx's fields for the final answer
	return nil
}

func (s *relayState) stop1xx() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
}

// relayBody copies an answer's body to the client, flushing each piece as
// it comes: a client sees a slow or broken body's bytes at once, not a
// buffer's worth later or never.
func (d *decision) relayBody(w http.ResponseWriter, body io.Reader) (readErr, writeErr error) {
	buf := d.s.copyBuffers.Get()
	defer d.s.copyBuffers.Put(buf)
	flusher, _ := w.(http.Flusher)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			d.outcome.bytes += int64(n)
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil, werr
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return err, nil
		}
	}
}

// switchProtocols relays a WebSocket connection once the origin has
// agreed to switch: it answers the client with the 101 and copies bytes
// both ways until either side is done.
func (d *decision) switchProtocols(w http.ResponseWriter, r *http.Request, resp *http.Response, upgrade string) {
	backend, ok := resp.Body.(io.ReadWriteCloser)
	if got := upgradeType(resp.Header); upgrade == "" || !strings.EqualFold(got, upgrade) || !ok {
		resp.Body.Close()
		d.outcome.status = http.StatusBadGateway
		d.outcome.cause = "the origin switched to a protocol that was not asked for"
		plainPage(http.StatusBadGateway, "robotsgate: the origin switched protocols unasked\n").write(w, r)
		return
	}
	defer backend.Close()
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		d.outcome.cause = "cannot take over the client's connection: " + err.Error()
		return
	}
	defer client.Close()
	// Recorded before the connection closes: shutdown waits for
	// connections, not for relays, to end.
	defer d.finish()
	resp.Header["Via"] = append(resp.Header["Via"], via(resp.ProtoMajor, resp.ProtoMinor))
	resp.Body = nil // Write sends the head only
	if err := resp.Write(brw); err != nil || brw.Flush() != nil {
		d.outcome.cause = "the client went away during the protocol switch"
		return
	}
	// Bytes the client sent after its request are in brw's buffer.
	fromClient := withBuffered(client, brw.Reader)
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(backend, fromClient)
		done <- struct{}{}
	}()
	go func() {
		io.Copy(client, backend)
		done <- struct{}{}
	}()
	select {
	case <-done:
	case <-r.Context().Done():
	}
}

// noCloseBody keeps the transport from closing the client's request body.
type noCloseBody struct{ io.Reader }

func (noCloseBody) Close() error { return nil }

// upstreamFailed answers when the origin could not be asked or did not
// answer: 502 with a short reason, or 403 when the destination policy
// refused the address the origin's name resolved to.
func (d *decision) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	if denied := deniedDestination(err); denied != nil {
		d.destinationPage(denied).write(w, r)
		return
	}
	why := upstreamProblem(err)
	d.outcome.status = http.StatusBadGateway
	d.outcome.cause = why
	text := "robotsgate could not get " + d.target.authority + ": " + why + "\n"
	if netcause.NotTrusted(err) {
		text += "robotsgate does not trust the origin's TLS certificate: " + upstreamCAHint + ".\n"
		d.s.originNotTrusted(d.asked.origin, "forwarding")
	}
	plainPage(http.StatusBadGateway, text).write(w, r)
}

// bufferPool lends relayBody its copy buffers: a fresh 32 KiB buffer per
// request would be most of what a request allocates.
type bufferPool struct{ pool sync.Pool }

func (p *bufferPool) Get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32<<10)
}

func (p *bufferPool) Put(b []byte) { p.pool.Put(&b) }

// upstreamProblem says in a few words why the exchange with an origin
// failed, in the words robots.txt fetches use too; when the upstream proxy
// failed it, the words name the proxy (its password redacted) and what it
// did.
func upstreamProblem(err error) string {
	if errors.Is(err, errTooManyInterim) {
		return "more than 16 interim (1xx) answers"
	}
	if why, ok := egress.Problem(err); ok {
		return why
	}
	return netcause.Of(err)
}
