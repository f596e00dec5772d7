package policy

import (
	"strings"
	"testing"
	"time"

	"robotsgate/robots"
)

const judged = `sites:
  - hosts: [example.com]
    rules:
      - "Disallow: /reports/secret/"
      - "Disallow: /*.bak$"
      - "Disallow: /a/"
      - "Allow: /a/public/"
    reason: "asked by mail"
    exceptions:
      - allow: /reports/
        reason: "permission 1"
      - allow: /*.pdf$
        reason: "permission 2"
      - allow: /docs/index.html
        reason: "permission 3"
crawlers:
  - token: bot
    rules: ["disallow: /checkout/  # no carts"]
`

func TestJudge(t *testing.T) {
	p := mustParse(t, judged)
	const everything = "User-agent: *\nDisallow: /\n"
	tests := []struct {
		name, robotsTxt, path string
		allowed               bool
		line                  int    // the finding's line; 0: none
		rule                  string // the finding's Rule
	}{
		{"allowed stays", "", "/x", true, 0, ""},
		{"disallowed stays", "User-agent: *\nDisallow: /x\n", "/x", false, 0, ""},
		{"exception", everything, "/reports/2026.html", true, 10, "allow: /reports/"},
		{"exception, robots.txt's reading", "User-agent: *\nDisallow: /reports/\n", "/reports/x", true, 10, "allow: /reports/"},
		{"dot segments escape the exception", everything, "/reports/../admin/", false, 0, ""},
		{"encoded dot segments escape it", everything, "/reports/%2e%2e/admin/", false, 0, ""},
		{"encoded slash", everything, "/reports%2F..%2Fadmin/", false, 0, ""},
		{"anchored exception", everything, "/files/a.pdf", true, 12, "allow: /*.pdf$"},
		{"anchored exception and a query", everything, "/files/a.pdf?page=2", false, 0, ""},
		{"anchored exception, a longer path", everything, "/files/a.pdf/x", false, 0, ""},
		{"exception names exactly its path", everything, "/docs/index.html", true, 14, "allow: /docs/index.html"},
		{"no implied directory URL", everything, "/docs/", false, 0, ""},
		{"rule beats robots.txt", "", "/reports/secret/x", false, 4, "Disallow: /reports/secret/"},
		{"rule beats exception", everything, "/reports/secret/x", false, 4, "Disallow: /reports/secret/"},
		{"rule reading", "", "/reports/x/../secret/y", false, 4, "Disallow: /reports/secret/"},
		{"anchored rule drops the query", "", "/db.bak?x=1", false, 5, "Disallow: /*.bak$"},
		{"anchored rule", "", "/db.bak.txt", true, 0, ""},
		{"allow within the rules", "", "/a/public/x", true, 0, ""},
		{"disallow within the rules", "", "/a/private", false, 6, "Disallow: /a/"},
		{"crawler rule, comment dropped", "", "/checkout/1", false, 18, "disallow: /checkout/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := robotsVerdict(t, tt.robotsTxt, tt.path)
			m := p.Match("", "bot", "example.com")
			ok, f := m.Judge(tt.path, v)
			if ok != tt.allowed {
				t.Errorf("allowed %v, want %v (robots.txt: %v, finding %v)", ok, tt.allowed, v.Reason(), f)
			}
			switch {
			case tt.line == 0 && f != nil:
				t.Errorf("finding %v, want none", f)
			case tt.line != 0 && (f == nil || f.Line != tt.line || !strings.EqualFold(f.Rule, tt.rule) || f.File != "p.yaml"):
				t.Errorf("finding %+v, want line %d, %q", f, tt.line, tt.rule)
			case f != nil && f.Kind == KindRule && f.Line < 10 && f.Reason != "asked by mail":
				t.Errorf("the site rule's reason is %q", f.Reason)
			case f != nil && f.Kind == KindException && !strings.HasPrefix(f.Reason, "permission"):
				t.Errorf("the exception's reason is %q", f.Reason)
			}
		})
	}
}

// TestExceptionOnlyOverridesARule: an unreachable robots.txt, an
// ambiguous or too costly path stay refused.
func TestExceptionOnlyOverridesARule(t *testing.T) {
	p := mustParse(t, judged)
	m := p.Match("", "bot", "example.com")
	for _, v := range []robots.Verdict{
		{Cause: robots.CauseUnreachable, Detail: "robots.txt 503"},
		{Cause: robots.CauseAmbiguous},
		{Cause: robots.CauseTooCostly},
	} {
		if ok, f := m.Judge("/reports/x", v); ok || f != nil {
			t.Errorf("%v: (%v, %v), want the refusal to stand", v.Cause, ok, f)
		}
	}
	unreachable := (&robots.Answer{Outcome: robots.OutcomeUnreachable}).CheckReadings("bot", "/reports/x")
	if ok, f := m.Judge("/reports/x", unreachable); ok || f != nil {
		t.Errorf("unreachable robots.txt: (%v, %v)", ok, f)
	}
}

