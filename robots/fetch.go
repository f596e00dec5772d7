package robots

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// Defaults of [FetcherOptions].
const (
	DefaultFetchTimeout   = 5 * time.Second
	DefaultConnectTimeout = 3 * time.Second
	// MaxRedirects is how many consecutive redirects a fetch follows, the
	// minimum RFC 9309 §2.3.1.2 asks for; past it robots.txt is
	// unavailable.
	MaxRedirects = 5
	// maxHeaderBytes bounds an origin's response headers.
	maxHeaderBytes = 64 << 10
	// drainBytes is the most of an unused body read so that its
	// connection can carry the next request (a redirect to the same host).
	drainBytes = 4 << 10
	// acceptHeader asks for what RFC 9309 §2.3 says robots.txt is, and
	// takes anything else rather than a 406.
	acceptHeader = "text/plain, */*;q=0.1"
	// projectURL is where site owners learn what robotsgate is.
	projectURL = "https://github.com/robotsgate/robotsgate#for-site-owners"
)

// Errors a [FetchResult] wraps when redirects decided its outcome.
var (
	// ErrTooManyRedirects: robots.txt was not reached within
	// MaxRedirects redirects (unavailable, RFC 9309 §2.3.1.2).
	ErrTooManyRedirects = errors.New("too many redirects (more than 5)")
	// ErrRedirectLoop: a redirect led back to a URL already fetched
	// (unavailable, like too many redirects: it never ends).
	ErrRedirectLoop = errors.New("redirect loop")
	// ErrBadRedirect: a redirect without a Location, or to a URL that is
	// not http or https (unreachable).
	ErrBadRedirect = errors.New("unusable redirect")
)

// StatusError is FetchResult.Err when the origin answered robots.txt with
// a status that decided the outcome: 4xx, 5xx and any other non-2xx that
// is not a redirect followed.
type StatusError struct {
	URL  string
	Code int
}

func (e *StatusError) Error() string {
	msg := "GET " + e.URL + ": " + strconv.Itoa(e.Code)
	if text := http.StatusText(e.Code); text != "" {
		msg += " " + text
	}
	return msg
}

// Outcome is how a robots.txt fetch ended, in RFC 9309 §2.3.1's terms.
// The zero value is no outcome; [FetchResult.Check] treats it as a
// complete disallow.
type Outcome uint8

const (
	// OutcomeOK: a 2xx answer; its body's rules apply.
	OutcomeOK Outcome = iota + 1
	// OutcomeUnavailable: a 4xx answer (but 429), more than MaxRedirects
	// redirects, or a redirect loop: no restrictions (§2.3.1.3).
	OutcomeUnavailable
	// OutcomeUnreachable: a 5xx or 429 answer, another status that is
	// neither 2xx nor a usable redirect, or a network, TLS or protocol
	// error or a timeout: complete disallow (§2.3.1.4). It is the only
	// transient outcome: a cache may keep obeying an earlier good copy.
	OutcomeUnreachable
	// OutcomeRestricted: a 401 or 403 answer when
	// FetcherOptions.AuthDisallow asks for the 1996 draft's reading: the
	// origin answered, and its answer is a complete disallow. Unlike
	// OutcomeUnreachable it is not a failure; it replaces an earlier copy.
	OutcomeRestricted
)

// String returns "ok", "unavailable", "unreachable" or "restricted".
func (o Outcome) String() string {
	switch o {
	case OutcomeOK:
		return "ok"
	case OutcomeUnavailable:
		return "unavailable"
	case OutcomeUnreachable:
		return "unreachable"
	case OutcomeRestricted:
		return "restricted"
	}
	return "outcome " + strconv.Itoa(int(o))
}

// DefaultFetchUserAgent is the User-Agent robotsgate fetches robots.txt
// with: "robotsgate/<version> (+<project URL>)", the version reduced to
// the characters a product version may hold ("(devel)" gives "devel");
// without one, "robotsgate (+<project URL>)".
func DefaultFetchUserAgent(version string) string {
	v := strings.Map(func(r rune) rune {
		if r < 0x80 && isNameByte(byte(r)) {
			return r
		}
		return -1
	}, version)
	if v == "" {
		return "robotsgate (+" + projectURL + ")"
	}
	return "robotsgate/" + v + " (+" + projectURL + ")"
}

