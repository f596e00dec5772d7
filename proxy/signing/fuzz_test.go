package signing

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzSign signs requests with fuzzed targets, Signature-Agent URLs (when
// NewIdentity accepts them) and client-sent signature fields. Sign either
// refuses a target with a byte outside printable ASCII (ErrNotASCII),
// leaving no signature field, or sets the three fields, the client's gone,
// as structured-field dictionaries of the profile's shape, and the
// independent verifier accepts the request as the origin receives it.
func FuzzSign(f *testing.F) {
	type seed struct{ authority, method, path, query, agent, clientSig, clientInput, clientAgent string }
	for _, s := range []seed{
		{"example.com", "GET", "/", "", "https://crawler.example", "", "", ""},
		{"Example.COM:80", "get", "/a%2Fb/../c", "x=1&y=%C3%A9", "https://Crawler.Example:443/", `sig1=:AAAA:`, `sig1=("@authority");created=1`, `sig1="https://evil.example"`},
		{"[::1]:8080", "M-SEARCH", "", "a", "http://127.0.0.1:1", "((((", ")", `"`},
		{"", "", "", "", "", "", "", ""},
		{"example.com", "GET", "/a?b", "c?d", "https://a.example/path", `sig1=:AAAA:, sig2=:BBBB:`, "sig1=()", `sig1=x, sig2="y"`},
		{"\u212Aelvin.example", "GET", "/caf\u00e9", "q=\xff", "https://u@a.example", "\x00", "\r\n", "\u00e9"},
		{"example.com", "GET ", "/ ~\"\\", " ~", "https://a.example?x", "", "", ""},
		{"example.com\x7f", "\t", "/\x1f", "\n", "javascript:alert(1)", "", "", ""},
		{"example.com:443", "GET", "//double", "#frag", "https://a.example\"", "", "", ""},
		{"example.com", "GET", "http://other.example/x", "", "https://a.example\\", "", "", ""},
		{"EXAMPLE.com:8443", "POST", "/%", "%zz", "https://[::1]:443", "", "", ""},
		{"example.com", "GET", "noslash", "", "HTTPS://A.EXAMPLE", "", "", ""},
	} {
		f.Add(s.authority, s.method, s.path, s.query, s.agent, s.clientSig, s.clientInput, s.clientAgent)
	}
	k := seededKey(f, 1, time.Time{}, time.Time{})
	fallback := identity(f, "https://crawler.example", k)
	s := Signer{TTL: time.Minute}
	f.Fuzz(func(t *testing.T, authority, method, path, query, agent, clientSig, clientInput, clientAgent string) {
		id, err := NewIdentity("user fuzz", agent, []*Key{k})
		if err != nil {
			if CheckAgent(agent) == nil {
				t.Fatalf("CheckAgent accepts %q, NewIdentity refuses it: %v", agent, err)
			}
			id = fallback
		}
		// The target as the proxy makes it: the authority normalized, an
		// origin-form path, path and query cut at the first '?'.
		if path != "" && path[0] != '/' {
			path = "/" + path
		}
		raw := path
		if query != "" {
			raw += "?" + query
		}
		p, q, _ := strings.Cut(raw, "?")
		tgt := Target{Method: method, Authority: normalizeAuthority(authority, "http"), Path: p, Query: q}
		client := map[string]string{FieldSignature: clientSig, FieldSignatureInput: clientInput, FieldSignatureAgent: clientAgent}
		h := http.Header{"Accept": {"*/*"}}
		for name, v := range client {
			h[name] = []string{v}
		}

		used, err := s.Sign(h, tgt, id, fixedNow)
		ascii := printableASCII(tgt.Method) && printableASCII(tgt.Authority) && printableASCII(tgt.Path) && printableASCII(tgt.Query)
		if err != nil {
			if !errors.Is(err, ErrNotASCII) || ascii {
				t.Fatalf("Sign(%+v) = %v", tgt, err)
			}
			assertNoSignatureFields(t, h)
			return
		}
		if !ascii || used != k {
			t.Fatalf("Sign(%+v) signed (key %v) a target with bytes outside printable ASCII", tgt, used)
		}
		got := parseSigned(t, h)
		if got.agent != id.Agent {
			t.Errorf("Signature-Agent sig1 %q, want %q", got.agent, id.Agent)
		}
		if len(got.components) != 5 {
			t.Errorf("components %q", got.components)
		}
		for name, v := range client {
			if h.Get(name) == v {
				t.Errorf("%s is still the client's %q", name, v)
			}
		}
		r := receivedRequest(tgt, h)
		r.Host = authority
		if err := verifyRequest(t, r, publicJWKs(k), fixedNow); err != nil {
			t.Errorf("target %+v, agent %q: the verifier refuses: %v\n%s", tgt, id.Agent, err, h)
		}
	})
}

// printableASCII is the fuzz test's own oracle of what a signature base
// may hold.
func printableASCII(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r > '~' })
}
