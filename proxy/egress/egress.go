// Package egress is the way out through an upstream HTTP proxy, shared by
// the robots.txt fetcher and the forwarder: the origin judged before
// anything is handed to the proxy, since the connection is then made to the
// proxy, and the proxy's failures told apart from the origin's, in the same
// words wherever an operator reads them.
package egress

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"

	"robotsgate/proxy/netcause"
)

// Bounds of the verdicts a Proxy keeps on origins, so that a request does
// not wait on a name lookup each time: short enough that a name's new
// addresses are soon judged, few enough that a client naming endless
// hosts holds little memory.
const (
	verdictTTL  = 30 * time.Second
	maxVerdicts = 4096
)

// Resolver resolves an origin's name; [net.Resolver] is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configures a [Proxy].
type Options struct {
	// URL is the proxy, http://host:port, with Basic credentials in its
	// user information if it wants any.
	URL *url.URL
	// Control judges, before a request or a CONNECT is handed to the
	// proxy, each address the origin's name resolves to here, as a
	// dialer's ControlContext judges an address it is about to connect to
	// (with a nil RawConn); an error refuses the origin, and so does a name
	// that does not resolve here. Nil judges nothing and resolves no name:
	// every origin is handed on.
	Control func(ctx context.Context, network, address string, c syscall.RawConn) error
	// ResolveTimeout bounds resolving an origin's name; zero means no
	// bound but the request's.
	ResolveTimeout time.Duration
	// Resolver resolves origins' names; nil means net.DefaultResolver.
	Resolver Resolver
}

// Proxy is an upstream HTTP proxy. It is safe for concurrent use.
type Proxy struct {
	url  *url.URL
	name string // url, its password redacted: what messages say
	// authorization is the Proxy-Authorization of a CONNECT its user
	// sends itself, "" for none; net/http makes its own from url.
	authorization  string
	control        func(ctx context.Context, network, address string, c syscall.RawConn) error
	resolveTimeout time.Duration
	resolver       Resolver
	verdicts       verdictCache
}

// New returns the Proxy o describes; o.URL must be set.
func New(o Options) *Proxy {
	p := &Proxy{
		url:            o.URL,
		name:           o.URL.Redacted(),
		control:        o.Control,
		resolveTimeout: o.ResolveTimeout,
		resolver:       o.Resolver,
	}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	if u := o.URL.User; u != nil {
		password, _ := u.Password()
		p.authorization = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+password))
	}
	return p
}

// URL is the proxy's URL, credentials included.
func (p *Proxy) URL() *url.URL { return p.url }

// Authorization is the Proxy-Authorization header of a CONNECT sent
// without net/http, "" when the proxy wants none.
func (p *Proxy) Authorization() string { return p.authorization }

// For is an [http.Transport] Proxy function: it hands req to the proxy
// once req's origin passes [Proxy.CheckOrigin].
func (p *Proxy) For(req *http.Request) (*url.URL, error) {
	port := req.URL.Port()
	if port == "" {
		port = "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
	}
	if err := p.CheckOrigin(req.Context(), req.URL.Hostname(), port); err != nil {
		return nil, err
	}
	return p.url, nil
}

// CheckOrigin returns the Control's refusal of an origin (host, an IP
// address or a name, and port) if it refuses host's address or any address
// host resolves to here, or an *Error if host does not resolve here: the
// proxy would resolve it again, maybe to an address Control refuses, if
// only whoever answers its lookups wished. Verdicts on names are kept for
// a while.
func (p *Proxy) CheckOrigin(ctx context.Context, host, port string) error {
	if p.control == nil {
		return nil
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		return p.judge(ctx, []netip.Addr{addr}, port)
	}
	key := net.JoinHostPort(host, port)
	now := time.Now()
	if err, ok := p.verdicts.get(key, now); ok {
		return err
	}
	lookupCtx, cancel := ctx, context.CancelFunc(func() {})
	if p.resolveTimeout > 0 {
		lookupCtx, cancel = context.WithTimeout(ctx, p.resolveTimeout)
	}
	addrs, err := p.resolver.LookupNetIP(lookupCtx, "ip", host)
	cancel()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("resolving %s: %w", host, ctxErr) // the request's end, no verdict on host
	}
	if err == nil {
		err = p.judge(ctx, addrs, port)
	} else {
		err = &Error{msg: "cannot resolve " + host + " here (" + netcause.Of(err) + "), and robotsgate must, to check it against " +
			"ROBOTSGATE_DENY_DESTINATIONS before the upstream proxy gets it; ROBOTSGATE_DENY_DESTINATIONS=none hands every name on unchecked", err: err}
	}
	p.verdicts.put(key, err, now)
	return err
}