// FetcherOptions configures a [Fetcher]. The zero value is usable.
type FetcherOptions struct {
	// UserAgent identifies the fetches. Empty means
	// DefaultFetchUserAgent(""); control characters are dropped.
	UserAgent string
	// Timeout bounds one fetch from start to end: connecting, every
	// redirect and reading the body. Zero or less means
	// DefaultFetchTimeout.
	Timeout time.Duration
	// ConnectTimeout bounds each connection and each TLS handshake. Zero
	// or less means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// MaxBytes is the parse limit (see [Parser]): at most MaxBytes+1 bytes
	// of a body are read, the extra byte to notice a longer one. Zero or
	// less means DefaultMaxBytes.
	MaxBytes int
	// AuthDisallow makes 401 and 403 mean complete disallow
	// (OutcomeRestricted), as the 1996 draft recommended, instead of RFC
	// 9309's "unavailable".
	AuthDisallow bool
	// RootCAs verifies origins' certificates; nil means the system roots.
	RootCAs *x509.CertPool
	// DialControl, when set, is called with each resolved address before
	// connecting (see net.Dialer.ControlContext); an error refuses the
	// connection. The proxy's destination policy comes in here.
	DialControl func(ctx context.Context, network, address string, c syscall.RawConn) error
	// MaxConcurrent bounds the fetches under way at once; a fetch that
	// finds no room within its Timeout ends unreachable. Zero or less means
	// DefaultMaxConcurrent.
	MaxConcurrent int
}

// DefaultMaxConcurrent is how many fetches a Fetcher runs at once unless
// told otherwise: enough for any real crawl, few enough that a client
// naming endless origins cannot make it hold endless connections.
const DefaultMaxConcurrent = 256

// Fetcher fetches robots.txt files. It is safe for concurrent use; Close
// releases its idle connections.
type Fetcher struct {
	slots        chan struct{} // one per fetch under way
	transport    *http.Transport
	dialer       net.Dialer
	parser       Parser
	userAgent    string
	timeout      time.Duration
	maxBytes     int
	authDisallow bool
}

// NewFetcher returns a Fetcher with its own connections: it never goes
// through the process's HTTP_PROXY, keeps no cookies and bounds every
// step of a fetch.
func NewFetcher(opts FetcherOptions) *Fetcher {
	f := &Fetcher{
		userAgent:    strings.Map(dropControl, opts.UserAgent),
		timeout:      opts.Timeout,
		maxBytes:     opts.MaxBytes,
		authDisallow: opts.AuthDisallow,
	}
	if f.userAgent == "" {
		f.userAgent = DefaultFetchUserAgent("")
	}
	if f.timeout <= 0 {
		f.timeout = DefaultFetchTimeout
	}
	if f.maxBytes <= 0 {
		f.maxBytes = DefaultMaxBytes
	}
	f.parser = Parser{MaxBytes: f.maxBytes}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	f.slots = make(chan struct{}, opts.MaxConcurrent)
	connect := opts.ConnectTimeout
	if connect <= 0 {
		connect = DefaultConnectTimeout
	}
	f.dialer = net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second, ControlContext: opts.DialControl}
	f.transport = &http.Transport{
		Proxy:                  nil, // from the origin itself: robotsgate may well be HTTP_PROXY
		DialContext:            f.dial,
		TLSClientConfig:        &tls.Config{RootCAs: opts.RootCAs},
		TLSHandshakeTimeout:    connect,
		ResponseHeaderTimeout:  f.timeout,
		MaxResponseHeaderBytes: maxHeaderBytes,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        30 * time.Second,
	}
	return f
}

func dropControl(r rune) rune {
	if r < ' ' || r == 0x7F {
		return -1
	}
	return r
}

// Close releases the Fetcher's idle connections. Fetches may still run
// afterwards; they open new ones.
func (f *Fetcher) Close() { f.transport.CloseIdleConnections() }

// dial refuses names under ".invalid" at once, as RFC 6761 §6.4 asks of
// name resolution libraries (Go's asks the resolver), then dials.
func (f *Fetcher) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		name := strings.ToLower(strings.TrimSuffix(host, "."))
		if name == "invalid" || strings.HasSuffix(name, ".invalid") {
			return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{
				Err: "no such host", Name: host, IsNotFound: true,
			}}
		}
	}
	return f.dialer.DialContext(ctx, network, addr)
}

