// Package fetch gets robots.txt files from origins, as RFC 9309 §2.3 asks:
// GET /robots.txt with robotsgate's own identity and nothing of the
// crawler's, redirects followed up to a bound, every step bounded in time
// and bytes, the answer's freshness headers read as a shared cache reads
// them, and every way it can go wrong turned into an outcome that
// [robots.Answer] judges by. It is the only package that reads robots.txt
// from the network; the robots package itself does no I/O.
package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"robotsgate/proxy/egress"
	"robotsgate/proxy/netcause"
	"robotsgate/robots"
	"robotsgate/robots/usage"
)

// Defaults of [Options].
const (
	DefaultTimeout        = 5 * time.Second
	DefaultConnectTimeout = 3 * time.Second
	// MaxRedirects is how many consecutive redirects a fetch follows, the
	// minimum RFC 9309 §2.3.1.2 asks for; past it robots.txt is
	// unavailable.
	MaxRedirects = 5
	// maxHeaderBytes bounds an origin's response headers.
	maxHeaderBytes = 64 << 10
	// firstReadBytes is the most a body's buffer is given before any of
	// it arrives: past it, the buffer grows with what arrives, never with
	// what the origin announces, so a stalled origin that announces the
	// parse limit and sends a little costs a little for the whole fetch
	// timeout.
	firstReadBytes = 64 << 10
	// drainBytes is the most of an unused body read so that its
	// connection can carry the next request (a redirect to the same host).
	drainBytes = 4 << 10
	// acceptHeader asks for what RFC 9309 §2.3 says robots.txt is, and
	// takes anything else rather than a 406.
	acceptHeader = "text/plain, */*;q=0.1"
	// projectURL is where site owners learn what robotsgate is.
	projectURL = "https://github.com/robotsgate/robotsgate#for-site-owners"
)

// Errors a [Result] wraps when redirects decided its outcome.
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

// StatusError is Result.Err when the origin answered robots.txt with
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

// DefaultUserAgent is the User-Agent robotsgate fetches robots.txt
// with: "robotsgate/<version> (+<project URL>)", the version reduced to
// the characters a product version may hold ("(devel)" gives "devel");
// without one, "robotsgate (+<project URL>)".
func DefaultUserAgent(version string) string {
	v := strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune(".-_+~", r) {
			return r
		}
		return -1
	}, version)
	if v == "" {
		return "robotsgate (+" + projectURL + ")"
	}
	return "robotsgate/" + v + " (+" + projectURL + ")"
}

