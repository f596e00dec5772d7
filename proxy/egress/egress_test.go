package egress

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// fakeResolver answers from a table, as DNS the test controls would, and
// counts the lookups.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr // a name not here fails, as on SERVFAIL
	lookups int
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups++
	if addrs, ok := r.answers[host]; ok {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
}

func (r *fakeResolver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups
}

var errDenied = fmt.Errorf("denied for the test: %w", fs.ErrPermission)

// denyLinkLocal is a Control refusing 169.254.0.0/16, as the default
// destination policy does; it records what it judged.
type denyLinkLocal struct {
	mu     sync.Mutex
	judged []string
}

func (d *denyLinkLocal) control(_ context.Context, network, address string, c syscall.RawConn) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.judged = append(d.judged, network+" "+address)
	if c != nil {
		return errors.New("a RawConn: the proxy's connection judged")
	}
	if strings.HasPrefix(address, "169.254.") {
		return errDenied
	}
	return nil
}

func newTestProxy(control func(context.Context, string, string, syscall.RawConn) error) (*Proxy, *fakeResolver) {
	r := &fakeResolver{answers: map[string][]netip.Addr{
		"example.com":   {netip.MustParseAddr("::ffff:93.184.216.34"), netip.MustParseAddr("2001:db8::1")},
		"metadata.test": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("::ffff:169.254.169.254")},
	}}
	u := &url.URL{Scheme: "http", User: url.UserPassword("crawler", "s3cret"), Host: "127.0.0.1:3128"}
	return New(Options{URL: u, Control: control, Resolver: r}), r
}

// TestCheckOrigin: every address a name resolves to here is judged, as a
// dialer would judge it; a name that does not resolve here is refused,
// since the proxy could resolve it anywhere; with no Control nothing is
// resolved and every origin passes.
func TestCheckOrigin(t *testing.T) {
	for _, c := range []struct {
		host    string
		judged  string // what Control saw
		denied  bool
		unknown bool // refused as not resolving here
	}{
		{"example.com", "tcp 93.184.216.34:443,tcp [2001:db8::1]:443", false, false},
		{"metadata.test", "tcp 93.184.216.34:443,tcp 169.254.169.254:443", true, false},
		{"169.254.169.254", "tcp 169.254.169.254:443", true, false},
		{"2001:db8::2", "tcp [2001:db8::2]:443", false, false},
		{"servfail.test", "", false, true},
	} {
		t.Run(c.host, func(t *testing.T) {
			d := &denyLinkLocal{}
			p, _ := newTestProxy(d.control)
			err := p.CheckOrigin(t.Context(), c.host, "443")
			if got := strings.Join(d.judged, ","); got != c.judged {
				t.Errorf("Control judged %q, want %q", got, c.judged)
			}
			if errors.Is(err, errDenied) != c.denied {
				t.Errorf("err %v; want denied %v", err, c.denied)
			}
			_, unknown := errors.AsType[*Error](err)
			if unknown != c.unknown {
				t.Errorf("err %v; want refused as unresolved %v", err, c.unknown)
			}
			if unknown {
				why, ok := Problem(err)
				if !ok || !strings.Contains(why, "cannot resolve servfail.test here (DNS failure)") ||
					!strings.Contains(why, "ROBOTSGATE_DENY_DESTINATIONS=none hands every name on unchecked") {
					t.Errorf("Problem = %q, %v; want it to say the name must resolve here, and how to hand it on", why, ok)
				}
			}
		})
	}

	p, r := newTestProxy(nil)
	for _, host := range []string{"example.com", "servfail.test", "169.254.169.254"} {
		if err := p.CheckOrigin(t.Context(), host, "80"); err != nil {
			t.Errorf("with no Control, CheckOrigin(%s) = %v, want nil", host, err)
		}
	}
	if n := r.count(); n != 0 {
		t.Errorf("with no Control, %d lookups; want none", n)
	}
}

// TestFor: the request's port, or its scheme's, is judged, and the proxy
// is where an allowed request goes.
func TestFor(t *testing.T) {
	d := &denyLinkLocal{}
	p, _ := newTestProxy(d.control)
	for _, c := range []struct{ url, judged string }{
		{"http://example.com/x", "tcp 93.184.216.34:80"},
		{"https://example.com/x", "tcp 93.184.216.34:443"},
		{"http://example.com:8080/x", "tcp 93.184.216.34:8080"},
	} {
		d.judged = nil
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, c.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		proxy, err := p.For(req)
		if err != nil || proxy != p.URL() {
			t.Errorf("For(%s) = %v, %v; want the proxy", c.url, proxy, err)
		}
		if d.judged[0] != c.judged {
			t.Errorf("For(%s) judged %q first, want %q", c.url, d.judged[0], c.judged)
		}
	}
}

