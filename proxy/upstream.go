package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"robotsgate/proxy/destination"
	"robotsgate/proxy/egress"
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
// request or the CONNECT is handed on (see [egress.Proxy.CheckOrigin]).
type upstreamProxy struct {
	egress *egress.Proxy
	dialer *net.Dialer // to the proxy, judging nothing
	// answerTimeout bounds the wait for the answer to a blind CONNECT;
	// zero means no bound.
	answerTimeout time.Duration
}

// newUpstreamProxy returns the way out through o.Proxy, origins judged by
// destinations and their names resolved by resolver (nil for
// net.DefaultResolver) unless destinations deny nothing.
func newUpstreamProxy(o UpstreamOptions, destinations *destination.Policy, resolver egress.Resolver) (*upstreamProxy, error) {
	u := o.Proxy
	if u.Scheme != "http" || u.Hostname() == "" || u.Port() == "" {
		return nil, fmt.Errorf("proxy: Options.Upstream.Proxy %q is not http://host:port", u.Redacted())
	}
	eo := egress.Options{URL: u, ResolveTimeout: o.DialTimeout, Resolver: resolver}
	if len(destinations.Ranges()) > 0 {
		eo.Control = destinations.Control
	}
	return &upstreamProxy{
		egress:        egress.New(eo),
		dialer:        &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second},
		answerTimeout: o.ResponseHeaderTimeout,
	}, nil
}

// route sends t's requests through the proxy.
func (u *upstreamProxy) route(t *http.Transport) {
	t.Proxy = u.egress.For
	t.DialContext = u.dial
	t.OnProxyConnectResponse = u.egress.ConnectAnswered
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

// dial connects to the proxy; a failure says so.
func (u *upstreamProxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := u.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, u.egress.CannotConnect(err)
	}
	return conn, nil
}

// refusal is the proxy's refusal when resp, the answer to a plain HTTP
// request sent through it, is the proxy's own 407.
func (u *upstreamProxy) refusal(resp *http.Response) error {
	if u == nil {
		return nil
	}
	return u.egress.Refusal(resp)
}

// openTunnel opens a blind tunnel to authority (host:port, checked) through
// the proxy: host must pass the destination policy, and the proxy must
// answer the CONNECT with a 2xx within answerTimeout. Bytes the proxy sent
// after its answer belong to the tunnel and are read first.
func (u *upstreamProxy) openTunnel(ctx context.Context, host, authority string) (net.Conn, error) {
	_, port, err := net.SplitHostPort(authority)
	if err != nil {
		return nil, fmt.Errorf("the tunnel's target %q: %w", authority, err)
	}
	if err := u.egress.CheckOrigin(ctx, host, port); err != nil {
		return nil, err
	}
	conn, err := u.dial(ctx, "tcp", u.egress.URL().Host)
	if err != nil {
		return nil, err
	}
	if u.answerTimeout > 0 {
		conn.SetDeadline(time.Now().Add(u.answerTimeout))
	}
	connect := "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n"
	if auth := u.egress.Authorization(); auth != "" {
		connect += "Proxy-Authorization: " + auth + "\r\n"
	}
	br := bufio.NewReader(io.LimitReader(conn, maxConnectAnswerBytes))
	var resp *http.Response
	if _, err = io.WriteString(conn, connect+"\r\n"); err == nil {
		resp, err = http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	}
	switch {
	case err != nil:
		conn.Close()
		return nil, u.egress.DidNotAnswer("CONNECT", err)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		conn.Close()
		return nil, u.egress.Refused("CONNECT", resp.StatusCode)
	}
	conn.SetDeadline(time.Time{})
	return withBuffered(conn, br), nil
}
