package proxy

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	tunnelTo := func(connect, scheme string) *tunnel {
		tun, err := parseConnectTarget(connect)
		if err != nil {
			t.Fatalf("parseConnectTarget(%q): %v", connect, err)
		}
		tun.scheme = scheme
		return tun
	}
	tunTLS := tunnelTo("example.com:443", "https")
	tunPlain := tunnelTo("example.com:8080", "http")
	tunLoop := tunnelTo("127.0.0.1:8080", "http")
	tunMapped := tunnelTo("[::ffff:7f00:1]:08080", "http")
	tests := []struct {
		name   string
		uri    string
		host   string // the Host header, for origin-form
		tun    *tunnel
		status int    // 0: parsed
		want   string // target.String()
		dial   string
		judged string // pathAndQuery
		origin string
		// hostHeader is the Host the origin gets.
		hostHeader string
		wantWhy    string
		outgoing   string // the request line's target the transport writes
	}{
		{name: "absolute", uri: "http://Example.COM:80/a/b?q=1", want: "http://Example.COM:80/a/b?q=1", dial: "example.com", host: "ignored", hostHeader: "example.com", judged: "/a/b?q=1", origin: "http://example.com", outgoing: "/a/b?q=1"},
		{name: "canonical", uri: "http://example.com:8080/a", origin: "http://example.com:8080"},
		{name: "leading zeros in the port", uri: "http://example.com:08080/a", origin: "http://example.com:8080", hostHeader: "example.com:8080", dial: "example.com:8080"},
		{name: "upper-case scheme", uri: "HTTPS://example.com/a", want: "https://example.com/a", origin: "https://example.com"},
		{name: "default https port", uri: "https://example.com:443/a", origin: "https://example.com"},
		{name: "empty path", uri: "http://example.com", want: "http://example.com/", judged: "/", outgoing: "/"},
		{name: "query without path", uri: "http://example.com?x", want: "http://example.com/?x", judged: "/?x", outgoing: "/?x"},
		{name: "empty query kept", uri: "http://example.com/a?", want: "http://example.com/a?", judged: "/a?", outgoing: "/a?"},
		{name: "bytes kept", uri: "http://example.com/a|b%7c;c?q=%zz|", judged: "/a|b%7c;c?q=%zz|", outgoing: "/a|b%7c;c?q=%zz|"},
		{name: "double slash kept", uri: "http://example.com//a%2Fb", judged: "//a%2Fb", outgoing: "//a%2Fb"},
		{name: "ipv6", uri: "https://[2001:DB8::1]:8443/x", want: "https://[2001:DB8::1]:8443/x", origin: "https://[2001:db8::1]:8443", outgoing: "/x"},
		{name: "user info", uri: "http://;@example.com/private/x", status: 400, wantWhy: "user information"},
		{name: "password", uri: "http://u:p@example.com/", status: 400, wantWhy: "RFC 9110"},
		{name: "fragment", uri: "http://example.com/a#b", status: 400, wantWhy: "fragment"},
		{name: "scheme", uri: "ftp://example.com/", status: 400, wantWhy: "only http and https"},
		{name: "no scheme", uri: "example.com/a", status: 400},
		{name: "origin-form outside a tunnel", uri: "/a", host: "example.com", status: 400},
		{name: "asterisk", uri: "*", status: 400, wantWhy: "asterisk"},
		{name: "port zero", uri: "http://example.com:0/", status: 400, wantWhy: "port"},
		{name: "port too large", uri: "http://example.com:65536/", status: 400, wantWhy: "port"},
		{name: "empty port", uri: "http://example.com:/", status: 400, wantWhy: "empty port"},
		{name: "percent in host", uri: "http://ex%61mple.com/", status: 400, wantWhy: "cannot be in a host name"},
		{name: "backslash in host", uri: `http://example.com\@evil/`, status: 400},
		{name: "bare ipv6", uri: "http://::1/", status: 400},
		{name: "ipv6 zone", uri: "http://[fe80::1%25eth0]/", status: 400},
		{name: "too long", uri: "http://example.com/" + strings.Repeat("a", 100), status: 414},

		// One address, one origin: every spelling is judged, paced and
		// sent as the canonical one; what was sent is what is recorded.
		{name: "ipv4 canonical", uri: "http://127.0.0.1:8080/a", want: "http://127.0.0.1:8080/a", origin: "http://127.0.0.1:8080", hostHeader: "127.0.0.1:8080", dial: "127.0.0.1:8080"},
		{name: "ipv4-mapped", uri: "http://[::ffff:127.0.0.1]:8080/a", want: "http://[::ffff:127.0.0.1]:8080/a", origin: "http://127.0.0.1:8080", hostHeader: "127.0.0.1:8080", dial: "127.0.0.1:8080", outgoing: "/a"},
		{name: "ipv4-mapped hex", uri: "http://[::FFFF:7F00:1]:8080/a", origin: "http://127.0.0.1:8080", hostHeader: "127.0.0.1:8080"},
		{name: "ipv4 short", uri: "http://127.1:8080/a?q", want: "http://127.1:8080/a?q", origin: "http://127.0.0.1:8080", dial: "127.0.0.1:8080", judged: "/a?q", outgoing: "/a?q"},
		{name: "ipv4 hex", uri: "http://0x7f.0.0.1:8080/a", origin: "http://127.0.0.1:8080"},
		{name: "ipv4 octal", uri: "http://0177.0.0.1:8080/a", origin: "http://127.0.0.1:8080"},
		{name: "ipv4 one number", uri: "http://2130706433:8080/a", origin: "http://127.0.0.1:8080"},
		{name: "ipv4 leading zeros", uri: "http://127.000.000.001:8080/a", origin: "http://127.0.0.1:8080"},
		{name: "ipv4 trailing dot", uri: "http://127.0.0.1.:8080/a", origin: "http://127.0.0.1:8080"},
		{name: "ipv4 hex metadata", uri: "http://0xa9.0xfe.0xa9.0xfe/latest", origin: "http://169.254.169.254", dial: "169.254.169.254"},
		{name: "ipv6 canonical", uri: "http://[2001:db8::1]:8080/a", origin: "http://[2001:db8::1]:8080", hostHeader: "[2001:db8::1]:8080"},
		{name: "ipv6 long form", uri: "http://[0:0:0:0:0:0:0:1]:8080/a", origin: "http://[::1]:8080", hostHeader: "[::1]:8080", dial: "[::1]:8080"},
		{name: "ipv6 leading zeros", uri: "http://[0000::0001]/a", origin: "http://[::1]", hostHeader: "[::1]"},
		{name: "ipv6 default port", uri: "https://[::1]:443/a", origin: "https://[::1]"},
		{name: "name trailing dot", uri: "http://Example.COM.:80/a", want: "http://Example.COM.:80/a", origin: "http://example.com", hostHeader: "example.com", dial: "example.com"},
		{name: "name trailing dot and port", uri: "http://example.com.:8080/a", origin: "http://example.com:8080", hostHeader: "example.com:8080"},
		{name: "ipv4 part too large", uri: "http://1.2.3.999/", status: 400, wantWhy: "IPv4"},
		{name: "ipv4 bad octal", uri: "http://08.1.1.1/", status: 400, wantWhy: "IPv4"},
		{name: "ipv4 five parts", uri: "http://1.2.3.4.5/", status: 400, wantWhy: "IPv4"},
		{name: "numeric last label", uri: "http://example.123/", status: 400, wantWhy: "IPv4"},
		{name: "ipv4 too large", uri: "http://4294967296/", status: 400, wantWhy: "IPv4"},
		{name: "ipv4 in brackets", uri: "http://[127.0.0.1]/", status: 400, wantWhy: "IPv6"},
		{name: "ipv6 with short ipv4", uri: "http://[::ffff:127.1]/", status: 400, wantWhy: "IPv6"},
		{name: "empty label", uri: "http://example..com/", status: 400, wantWhy: "empty label"},
		{name: "two trailing dots", uri: "http://example.com../", status: 400, wantWhy: "empty label"},
		{name: "only a dot", uri: "http://./", status: 400},

		{name: "tunnel origin-form", uri: "/p?q", host: "EXAMPLE.com", tun: tunTLS, want: "https://EXAMPLE.com/p?q", dial: "example.com:443", hostHeader: "example.com", judged: "/p?q", origin: "https://example.com", outgoing: "/p?q"},
		{name: "tunnel explicit default port", uri: "/p", host: "example.com:443", tun: tunTLS, want: "https://example.com:443/p"},
		{name: "tunnel leading zeros in port", uri: "/p", host: "example.com:0443", tun: tunTLS, want: "https://example.com:0443/p"},
		{name: "tunnel absolute", uri: "https://example.com/p", host: "ignored", tun: tunTLS, want: "https://example.com/p", dial: "example.com:443"},
		{name: "tunnel other host", uri: "/p", host: "other.com", tun: tunTLS, status: 421},
		{name: "tunnel other port", uri: "/p", host: "example.com:8443", tun: tunTLS, status: 421},
		{name: "tunnel other scheme", uri: "http://example.com:443/p", tun: tunTLS, status: 421},
		{name: "tunnel absolute other host", uri: "https://other.com/p", tun: tunTLS, status: 421},
		{name: "plain tunnel default port differs", uri: "/p", host: "example.com", tun: tunPlain, status: 421},
		{name: "plain tunnel", uri: "/p", host: "example.com:8080", tun: tunPlain, want: "http://example.com:8080/p", dial: "example.com:8080"},
		{name: "tunnel host with path", uri: "/p", host: "example.com/private", tun: tunTLS, status: 400},
		{name: "tunnel without Host", uri: "/p", tun: tunTLS, status: 400, wantWhy: "no Host"},
		{name: "tunnel user info", uri: "https://;@example.com/p", tun: tunTLS, status: 400, wantWhy: "user information"},
		{name: "tunnel name trailing dot", uri: "/p", host: "example.com.", tun: tunTLS, want: "https://example.com./p", origin: "https://example.com", hostHeader: "example.com", dial: "example.com:443"},
		{name: "tunnel host mapped", uri: "/p", host: "[::ffff:127.0.0.1]:8080", tun: tunLoop, origin: "http://127.0.0.1:8080", hostHeader: "127.0.0.1:8080", dial: "127.0.0.1:8080"},
		{name: "tunnel host short", uri: "http://127.1:8080/p", tun: tunLoop, origin: "http://127.0.0.1:8080", hostHeader: "127.0.0.1:8080"},
		{name: "mapped tunnel", uri: "/p", host: "127.0.0.1:8080", tun: tunMapped, origin: "http://127.0.0.1:8080", hostHeader: "127.0.0.1:8080", dial: "127.0.0.1:8080"},
		{name: "mapped tunnel other address", uri: "/p", host: "127.0.0.2:8080", tun: tunMapped, status: 421},
		{name: "tunnel host invalid ipv4", uri: "/p", host: "127.0.0.256:8080", tun: tunLoop, status: 400, wantWhy: "IPv4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &http.Request{Method: "GET", RequestURI: tt.uri, Host: tt.host}
			var got target
			err := parseTarget(r, tt.tun, 64, &got)
			if tt.status != 0 {
				if err == nil || err.status != tt.status || !strings.Contains(err.why, tt.wantWhy) {
					t.Fatalf("parseTarget(%q) = %+v, %v; want status %d saying %q", tt.uri, got, err, tt.status, tt.wantWhy)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseTarget(%q): %v", tt.uri, err)
			}
			if tt.want != "" && got.url != tt.want {
				t.Errorf("url = %q, want %q", got.url, tt.want)
			}
			if tt.hostHeader != "" && got.hostHeader != tt.hostHeader {
				t.Errorf("hostHeader = %q, want %q", got.hostHeader, tt.hostHeader)
			}
			if tt.origin != "" && got.origin != tt.origin {
				t.Errorf("origin = %q, want %q", got.origin, tt.origin)
			}
			if tt.dial != "" && got.dial != tt.dial {
				t.Errorf("dial = %q, want %q", got.dial, tt.dial)
			}
			if tt.judged != "" && got.pathAndQuery != tt.judged {
				t.Errorf("pathAndQuery = %q, want %q", got.pathAndQuery, tt.judged)
			}
			if tt.outgoing != "" {
				var u url.URL
				ok := got.outgoingURL(&u)
				if !ok || u.RequestURI() != tt.outgoing {
					t.Errorf("outgoing request target %q (ok %v), want %q", u.RequestURI(), ok, tt.outgoing)
				}
			}
		})
	}
}