func (p *Proxy) judge(ctx context.Context, addrs []netip.Addr, port string) error {
	for _, addr := range addrs {
		// The resolver gives IPv4 addresses in their IPv6 form; a dialer
		// connects to the IPv4 address.
		if err := p.control(ctx, "tcp", net.JoinHostPort(addr.Unmap().String(), port), nil); err != nil {
			return err
		}
	}
	return nil
}

// ConnectAnswered is an [http.Transport] OnProxyConnectResponse function:
// it fails a CONNECT net/http sent unless the proxy opened the tunnel;
// net/http itself takes only a 200, and would say no more than the status
// text.
func (p *Proxy) ConnectAnswered(_ context.Context, _ *url.URL, _ *http.Request, resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	return p.Refused("CONNECT", resp.StatusCode)
}

// Refusal is the proxy's refusal when resp, the answer to a plain HTTP
// request sent through it, is the proxy's own 407: an origin does not ask
// for proxy credentials, and its answer must not pass for the origin's.
// It is nil otherwise, and always for a nil Proxy.
func (p *Proxy) Refusal(resp *http.Response) error {
	if p == nil || resp.StatusCode != http.StatusProxyAuthRequired || resp.Request == nil || resp.Request.URL.Scheme != "http" {
		return nil
	}
	return p.Refused("request", resp.StatusCode)
}

// Refused is the proxy's refusal, with status, of what it was asked: "the
// request" or "the CONNECT".
func (p *Proxy) Refused(what string, status int) error {
	return &Error{msg: "the upstream proxy " + p.name + " refused the " + what + ": " + statusLine(status)}
}

// CannotConnect is err, from connecting to the proxy, as the proxy's
// failure.
func (p *Proxy) CannotConnect(err error) error {
	return &Error{msg: "cannot connect to the upstream proxy " + p.name + ": " + netcause.Of(err), err: err}
}

// DidNotAnswer is err, from waiting for the proxy's answer to what it was
// asked, as the proxy's failure.
func (p *Proxy) DidNotAnswer(what string, err error) error {
	return &Error{msg: "the upstream proxy " + p.name + " did not answer the " + what + ": " + netcause.Of(err), err: err}
}

// Error is an exchange with an origin that the way out failed, not the
// origin: the upstream proxy could not be reached, did not answer, or
// refused, or the origin's name could not be checked before it was handed
// on. It says so in a few words, the proxy's password redacted.
type Error struct {
	msg string
	err error // the network error, if any
}

func (e *Error) Error() string { return e.msg }
func (e *Error) Unwrap() error { return e.err }

// Problem is the words of err's failure of the way out, if err wraps one
// and the exchange was not cancelled first.
func Problem(err error) (string, bool) {
	if e, ok := errors.AsType[*Error](err); ok && !errors.Is(err, context.Canceled) {
		return e.Error(), true
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

// verdictCache keeps CheckOrigin's verdicts on names for verdictTTL, at
// most maxVerdicts of them. The zero value is ready.
type verdictCache struct {
	mu      sync.Mutex
	entries map[string]verdict // by host:port
}

type verdict struct {
	err     error // nil: allowed
	expires time.Time
}

func (c *verdictCache) get(key string, now time.Time) (error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.entries[key]
	if !ok || !now.Before(v.expires) {
		return nil, false
	}
	return v.err, true
}

// put keeps err, the verdict on key reached at now. A full cache drops
// its expired verdicts, and all of them if none had expired: it never
// grows past maxVerdicts.
func (c *verdictCache) put(key string, err error, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = make(map[string]verdict)
	}
	if _, ok := c.entries[key]; !ok && len(c.entries) >= maxVerdicts {
		for k, v := range c.entries {
			if !now.Before(v.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxVerdicts {
			clear(c.entries)
		}
	}
	c.entries[key] = verdict{err: err, expires: now.Add(verdictTTL)}
}
