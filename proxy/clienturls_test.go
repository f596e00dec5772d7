package proxy

import (
	"errors"
	"net"
	"testing"
)

func TestClientURLs(t *testing.T) {
	ifaces := func(cidrs ...string) func() ([]net.Addr, error) {
		return func() ([]net.Addr, error) {
			var addrs []net.Addr
			for _, c := range cidrs {
				ip, ipnet, err := net.ParseCIDR(c)
				if err != nil {
					t.Fatal(err)
				}
				ipnet.IP = ip
				addrs = append(addrs, ipnet)
			}
			return addrs, nil
		}
	}
	machine := ifaces("127.0.0.1/8", "::1/128", "fe80::1/64", "2001:db8::5/64", "192.0.2.7/24")
	tests := []struct {
		name            string
		addr            net.Addr
		interfaces      func() ([]net.Addr, error)
		here, elsewhere string
	}{
		{"loopback", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, machine, "http://127.0.0.1:8080", ""},
		{"one address", &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 3128}, machine, "http://192.0.2.7:3128", ""},
		{"IPv6 loopback", &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}, machine, "http://[::1]:8080", ""},
		{"every IPv4 address", &net.TCPAddr{IP: net.IPv4zero, Port: 8080}, machine, "http://127.0.0.1:8080", "http://192.0.2.7:8080"},
		{"every address", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, machine, "http://127.0.0.1:8080", "http://192.0.2.7:8080"},
		{"IPv6 only elsewhere", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, ifaces("127.0.0.1/8", "fe80::1/64", "2001:db8::5/64"),
			"http://127.0.0.1:8080", "http://[2001:db8::5]:8080"},
		{"IPv4 only, IPv6 only elsewhere", &net.TCPAddr{IP: net.IPv4zero, Port: 8080}, ifaces("127.0.0.1/8", "fe80::1/64", "2001:db8::5/64"),
			"http://127.0.0.1:8080", ""},
		{"loopback only", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, ifaces("127.0.0.1/8", "::1/128"), "http://127.0.0.1:8080", ""},
		{"interfaces unknown", &net.TCPAddr{IP: net.IPv4zero, Port: 8080},
			func() ([]net.Addr, error) { return nil, errors.New("no") }, "http://127.0.0.1:8080", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			here, elsewhere := ClientURLs(tt.addr, tt.interfaces)
			if here != tt.here || elsewhere != tt.elsewhere {
				t.Errorf("ClientURLs(%v) = %q, %q; want %q, %q", tt.addr, here, elsewhere, tt.here, tt.elsewhere)
			}
		})
	}
}