// TestVerdictsAreKept: a name is looked up once per verdictTTL, whatever
// the verdict; a lookup the request's end cut short leaves no verdict.
func TestVerdictsAreKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &denyLinkLocal{}
		p, r := newTestProxy(d.control)
		check := func(host string) error { return p.CheckOrigin(t.Context(), host, "443") }
		for range 3 {
			if err := check("example.com"); err != nil {
				t.Fatal(err)
			}
			if err := check("metadata.test"); !errors.Is(err, errDenied) {
				t.Fatalf("metadata.test: %v, want denied", err)
			}
			if _, ok := errors.AsType[*Error](check("servfail.test")); !ok {
				t.Fatal("servfail.test was not refused")
			}
		}
		if n := r.count(); n != 3 {
			t.Errorf("%d lookups for three names checked three times; want 3", n)
		}
		if err := p.CheckOrigin(t.Context(), "example.com", "8443"); err != nil || r.count() != 4 {
			t.Errorf("another port: %v after %d lookups; want its own verdict, a fourth lookup", err, r.count())
		}
		time.Sleep(verdictTTL)
		if err := check("example.com"); err != nil || r.count() != 5 {
			t.Errorf("after %v: %v after %d lookups; want a fifth lookup", verdictTTL, err, r.count())
		}

		ended, cancel := context.WithCancel(t.Context())
		cancel()
		if err := p.CheckOrigin(ended, "servfail.test", "80"); !errors.Is(err, context.Canceled) {
			t.Errorf("with the request over: %v, want it cancelled", err)
		}
		if _, ok := errors.AsType[*Error](p.CheckOrigin(t.Context(), "servfail.test", "80")); !ok || r.count() != 7 {
			t.Errorf("after a cancelled check, %d lookups; want the name looked up again and refused", r.count())
		}
	})
}

// TestVerdictCacheBound: a full cache drops what expired, or everything if
// nothing had; it never holds more than maxVerdicts.
func TestVerdictCacheBound(t *testing.T) {
	var c verdictCache
	start := time.Now()
	for i := range maxVerdicts {
		c.put(fmt.Sprint("old", i), nil, start)
	}
	later := start.Add(verdictTTL / 2)
	c.put("new", errDenied, later)
	if n := len(c.entries); n != 1 {
		t.Errorf("%d verdicts after one past the bound, none expired; want only the new one", n)
	}
	for i := range maxVerdicts - 1 {
		c.put(fmt.Sprint("newer", i), nil, later.Add(verdictTTL/2))
	}
	c.put("newest", nil, later.Add(verdictTTL))
	if _, ok := c.entries["new"]; ok || len(c.entries) != maxVerdicts {
		t.Errorf("%d verdicts, the expired one kept %v; want the expired one dropped, %d kept", len(c.entries), ok, maxVerdicts)
	}
	if err, ok := c.get("newest", later.Add(verdictTTL)); err != nil || !ok {
		t.Errorf("the newest verdict: %v, %v", err, ok)
	}
}

// TestErrorWords: the proxy's failures say what it did, never its
// password; a cancelled exchange is no failure of the proxy.
func TestErrorWords(t *testing.T) {
	p, _ := newTestProxy(nil)
	named := "the upstream proxy http://crawler:xxxxx@127.0.0.1:3128"
	refused := &http.Response{StatusCode: http.StatusProxyAuthRequired, Request: &http.Request{URL: &url.URL{Scheme: "http"}}}
	for _, c := range []struct {
		err  error
		want string
	}{
		{p.Refused("CONNECT", http.StatusForbidden), named + " refused the CONNECT: 403 Forbidden"},
		{p.Refusal(refused), named + " refused the request: 407 Proxy Authentication Required"},
		{p.ConnectAnswered(t.Context(), p.URL(), nil, &http.Response{StatusCode: 599}), named + " refused the CONNECT: 599"},
		{p.CannotConnect(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), "cannot connect to " + named + ": connection refused"},
		{p.DidNotAnswer("CONNECT", context.DeadlineExceeded), named + " did not answer the CONNECT: timeout"},
		{fmt.Errorf("fetch: %w", p.CannotConnect(syscall.ECONNRESET)), "cannot connect to " + named + ": connection reset"},
	} {
		if got, ok := Problem(c.err); !ok || got != c.want {
			t.Errorf("Problem(%v) = %q, %v; want %q", c.err, got, ok, c.want)
		}
	}
	if why, ok := Problem(p.CannotConnect(context.Canceled)); ok {
		t.Errorf("a cancelled dial is the proxy's failure: %q", why)
	}
	if err := p.ConnectAnswered(t.Context(), p.URL(), nil, &http.Response{StatusCode: http.StatusOK}); err != nil {
		t.Errorf("a CONNECT answered 200: %v", err)
	}
	https := &http.Response{StatusCode: http.StatusProxyAuthRequired, Request: &http.Request{URL: &url.URL{Scheme: "https"}}}
	var none *Proxy
	if p.Refusal(https) != nil || none.Refusal(refused) != nil {
		t.Error("a 407 inside a tunnel, or with no proxy, taken for the proxy's refusal")
	}
}
