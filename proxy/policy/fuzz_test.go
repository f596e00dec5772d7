package policy

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"robotsgate/proxy/signing"
	"robotsgate/robots"
)

// quote writes s as a YAML double-quoted string, or reports that it
// cannot be written plainly (a control character, bytes that are not
// UTF-8: YAML would read another string).
func quote(s string) (string, bool) {
	if !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return "", false
	}
	return strconv.Quote(s), true
}

// FuzzParse parses a file in a folder of its own, holding a key file
// (key.pem) and the file's key set (acme.jwk), so that relative key
// file names are read there.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	writeKey(f, dir, "key.pem", time.Time{}, time.Time{})
	writeKey(f, dir, "acme.jwk", time.Time{}, time.Time{})
	name := filepath.Join(dir, "p.yaml")
	f.Add(example)
	f.Add([]byte(judged))
	f.Add([]byte(addsUp))
	f.Add([]byte(signers))
	f.Add([]byte("a: &a [x]\nb: *a\n"))
	f.Add([]byte("crawlers:\n  - user: a\n    rules:\n      - Disallow: /a/\n"))
	f.Add([]byte("crawlers:\n  - user: acme\n    signing_keys: [key.pem, acme.jwk]\n    signature_agent: https://bot.example\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseOptions(name, data, Options{SignatureAgent: "https://crawler.example"})
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, name+":") {
					t.Fatalf("error line %q does not name the file", line)
				}
			}
			return
		}
		for _, id := range p.Identities() {
			if !strings.HasPrefix(id.Name, "user ") || len(id.Keys) == 0 || signing.CheckAgent(id.Agent) != nil {
				t.Fatalf("identity %q, agent %q, %d keys", id.Name, id.Agent, len(id.Keys))
			}
		}
		if len(p.Version()) != 12 || p.Summary() == "" {
			t.Fatalf("version %q, summary %q", p.Version(), p.Summary())
		}
		for _, host := range []string{"example.com", "www.example.com", "127.0.0.1", "::1", "acme.example"} {
			for _, who := range [][2]string{{"", "bot"}, {"acme", "GPTBot"}, {"archiver", "*"}} {
				m := p.Match(who[0], who[1], host)
				if id := m.Signer(); id != nil && (who[0] == "" || id.Name != "user "+who[0]) {
					t.Fatalf("Match(%q, %q).Signer() is %q's", who[0], who[1], id.Name)
				}
				m.Destination()
				m.MinDelay()
				m.MaxConcurrency()
				m.Purposes()
				for _, path := range []string{"/", "/reports/x", "/a/../b?c=d"} {
					if ok, f := m.Judge(path, robots.Verdict{Cause: robots.CauseUnreachable}); ok || f != nil && f.Kind != KindRule {
						t.Fatalf("an unreachable robots.txt was overridden: %v", f)
					}
					m.Judge(path, allowed)
				}
			}
		}
	})
}

// FuzzMatch checks each host pattern against a host: the crawler's
// allow_sites and the site entries' index must agree with each other and
// with the patterns' definition.
func FuzzMatch(f *testing.F) {
	for _, seed := range [][2]string{
		{"example.com", "example.com"}, {"*.example.com", "a.b.example.com"}, {"domain:example.com", "example.com"},
		{"domain:example.co.uk", "www.example.co.uk"}, {"Bücher.example", "xn--bcher-kva.example"}, {"127.1", "127.0.0.1"},
		{"[::1]", "[0::1]"}, {"2001:db8::1", "[2001:db8::1]"}, {"*.com", "example.com"}, {"example.com:80", "example.com"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, host string) {
		q, ok := quote(pattern)
		if !ok {
			return
		}
		p, err := Parse("p.yaml", []byte("crawlers:\n  - user: u\n    allow_sites: ["+q+"]\nsites:\n  - hosts: ["+q+"]\n    rules: [\"Disallow: /x\"]\n"))
		if err != nil {
			if _, perr := parseHostPattern(pattern); perr == nil {
				t.Fatalf("the pattern parses alone but not in a file: %v", err)
			}
			return
		}
		hp, err := parseHostPattern(pattern)
		if err != nil {
			t.Fatal(err)
		}
		canonical, err := robots.CanonicalHost(host)
		if err != nil {
			return // the proxy answers 400 before any policy
		}
		canonical = strings.TrimSuffix(strings.TrimPrefix(canonical, "["), "]")
		want := hp.self && canonical == hp.host || hp.under && strings.HasSuffix(canonical, "."+hp.host)
		m := p.Match("u", "bot", canonical)
		if got := m.Destination() == nil; got != want {
			t.Fatalf("pattern %q (%+v), host %q: allow_sites matches %v, want %v", pattern, hp, canonical, got, want)
		}
		if ok, _ := m.Judge("/x", allowed); ok == want {
			t.Fatalf("pattern %q (%+v), host %q: the site entry applies %v, want %v", pattern, hp, canonical, !ok, want)
		}
	})
}