// FetchResult is one robots.txt fetch: how it went, what the origin asked
// of caches and, when it succeeded, the rules. It is immutable once
// returned and safe for concurrent use.
type FetchResult struct {
	// Origin is the canonical origin the rules apply to (see
	// [OriginOf]), whatever the redirects.
	Origin  string
	Outcome Outcome
	// Status is the status of the last answer, 0 when there was none.
	Status int
	// Redirects is how many redirects were followed.
	Redirects int
	// FinalURL is the last URL requested.
	FinalURL string
	// Bytes is how many body bytes were read: at most the parse limit
	// plus one.
	Bytes int
	// Truncated reports a body longer than the parse limit.
	Truncated bool
	// Duration is how long the fetch took, redirects and parsing
	// included.
	Duration time.Duration
	// Err says why the outcome is not OK: a *StatusError, one of the
	// redirect errors, or the network error, each with the URL.
	Err error
	// Detail is the short account of a non-OK outcome that verdicts carry
	// (see [Verdict]): "robots.txt 404", "robots.txt 503", "robots.txt
	// unreachable: timeout", "robots.txt: redirect loop"...
	Detail string
	// FetchedAt is when the fetch ended.
	FetchedAt time.Time
	// Freshness is what the last answer asked of caches.
	Freshness Freshness
	// Robots is the parsed file; never nil when Outcome is OutcomeOK (an
	// empty body has no rules), nil otherwise.
	Robots *Robots
}

// Check decides whether the crawler with the product token may fetch
// pathAndQuery on r.Origin: by the rules when the fetch succeeded;
// anything when robots.txt is unavailable; nothing but /robots.txt
// otherwise. Like [Robots.Check] it does not allocate unless the path
// needs percent-normalising.
func (r *FetchResult) Check(token, pathAndQuery string) Verdict {
	if r != nil && r.Outcome == OutcomeOK {
		return r.Robots.Check(token, pathAndQuery)
	}
	if isRobotsTxt(normalizePath(pathAndQuery)) {
		return Verdict{Allowed: true, Cause: CauseRobotsTxt}
	}
	if r == nil {
		return Verdict{Cause: CauseUnreachable, Detail: "robots.txt not fetched"}
	}
	if r.Outcome == OutcomeUnavailable {
		return Verdict{Allowed: true, Cause: CauseUnavailable, Detail: r.Detail}
	}
	return Verdict{Cause: CauseUnreachable, Detail: r.Detail}
}

// CheckReadings is Check over every reading of the path (see
// [Robots.CheckReadings]).
func (r *FetchResult) CheckReadings(token, pathAndQuery string) Verdict {
	v := r.Check(token, pathAndQuery)
	if !v.Allowed || !mayReadOtherwise(pathAndQuery) {
		return v
	}
	return judgeReadings(v, pathAndQuery, func(p string) Verdict { return r.Check(token, p) })
}

// RetainedBytes estimates the memory r keeps alive, parsed rules
// included, for charging it against a cache budget.
func (r *FetchResult) RetainedBytes() int64 {
	if r == nil {
		return 0
	}
	n := allocSize(int(unsafe.Sizeof(*r))) + allocSize(len(r.Origin)) +
		allocSize(len(r.FinalURL)) + allocSize(len(r.Detail))
	if r.Err != nil {
		// A wrapped error is a few small structs and the strings of its
		// message.
		n += 128 + 2*int64(len(r.Err.Error()))
	}
	return n + r.Robots.RetainedBytes()
}

// Fetch fetches origin's robots.txt and parses it. origin is an http or
// https origin (any URL of it will do; see [OriginOf]). Fetch never
// fails: every way a fetch can go wrong is an outcome, described by Err
// and Detail. It ends within the Timeout, or sooner when ctx ends.
func (f *Fetcher) Fetch(ctx context.Context, origin string) *FetchResult {
	start := time.Now()
	res := &FetchResult{Origin: origin}
	if canonical, err := OriginOf(origin); err != nil {
		res.fail(OutcomeUnreachable, "robots.txt: invalid origin", fmt.Errorf("robots.txt fetch: %w", err))
	} else {
		res.Origin = canonical
		ctx, cancel := context.WithTimeout(ctx, f.timeout)
		if f.takeSlot(ctx) {
			f.fetch(ctx, res)
			<-f.slots
		} else if err := ctx.Err(); errors.Is(err, context.Canceled) {
			res.failNetwork(fmt.Errorf("robots.txt fetch of %s: %w", canonical, err))
		} else {
			res.fail(OutcomeUnreachable, "robots.txt unreachable: too many fetches under way",
				fmt.Errorf("robots.txt fetch of %s: no room among %d fetches under way: %w", canonical, cap(f.slots), err))
		}
		cancel()
	}
	res.FetchedAt = time.Now()
	res.Duration = res.FetchedAt.Sub(start)
	return res
}

