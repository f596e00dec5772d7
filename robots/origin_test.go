package robots

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

func TestOriginOf(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://example.com", "https://example.com"},
		{"https://Example.COM/robots.txt?x=1#top", "https://example.com"},
		{"HTTPS://example.com/", "https://example.com"},
		{"http://example.com:80/page", "http://example.com"},
		{"https://example.com:443", "https://example.com"},
		{"http://example.com:443", "http://example.com:443"},
		{"https://example.com:80", "https://example.com:80"},
		{"https://example.com:8443/", "https://example.com:8443"},
		{"http://example.com:0080", "http://example.com"},
		{"http://example.com:08080", "http://example.com:8080"},
		{"http://example.com:/", "http://example.com"},
		{"http://127.0.0.1:8080/x", "http://127.0.0.1:8080"},
		{"http://[::1]:8080/", "http://[::1]:8080"},
		{"http://[2001:DB8::1]/", "http://[2001:db8::1]"},
		{"https://[2001:db8::1]:443", "https://[2001:db8::1]"},
		// Every spelling of one address is one origin.
		{"http://[0:0:0:0:0:0:0:1]:8080/", "http://[::1]:8080"},
		{"http://[0000::0001]:8080/", "http://[::1]:8080"},
		{"http://[::ffff:127.0.0.1]:8080/", "http://127.0.0.1:8080"},
		{"http://[::FFFF:7F00:1]:8080/", "http://127.0.0.1:8080"},
		{"http://127.1:8080/", "http://127.0.0.1:8080"},
		{"http://0x7f.0.0.1:8080/", "http://127.0.0.1:8080"},
		{"http://2130706433:8080/", "http://127.0.0.1:8080"},
		{"http://127.0.0.1.:8080/", "http://127.0.0.1:8080"},
		{"https://Example.COM.:443/", "https://example.com"},
		{"https://user:secret@example.com/private", "https://example.com"},
		{"http://a.b.example.com./", "http://a.b.example.com"},
	} {
		got, err := OriginOf(c.in)
		if err != nil || got != c.want {
			t.Errorf("OriginOf(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
		// The result is a fixed point: canonical means canonical.
		if again, err := OriginOf(got); err != nil || again != got {
			t.Errorf("OriginOf(%q) = %q, %v; not canonical", got, again, err)
		}
	}
	for _, in := range []string{
		"",
		"example.com",
		"/robots.txt",
		"ftp://example.com/",
		"mailto:someone@example.com",
		"file:///etc/passwd",
		"http://",
		"http:///robots.txt",
		"https://:443/",
		"http:example.com",
		"http://exa mple.com/",
		"http://example.com:99999/",
		"http://example.com:0/",
		"http://example.com:http/",
		"http://[::1/",
		"http://[fe80::1%25eth0]:8080/",
		"http://1.2.3.999/",
		"http://0x1.0x100.1.1/",
		"http://a..b/",
		"http://example.com../",
		"http://ex%41mple.com/",
	} {
		if got, err := OriginOf(in); err == nil {
			t.Errorf("OriginOf(%q) = %q, want an error", in, got)
		}
	}
}

func TestOriginFromURL(t *testing.T) {
	// A proxy hands over the URL of a request it received.
	u := &url.URL{Scheme: "http", Host: "EXAMPLE.com:80", Path: "/a", User: url.UserPassword("u", "p")}
	if got, err := OriginFromURL(u); err != nil || got != "http://example.com" {
		t.Errorf("OriginFromURL(%v) = %q, %v", u, got, err)
	}
	if got, err := OriginFromURL(nil); err == nil {
		t.Errorf("OriginFromURL(nil) = %q, want an error", got)
	}
	if got, err := OriginFromURL(&url.URL{Path: "/robots.txt"}); err == nil {
		t.Errorf("OriginFromURL(path only) = %q, want an error", got)
	}
}

func TestCanonicalHost(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// DNS names: lower case, without the root's final dot.
		{"example.com", "example.com"},
		{"Example.COM", "example.com"},
		{"example.com.", "example.com"},
		{"EXAMPLE.com.", "example.com"},
		{"localhost.", "localhost"},
		{"under_score-and-dash.example", "under_score-and-dash.example"},
		{"xn--bcher-kva.example", "xn--bcher-kva.example"},
		// A last label that is not a number: a name, even with numbers before it.
		{"1.2.3.com", "1.2.3.com"},
		{"example.0x1g", "example.0x1g"},
		{"0x7f.example", "0x7f.example"},
		// IPv4 in every form browsers and inet_aton read.
		{"127.0.0.1", "127.0.0.1"},
		{"127.0.0.1.", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"0X7F.1", "127.0.0.1"},
		{"0x7f.0.0.1", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"127.000.000.001", "127.0.0.1"},
		{"0xa9.0xfe.0xa9.0xfe", "169.254.169.254"},
		{"169.254.43518", "169.254.169.254"},
		{"010.0.0.1", "8.0.0.1"}, // octal, as inet_aton says; never 10.0.0.1
		{"0x.0x.0x.0x", "0.0.0.0"},
		{"0", "0.0.0.0"},
		{"4294967295", "255.255.255.255"},
		{"255.255.255.255", "255.255.255.255"},
		// IPv6: RFC 5952, and IPv4-mapped is IPv4.
		{"[::1]", "[::1]"},
		{"[0:0:0:0:0:0:0:1]", "[::1]"},
		{"[0000::0001]", "[::1]"},
		{"[2001:DB8::1]", "[2001:db8::1]"},
		{"[2001:db8:0:0:1:0:0:1]", "[2001:db8::1:0:0:1]"},
		{"[::ffff:127.0.0.1]", "127.0.0.1"},
		{"[::ffff:7f00:1]", "127.0.0.1"},
		{"[0:0:0:0:0:FFFF:7F00:0001]", "127.0.0.1"},
		{"[::ffff:169.254.169.254]", "169.254.169.254"},
		// Other IPv4-in-IPv6 forms are other addresses: not mapped.
		{"[::127.0.0.1]", "[::7f00:1]"},
		{"[64:ff9b::127.0.0.1]", "[64:ff9b::7f00:1]"},
	} {
		got, err := CanonicalHost(c.in)
		if err != nil || got != c.want {
			t.Errorf("CanonicalHost(%q) = %q, %v; want %q", c.in, got, err, c.want)
			continue
		}
		if again, err := CanonicalHost(got); err != nil || again != got {
			t.Errorf("CanonicalHost(%q) = %q, %v; not canonical", got, again, err)
		}
	}
	for _, c := range []struct{ in, why string }{
		{"", "no host name"},
		{".", "no host name"},
		{strings.Repeat("a", 254), "longer than 253"},
		{"a..b", "empty label"},
		{".example.com", "empty label"},
		{"example.com..", "empty label"},
		{"ex%61mple.com", "cannot be in a host name"},
		{"exa mple.com", "cannot be in a host name"},
		{"bücher.example", "cannot be in a host name"},
		{"example.com:80", "cannot be in a host name"},
		{"::1", "cannot be in a host name"}, // IPv6 only in brackets
		// Ends in a number, so IPv4 (WHATWG), but not a valid one.
		{"1.2.3.999", "IPv4"},
		{"1.2.3.256", "IPv4"},
		{"1.2.65536", "IPv4"},
		{"1.16777216", "IPv4"},
		{"4294967296", "IPv4"},
		{"99999999999999999999999", "IPv4"},
		{"256.1.1.1", "IPv4"},
		{"1.2.3.4.5", "IPv4"},
		{"08.1.1.1", "IPv4"},
		{"0x1g.1.1.1", "IPv4"},
		{"example.123", "IPv4"},
		{"example.0x", "IPv4"},
		{"[::1", "closing ']'"},
		{"[]", "not an IPv6 address"},
		{"[127.0.0.1]", "not an IPv6 address"},
		{"[::ffff:127.1]", "not an IPv6 address"},
		{"[::00001]", "not an IPv6 address"},
		{"[example.com]", "not an IPv6 address"},
		{"[fe80::1%eth0]", "zone"},
		{"[fe80::1%25eth0]", "zone"},
	} {
		if got, err := CanonicalHost(c.in); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("CanonicalHost(%q) = %q, %v; want an error saying %q", c.in, got, err, c.why)
		}
	}
}

