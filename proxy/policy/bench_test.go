package policy

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchPolicy has 1,000 site entries, a third of each host pattern form,
// and a few crawler entries.
func benchPolicy(b *testing.B) *Policy {
	var file strings.Builder
	file.WriteString(addsUp)
	file.WriteString("sites:\n")
	for i := range 1000 {
		host := "site" + strconv.Itoa(i) + ".example"
		switch i % 3 {
		case 1:
			host = "*." + host
		case 2:
			host = "domain:" + host
		}
		file.WriteString("  - hosts: [\"" + host + "\"]\n    rules: [\"Disallow: /private/\"]\n")
		if i%10 == 0 {
			file.WriteString("    users: [archiver]\n    exceptions: [{allow: /reports/, reason: ok}]\n")
		}
	}
	return mustParse(b, file.String())
}

// BenchmarkMatch is the policy's cost on a request: Match, Destination
// and Judge of an allowed path.
func BenchmarkMatch(b *testing.B) {
	p := benchPolicy(b)
	for _, bench := range []struct{ name, user, token, host string }{
		{"no policy", "", "", ""},
		{"host not in it", "", "bot", "www.example.com"},
		{"host in it", "", "bot", "www.site998.example"},
		{"sandboxed crawler", "acme", "AcmeBot", "shop.acme.example"},
	} {
		policy := p
		if bench.name == "no policy" {
			policy, bench.host = nil, "www.example.com"
		}
		b.Run(bench.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m := policy.Match(bench.user, bench.token, bench.host)
				if m.Destination() != nil {
					b.Fatal("refused")
				}
				if ok, _ := m.Judge("/public/page.html", allowed); !ok {
					b.Fatal("refused")
				}
			}
		})
	}
}

// BenchmarkMatchSigner is Match and Signer on a policy with signing
// keys: for a user with keys, one without, and an anonymous client.
func BenchmarkMatchSigner(b *testing.B) {
	dir := b.TempDir()
	writeKey(b, dir, "acme.pem", time.Time{}, time.Time{})
	writeKey(b, dir, "carol.jwk", time.Time{}, time.Time{})
	p, err := ParseOptions(filepath.Join(dir, "p.yaml"), []byte(signers), Options{SignatureAgent: "https://crawler.example"})
	if err != nil {
		b.Fatal(err)
	}
	for _, bench := range []struct {
		name, user, token string
		signs             bool
	}{
		{"signing user", "acme", "AcmeBot", true},
		{"user without keys", "bob", "acme", false},
		{"anonymous", "", "acme", false},
	} {
		b.Run(bench.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m := p.Match(bench.user, bench.token, "acme.example")
				if (m.Signer() != nil) != bench.signs {
					b.Fatal("wrong signer")
				}
			}
		})
	}
}
