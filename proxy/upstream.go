package proxy

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"robotsgate/proxy/destination"
	"robotsgate/robots/fetch/netcause"
)

// maxConnectAnswerBytes bounds the header of an upstream proxy's answer
// to a blind tunnel's CONNECT.
const maxConnectAnswerBytes = 64 << 10

// upstreamProxy is the HTTP proxy every connection to an origin goes
// through (UpstreamOptions.Proxy): plain requests are sent to it as proxy
// requests, every tunnel, intercepted or blind, is a CONNECT through it.
//
// The connection is made to the proxy, which the operator chose, so the
// destination policy does not judge the proxy's address; it judges the
// origin instead, by the addresses its name resolves to here, before the
// request or the CONNECT is handed on.
type upstreamProxy struct {
	url  *url.URL
	name string // url, its password redacted: what messages say
	// authorization is a blind CONNECT's Proxy-Authorization, "" for none;
	// net/http makes its own from url.
	authorization string
	destinations  *destination.Policy // nil or empty: no name is resolved
	dialer        *net.Dialer         // to the proxy, judging nothing
	// resolveTimeout bounds resolving an origin's name and answerTimeout
	// the wait for the answer to a blind CONNECT; zero means no bound.
	resolveTimeout time.Duration
	answerTimeout  time.Duration
}

func newUpstreamProxy(o UpstreamOptions, destinations *destination.Policy) (*upstreamProxy, error) {
	u := o.Proxy
	if u.Scheme != "http" || u.Hostname() == "" || u.Port() == "" {
		return nil, fmt.Errorf("proxy: Options.Upstream.Proxy %q is not http://host:port", u.Redacted())
	}
	p := &upstreamProxy{
		url:            u,
		name:           u.Redacted(),
		dialer:         &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second},
		resolveTimeout: o.DialTimeout,
		answerTimeout:  o.ResponseHeaderTimeout,
	}
	if len(destinations.Ranges()) > 0 {
		p.destinations = destinations
	}
	if u.User != nil {
		password, _ := u.User.Password()
		p.authorization = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+password))
	}
	return p, nil
}

// route sends t's requests through the proxy.
func (u *upstreamProxy) route(t *http.Transport) {
	t.Proxy = u.proxyFor
	t.DialContext = u.dial
	t.OnProxyConnectResponse = u.connectAnswered
}

// proxyFor hands a request to the proxy once its origin passes the
// destination policy.
func (u *upstreamProxy) proxyFor(req *http.Request) (*url.URL, error) {
	if err := u.checkOrigin(req.Context(), req.URL.Hostname()); err != nil {
		return nil, err
	}
	return u.url, nil
}

// toProxy rewrites out, the URL of a request about to be forwarded, so
// that the proxy gets a plain HTTP request in absolute form with the path
// and query byte for byte: net/http prefixes the scheme and host only to
// a URL without Opaque, which the forwarder uses to keep those bytes.
// Requests in a tunnel keep their origin form.
func (u *upstreamProxy) toProxy(out *url.URL) {
	if u == nil || out.Scheme != "http" {
		return
	}
	path := out.Opaque
	if path == "" {
		path = out.EscapedPath() // a path starting with "//", kept in RawPath
	}
	out.Opaque, out.Path, out.RawPath = "//"+out.Host+path, "", ""
}

// checkOrigin refuses, with a *destination.DeniedError, an origin host
// whose address, or any address its name resolves to here, the policy
// denies. A name that does not resolve here is handed on: the proxy may
// see names this host cannot, and resolves every name again anyway, so
// an answer that differs is the proxy's to judge.
func (u *upstreamProxy) checkOrigin(ctx context.Context, host string) error {
	if u.destinations == nil {
		return nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return u.destinations.Check(host)
	}
	lookupCtx, cancel := ctx, func() {}
	if u.resolveTimeout > 0 {
		lookupCtx, cancel = context.WithTimeout(ctx, u.resolveTimeout)
	}
	addrs, err := net.DefaultResolver.LookupNetIP(lookupCtx, "ip", host)
	cancel()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("resolving %s: %w", host, ctxErr)
	}
	if err != nil {
		return nil // the proxy's to resolve, and to judge
	}
	for _, addr := range addrs {
		// The resolver gives IPv4 addresses in their IPv6 form.
		if prefix, denied := u.destinations.Denied(addr.Unmap()); denied {
			return &destination.DeniedError{Addr: addr.Unmap(), Range: prefix}
		}
	}
	return nil
}

