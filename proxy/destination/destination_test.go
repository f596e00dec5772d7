package destination

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestDenied(t *testing.T) {
	var deny []netip.Prefix
	for _, r := range []string{"169.254.0.0/16", "fe80::/10", "0.0.0.0/8", "::/128"} {
		deny = append(deny, netip.MustParsePrefix(r))
	}
	p := New(deny)
	for addr, want := range map[string]string{
		"169.254.169.254":        "169.254.0.0/16",
		"::ffff:169.254.169.254": "169.254.0.0/16",
		"::169.254.169.254":      "169.254.0.0/16",
		"64:ff9b::a9fe:a9fe":     "169.254.0.0/16",
		"64:ff9b::808:808":       "",
		"fe80::1":                "fe80::/10",
		"fe80::1%eth0":           "fe80::/10",
		"0.0.0.0":                "0.0.0.0/8",
		"0.1.2.3":                "0.0.0.0/8",
		"::":                     "::/128",
		"127.0.0.1":              "",
		"::1":                    "",
		"93.184.216.34":          "",
		"2001:db8::1":            "",
	} {
		got := ""
		if prefix, denied := p.Denied(netip.MustParseAddr(addr)); denied {
			got = prefix.String()
		}
		if got != want {
			t.Errorf("Denied(%s) = %q, want %q", addr, got, want)
		}
	}
	var nilPolicy *Policy
	if _, denied := nilPolicy.Denied(netip.MustParseAddr("169.254.169.254")); denied {
		t.Error("the nil Policy denied an address")
	}
	if err := p.Check("example.com"); err != nil {
		t.Errorf("Check of a host name = %v, want nil: names are judged when resolved", err)
	}
	err := p.Check("169.254.169.254")
	var denied *DeniedError
	if !errors.As(err, &denied) || !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "169.254.0.0/16") {
		t.Errorf("Check(169.254.169.254) = %v, want a DeniedError naming the range", err)
	}
}

// TestDialerRefusesResolvedAddress dials a name that resolves to a denied
// address: the policy sees the address, not the name, and nothing is
// connected to.
func TestDialerRefusesResolvedAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	d := New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}).Dialer(net.Dialer{Timeout: 5 * time.Second})
	_, err = d.DialContext(context.Background(), "tcp", net.JoinHostPort("localhost", port))
	var denied *DeniedError
	if !errors.As(err, &denied) {
		t.Fatalf("dialing localhost:%s = %v, want a DeniedError", port, err)
	}

	// Without the range the same dial goes through. The listener queues
	// connections in order, so the first it accepts is this one unless
	// the denied dial connected before it.
	c, err := New(nil).Dialer(net.Dialer{Timeout: 5 * time.Second}).DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial with nothing denied: %v", err)
	}
	defer c.Close()
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second))
	first, err := ln.Accept()
	if err != nil {
		t.Fatalf("accept the allowed dial: %v", err)
	}
	defer first.Close()
	if first.RemoteAddr().String() != c.LocalAddr().String() {
		t.Errorf("the listener first accepted %s, not the allowed dial from %s: the denied address was connected to",
			first.RemoteAddr(), c.LocalAddr())
	}
}