// Options configures a [Fetcher]. The zero value is usable.
type Options struct {
	// UserAgent identifies the fetches. Empty means
	// DefaultUserAgent(""); control characters are dropped.
	UserAgent string
	// Timeout bounds one fetch from start to end: connecting, every
	// redirect and reading the body. A fetch may first wait as long for a
	// free slot (see MaxConcurrent), which does not shorten its own time.
	// Zero or less means DefaultTimeout.
	Timeout time.Duration
	// ConnectTimeout bounds each connection and each TLS handshake. Zero
	// or less means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// MaxBytes is the parse limit (see [robots.Parser]): at most
	// MaxBytes+1 bytes of a body are read, the extra byte to notice a
	// longer one. Zero or less means robots.DefaultMaxBytes; more than
	// robots.MaxParseBytes means robots.MaxParseBytes.
	MaxBytes int
	// KeepIgnored keeps the list of the lines the parser ignored (see
	// [robots.Parser.KeepIgnored]) in every Result. The proxy leaves it
	// off: it never shows them, and a cached file of junk would keep an
	// entry per line. A tool that prints them, such as the check command,
	// turns it on.
	KeepIgnored bool
	// AuthDisallow makes 401 and 403 mean complete disallow, as the 1996
	// draft recommended, instead of RFC 9309's "unavailable" (see
	// [robots.OutcomeOfStatus]).
	AuthDisallow bool
	// RootCAs verifies origins' certificates; nil means the system roots.
	RootCAs *x509.CertPool
	// DialControl, when set, is called with each resolved address before
	// connecting (see net.Dialer.ControlContext); an error refuses the
	// connection. The proxy's destination policy comes in here, when it
	// denies anything.
	DialControl func(ctx context.Context, network, address string, c syscall.RawConn) error
	// UpstreamProxy, when set, is the HTTP proxy (http://host:port) every
	// fetch goes through: http URLs as proxy requests, https ones through
	// a CONNECT tunnel, with Basic credentials from its user information.
	// Connections are then made to the proxy, whose address DialControl
	// does not judge: it judges instead, before the request is handed to
	// the proxy, each address the origin's name resolves to here (with a
	// nil c), and a name that does not resolve here is refused (see
	// [egress.Options]). With DialControl nil no name is resolved: every
	// origin is handed on. A 407 answer, or a CONNECT refused, is the
	// proxy's failure, never the origin's answer: robots.txt is
	// unreachable.
	UpstreamProxy *url.URL
	// MaxConcurrent bounds the fetches under way at once, and MaxPerClient
	// those of one client (the Client of a [ClientContext]). A fetch that
	// finds no free slot waits, at most its Timeout; a slot that frees goes
	// to the waiting client that holds the fewest, the one waiting longest
	// among equals. A fetch that got no slot ends unreachable with a
	// *[SlotError], which [Fetcher.Load] keeps out of every cache. Zero or
	// less means DefaultMaxConcurrent, and DefaultMaxPerClient; MaxPerClient
	// is at most MaxConcurrent.
	MaxConcurrent, MaxPerClient int
	// MaxParses bounds the bodies parsed at once, all clients together:
	// parsing is CPU-bound, and a parse of a large body allocates several
	// times its size, so more parses at once than CPUs would only hold
	// more memory. A parse waits for a free one, within its fetch's
	// Timeout; a parse slot that frees goes to the waiting client that
	// holds the fewest. A body that got none is not parsed: the fetch ends
	// unreachable with a *[ParseSlotError], which [Fetcher.Load] keeps out
	// of every cache. Zero or less means runtime.GOMAXPROCS(0).
	MaxParses int
	// Share makes [Fetcher.Load] encode each result for a fleet's shared
	// store (cache.Result.Shared), which [Fetcher.Decode] reads back: the
	// body as fetched, parsed again by each instance. Off, nothing is
	// encoded and no copy of the body outlives the fetch.
	Share bool
	// Logger receives a debug record per fetch made by [Fetcher.Load]; nil
	// discards them.
	Logger *slog.Logger
	// TDMRep makes each fetch also get the origin's
	// /.well-known/tdmrep.json (W3C TDMRep, see [usage.ParseTDMRep]) once
	// robots.txt is done: in the same fetch slot and within the same
	// Timeout, with the same User-Agent and redirect rules, at most
	// MaxTDMRepBytes of it. It is not requested when robots.txt got no
	// answer at all. Whatever becomes of it, robots.txt's outcome is the
	// same; see Result.TDMRep.
	TDMRep bool
}

// DefaultMaxConcurrent is how many fetches a Fetcher runs at once unless
// told otherwise: enough for any real crawl, few enough that a client
// naming endless origins cannot make it hold endless connections.
const DefaultMaxConcurrent = 256

// DefaultMaxPerClient is how many of maxConcurrent fetches one client may
// have under way unless told otherwise: a quarter (at least 1), so that it
// takes several clients at their share to fill every slot.
func DefaultMaxPerClient(maxConcurrent int) int { return max(maxConcurrent/4, 1) }

// Fetcher fetches robots.txt files. It is safe for concurrent use; Close
// releases its idle connections.
type Fetcher struct {
	opts      Options       // as New filled them in
	slots     *slots        // the fetches under way
	parses    *slots        // the parses under way, one client's up to all
	upstream  *egress.Proxy // nil: origins are fetched directly
	transport *http.Transport
	dialer    net.Dialer
	parser    robots.Parser
}

// New returns a Fetcher with its own connections: it never goes
// through the process's HTTP_PROXY, keeps no cookies and bounds every
// step of a fetch.
func New(opts Options) *Fetcher { return newFetcher(opts, nil) }

