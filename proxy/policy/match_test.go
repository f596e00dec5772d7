package policy

import (
	"slices"
	"strings"
	"testing"
	"time"

	"robotsgate/robots"
)

func mustParse(t testing.TB, file string) *Policy {
	t.Helper()
	p, err := Parse("p.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// allowed is robots.txt's verdict when it says nothing of the path.
var allowed = robots.Verdict{Allowed: true, Cause: robots.CauseNoMatchingRule}

// TestHostPatterns checks each pattern form both where a crawler entry
// names sites (allow_sites) and where a site entry does (hosts).
func TestHostPatterns(t *testing.T) {
	tests := []struct {
		pattern string
		match   []string
		miss    []string
	}{
		{"example.com", []string{"example.com", "Example.COM", "example.com."}, []string{"www.example.com", "example.org", "notexample.com", "com"}},
		{"EXAMPLE.com.", []string{"example.com"}, []string{"www.example.com"}},
		{"*.example.com", []string{"www.example.com", "a.b.c.example.com"}, []string{"example.com", "badexample.com", "example.com.evil.net"}},
		{"domain:example.com", []string{"example.com", "www.example.com", "a.b.example.com"}, []string{"notexample.com", "example.org"}},
		{"domain:example.co.uk", []string{"example.co.uk", "www.example.co.uk"}, []string{"other.co.uk", "co.uk"}},
		{"domain:user.github.io", []string{"user.github.io", "www.user.github.io"}, []string{"other.github.io"}},
		{"Bücher.example", []string{"xn--bcher-kva.example"}, []string{"bucher.example"}},
		{"*.bücher.de", []string{"www.xn--bcher-kva.de"}, []string{"xn--bcher-kva.de"}},
		{"127.1", []string{"127.0.0.1"}, []string{"127.0.0.2", "0.0.1"}},
		{"10.0.0.1", []string{"10.0.0.1"}, []string{"110.0.0.1", "0.0.1"}},
		{"[2001:DB8:0:0::1]", []string{"2001:db8::1", "[2001:db8::1]"}, []string{"2001:db8::2"}},
		{"2001:db8::1", []string{"2001:db8::1"}, []string{"db8::1"}},
		{"[::ffff:127.0.0.1]", []string{"127.0.0.1"}, []string{"::ffff:127.0.0.1"}},
		{"under_score.example", []string{"under_score.example"}, nil},
		// A name ending in a digit is a name, not an address: its patterns apply.
		{"*.intranet.corp1", []string{"app.intranet.corp1", "a.b.intranet.corp1"}, []string{"intranet.corp1", "app.intranet.corp2"}},
		{"domain:example.k8s2", []string{"example.k8s2", "www.example.k8s2"}, []string{"example.k8s3"}},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			q := `"` + tt.pattern + `"`
			p := mustParse(t, "crawlers:\n  - user: u\n    allow_sites: ["+q+"]\nsites:\n  - hosts: ["+q+"]\n    rules: [\"Disallow: /x\"]\n")
			for _, host := range tt.match {
				m := p.Match("u", "bot", host)
				if f := m.Destination(); f != nil {
					t.Errorf("%s: refused by %v", host, f)
				}
				if ok, f := m.Judge("/x", allowed); ok || f == nil || f.Line != 6 {
					t.Errorf("%s: the site entry's rule does not apply: (%v, %v)", host, ok, f)
				}
			}
			for _, host := range tt.miss {
				m := p.Match("u", "bot", host)
				if f := m.Destination(); f == nil || f.Line != 3 || f.Kind != KindDestination {
					t.Errorf("%s: destination finding %v, want the allow_sites of line 3", host, f)
				}
				if ok, f := m.Judge("/x", allowed); !ok || f != nil {
					t.Errorf("%s: the site entry applies: (%v, %v)", host, ok, f)
				}
			}
		})
	}
}