// A host written canonically costs no allocation: the proxy calls
// CanonicalHost for every request.
func TestCanonicalHostAllocations(t *testing.T) {
	for _, host := range []string{"example.com", "127.0.0.1", "[2001:db8::1]", "example.com."} {
		if n := testing.AllocsPerRun(100, func() { _, _ = CanonicalHost(host) }); n != 0 {
			t.Errorf("CanonicalHost(%q): %v allocations, want 0", host, n)
		}
	}
}

// FuzzCanonicalHost checks that any host is refused or written in a form
// that is its own canonical form, an address netip reads the same way
// when it is one, and never an IPv4-mapped IPv6 address; and that an IPv4
// address is read as the WHATWG URL Standard (and inet_aton) reads it.
func FuzzCanonicalHost(f *testing.F) {
	for _, seed := range []string{"example.com.", "127.1", "0x7f.0.0.1", "0177.0.0.1", "2130706433", "1.2.3.999",
		"[::ffff:7f00:1]", "[0000::0001]", "[fe80::1%25eth0]", "a..b", "0x.0x", "[::1", "4294967296"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, host string) {
		got, err := CanonicalHost(host)
		if want, ok := referenceIPv4(host); ok && len(host) <= maxHostName && (err != nil || got != want) {
			t.Fatalf("CanonicalHost(%q) = %q, %v; the WHATWG IPv4 parser reads %q", host, got, err, want)
		}
		if err != nil {
			return
		}
		if again, err := CanonicalHost(got); err != nil || again != got {
			t.Fatalf("CanonicalHost(%q) = %q, then %q, %v", host, got, again, err)
		}
		literal := strings.TrimSuffix(strings.TrimPrefix(got, "["), "]")
		addr, perr := netip.ParseAddr(literal)
		switch {
		case strings.HasPrefix(got, "[") && (perr != nil || !addr.Is6() || addr.Is4In6() || addr.String() != literal):
			t.Fatalf("CanonicalHost(%q) = %q: not a canonical IPv6 address", host, got)
		case perr == nil && !strings.HasPrefix(got, "[") && (!addr.Is4() || addr.String() != got):
			t.Fatalf("CanonicalHost(%q) = %q: not a dotted-decimal IPv4 address", host, got)
		case perr != nil && (got != strings.ToLower(got) || strings.HasSuffix(got, ".") || endsInNumber(got)):
			t.Fatalf("CanonicalHost(%q) = %q: not a canonical name", host, got)
		}
	})
}

// referenceIPv4 is the WHATWG URL Standard's IPv4 parser written out
// step by step with strconv, to check CanonicalHost's against: ok is false
// for a host it does not read as an address.
func referenceIPv4(host string) (string, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) > 4 {
		return "", false
	}
	var numbers []uint64
	for _, p := range parts {
		base := 10
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			p, base = p[2:], 16
		case len(p) > 1 && p[0] == '0':
			p, base = p[1:], 8
		case p == "":
			return "", false
		}
		n := uint64(0)
		if p != "" {
			if strings.ContainsAny(p, "+-_") {
				return "", false
			}
			var err error
			if n, err = strconv.ParseUint(p, base, 64); err != nil {
				return "", false
			}
		}
		numbers = append(numbers, n)
	}
	addr := uint64(0)
	for i, n := range numbers[:len(numbers)-1] {
		if n > 255 {
			return "", false
		}
		addr += n << (8 * (3 - i))
	}
	last := numbers[len(numbers)-1]
	if last >= 1<<(8*(5-len(numbers))) {
		return "", false
	}
	addr += last
	return netip.AddrFrom4([4]byte{byte(addr >> 24), byte(addr >> 16), byte(addr >> 8), byte(addr)}).String(), true
}
