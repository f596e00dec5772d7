package robots

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// OriginOf returns the canonical origin of an http or https URL, the key
// of everything robots.txt decides: "https://example.com",
// "http://127.0.0.1:8080", "http://[2001:db8::1]". See [OriginFromURL].
func OriginOf(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("origin of %q: %w", rawURL, err)
	}
	origin, err := OriginFromURL(u)
	if err != nil {
		return "", fmt.Errorf("origin of %q: %w", rawURL, err)
	}
	return origin, nil
}

// OriginFromURL returns the canonical origin of u: the scheme (http or
// https) and host lower-cased, an IPv6 address in brackets, the port
// without leading zeros and left out when it is the scheme's default, and
// no user information. Two URLs of the same origin give the same string,
// so a cache can key on it.
func OriginFromURL(u *url.URL) (string, error) {
	if u == nil {
		return "", errors.New("no URL")
	}
	scheme := strings.ToLower(u.Scheme)
	var defaultPort string
	switch scheme {
	case "http":
		defaultPort = "80"
	case "https":
		defaultPort = "443"
	default:
		return "", fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return "", errors.New("no host")
	}
	port := u.Port()
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return "", fmt.Errorf("port %q is not a port number", port)
		}
		port = strconv.FormatUint(n, 10)
	}
	if port == defaultPort {
		port = ""
	}

	var b strings.Builder
	b.Grow(len(scheme) + len("://[]:") + len(host) + len(port))
	b.WriteString(scheme)
	b.WriteString("://")
	if strings.IndexByte(host, ':') >= 0 {
		// An IPv6 address; a zone ("%eth0") names an interface, whose
		// case matters, and is escaped as in a URL.
		addr, zone, hasZone := strings.Cut(host, "%")
		b.WriteByte('[')
		b.WriteString(strings.ToLower(addr))
		if hasZone {
			b.WriteString("%25")
			b.WriteString(zone)
		}
		b.WriteByte(']')
	} else {
		b.WriteString(strings.ToLower(host))
	}
	if port != "" {
		b.WriteByte(':')
		b.WriteString(port)
	}
	return b.String(), nil
}