// newFetcher is New with the resolver that judges origins' names before
// they are handed to an upstream proxy; nil means net.DefaultResolver.
func newFetcher(opts Options, resolver egress.Resolver) *Fetcher {
	opts.UserAgent = strings.Map(dropControl, opts.UserAgent)
	if opts.UserAgent == "" {
		opts.UserAgent = DefaultUserAgent("")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = robots.DefaultMaxBytes
	}
	// The parser reads no more; Result.Bytes holds what the limit allows.
	opts.MaxBytes = min(opts.MaxBytes, robots.MaxParseBytes)
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if opts.MaxPerClient <= 0 {
		opts.MaxPerClient = DefaultMaxPerClient(opts.MaxConcurrent)
	}
	opts.MaxPerClient = min(opts.MaxPerClient, opts.MaxConcurrent)
	if opts.MaxParses <= 0 {
		opts.MaxParses = runtime.GOMAXPROCS(0)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Fetcher{
		opts:   opts,
		slots:  newSlots(opts.MaxConcurrent, opts.MaxPerClient),
		parses: newSlots(opts.MaxParses, opts.MaxParses),
		parser: robots.Parser{MaxBytes: opts.MaxBytes, KeepIgnored: opts.KeepIgnored},
	}
	connect := opts.ConnectTimeout
	f.dialer = net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second, ControlContext: opts.DialControl}
	f.transport = &http.Transport{
		Proxy:                  nil, // never HTTP_PROXY, which may well be robotsgate; UpstreamProxy only
		DialContext:            f.dial,
		TLSClientConfig:        &tls.Config{RootCAs: opts.RootCAs},
		TLSHandshakeTimeout:    connect,
		ResponseHeaderTimeout:  opts.Timeout,
		MaxResponseHeaderBytes: maxHeaderBytes,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        30 * time.Second,
	}
	if opts.UpstreamProxy != nil {
		// The proxy is the operator's choice: proxyFor judges the origin.
		f.upstream = egress.New(egress.Options{URL: opts.UpstreamProxy, Control: opts.DialControl, ResolveTimeout: connect, Resolver: resolver})
		f.dialer.ControlContext = nil
		f.transport.Proxy = f.proxyFor
		f.transport.OnProxyConnectResponse = f.upstream.ConnectAnswered
	}
	return f
}

func dropControl(r rune) rune {
	if r < ' ' || r == 0x7F {
		return -1
	}
	return r
}

// Options returns the options the Fetcher works with: those given to
// [New], every default filled in.
func (f *Fetcher) Options() Options { return f.opts }

// Close releases the Fetcher's idle connections. Fetches may still run
// afterwards; they open new ones.
func (f *Fetcher) Close() { f.transport.CloseIdleConnections() }

// dial refuses names under ".invalid" at once, as RFC 6761 §6.4 asks of
// name resolution libraries (Go's asks the resolver), then dials: the
// origin, or the upstream proxy.
func (f *Fetcher) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if host, _, err := net.SplitHostPort(addr); err == nil && isInvalidName(host) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: noSuchHost(host)}
	}
	conn, err := f.dialer.DialContext(ctx, network, addr)
	if err != nil && f.upstream != nil {
		return nil, f.upstream.CannotConnect(err)
	}
	return conn, err
}

// isInvalidName reports a name under ".invalid" (RFC 6761 §6.4).
func isInvalidName(host string) bool {
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	return name == "invalid" || strings.HasSuffix(name, ".invalid")
}