// A path that starts with "//" and needs re-encoding cannot be sent as is;
// it is refused rather than changed.
func TestOutgoingURLRefusesReencoding(t *testing.T) {
	tgt := &target{scheme: "http", dial: "example.com", path: "//a|b"}
	var u url.URL
	if ok := tgt.outgoingURL(&u); ok {
		t.Errorf("outgoingURL of //a|b = %q, want refused", u.RequestURI())
	}
}

func TestParseConnectTarget(t *testing.T) {
	for _, c := range []struct {
		raw      string
		status   int
		host     string // canonical, IPv6 without brackets
		hostPort string // where the tunnel connects
	}{
		{raw: "example.com:443", host: "example.com", hostPort: "example.com:443"},
		{raw: "[::1]:8443", host: "::1", hostPort: "[::1]:8443"},
		{raw: "127.0.0.1:80", host: "127.0.0.1", hostPort: "127.0.0.1:80"},
		{raw: "Example.COM.:0443", host: "example.com", hostPort: "example.com:443"},
		{raw: "[0:0:0:0:0:0:0:1]:8443", host: "::1", hostPort: "[::1]:8443"},
		{raw: "[::ffff:127.0.0.1]:443", host: "127.0.0.1", hostPort: "127.0.0.1:443"},
		{raw: "[::ffff:a9fe:a9fe]:443", host: "169.254.169.254", hostPort: "169.254.169.254:443"},
		{raw: "0xa9.0xfe.0xa9.0xfe:443", host: "169.254.169.254", hostPort: "169.254.169.254:443"},
		{raw: "127.1:443", host: "127.0.0.1", hostPort: "127.0.0.1:443"},
		{raw: "2130706433:443", host: "127.0.0.1", hostPort: "127.0.0.1:443"},
		{raw: "example.com", status: 400},
		{raw: "user@example.com:443", status: 400},
		{raw: "example.com:0", status: 400},
		{raw: "example.com:https", status: 400},
		{raw: "/rpc", status: 400},
		{raw: "exa mple.com:443", status: 400},
		{raw: "1.2.3.999:443", status: 400},
		{raw: "[fe80::1%25eth0]:443", status: 400},
		{raw: "", status: 400},
	} {
		tun, err := parseConnectTarget(c.raw)
		switch {
		case c.status == 0 && err != nil:
			t.Errorf("%q: %v", c.raw, err)
		case c.status == 0 && (tun.authority != c.raw || tun.host != c.host || tun.hostPort != c.hostPort):
			t.Errorf("%q: authority %q, host %q, hostPort %q; want host %q, hostPort %q", c.raw, tun.authority, tun.host, tun.hostPort, c.host, c.hostPort)
		case c.status != 0 && (err == nil || err.status != c.status):
			t.Errorf("%q: %+v, %v; want %d", c.raw, tun, err, c.status)
		}
	}
}

