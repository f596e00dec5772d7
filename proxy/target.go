package proxy

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"robotsgate/robots"
)

// target is the one canonical form of a request: parsed once from the
// request as the client sent it, judged, and forwarded byte for byte. No
// other code reads the request line or Host header to decide where a
// request goes or what it asks for.
type target struct {
	scheme string // "http" or "https"
	// authority is host[:port] as the client wrote it.
	authority string
	// hostHeader is the Host the origin receives: the origin's own
	// host[:port], as robots.txt was fetched with, so that an origin that
	// tells hosts apart by case or port spelling serves the request from
	// the site whose robots.txt judged it.
	hostHeader string
	// host is canonical (robots.CanonicalHost: one spelling of an
	// address), an IPv6 address without brackets.
	host string
	port string // the port connected to: explicit or the scheme's default
	// dial is the host[:port] the request is sent to: the tunnel's target
	// inside a tunnel (the same place by then), else hostHeader.
	dial string
	// pathAndQuery is what robots.txt rules are matched against: the
	// path and query as sent, never re-encoded ("/" when an absolute URL
	// has no path).
	pathAndQuery string
	path, query  string // pathAndQuery cut at its first '?'
	url          string // the URL the request stands for, for records and pages
	origin       string // the canonical origin whose robots.txt applies
}

// hasQuery tells "/a?" from "/a": the path is all of pathAndQuery
// without one. A method rather than a field keeps the decision, which
// every request allocates, in its size class (TestDecisionSize).
func (t *target) hasQuery() bool { return len(t.path) < len(t.pathAndQuery) }

// requestError is a request the proxy refuses to handle as sent, with the
// status and the reason it answers.
type requestError struct {
	status int
	why    string
}

func badRequest(why string) *requestError {
	return &requestError{status: http.StatusBadRequest, why: why}
}

// outgoingURL fills u with what to give the transport so that the request
// line it writes is exactly the path and query received. Go's URL type
// re-encodes a path it considers badly escaped (a '|', say) from its
// decoded form; Opaque is written as is. A path starting with "//" cannot
// be Opaque (the transport would write it as a scheme-relative URL), so it
// goes through RawPath, which Go keeps only when it is a valid encoding;
// ok is false when neither keeps the bytes.
func (t *target) outgoingURL(u *url.URL) (ok bool) {
	*u = url.URL{Scheme: t.scheme, Host: t.dial, RawQuery: t.query, ForceQuery: t.hasQuery() && t.query == ""}
	if !strings.HasPrefix(t.path, "//") {
		u.Opaque = t.path
		return true
	}
	decoded, err := url.PathUnescape(t.path)
	if err != nil {
		return false
	}
	u.Path, u.RawPath = decoded, t.path
	return u.EscapedPath() == t.path
}

// parseTarget fills t with the canonical target of r, a request read
// plainly (tun == nil: the request-target must be absolute) or inside a
// tunnel (origin-form, with the Host header, or absolute-form). maxURL
// bounds the request-target's length. The common cases allocate nothing:
// every field is a piece of what the client sent.
func parseTarget(r *http.Request, tun *tunnel, maxURL int, t *target) *requestError {
	raw := r.RequestURI
	switch {
	case len(raw) > maxURL:
		return &requestError{status: http.StatusRequestURITooLong,
			why: "the request target is " + strconv.Itoa(len(raw)) + " bytes long; robotsgate accepts at most " + strconv.Itoa(maxURL) + " (ROBOTSGATE_MAX_URL_BYTES)"}
	case r.Method == http.MethodConnect:
		return badRequest("CONNECT is not allowed inside a tunnel")
	case raw == "*":
		return badRequest("the asterisk-form request target (OPTIONS *) is not supported")
	case strings.IndexByte(raw, '#') >= 0:
		return badRequest("the request target has a fragment ('#'), which HTTP does not allow")
	}

	// prefix is "scheme://authority" when raw starts with it as is.
	var prefix string
	if strings.HasPrefix(raw, "/") {
		if tun == nil {
			return badRequest("a proxy request needs an absolute URL (http://host/path)")
		}
		if r.Host == "" {
			return badRequest("the request has no Host header")
		}
		t.scheme, t.authority, t.pathAndQuery = tun.scheme, r.Host, raw
	} else {
		scheme, rest, ok := strings.Cut(raw, "://")
		if !ok {
			return badRequest("the request target is neither an absolute http(s) URL nor a path")
		}
		switch {
		case scheme == "http" || scheme == "https":
			t.scheme = scheme
		case strings.EqualFold(scheme, "http"):
			t.scheme = "http"
		case strings.EqualFold(scheme, "https"):
			t.scheme = "https"
		default:
			return badRequest("only http and https URLs can be fetched through robotsgate")
		}
		end := strings.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		t.authority, t.pathAndQuery = rest[:end], rest[end:]
		if strings.IndexByte(t.authority, '@') >= 0 {
			return badRequest("the URL carries user information (user:password@), which RFC 9110 section 4.2.4 forbids sending; remove it")
		}
		if t.pathAndQuery == "" || t.pathAndQuery[0] == '?' {
			t.pathAndQuery = "/" + t.pathAndQuery // an empty path is "/" (RFC 9110 §4.2.3)
		} else if scheme == t.scheme {
			prefix = raw[:len(raw)-len(t.pathAndQuery)]
		}
	}
	var err error
	if t.host, t.port, err = splitAuthority(t.authority); err != nil {
		return badRequest("the host " + quoteClip(t.authority) + " is not a valid host[:port]: " + err.Error())
	}
	explicitPort := t.port != ""
	if !explicitPort {
		t.port = defaultPort(t.scheme)
	}
	t.path, t.query, _ = strings.Cut(t.pathAndQuery, "?")
	if tun != nil && (t.scheme != tun.scheme || t.host != tun.host || t.port != tun.port) {
		return &requestError{status: http.StatusMisdirectedRequest,
			why: "this tunnel leads to " + tun.scheme + "://" + tun.authority + "; a request for " + t.scheme + "://" + t.authority + " needs a tunnel of its own"}
	}
	if prefix != "" {
		t.url = raw
	} else {
		prefix = t.scheme + "://" + t.authority
		t.url = prefix + t.pathAndQuery
	}
	// The origin is the prefix itself when the client wrote it canonically
	// (see robots.CanonicalHost; no default port, no leading zeros), and
	// the same for every other spelling of the address.
	if isCanonical(t.authority, t.host, t.port, explicitPort, defaultPort(t.scheme)) {
		t.origin = prefix
	} else if t.origin, err = robots.OriginFromURL(&url.URL{Scheme: t.scheme, Host: t.authority}); err != nil {
		return badRequest("the request names no http or https origin: " + err.Error())
	}
	t.hostHeader = t.origin[len(t.scheme)+len("://"):]
	t.dial = t.hostHeader
	if tun != nil {
		t.dial = tun.hostPort
	}
	return nil
}