func noSuchHost(host string) *net.DNSError {
	return &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// proxyFor hands a request to the upstream proxy once its origin passes
// what dial checks of an origin it connects to itself: no ".invalid"
// name, no address DialControl refuses among those its name resolves to.
func (f *Fetcher) proxyFor(req *http.Request) (*url.URL, error) {
	if host := req.URL.Hostname(); isInvalidName(host) {
		return nil, noSuchHost(host)
	}
	return f.upstream.For(req)
}

// Result is one robots.txt fetch: how it went and, when it succeeded,
// the rules; what a cache keeps of it for as long as it keeps the rules
// (what only loading it into a cache uses is its [Timing]). It is
// immutable once returned and safe for concurrent use. Its fields are
// ordered and sized to fit the 112-byte size class.
type Result struct {
	// Answer is the outcome, in RFC 9309's terms, with the rules when it
	// is OK; its Check and CheckReadings judge paths.
	robots.Answer
	// Origin is the canonical origin the rules apply to (see
	// [robots.OriginOf]), whatever the redirects.
	Origin string
	// FinalURL is the last URL requested. (When it is Origin's
	// /robots.txt, as it mostly is, Origin is a part of it, not a string
	// of its own.)
	FinalURL string
	// TDMRepDetail says in a few words how the tdmrep.json fetch went:
	// "tdmrep.json: 3 rules", "tdmrep.json 404", "tdmrep.json: invalid
	// JSON at byte 12: …"; "" without Options.TDMRep.
	TDMRepDetail string
	// Err says why the outcome is not OK: a *StatusError, one of the
	// redirect errors, or the network error, each with the URL; a
	// *SlotError when robots.txt was not fetched at all, a
	// *ParseSlotError when it was fetched but not parsed.
	Err error
	// TDMRep is the origin's tdmrep.json when [Options.TDMRep] is set and
	// it was fetched (a 2xx answer, redirects followed) and parsed; nil
	// otherwise. It is kept, cached and shared with robots.txt's rules.
	TDMRep *usage.TDMRep
	// Bytes is how many body bytes were read: at most the parse limit
	// plus one (see [Options.MaxBytes]).
	Bytes int32
	// Status is the status of the last answer, 0 when there was none
	// (an HTTP/2 status past three digits is none: unreachable).
	Status uint16
	// Redirects is how many redirects were followed: at most
	// MaxRedirects.
	Redirects uint8
	// Truncated reports a body longer than the parse limit.
	Truncated bool
}

// Timing is what a fetch yields beside its [Result] that only loading
// it into a cache uses, so that a cache does not keep it for as long as
// the rules: when it ended, how long it took, how long its answer may
// be kept.
type Timing struct {
	// FetchedAt is when the fetch ended.
	FetchedAt time.Time
	// Duration is how long the fetch took, redirects and parsing
	// included.
	Duration time.Duration
	// Freshness is what the last answer asked of caches.
	Freshness Freshness
}

// RetainedBytes is the memory r keeps alive, parsed rules included, for
// charging it against a cache budget: r itself and each string it holds,
// as Go's allocator rounds them (a string that is part of another counts
// once), and its error, estimated.
func (r *Result) RetainedBytes() int64 {
	if r == nil {
		return 0
	}
	n := allocSize(int(unsafe.Sizeof(*r))) + stringBytes(r.Detail) + stringBytes(r.FinalURL) + stringBytes(r.TDMRepDetail) +
		r.Answer.Robots.RetainedBytes() + r.TDMRep.RetainedBytes()
	if !within(r.Origin, r.FinalURL) {
		n += stringBytes(r.Origin)
	}
	if r.Err != nil {
		// A wrapped error is a few small structs and the strings of its
		// message.
		n += 128 + 2*int64(len(r.Err.Error()))
	}
	return n
}

// stringBytes is the allocation holding a string of s's length. (A
// Detail may be a constant, not on the heap: counted all the same.)
func stringBytes(s string) int64 { return allocSize(len(s)) }

// sizeClasses are the sizes of Go's small allocations (runtime's
// sizeclasses.go): an allocation of up to 32 KiB takes the first at least
// as large.
var sizeClasses = [...]int32{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792,
	2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240,
	10880, 12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

// allocSize is the heap an allocation of n bytes without pointers takes:
// its size class, or whole 8 KiB pages past 32 KiB.
func allocSize(n int) int64 {
	if n <= 0 {
		return 0
	}
	if n > int(sizeClasses[len(sizeClasses)-1]) {
		const page = 8 << 10
		return int64((n + page - 1) &^ (page - 1))
	}
	i, _ := slices.BinarySearch(sizeClasses[:], int32(n))
	return int64(sizeClasses[i])
}

// within reports whether s is part of the string t (shares its bytes).
func within(s, t string) bool {
	if len(s) == 0 || len(t) == 0 || len(s) > len(t) {
		return len(s) == 0
	}
	p, q := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(t)))
	return q <= p && p+uintptr(len(s)) <= q+uintptr(len(t))
}

// maxResultBytes bounds what a Result keeps beside its rules (see
// RetainedBytes): itself and its origin; its final URL, a Location within
// maxHeaderBytes that url.URL.String may escape to three times its length;
// and, when it failed, an error whose message names up to two such URLs,
// or quotes a Location (up to four bytes per byte), counted twice; and a
// TDMRepDetail (see tdmrepDetail).
const maxResultBytes = 20*maxHeaderBytes + maxSharedMessage