// takeSlot waits for room among the fetches under way until ctx ends; a
// free slot is taken even when ctx has ended, so the fetch reports why.
func (f *Fetcher) takeSlot(ctx context.Context) bool {
	select {
	case f.slots <- struct{}{}:
		return true
	default:
	}
	select {
	case f.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *FetchResult) fail(outcome Outcome, detail string, err error) {
	r.Outcome, r.Detail, r.Err = outcome, detail, err
}

// failNetwork records an error that left no usable answer.
func (r *FetchResult) failNetwork(err error) {
	r.fail(OutcomeUnreachable, "robots.txt unreachable: "+networkCause(err), err)
}

// fetch requests robots.txt of res.Origin, canonical by now, and follows
// redirects until an answer decides the outcome.
func (f *Fetcher) fetch(ctx context.Context, res *FetchResult) {
	scheme, host, _ := strings.Cut(res.Origin, "://")
	target := &url.URL{Scheme: scheme, Host: host, Path: "/robots.txt"}
	seen := make([]string, 0, MaxRedirects+1)
	for {
		res.FinalURL = target.String()
		seen = append(seen, redirectKey(target))
		resp, err := f.get(ctx, target)
		if err != nil {
			res.failNetwork(fmt.Errorf("fetch %s: %w", res.FinalURL, err))
			return
		}
		res.Status = resp.StatusCode
		res.Freshness = freshnessOf(resp.Header, time.Now())
		code := resp.StatusCode
		if 200 <= code && code <= 299 {
			f.readRules(resp, res)
			resp.Body.Close()
			return
		}
		drain(resp)
		if !isRedirect(code) {
			f.judgeStatus(res)
			return
		}
		next, err := redirectTarget(target, resp.Header.Get("Location"))
		switch {
		case err != nil && next == nil:
			res.fail(OutcomeUnreachable, "robots.txt "+strconv.Itoa(code)+" without a usable Location",
				fmt.Errorf("%s answered %d: %w: %w", res.FinalURL, code, ErrBadRedirect, err))
		case err != nil:
			res.fail(OutcomeUnreachable, "robots.txt: redirect to a non-HTTP URL",
				fmt.Errorf("%s redirects to %s: %w: %w", res.FinalURL, next, ErrBadRedirect, err))
		case slices.Contains(seen, redirectKey(next)):
			res.fail(OutcomeUnavailable, "robots.txt: redirect loop",
				fmt.Errorf("%s redirects back to %s: %w", res.FinalURL, next, ErrRedirectLoop))
		case res.Redirects == MaxRedirects:
			res.fail(OutcomeUnavailable, "robots.txt: more than 5 redirects",
				fmt.Errorf("%s redirects to %s: %w", res.FinalURL, next, ErrTooManyRedirects))
		default:
			res.Redirects++
			target = next
			continue
		}
		return
	}
}

// get sends the one request a robots.txt fetch makes per URL: GET with
// our User-Agent and Accept, nothing else of ours.
func (f *Fetcher) get(ctx context.Context, u *url.URL) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header = http.Header{
		"User-Agent": {f.userAgent},
		"Accept":     {acceptHeader},
	}
	// The transport, not a Client: redirects are followed by fetch, and
	// there is no cookie jar, no Referer, no credentials to carry.
	return f.transport.RoundTrip(req)
}

// readRules reads a 2xx body up to the parse limit and parses it. A body
// cut short by the network is no robots.txt: unreachable.
func (f *Fetcher) readRules(resp *http.Response, res *FetchResult) {
	body, err := readLimited(resp.Body, f.maxBytes+1, resp.ContentLength)
	res.Bytes = len(body)
	if err != nil {
		res.failNetwork(fmt.Errorf("read body of %s: %w", res.FinalURL, err))
		return
	}
	res.Truncated = len(body) > f.maxBytes
	res.Outcome = OutcomeOK
	res.Robots = f.parser.Parse(body)
}