// FuzzJudge checks Judge's invariants over rule and exception patterns,
// robots.txt rules and paths.
func FuzzJudge(f *testing.F) {
	for _, seed := range [][4]string{
		{"/shop/", "/reports/", "/", "/reports/../admin/"},
		{"/*.bak$", "/*.pdf$", "/files/", "/files/a.pdf?x=1"},
		{"/a/", "/reports/", "/reports/", "/reports/%2e%2e/a/"},
		{"*", "/x", "/", "/x"},
		{"/reports/secret", "/reports/", "/", "/reports/secret/x"},
		{"/docs/index.html", "/docs/index.html", "/", "/docs/"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	f.Fuzz(func(t *testing.T, rule, exception, robotsRule, path string) {
		qr, ok1 := quote("Disallow: " + rule)
		qe, ok2 := quote(exception)
		if !ok1 || !ok2 || path == "" || path[0] != '/' {
			return
		}
		p, err := Parse("p.yaml", []byte("sites:\n  - hosts: [example.com]\n    rules: ["+qr+"]\n    exceptions:\n      - allow: "+qe+"\n        reason: ok\n"))
		if err != nil {
			return
		}
		v := robots.Parser{}.Parse([]byte("User-agent: *\nDisallow: "+robotsRule+"\n")).CheckReadings("bot", path)
		m := p.Match("", "bot", "example.com")
		ok, f := m.Judge(path, v)
		rules := robots.Parser{}.Parse([]byte("User-agent: *\nDisallow: "+rule+"\n")).CheckReadings("*", path)
		switch {
		case f == nil && ok != v.Allowed:
			t.Fatalf("no finding, yet allowed %v where robots.txt says %v", ok, v.Allowed)
		case f == nil && !rules.Allowed:
			t.Fatalf("the rule %q refuses %q (%s), Judge did not", rule, path, rules.Reason())
		case f == nil:
		case f.Kind == KindException && (!ok || v.Allowed || v.Cause != robots.CauseRule):
			t.Fatalf("an exception decided (%v) where robots.txt said %s", ok, v.Reason())
		case f.Kind == KindException && !rules.Allowed:
			t.Fatalf("an exception allowed what the rule %q refuses", rule)
		case f.Kind == KindException:
			exc := robots.Parser{}.Parse([]byte("User-agent: *\nDisallow: /\nAllow: "+exception+"\n")).CheckReadings("*", path)
			if !exc.Allowed || f.Line != 5 {
				t.Fatalf("the exception %q (line %d) does not cover %q", exception, f.Line, path)
			}
		case f.Kind == KindRule && (ok || rules.Allowed || f.Line != 3):
			t.Fatalf("a rule finding (line %d, allowed %v) where the rule says %s", f.Line, ok, rules.Reason())
		case f.Kind != KindRule:
			t.Fatalf("Judge found %v", f)
		}
		for _, refused := range []robots.Verdict{{Cause: robots.CauseUnreachable}, {Cause: robots.CauseAmbiguous}, {Cause: robots.CauseTooCostly}} {
			if ok, f := m.Judge(path, refused); ok || f != nil && f.Kind != KindRule {
				t.Fatalf("%v was overridden: %v", refused.Cause, f)
			}
		}
	})
}