// MaxRetainedBytes is the most [Result.RetainedBytes] of a fetch by a
// Fetcher whose parse limit is maxBytes (zero or less:
// robots.DefaultMaxBytes) and that does not keep ignored lines, its
// tdmrep.json included: the room a cache must have for any robots.txt
// (cache.Options.LargestCost) so that none is fetched again on every
// request for want of it.
func MaxRetainedBytes(maxBytes int) int64 {
	return robots.MaxRetained(maxBytes) + maxResultBytes + usage.MaxTDMRepRetained(MaxTDMRepBytes)
}

// Fetch fetches origin's robots.txt and parses it. origin is an http or
// https origin (any URL of it will do; see [robots.OriginOf]). Fetch never
// fails: every way a fetch can go wrong is an outcome, described by Err
// and Detail. It ends within twice the Timeout (a wait for a free slot,
// then the fetch), or sooner when ctx ends. Its slot is taken from the
// share of the client ctx names (see [ClientContext]).
func (f *Fetcher) Fetch(ctx context.Context, origin string) *Result {
	res, _ := f.FetchTimed(ctx, origin)
	return res
}

// FetchTimed is Fetch that also returns the fetch's Timing.
func (f *Fetcher) FetchTimed(ctx context.Context, origin string) (*Result, Timing) {
	res, fx := f.fetchAll(ctx, origin)
	return res, fx.Timing
}

// fetched is what a fetch yields beside its Result for [Fetcher.Load]
// alone: its Timing, the bodies parsed (for a shared store), and why
// Result.TDMRep is nil when the reason is this instance's.
type fetched struct {
	Timing
	bodies
	tdmrepLocal tdmrepLocality
}

// bodies are the bodies a fetch parsed, nil for none: what [Fetcher.Load]
// encodes for a shared store.
type bodies struct {
	robots, tdmrep []byte
}

// fetchAll is FetchTimed that also returns what only Load uses: the
// bodies it parsed (robots.txt when the outcome is OK, tdmrep.json when
// Result.TDMRep is set) and the locality of a missing TDMRep.
func (f *Fetcher) fetchAll(ctx context.Context, origin string) (*Result, fetched) {
	start := time.Now()
	var fx fetched
	res := &Result{Origin: origin}
	if canonical, err := robots.OriginOf(origin); err != nil {
		res.fail(robots.OutcomeUnreachable, "robots.txt: invalid origin", fmt.Errorf("robots.txt fetch: %w", err))
	} else {
		res.Origin = canonical
		f.fetchInSlot(ctx, res, &fx)
	}
	if f.opts.TDMRep && res.TDMRepDetail == "" {
		res.TDMRepDetail = "tdmrep.json not fetched"
	}
	fx.FetchedAt = time.Now()
	fx.Duration = fx.FetchedAt.Sub(start)
	res.compact()
	return res, fx
}

// robotsPath is the path of robots.txt, which FinalURL mostly ends in.
const robotsPath = "/robots.txt"

// compact makes the strings r keeps as small as they can be, as a cache
// may keep r long: FinalURL in an allocation of its own length (URL.String
// makes a larger one), and Origin a part of it when FinalURL is Origin's
// robots.txt.
func (r *Result) compact() {
	switch {
	case len(r.FinalURL) == len(r.Origin)+len(robotsPath) && strings.HasPrefix(r.FinalURL, r.Origin) && strings.HasSuffix(r.FinalURL, robotsPath):
		r.FinalURL = r.Origin + robotsPath
		r.Origin = r.FinalURL[:len(r.Origin)]
	case r.FinalURL != "":
		r.FinalURL = strings.Clone(r.FinalURL)
	}
}

// fetchInSlot fetches res.Origin once its client has a slot, and fills in
// fx (see fetch and fetchTDMRep) but for its times. A fetch that gets none
// within the Timeout fails with a *SlotError, or as cancelled when ctx
// ended first.
func (f *Fetcher) fetchInSlot(ctx context.Context, res *Result, fx *fetched) {
	client := clientOf(ctx)
	start := time.Now()
	var queued func(held, waiting int)
	if log := f.opts.Logger; log.Enabled(ctx, slog.LevelDebug) {
		queued = func(held, waiting int) {
			log.DebugContext(ctx, "robots.txt fetch waits for a slot", "origin", res.Origin, "client", client,
				"client_fetches", held, "waiting", waiting)
		}
	}
	held, ok := f.slots.take(ctx, client, f.opts.Timeout, queued)
	if !ok {
		if err := ctx.Err(); errors.Is(err, context.Canceled) {
			res.failNetwork(fmt.Errorf("robots.txt fetch of %s: %w", res.Origin, err))
		} else {
			res.fail(robots.OutcomeUnreachable, "robots.txt not fetched: no free fetch slot", &SlotError{
				Origin: res.Origin, Held: held, PerClient: f.opts.MaxPerClient, MaxConcurrent: f.opts.MaxConcurrent,
				Waited: time.Since(start), Timeout: f.opts.Timeout,
			})
		}
		return
	}
	defer f.slots.put(client)
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	fx.robots = f.fetch(ctx, res, &fx.Freshness)
	if f.opts.TDMRep {
		fx.tdmrep, fx.tdmrepLocal = f.fetchTDMRep(ctx, res)
	}
}