// TestSiteIndexMerges checks that overlapping patterns of many entries
// all apply, in file order, at every depth.
func TestSiteIndexMerges(t *testing.T) {
	p := mustParse(t, `
sites:
  - hosts: ["domain:example.com"]
    rules: ["Disallow: /a"]
  - hosts: ["www.example.com"]
    rules: ["Disallow: /b"]
  - hosts: ["*.www.example.com"]
    rules: ["Disallow: /c"]
  - hosts: ["*.example.com", "a.b.www.example.com"]
    rules: ["Disallow: /d"]
  - hosts: ["other.example"]
    rules: ["Disallow: /e"]
`)
	tests := []struct {
		host string
		want string // the rule lines of the entries that apply, in order
	}{
		{"example.com", "a"},
		{"www.example.com", "abd"},
		{"x.www.example.com", "acd"},
		{"b.www.example.com", "acd"},
		{"a.b.www.example.com", "acd"},
		{"z.a.b.www.example.com", "acd"},
		{"q.example.com", "ad"},
		{"other.example", "e"},
		{"example.org", ""},
		{"com", ""},
	}
	for _, tt := range tests {
		m := p.Match("", "bot", tt.host)
		var got string
		for _, path := range []string{"/a", "/b", "/c", "/d", "/e"} {
			if ok, _ := m.Judge(path, allowed); !ok {
				got += path[1:]
			}
		}
		if got != tt.want {
			t.Errorf("%s: refused %q, want %q", tt.host, got, tt.want)
		}
	}
}

const addsUp = `
crawlers:
  - user: acme
    purposes: [search, archive]
    allow_sites: ["*.acme.example", "acme-shop.example"]
    min_delay: 2s
    max_concurrency: 4
  - user: acme
    purposes: [search]
    deny_sites: ["admin.acme.example"]
    rules: ["Disallow: /checkout/"]
    max_concurrency: 2
  - token: AcmeBot
    purposes: [ai-train]
    min_delay: 5s
    max_concurrency: 3
  - token: "*"
    deny_sites: ["intranet.acme.example"]
    min_delay: 1s
`

func TestEveryEntryAddsUp(t *testing.T) {
	p := mustParse(t, addsUp)
	m := p.Match("acme", "acmebot", "www.acme.example")
	if f := m.Destination(); f != nil {
		t.Errorf("refused: %v", f)
	}
	if d, f := m.MinDelay(); d != 5*time.Second || f == nil || f.Line != 15 || f.Rule != "min_delay: 5s" || f.Kind != KindMinDelay {
		t.Errorf("MinDelay %v %+v, want 5s from line 15", d, f)
	}
	if n, f := m.MaxConcurrency(); n != 2 || f == nil || f.Line != 12 || f.Kind != KindMaxConcurrency {
		t.Errorf("MaxConcurrency %d %+v, want 2 from line 12", n, f)
	}
	if got := m.Purposes(); !slices.Equal(got, []string{"search", "archive", "ai-train"}) {
		t.Errorf("Purposes %q", got)
	}
	if ok, f := m.Judge("/checkout/1", allowed); ok || f == nil || f.Line != 11 || f.Rule != "Disallow: /checkout/" {
		t.Errorf("Judge /checkout/1: (%v, %+v), want the rule of line 11", ok, f)
	}
	for host, line := range map[string]int{
		"admin.acme.example":    10, // the second acme entry's deny
		"intranet.acme.example": 18, // everyone's deny
		"example.com":           5,  // outside the first acme entry's allow_sites
	} {
		m := p.Match("acme", "AcmeBot", host)
		if f := m.Destination(); f == nil || f.Line != line {
			t.Errorf("%s: %+v, want the finding of line %d", host, f, line)
		}
	}
	m = p.Match("acme", "x", "example.com")
	f := m.Destination()
	if want := "allow_sites: *.acme.example, acme-shop.example"; f.Rule != want {
		t.Errorf("Rule %q, want %q", f.Rule, want)
	}
	if want := "p.yaml line 5: destination: allow_sites: *.acme.example, acme-shop.example (acme may visit only the sites allow_sites names)"; f.String() != want {
		t.Errorf("String %q, want %q", f.String(), want)
	}
	m = p.Match("", "x", "admin.acme.example")
	if f := m.Destination(); f != nil {
		t.Errorf("an anonymous crawler got the user's deny_sites: %v", f)
	}
}

