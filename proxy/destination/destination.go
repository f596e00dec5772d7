// Package destination is the proxy's destination policy: address ranges it
// never connects to, whatever a client asks for.
//
// The check runs on the address a connection is about to be made to, after
// name resolution (as a [net.Dialer] Control function), so a host name that
// resolves to a denied address is caught however it was spelt and whenever
// its DNS answer changes. [Policy.Denied] serves an early, friendlier check
// of addresses written literally in a request.
package destination

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"syscall"
)

// Policy denies connections to a set of address ranges. The nil Policy
// denies nothing. It is immutable and safe for concurrent use.
type Policy struct {
	deny []netip.Prefix
}

// New returns a Policy denying the given ranges.
func New(deny []netip.Prefix) *Policy {
	p := &Policy{deny: make([]netip.Prefix, len(deny))}
	for i, prefix := range deny {
		p.deny[i] = prefix.Masked()
	}
	return p
}

// Ranges returns the denied ranges.
func (p *Policy) Ranges() []netip.Prefix {
	if p == nil {
		return nil
	}
	return append([]netip.Prefix(nil), p.deny...)
}

// Denied reports the denied range addr is in. An IPv4 address carried in
// IPv6 is judged as the IPv4 address too: IPv4-mapped
// (::ffff:169.254.169.254), IPv4-compatible (::169.254.169.254) and the
// well-known NAT64 prefix (64:ff9b::169.254.169.254).
func (p *Policy) Denied(addr netip.Addr) (netip.Prefix, bool) {
	if p == nil || !addr.IsValid() {
		return netip.Prefix{}, false
	}
	addr = addr.Unmap().WithZone("")
	candidates := [2]netip.Addr{addr}
	if addr.Is6() {
		b := addr.As16()
		if embedsIPv4(b) {
			candidates[1] = netip.AddrFrom4([4]byte(b[12:]))
		}
	}
	for _, a := range candidates {
		if !a.IsValid() {
			continue
		}
		for _, prefix := range p.deny {
			if prefix.Contains(a) {
				return prefix, true
			}
		}
	}
	return netip.Prefix{}, false
}

// embedsIPv4 reports an IPv6 address in ::/96 (IPv4-compatible, but :: and
// ::1) or 64:ff9b::/96 (NAT64), whose last four bytes are an IPv4 address.
func embedsIPv4(b [16]byte) bool {
	nat64 := [12]byte{0x00, 0x64, 0xff, 0x9b}
	switch [12]byte(b[:12]) {
	case nat64:
		return true
	case [12]byte{}:
		return b[12]|b[13]|b[14] != 0 || b[15] > 1
	}
	return false
}

// Check returns a *DeniedError when host (an IP address, without brackets
// or port) is in a denied range; a host name is not resolved and passes.
func (p *Policy) Check(host string) error {
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return nil
	}
	if prefix, denied := p.Denied(addr); denied {
		return &DeniedError{Addr: addr, Range: prefix}
	}
	return nil
}

// Control is a [net.Dialer] ControlContext function: it refuses to connect
// to an address in a denied range. address is the resolved "ip:port".
func (p *Policy) Control(_ context.Context, _, address string, _ syscall.RawConn) error {
	addrPort, err := netip.ParseAddrPort(address)
	if err != nil {
		// Not an IP socket: nothing this policy knows how to judge.
		return nil
	}
	if prefix, denied := p.Denied(addrPort.Addr()); denied {
		return &DeniedError{Addr: addrPort.Addr(), Range: prefix}
	}
	return nil
}

// Dialer returns a copy of d that refuses denied destinations.
func (p *Policy) Dialer(d net.Dialer) *net.Dialer {
	d.ControlContext = p.Control
	return &d
}

// DeniedError is a refusal to connect to an address in a denied range. It
// matches [fs.ErrPermission] for callers that only tell permission
// failures apart.
type DeniedError struct {
	Addr  netip.Addr
	Range netip.Prefix
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("destination %s is in the denied range %s", e.Addr, e.Range)
}

// Is makes a denial an fs.ErrPermission.
func (e *DeniedError) Is(target error) bool { return target == fs.ErrPermission }