func (r *Result) fail(outcome robots.Outcome, detail string, err error) {
	r.Outcome, r.Detail, r.Err = outcome, detail, err
}

// failNetwork records an error that left no usable answer; an upstream
// proxy's failure is told apart from the origin's.
func (r *Result) failNetwork(err error) {
	cause, ok := egress.Problem(err)
	if !ok {
		cause = netcause.Of(err)
	}
	r.fail(robots.OutcomeUnreachable, "robots.txt unreachable: "+cause, err)
}

// fetch requests robots.txt of res.Origin, canonical by now, and follows
// redirects until an answer decides the outcome, whose caching headers it
// reads into fresh. It returns the body parsed, nil when none was.
func (f *Fetcher) fetch(ctx context.Context, res *Result, fresh *Freshness) []byte {
	scheme, host, _ := strings.Cut(res.Origin, "://")
	target := &url.URL{Scheme: scheme, Host: host, Path: "/robots.txt"}
	seen := make([]string, 0, MaxRedirects+1)
	for {
		res.FinalURL = target.String()
		seen = append(seen, redirectKey(target))
		resp, err := f.get(ctx, target, acceptHeader)
		if err != nil {
			res.failNetwork(fmt.Errorf("fetch %s: %w", res.FinalURL, err))
			return nil
		}
		res.Status = uint16(resp.StatusCode) // three digits at most (see get)
		*fresh = freshnessOf(resp.Header, time.Now())
		code := resp.StatusCode
		if 200 <= code && code <= 299 {
			body := f.readRules(ctx, resp, res)
			resp.Body.Close()
			return body
		}
		drain(resp)
		if !isRedirect(code) {
			f.judgeStatus(res)
			return nil
		}
		next, err := redirectTarget(target, resp.Header.Get("Location"))
		switch {
		case err != nil && next == nil:
			res.fail(robots.OutcomeUnreachable, "robots.txt "+strconv.Itoa(code)+" without a usable Location",
				fmt.Errorf("%s answered %d: %w: %w", res.FinalURL, code, ErrBadRedirect, err))
		case err != nil:
			res.fail(robots.OutcomeUnreachable, "robots.txt: redirect to a non-HTTP URL",
				fmt.Errorf("%s redirects to %s: %w: %w", res.FinalURL, next, ErrBadRedirect, err))
		case slices.Contains(seen, redirectKey(next)):
			res.fail(robots.OutcomeUnavailable, "robots.txt: redirect loop",
				fmt.Errorf("%s redirects back to %s: %w", res.FinalURL, next, ErrRedirectLoop))
		case res.Redirects == MaxRedirects:
			res.fail(robots.OutcomeUnavailable, "robots.txt: more than 5 redirects",
				fmt.Errorf("%s redirects to %s: %w", res.FinalURL, next, ErrTooManyRedirects))
		default:
			res.Redirects++
			target = next
			continue
		}
		return nil
	}
}

// get sends the one request a fetch makes per URL: GET with our
// User-Agent and accept, nothing else of ours.
func (f *Fetcher) get(ctx context.Context, u *url.URL, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header = http.Header{
		"User-Agent": {f.opts.UserAgent},
		"Accept":     {accept},
	}
	// The transport, not a Client: redirects are followed by fetch, and
	// there is no cookie jar, no Referer, no credentials to carry.
	resp, err := f.transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if refusal := f.upstream.Refusal(resp); refusal != nil {
		resp.Body.Close()
		return nil, refusal
	}
	if resp.StatusCode < 0 || resp.StatusCode > 999 {
		// HTTP/1 takes three digits only; HTTP/2's :status is any number,
		// which Result.Status could not hold.
		resp.Body.Close()
		return nil, fmt.Errorf("malformed HTTP status code %d", resp.StatusCode)
	}
	return resp, nil
}