func TestUserIsNotAToken(t *testing.T) {
	p := mustParse(t, addsUp+`
sites:
  - hosts: [www.example.com]
    users: [acme]
    exceptions: [{allow: /private/, reason: ok}]
`)
	// An anonymous client naming itself acme gets nothing of acme's
	// entries: not its sandbox, not its exception.
	m := p.Match("", "acme", "www.example.com")
	if f := m.Destination(); f != nil {
		t.Errorf("Destination %v", f)
	}
	if d, f := m.MinDelay(); d != time.Second || f.Line != 19 {
		t.Errorf("MinDelay %v from %v, want only everyone's 1s", d, f)
	}
	if got := m.Purposes(); got != nil {
		t.Errorf("Purposes %q", got)
	}
	disallowed := robotsVerdict(t, "User-agent: *\nDisallow: /private/\n", "/private/x")
	if ok, f := m.Judge("/private/x", disallowed); ok || f != nil {
		t.Errorf("the anonymous client got the user's exception: (%v, %v)", ok, f)
	}
	m = p.Match("acme", "acme", "www.example.com")
	if ok, f := m.Judge("/private/x", disallowed); !ok || f == nil || f.Kind != KindException {
		t.Errorf("the user did not get its exception: (%v, %v)", ok, f)
	}
}

func TestTokenCase(t *testing.T) {
	long := strings.Repeat("Long", 20) // past the lookup's buffer
	p := mustParse(t, "crawlers:\n  - token: GPTBot\n    purposes: [ai-train]\n  - token: "+long+"\n    purposes: [x]\n"+
		"sites:\n  - hosts: [example.com]\n    tokens: [ia_archiver]\n    exceptions: [{allow: /a, reason: ok}]\n")
	for _, tok := range []string{"GPTBot", "gptbot", "GPTBOT"} {
		m := p.Match("", tok, "h.example")
		if got := m.Purposes(); !slices.Equal(got, []string{"ai-train"}) {
			t.Errorf("%s: Purposes %q", tok, got)
		}
	}
	m := p.Match("", strings.ToUpper(long), "h.example")
	if got := m.Purposes(); !slices.Equal(got, []string{"x"}) {
		t.Errorf("long token: Purposes %q", got)
	}
	m = p.Match("GPTBot", "other", "h.example")
	if got := m.Purposes(); got != nil {
		t.Errorf("a user named like the token got its entry: %q", got)
	}
	v := robots.Verdict{Cause: robots.CauseRule}
	m = p.Match("", "IA_Archiver", "example.com")
	if ok, _ := m.Judge("/a", v); !ok {
		t.Error("the site entry's token is not matched case-insensitively")
	}
	if notes := p.Notes(); len(notes) != 1 || !strings.Contains(notes[0], "any anonymous client naming itself ia_archiver gets them") {
		t.Errorf("Notes %q", notes)
	}
}

func TestNothingApplies(t *testing.T) {
	var nilPolicy *Policy
	p := mustParse(t, "sites:\n  - hosts: [example.com]\n    users: [a]\n    rules: [\"Disallow: /\"]\n")
	for _, m := range []*Match{ptr(nilPolicy.Match("a", "b", "example.com")), ptr(p.Match("", "a", "example.com")), ptr(p.Match("a", "a", "example.org"))} {
		if m.Destination() != nil || m.Purposes() != nil {
			t.Errorf("%+v applies", m)
		}
		if ok, f := m.Judge("/", allowed); !ok || f != nil {
			t.Errorf("Judge (%v, %v)", ok, f)
		}
		if d, f := m.MinDelay(); d != 0 || f != nil {
			t.Errorf("MinDelay %v %v", d, f)
		}
		if n, f := m.MaxConcurrency(); n != 0 || f != nil {
			t.Errorf("MaxConcurrency %v %v", n, f)
		}
	}
	if nilPolicy.Summary() != "no policy" || nilPolicy.Version() != "" || nilPolicy.File() != "" || nilPolicy.Notes() != nil {
		t.Error("a nil policy describes itself")
	}
}