// dial connects to the proxy; a failure says so.
func (u *upstreamProxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := u.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, &upstreamProxyError{msg: "cannot connect to the upstream proxy " + u.name + ": " + netcause.Of(err), err: err}
	}
	return conn, nil
}

// connectAnswered fails a CONNECT net/http sent unless the proxy opened
// the tunnel; net/http itself takes only a 200, and would say no more
// than the status text.
func (u *upstreamProxy) connectAnswered(_ context.Context, _ *url.URL, _ *http.Request, resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	return u.refused("CONNECT", resp.StatusCode)
}

// refusal is the proxy's refusal when resp, the answer to a plain HTTP
// request sent through it, is the proxy's own 407: an origin does not ask
// for proxy credentials.
func (u *upstreamProxy) refusal(resp *http.Response) error {
	if u == nil || resp.StatusCode != http.StatusProxyAuthRequired || resp.Request.URL.Scheme != "http" {
		return nil
	}
	return u.refused("request", resp.StatusCode)
}

func (u *upstreamProxy) refused(what string, status int) error {
	return &upstreamProxyError{msg: "the upstream proxy " + u.name + " refused the " + what + ": " + statusLine(status)}
}

// openTunnel opens a blind tunnel to authority (host:port, checked) through
// the proxy: host must pass the destination policy, and the proxy must
// answer the CONNECT with a 2xx within answerTimeout. Bytes the proxy sent
// after its answer belong to the tunnel and are read first.
func (u *upstreamProxy) openTunnel(ctx context.Context, host, authority string) (net.Conn, error) {
	if err := u.checkOrigin(ctx, host); err != nil {
		return nil, err
	}
	conn, err := u.dial(ctx, "tcp", u.url.Host)
	if err != nil {
		return nil, err
	}
	if u.answerTimeout > 0 {
		conn.SetDeadline(time.Now().Add(u.answerTimeout))
	}
	connect := "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n"
	if u.authorization != "" {
		connect += "Proxy-Authorization: " + u.authorization + "\r\n"
	}
	br := bufio.NewReader(io.LimitReader(conn, maxConnectAnswerBytes))
	var resp *http.Response
	if _, err = io.WriteString(conn, connect+"\r\n"); err == nil {
		resp, err = http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	}
	switch {
	case err != nil:
		conn.Close()
		return nil, &upstreamProxyError{msg: "the upstream proxy " + u.name + " did not answer the CONNECT: " + netcause.Of(err), err: err}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		conn.Close()
		return nil, u.refused("CONNECT", resp.StatusCode)
	}
	conn.SetDeadline(time.Time{})
	return withBuffered(conn, br), nil
}

// upstreamProxyError is an exchange the upstream proxy failed, not the
// origin: it could not be reached, did not answer, or refused.
type upstreamProxyError struct {
	msg string // names the proxy, its password redacted, and what went wrong
	err error  // the network error, if any
}

func (e *upstreamProxyError) Error() string { return e.msg }
func (e *upstreamProxyError) Unwrap() error { return e.err }

// upstreamProxyProblem is the words of err's upstream proxy failure, if it
// is one.
func upstreamProxyProblem(err error) (string, bool) {
	if pe, ok := errors.AsType[*upstreamProxyError](err); ok && !errors.Is(err, context.Canceled) {
		return pe.Error(), true
	}
	return "", false
}

// statusLine is "407 Proxy Authentication Required": the code and its
// standard text, never a reason phrase the proxy wrote.
func statusLine(code int) string {
	if text := http.StatusText(code); text != "" {
		return strconv.Itoa(code) + " " + text
	}
	return strconv.Itoa(code)
}