// judgeStatus decides the outcome of an answer that is neither 2xx nor a
// redirect (RFC 9309 §2.3.1.3, §2.3.1.4 and robotsgate's choices).
func (f *Fetcher) judgeStatus(res *FetchResult) {
	code := res.Status
	detail := "robots.txt " + strconv.Itoa(code)
	err := &StatusError{URL: res.FinalURL, Code: code}
	switch {
	case (code == http.StatusUnauthorized || code == http.StatusForbidden) && f.authDisallow:
		res.fail(OutcomeRestricted, detail, err)
	case 400 <= code && code <= 499 && code != http.StatusTooManyRequests:
		res.fail(OutcomeUnavailable, detail, err)
	default:
		// 429 asks us to come back later, not that there are no rules;
		// 5xx, 1xx, 304 and the like say nothing usable: the safe side.
		res.fail(OutcomeUnreachable, detail, err)
	}
}

// isRedirect reports the statuses whose Location a client may follow on
// its own (RFC 9110 §15.4); 304, 305 and 306 are not redirects to follow.
func isRedirect(code int) bool {
	switch code {
	case http.StatusMultipleChoices, http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// redirectTarget resolves a Location against the URL that answered it.
// It returns a nil URL when there is no URL with a host to resolve, and
// the URL with an error when it is not http or https. The target loses
// any user information and fragment: credentials are never sent.
func redirectTarget(from *url.URL, location string) (*url.URL, error) {
	if location == "" {
		return nil, errors.New("no Location header")
	}
	next, err := from.Parse(location)
	if err != nil {
		return nil, fmt.Errorf("bad Location: %w", err)
	}
	next.User, next.Fragment, next.RawFragment = nil, "", ""
	if next.Scheme != "http" && next.Scheme != "https" { // url.Parse lower-cases it
		return next, fmt.Errorf("scheme %q is not http or https", next.Scheme)
	}
	if next.Hostname() == "" {
		return nil, fmt.Errorf("redirect to %q names no host", location)
	}
	return next, nil
}

// redirectKey identifies the resource a URL names, to notice a redirect
// loop however its origin is spelled.
func redirectKey(u *url.URL) string {
	origin, err := OriginFromURL(u)
	if err != nil {
		return u.String()
	}
	return origin + u.RequestURI()
}

// drain reads a little of a body that is not needed, so that the
// connection can be reused, then closes it. Only a body known to be short
// is drained: reading an unknown one could wait on a slow origin.
func drain(resp *http.Response) {
	if 0 <= resp.ContentLength && resp.ContentLength <= drainBytes {
		_, _ = io.CopyN(io.Discard, resp.Body, drainBytes)
	}
	resp.Body.Close()
}

// readLimited reads r to its end or until it holds limit bytes, whichever
// comes first. Its buffer never grows past limit bytes; sizeHint (the
// Content-Length, -1 when unknown) sizes the first one.
func readLimited(r io.Reader, limit int, sizeHint int64) ([]byte, error) {
	size := 8 << 10
	if 0 <= sizeHint && sizeHint < int64(limit) {
		size = int(sizeHint) + 1 // the +1 meets the end without growing
	}
	buf := make([]byte, 0, min(size, limit))
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), limit))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// networkCause names, in a few words, why no usable answer came.
func networkCause(err error) string {
	var (
		dnsErr      *net.DNSError
		certErr     *tls.CertificateVerificationError
		unknownCA   x509.UnknownAuthorityError
		wrongHost   x509.HostnameError
		invalidCert x509.CertificateInvalidError
		recordErr   tls.RecordHeaderError
		alertErr    tls.AlertError
		netErr      net.Error
	)
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, fs.ErrPermission):
		return "destination not permitted"
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return "host not found"
		}
		if dnsErr.IsTimeout {
			return "timeout"
		}
		return "DNS failure"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed early"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to host"
	case errors.As(err, &unknownCA):
		return "TLS certificate not trusted"
	case errors.As(err, &wrongHost):
		return "TLS certificate names another host"
	case errors.As(err, &invalidCert), errors.As(err, &certErr):
		return "TLS certificate invalid"
	case errors.As(err, &recordErr), errors.As(err, &alertErr):
		return "TLS handshake failed"
	}
	// net/http reports these with messages only, no error values.
	switch msg := err.Error(); {
	case strings.Contains(msg, "server response headers exceeded"):
		return "response headers too large"
	case strings.Contains(msg, "malformed HTTP"):
		return "malformed response"
	}
	return "network error"
}