// TestRulesRefuseWhatTheyCannotJudge: a path with more readings than
// robots.MaxReadings is refused by the policy's rules, not let through.
func TestRulesRefuseWhatTheyCannotJudge(t *testing.T) {
	p := mustParse(t, judged)
	m := p.Match("", "bot", "example.com")
	// From robots' TestReadingsAreBounded: more than MaxReadings.
	path := `/%2F%2e%5C/./..;\.a/%2F%2e%5C/./..;\.a`
	ok, f := m.Judge(path, allowed)
	if ok || f == nil || f.Kind != KindRule || f.Line != 18 || !strings.HasPrefix(f.Rule, "rules: ") {
		t.Errorf("(%v, %+v), want a refusal by the crawler rules of line 18", ok, f)
	}
}

func TestJudgeFastPathAllocatesNothing(t *testing.T) {
	p := mustParse(t, addsUp)
	for _, host := range []string{"example.com", "www.acme.example"} {
		allocs := testing.AllocsPerRun(100, func() {
			m := p.Match("", "other", host)
			m.Judge("/x", allowed)
			m.Destination()
			m.MinDelay()
			m.MaxConcurrency()
			m.Purposes()
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations", host, allocs)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		m := p.Match("acme", "AcmeBot", "www.acme.example")
		m.Destination()
		m.MinDelay()
	})
	if allocs != 0 {
		t.Errorf("a matching crawler: %v allocations", allocs)
	}
}

func TestExampleFile(t *testing.T) {
	p, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.crawlers) != 4 || len(p.sites) != 2 || p.exceptions != 2 {
		t.Errorf("Summary %s", p.Summary())
	}
	destinations := []struct {
		user, token, host string
		line              int
	}{
		{"acme", "acme", "shop.acme.example", 0},
		{"acme", "acme", "acme-shop.example", 0},
		{"acme", "acme", "example.com", 8},
		{"acme", "acme", "admin.acme.example", 9},
		{"", "GPTBot", "www.example.org", 15},
		{"", "gptbot", "example.org", 15},
		{"", "GPTBot", "www.example.com", 0},
		{"archiver", "ia_archiver", "intranet.example", 17},
		{"", "curl", "intranet.example", 17},
	}
	for _, d := range destinations {
		m := p.Match(d.user, d.token, d.host)
		f := m.Destination()
		if d.line == 0 && f != nil || d.line != 0 && (f == nil || f.Line != d.line) {
			t.Errorf("%s/%s on %s: %v, want line %d", d.user, d.token, d.host, f, d.line)
		}
	}
	m := p.Match("acme", "acme", "shop.acme.example")
	if d, f := m.MinDelay(); d != 2*time.Second || f.Line != 11 {
		t.Errorf("MinDelay %v %v", d, f)
	}
	if n, f := m.MaxConcurrency(); n != 2 || f.Line != 12 {
		t.Errorf("MaxConcurrency %v %v", n, f)
	}
	m = p.Match("", "curl", "www.example.com")
	if ok, f := m.Judge("/shop/cart", allowed); ok || f == nil || f.Line != 21 || f.Reason != "asked by mail to stay out of /shop/, 2026-10-01" {
		t.Errorf("/shop/cart: (%v, %+v), want the rule of line 21", ok, f)
	}
	disallowed := robotsVerdict(t, "User-agent: *\nDisallow: /\n", "/reports/q3.html")
	for _, who := range []struct{ user, token string }{{"archiver", "archiver"}, {"", "ia_archiver"}} {
		m := p.Match(who.user, who.token, "www.example.com")
		if ok, f := m.Judge("/reports/q3.html", disallowed); !ok || f == nil || f.Line != 27 {
			t.Errorf("%s/%s: (%v, %v), want the exception of line 27", who.user, who.token, ok, f)
		}
	}
	m = p.Match("", "curl", "www.example.com")
	if ok, f := m.Judge("/reports/q3.html", disallowed); ok || f != nil {
		t.Errorf("a crawler the entry does not name got its exception: (%v, %v)", ok, f)
	}
	if notes := p.Notes(); len(notes) != 1 || !strings.HasPrefix(notes[0], "testdata/example.yaml line 23: ") {
		t.Errorf("Notes %q", notes)
	}
}

func TestDisallowsAll(t *testing.T) {
	p := mustParse(t, `crawlers:
  - token: walled
    rules: ["Disallow: /"]
  - token: partly
    rules: ["Disallow: /", "Allow: /public/"]
  - token: narrow
    rules: ["Disallow: /private/"]
sites:
  - hosts: [closed.example]
    tokens: [visitor]
    rules: ["Disallow: /*"]
`)
	for _, tt := range []struct {
		token, host string
		line        int // of the rule refusing everything, 0 for none
	}{
		{"walled", "any.example", 3},
		{"partly", "any.example", 0},
		{"narrow", "any.example", 0},
		{"visitor", "closed.example", 11},
		{"visitor", "open.example", 0},
		{"other", "closed.example", 0},
	} {
		m := p.Match("", tt.token, tt.host)
		f := m.DisallowsAll()
		switch {
		case tt.line == 0 && f != nil:
			t.Errorf("%s at %s: refused everything by %v", tt.token, tt.host, f)
		case tt.line != 0 && (f == nil || f.Line != tt.line || f.Kind != KindRule):
			t.Errorf("%s at %s: %v, want the rule of line %d", tt.token, tt.host, f, tt.line)
		}
	}
}
