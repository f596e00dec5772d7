package robots

import (
	"errors"
	"fmt"
	"net/netip"
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
// https) lower-cased, the host as [CanonicalHost] writes it, the port
// without leading zeros and left out when it is the scheme's default, and
// no user information. Every spelling of one address gives the same
// string, so a cache, a pace or a limit can key on it.
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
	// The host as written, brackets and all: u.Hostname drops them.
	host := u.Host
	if end := strings.LastIndexByte(host, ']'); strings.HasPrefix(host, "[") && end >= 0 {
		host = host[:end+1]
	} else {
		host = u.Hostname()
	}
	host, err := CanonicalHost(host)
	if err != nil {
		return "", err
	}
	port := u.Port()
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return "", fmt.Errorf("port %q is not a port number", port)
		}
		port = strconv.FormatUint(n, 10)
	}
	if port == defaultPort || port == "" {
		return scheme + "://" + host, nil
	}
	return scheme + "://" + host + ":" + port, nil
}

// maxHostName is the longest DNS name, without its final dot (RFC 1035
// §2.3.4).
const maxHostName = 253

// CanonicalHost returns the one spelling of a URL's host (without its
// port), so that every way of writing one address names one origin:
//
//   - an IPv6 address, in brackets, is written as RFC 5952 says
//     ("[::1]" for "[0:0:0:0:0:0:0:1]" or "[0000::0001]"), and an
//     IPv4-mapped one ("[::ffff:127.0.0.1]", "[::ffff:7f00:1]") is the
//     IPv4 address it maps;
//   - a host whose last label is a number is an IPv4 address, read as
//     browsers and inet_aton read it (the WHATWG URL Standard's IPv4
//     parser: "127.1", "0x7f.0.0.1", "0177.0.0.1", "2130706433") and
//     written in dotted decimal; one that is not a valid address
//     ("1.2.3.999", "08.1.1.1") is an error, never a name to resolve;
//   - any other host is a DNS name of letters, digits, '-' and '_' in
//     labels separated by '.', lower-cased, its final '.' (the root)
//     left out: "Example.COM." is "example.com".
//
// Anything else is an error: an empty label, another character
// (percent-encoding, non-ASCII), an IPv6 zone ("%eth0": a network
// interface of this machine, not a host). host itself is returned, with
// no allocation, when it is canonical already.
func CanonicalHost(host string) (string, error) {
	if strings.HasPrefix(host, "[") {
		return canonicalIPv6(host)
	}
	name := strings.TrimSuffix(host, ".")
	if name == "" || len(name) > maxHostName {
		return "", fmt.Errorf("no host name, or one longer than %d characters", maxHostName)
	}
	upper := false
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_':
		case c == '.':
			if i == 0 || i == len(name)-1 || name[i-1] == '.' {
				return "", fmt.Errorf("the host name %q has an empty label", clip(host))
			}
		case c >= 'A' && c <= 'Z':
			upper = true
		default:
			return "", fmt.Errorf("the character %q cannot be in a host name", rune(c))
		}
	}
	switch {
	case isDottedDecimal(name):
		return name, nil
	case endsInNumber(name):
		return canonicalIPv4(name)
	case upper:
		return strings.ToLower(name), nil
	}
	return name, nil
}

// isDottedDecimal reports whether name is an IPv4 address written as it
// should be: four decimal numbers up to 255, without leading zeros.
func isDottedDecimal(name string) bool {
	parts, n, digits := 0, 0, 0
	for i := 0; i <= len(name); i++ {
		if i == len(name) || name[i] == '.' {
			if digits == 0 || n > 255 || (digits > 1 && name[i-digits] == '0') {
				return false
			}
			parts, n, digits = parts+1, 0, 0
			continue
		}
		c := name[i]
		if c < '0' || c > '9' || digits == 3 {
			return false
		}
		n, digits = n*10+int(c-'0'), digits+1
	}
	return parts == 4
}

// canonicalIPv6 writes host, an IPv6 address in brackets, as RFC 5952
// says, or the IPv4 address it maps.
func canonicalIPv6(host string) (string, error) {
	if len(host) < 2 || host[len(host)-1] != ']' {
		return "", errors.New("an IPv6 address without its closing ']'")
	}
	inner := host[1 : len(host)-1]
	if strings.IndexByte(inner, '%') >= 0 {
		return "", errors.New("an IPv6 zone ('%') names a network interface of this machine, not a host")
	}
	addr, err := netip.ParseAddr(inner)
	if err != nil || !addr.Is6() {
		return "", errors.New("not an IPv6 address between '[' and ']'")
	}
	if addr.Is4In6() {
		return addr.Unmap().String(), nil
	}
	var buf [len("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]")]byte
	b := append(addr.AppendTo(append(buf[:0], '[')), ']')
	if string(b) == host {
		return host, nil
	}
	return string(b), nil
}

// endsInNumber reports whether name, a host name without a final '.', is
// an IPv4 address by the WHATWG URL Standard: its last label is decimal
// digits or a "0x" hexadecimal number.
func endsInNumber(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if last == "" {
		return false
	}
	if strings.IndexFunc(last, func(r rune) bool { return r < '0' || r > '9' }) < 0 {
		return true
	}
	_, ok := ipv4Number(last)
	return ok
}

// ipv4Number reads one part of an IPv4 address as the WHATWG URL
// Standard's IPv4 number parser does (and inet_aton): "0x" or "0X" starts
// a hexadecimal number, "0" an octal one. Numbers beyond 32 bits fail.
func ipv4Number(s string) (uint32, bool) {
	base := uint64(10)
	switch {
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		s, base = s[2:], 16
		if s == "" {
			return 0, true
		}
	case len(s) >= 2 && s[0] == '0':
		s, base = s[1:], 8
	case s == "":
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		var d uint64
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		if n = n*base + d; n > 1<<32-1 {
			return 0, false
		}
	}
	return uint32(n), true
}

// canonicalIPv4 reads name, which ends in a number, as an IPv4 address of
// one to four parts (the last filling the bytes left) and writes it in
// dotted decimal.
func canonicalIPv4(name string) (string, error) {
	var parts [4]uint32
	n := 0
	for rest, more := name, true; more; n++ {
		var label string
		label, rest, more = strings.Cut(rest, ".")
		v, ok := ipv4Number(label)
		if !ok || n == len(parts) {
			return "", notIPv4(name)
		}
		parts[n] = v
	}
	var addr uint32
	for i := range n - 1 {
		if parts[i] > 255 {
			return "", notIPv4(name)
		}
		addr |= parts[i] << (24 - 8*i)
	}
	// The last part fills the bytes the others left.
	last := parts[n-1]
	if n > 1 && last>>(8*(5-n)) != 0 {
		return "", notIPv4(name)
	}
	addr |= last
	var buf [len("255.255.255.255")]byte
	b := netip.AddrFrom4([4]byte{byte(addr >> 24), byte(addr >> 16), byte(addr >> 8), byte(addr)}).AppendTo(buf[:0])
	if string(b) == name {
		return name, nil
	}
	return string(b), nil
}

func notIPv4(name string) error {
	return fmt.Errorf("the host %q ends in a number, so it is an IPv4 address (as browsers and inet_aton read it), and it is not a valid one", clip(name))
}

// clip cuts s to 100 bytes for a message.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
