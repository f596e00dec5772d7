package mitm

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// ErrInvalidHost is wrapped by every error about a host name a client sent
// (SNI or CONNECT target) that no certificate will be signed for.
var ErrInvalidHost = errors.New("invalid host name")

const (
	maxHostLen  = 253 // RFC 1035 §2.3.4, without the trailing dot
	maxLabelLen = 63
)

// leafHost is a validated, canonical host a leaf is signed for: either a DNS
// name or an IP address.
type leafHost struct {
	name string     // cache key: lower-case name without trailing dot, or addr.String()
	addr netip.Addr // valid when the host is an IP address
}

// hostFromConnect returns the host of a CONNECT target such as
// "example.com:443", "[2001:db8::1]:443" or a bare "example.com".
func hostFromConnect(target string) (leafHost, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		// No port: a bare name or address, possibly a bracketed IPv6 literal.
		host = target
		if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
			host = host[1 : len(host)-1]
		}
	}
	return parseLeafHost(host)
}

// parseLeafHost validates and normalises a host name or IP literal: IP
// addresses take their canonical form (IPv4-mapped IPv6 becomes IPv4), names
// are lower-cased without a trailing dot and must be plain ASCII DNS names
// (letters, digits, '-' and '_', which some real hosts use) of at most 253
// bytes with labels of 1 to 63 bytes. Wildcards, spaces and non-ASCII (IDNs
// arrive as punycode) are rejected.
func parseLeafHost(host string) (leafHost, error) {
	if host == "" {
		return leafHost{}, fmt.Errorf("%w: empty", ErrInvalidHost)
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Zone() != "" {
			return leafHost{}, fmt.Errorf("%w: %q: IPv6 zones cannot appear in a certificate", ErrInvalidHost, host)
		}
		addr = addr.Unmap()
		return leafHost{name: addr.String(), addr: addr}, nil
	}

	name := strings.TrimSuffix(host, ".")
	if name == "" || len(name) > maxHostLen {
		return leafHost{}, fmt.Errorf("%w: %d bytes long, want 1 to %d", ErrInvalidHost, len(name), maxHostLen)
	}
	name = strings.ToLower(name)
	labels := strings.Split(name, ".")
	for _, label := range labels {
		if len(label) == 0 || len(label) > maxLabelLen {
			return leafHost{}, fmt.Errorf("%w: %q: each label must be 1 to %d bytes", ErrInvalidHost, clip(host), maxLabelLen)
		}
		for i := 0; i < len(label); i++ {
			if !isHostByte(label[i]) {
				return leafHost{}, fmt.Errorf("%w: %q: byte %q not allowed", ErrInvalidHost, clip(host), label[i])
			}
		}
	}
	// No top-level domain is numeric, so "1.2.3" or "256.1.1.1" is a
	// malformed address rather than a name.
	if tld := labels[len(labels)-1]; strings.Trim(tld, "0123456789") == "" {
		return leafHost{}, fmt.Errorf("%w: %q is neither an IP address nor a DNS name", ErrInvalidHost, clip(host))
	}
	return leafHost{name: name}, nil
}

func isHostByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// clip bounds how much of an untrusted host name goes into an error message.
func clip(s string) string {
	const maxQuoted = 80
	if len(s) <= maxQuoted {
		return s
	}
	return s[:maxQuoted] + "..."
}