// Freshness is what an answer asked of caches (RFC 9111), read as a
// shared cache reads it: robotsgate serves one copy to many crawlers.
// "private" is ignored: robotsgate fetches with no credentials, so the
// answer is nobody's private copy, and it is never served to a client.
type Freshness struct {
	// MaxAge is s-maxage, or else max-age; an invalid value counts as 0
	// (stale, RFC 9111 §4.2.1).
	MaxAge    time.Duration
	HasMaxAge bool
	// NoStore and NoCache report those Cache-Control directives; a
	// no-cache that names header fields only concerns those fields, which
	// robotsgate does not keep, and is not reported.
	NoStore, NoCache bool
	// Expires is the Expires header; zero with HasExpires when it is not
	// a valid date, which means already expired (RFC 9111 §5.3).
	Expires    time.Time
	HasExpires bool
	// Date is the answer's Date header, or when it arrived when there is
	// none: Expires counts from it.
	Date time.Time
	// Age is the Age header: how long the answer sat in caches on the way.
	Age time.Duration
}

// TTL returns how long the answer may be used from when it arrived, and
// whether the origin said at all: 0 for no-store and no-cache; max-age
// (or s-maxage) less Age; else Expires less Date less Age. false means
// no preference.
func (f Freshness) TTL() (time.Duration, bool) {
	var lifetime time.Duration
	switch {
	case f.NoStore || f.NoCache:
		return 0, true
	case f.HasMaxAge:
		lifetime = f.MaxAge
	case f.HasExpires && f.Expires.IsZero():
		return 0, true
	case f.HasExpires:
		lifetime = f.Expires.Sub(f.Date)
	default:
		return 0, false
	}
	return max(lifetime-f.Age, 0), true
}

// maxDeltaSeconds is where RFC 9111 §1.2.2 caps delta-seconds.
const maxDeltaSeconds = 1 << 31

// freshnessOf reads the caching headers of an answer that arrived at
// received.
func freshnessOf(h http.Header, received time.Time) Freshness {
	f := Freshness{Date: received}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		f.Date = date
	}
	if v := h.Values("Expires"); len(v) > 0 {
		f.HasExpires = true
		if expires, err := http.ParseTime(v[0]); err == nil {
			f.Expires = expires
		}
	}
	if age, ok := deltaSeconds(h.Get("Age")); ok {
		f.Age = age
	}
	var maxAge, sharedMaxAge time.Duration
	var hasMaxAge, hasSharedMaxAge bool
	for _, line := range h.Values("Cache-Control") {
		for name, value := range cacheDirectives(line) {
			switch {
			case strings.EqualFold(name, "no-store"):
				f.NoStore = true
			case strings.EqualFold(name, "no-cache"):
				f.NoCache = f.NoCache || value == ""
			case strings.EqualFold(name, "max-age") && !hasMaxAge:
				// The first occurrence counts (RFC 9111 §4.2.1).
				maxAge, _ = deltaSeconds(value)
				hasMaxAge = true
			case strings.EqualFold(name, "s-maxage") && !hasSharedMaxAge:
				sharedMaxAge, _ = deltaSeconds(value)
				hasSharedMaxAge = true
			}
		}
	}
	switch {
	case hasSharedMaxAge:
		f.MaxAge, f.HasMaxAge = sharedMaxAge, true
	case hasMaxAge:
		f.MaxAge, f.HasMaxAge = maxAge, true
	}
	return f
}

// deltaSeconds parses a non-negative number of seconds (RFC 9111 §1.2.2),
// capped at 2^31 seconds.
func deltaSeconds(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > maxDeltaSeconds {
		n = maxDeltaSeconds // only overflow fails once the digits are checked
	}
	return time.Duration(n) * time.Second, true
}

// cacheDirectives yields the directives of one Cache-Control field value:
// each name with its argument, unquoted, or "" when it has none. Commas
// inside a quoted argument do not split directives.
func cacheDirectives(line string) iter.Seq2[string, string] {
	return func(yield func(name, value string) bool) {
		rest := line
		for rest != "" {
			var item string
			item, rest = nextDirective(rest)
			name, value, _ := strings.Cut(item, "=")
			name, value = strings.TrimSpace(name), strings.TrimSpace(value)
			if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
				value = unquote(value[1 : len(value)-1])
			}
			if name != "" && !yield(name, value) {
				return
			}
		}
	}
}

// nextDirective splits s at the first comma outside a quoted string.
func nextDirective(s string) (item, rest string) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// unquote removes the backslashes of a quoted-string's quoted pairs.
func unquote(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