func TestEmptyAllowSites(t *testing.T) {
	p := mustParse(t, "crawlers:\n  - user: off\n    allow_sites: []\n")
	m := p.Match("off", "", "example.com")
	f := m.Destination()
	if f == nil || f.Rule != "allow_sites: []" {
		t.Errorf("an empty allow_sites let the crawler go: %v", f)
	}
}

func TestListTextIsBounded(t *testing.T) {
	var hosts []string
	for i := range 40 {
		hosts = append(hosts, `"h`+strings.Repeat("x", i)+`.example"`)
	}
	p := mustParse(t, "crawlers:\n  - user: a\n    allow_sites: ["+strings.Join(hosts, ", ")+"]\n")
	m := p.Match("a", "", "example.com")
	f := m.Destination()
	if f == nil || len(f.Rule) > 250 || !strings.HasSuffix(f.Rule, "(35 more)") {
		t.Errorf("Rule %q", f.Rule)
	}
}

// robotsVerdict is robots.txt's verdict on path for the crawler "bot".
func robotsVerdict(t testing.TB, robotsTxt, path string) robots.Verdict {
	t.Helper()
	return robots.Parser{}.Parse([]byte(robotsTxt)).CheckReadings("bot", path)
}

func ptr[T any](v T) *T { return &v }

func TestPaceBoundAndUsers(t *testing.T) {
	for _, tt := range []struct {
		file      string
		paceLine  int
		namesUser bool
	}{
		{"", 0, false},
		{"crawlers:\n  - token: a\n    deny_sites: [x.example]\n", 0, false},
		{"crawlers:\n  - token: a\n    purposes: [search]\n  - user: b\n    max_concurrency: 2\n", 5, true},
		{"crawlers:\n  - token: a\n    min_delay: 1s\n", 3, false},
		{"sites:\n  - hosts: [x.example]\n    users: [u]\n    rules: [\"Disallow: /a\"]\n", 0, true},
	} {
		p := mustParse(t, tt.file)
		line := 0
		if f := p.PaceBound(); f != nil {
			line = f.Line
		}
		if line != tt.paceLine {
			t.Errorf("%q: PaceBound at line %d, want %d", tt.file, line, tt.paceLine)
		}
		if got := p.NamesUsers(); got != tt.namesUser {
			t.Errorf("%q: NamesUsers %v", tt.file, got)
		}
	}
	var none *Policy
	if none.PaceBound() != nil || none.NamesUsers() {
		t.Error("a nil policy has bounds or users")
	}
}

func TestBlank(t *testing.T) {
	for file, blank := range map[string]bool{
		"":                     true,
		"\n# nothing yet\n\n":  true,
		"crawlers: []\n":       false,
		"sites: []\n# empty\n": false,
		"crawlers:\nsites:\n":  true,
		"crawlers:\n# cut\n":   true,
	} {
		if got := mustParse(t, file).Blank(); got != blank {
			t.Errorf("%q: Blank %v, want %v", file, got, blank)
		}
	}
}

func TestReplaces(t *testing.T) {
	blank, empty, some := mustParse(t, "# cut\n"), mustParse(t, "crawlers: []\n"), mustParse(t, "crawlers:\n  - token: a\n    deny_sites: [x.example]\n")
	for _, tt := range []struct {
		name      string
		next, cur *Policy
		refused   bool
	}{
		{"blank over a policy", blank, some, true},
		{"blank over blank", blank, blank, false},
		{"an empty list over a policy, on purpose", empty, some, false},
		{"a policy over blank", some, blank, false},
		{"blank over an empty list", blank, empty, false},
		{"a key left without its list, over a policy", mustParse(t, "crawlers:\n"), some, true},
	} {
		err := tt.next.Replaces(tt.cur)
		if (err != nil) != tt.refused {
			t.Errorf("%s: %v", tt.name, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "p.yaml: the file is empty") {
			t.Errorf("%s: %v does not name the file", tt.name, err)
		}
	}
}