// The client's canonical spelling, the common case, is parsed without
// allocating; every other spelling of the address gives the same origin.
func TestParseTargetAllocations(t *testing.T) {
	for _, uri := range []string{"http://example.com/a?q=1", "http://127.0.0.1:8080/a", "https://[2001:db8::1]:8443/a"} {
		r := &http.Request{Method: "GET", RequestURI: uri}
		var tgt target
		if n := testing.AllocsPerRun(100, func() { _ = parseTarget(r, nil, 1024, &tgt) }); n != 0 {
			t.Errorf("parseTarget(%q): %v allocations, want 0", uri, n)
		}
	}
}

func TestRedactUserinfo(t *testing.T) {
	for raw, want := range map[string]string{
		"http://u:secret@h/p@q": "http://REDACTED@h/p@q",
		"http://;@h/private/x":  "http://REDACTED@h/private/x",
		"http://a@b@h?x":        "http://REDACTED@h?x",
		"http://h/p@q":          "http://h/p@q",
		"/path@x":               "/path@x",
		"alice:pw@host:443":     "REDACTED@host:443",
		"host:443":              "host:443",
		"https://h":             "https://h",
		"http://x:y@h#frag@z":   "http://REDACTED@h#frag@z",
	} {
		if got := redactUserinfo(raw); got != want {
			t.Errorf("redactUserinfo(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestListensBeyondLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": false,
		"127.0.0.2:8080": false,
		"[::1]:8080":     false,
		"0.0.0.0:8080":   true,
		"[::]:8080":      true,
		"10.1.2.3:8080":  true,
	} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := ListensBeyondLoopback(tcp); got != want {
			t.Errorf("ListensBeyondLoopback(%s) = %v, want %v", addr, got, want)
		}
	}
}

// BenchmarkParseTarget is the cost of the canonical target on its own:
// the client's canonical spelling (the common case) and another one.
func BenchmarkParseTarget(b *testing.B) {
	for _, bc := range []struct{ name, uri string }{
		{"name", "http://example.com/page?id=42"},
		{"ipv4-port", "http://127.0.0.1:8080/page?id=42"},
		{"ipv6-port", "http://[2001:db8::1]:8080/page?id=42"},
		{"ipv4-mapped", "http://[::ffff:127.0.0.1]:8080/page?id=42"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := &http.Request{Method: "GET", RequestURI: bc.uri}
			var tgt target
			b.ReportAllocs()
			for b.Loop() {
				if err := parseTarget(r, nil, 8<<10, &tgt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