// isCanonical reports whether authority, as the client wrote it, is
// already the canonical host[:port] of host and port (as splitAuthority
// gives them; an explicit port is in authority unless it is the default).
func isCanonical(authority, host, port string, explicitPort bool, defaultPort string) bool {
	if explicitPort {
		if port == defaultPort || !strings.HasSuffix(authority, port) {
			return false
		}
		if authority = authority[:len(authority)-len(port)]; !strings.HasSuffix(authority, ":") {
			return false
		}
		authority = authority[:len(authority)-1]
	}
	if strings.HasPrefix(authority, "[") {
		return len(authority) == len(host)+2 && authority[1:len(authority)-1] == host
	}
	return authority == host
}

// authorityError says what is wrong with a host[:port].
type authorityError string

func (e authorityError) Error() string { return string(e) }

// splitAuthority checks host[:port] strictly: a host that
// [robots.CanonicalHost] accepts (a DNS name of letters, digits, '.', '-'
// and '_', an IPv4 address, or an IPv6 address in brackets) and an
// optional decimal port from 1 to 65535. Anything else (user information,
// '/', '%', spaces, an empty port) is refused rather than guessed at. It
// returns the canonical host, an IPv6 address without brackets, and the
// port without leading zeros, "" when none is given: every spelling of
// one address gives the same host.
func splitAuthority(authority string) (host, port string, err error) {
	host = authority
	if strings.HasPrefix(authority, "[") {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return "", "", authorityError("an IPv6 address without its closing ']'")
		}
		host, port = authority[:end+1], authority[end+1:]
		if port != "" && port[0] != ':' {
			return "", "", authorityError("text after the IPv6 address")
		}
	} else if colon := strings.LastIndexByte(authority, ':'); colon >= 0 {
		host, port = authority[:colon], authority[colon:]
	}
	if port != "" {
		port = port[1:]
		n, perr := strconv.ParseUint(port, 10, 16)
		switch {
		case port == "":
			return "", "", authorityError("an empty port after ':'")
		case perr != nil || n == 0 || strings.IndexFunc(port, func(r rune) bool { return r < '0' || r > '9' }) >= 0:
			return "", "", authorityError("the port is not a number from 1 to 65535")
		}
		if port[0] == '0' {
			port = strconv.FormatUint(n, 10) // leading zeros dropped
		}
	}
	if host, err = robots.CanonicalHost(host); err != nil {
		return "", "", authorityError(err.Error())
	}
	if strings.HasPrefix(host, "[") {
		host = host[1 : len(host)-1]
	}
	return host, port, nil
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// quoteClip quotes what a client sent for a message, cut to 100 bytes.
func quoteClip(s string) string {
	if len(s) > 100 {
		return strconv.Quote(s[:100]) + "..."
	}
	return strconv.Quote(s)
}

// redactUserinfo removes user information from a request target as sent,
// an absolute URL or a CONNECT's host:port, so that a refused request's
// record and page never repeat a password.
func redactUserinfo(raw string) string {
	prefix, rest := "", raw
	if scheme, after, ok := strings.Cut(raw, "://"); ok {
		prefix, rest = scheme+"://", after
	} else if strings.HasPrefix(raw, "/") {
		return raw
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndexByte(rest[:end], '@')
	if at < 0 {
		return raw
	}
	return prefix + "REDACTED@" + rest[at+1:]
}