// readRules reads a 2xx body up to the parse limit and parses it once a
// parse slot is free, and returns the body parsed. A body cut short by the
// network is no robots.txt: unreachable, and nil; so is one that found no
// parse slot before ctx ended, a limit of this instance's (see
// ParseSlotError).
func (f *Fetcher) readRules(ctx context.Context, resp *http.Response, res *Result) []byte {
	body, err := readLimited(resp.Body, f.opts.MaxBytes+1, resp.ContentLength)
	res.Bytes = int32(len(body)) // at most MaxParseBytes+1 (see New)
	if err != nil {
		res.failNetwork(fmt.Errorf("read body of %s: %w", res.FinalURL, err))
		return nil
	}
	rules, slotErr := f.parse(ctx, res.Origin, body)
	if slotErr != nil {
		if err := ctx.Err(); errors.Is(err, context.Canceled) {
			res.failNetwork(fmt.Errorf("robots.txt fetch of %s: %w", res.Origin, err))
		} else {
			res.fail(robots.OutcomeUnreachable, "robots.txt not parsed: no free parse slot", slotErr)
		}
		return nil
	}
	res.Truncated = len(body) > f.opts.MaxBytes
	res.Outcome = robots.OutcomeOK
	res.Robots = rules
	return body
}

// parse parses origin's body once a parse slot is free for the client ctx
// names, waiting at most until ctx ends or for the Timeout; it fails with
// a *ParseSlotError when none came free.
func (f *Fetcher) parse(ctx context.Context, origin string, body []byte) (*robots.Robots, *ParseSlotError) {
	var rules *robots.Robots
	slotErr := f.inParseSlot(ctx, origin, func() { rules = f.parser.Parse(body) })
	return rules, slotErr
}

// inParseSlot runs parse once a parse slot is free for the client ctx
// names, waiting at most until ctx ends or for the Timeout; it fails with
// a *ParseSlotError when none came free.
func (f *Fetcher) inParseSlot(ctx context.Context, origin string, parse func()) *ParseSlotError {
	client, start := clientOf(ctx), time.Now()
	if _, ok := f.parses.take(ctx, client, f.opts.Timeout, nil); !ok {
		return &ParseSlotError{Origin: origin, MaxParses: f.opts.MaxParses, Waited: time.Since(start)}
	}
	defer f.parses.put(client)
	parse()
	return nil
}

// ParseSlotError is Result.Err of a fetch whose body arrived but found no
// free parse slot (see [Options.MaxParses]) before the fetch's Timeout
// ran out: a limit of this instance's, which says nothing of the origin.
// [Fetcher.Load] keeps such a result out of every cache.
type ParseSlotError struct {
	// Origin is the origin whose robots.txt was not parsed.
	Origin string
	// MaxParses is how many parses may run at once.
	MaxParses int
	// Waited is how long the parse waited: what was left of the fetch's
	// Timeout (the Timeout, for a body from a shared store), unless its
	// context ended first.
	Waited time.Duration
}

func (e *ParseSlotError) Error() string {
	return fmt.Sprintf("robots.txt of %s not parsed: no free parse slot within %s: all %d are in use",
		e.Origin, e.Waited.Round(time.Millisecond), e.MaxParses)
}

// judgeStatus decides the outcome of an answer that is neither 2xx nor a
// redirect followed.
func (f *Fetcher) judgeStatus(res *Result) {
	code := int(res.Status)
	res.fail(robots.OutcomeOfStatus(code, f.opts.AuthDisallow), "robots.txt "+strconv.Itoa(code),
		&StatusError{URL: res.FinalURL, Code: code})
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
	origin, err := robots.OriginFromURL(u)
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
// comes first. Its first buffer is sizeHint+1 bytes (sizeHint is the
// Content-Length, -1 when unknown: 8 KiB then), at most firstReadBytes;
// it doubles as bytes arrive, up to limit bytes. So it is never more than
// twice what was read, plus firstReadBytes, whatever the origin announced.
func readLimited(r io.Reader, limit int, sizeHint int64) ([]byte, error) {
	size := 8 << 10
	if sizeHint >= 0 {
		size = int(min(sizeHint+1, firstReadBytes)) // the +1 meets the end without growing
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
