package robots

import (
	"slices"
	"strings"
	"testing"
)

// fuzzSeeds are bodies worth mutating: the RFC examples, Google's odd
// cases, and every-encoding mixes.
var fuzzSeeds = []string{
	"",
	"User-Agent: *\nDisallow: *.gif$\nDisallow: /example/\nAllow: /publications/\n\nUser-Agent: foobot\nDisallow:/\nAllow:/example/page.html\nAllow:/example/allowed.gif\n\nUser-Agent: barbot\nUser-Agent: bazbot\nDisallow: /example/page.html\n\nUser-Agent: quxbot\n",
	"user-agent FooBot\ndisallow /\n",
	"\xEF\xBB\xBFUser-agent: *\r\nDisallow: /a%2Fb\rAllow: /a/%62\n",
	"User-agent: *\nDisallow: /*a*a*a*b$\nAllow: /$\nDisallow: /index.html\nAllow: /dir/index.htm\n",
	"useragent: MJ12bot\nDisalow: /\nCrawl-delay: 2\nSitemap: https://e.com/s.xml\nUser-agent: *MJ12bot*\nAllow: /ok\n",
	"\xFF\xFEU\x00s\x00e\x00r\x00-\x00a\x00g\x00e\x00n\x00t\x00:\x00 \x00*\x00\n\x00D\x00i\x00s\x00a\x00l\x00l\x00o\x00w\x00:\x00 \x00/\x00",
	"User-agent: gamma\x00\nDisallow: /nul\x00/\nDisallow: /latin-\xe9t\xe9\n#\x00\n",
	"User-agent: fuzzbot\nCrawl-delay: 0.5\nRequest-rate: 10/1m 0600-0845\nUser-agent: *\nRequest_rate: 1/5h\nDisallow: /x\nCrawl-delay: 99999999\n",
	draftExample,
	"Content-Usage: train-ai=n\nUser-agent: fuzzbot\nContent-Signal: search=yes, ai-train=no\nUser-agent: *\nContent-Usage: /*.pdf$ train-ai=n\nContent-Usage: /some/ search=y\nContent-Signal: /some/ ai-input=no\nContent-Usage:\tx\nContent-Usage: /%7e\ttrain-ai=y\n\nuser-agent: FUZZBOT\ncontent-usage: /some/path train-ai=y\n",
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), "/some/path?q=1")
	}
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		r := Parser{KeepIgnored: true}.Parse(body)
		if r.ParsedBytes() > len(body) || r.Lines() < 1 {
			t.Fatalf("ParsedBytes %d of %d, Lines %d", r.ParsedBytes(), len(body), r.Lines())
		}
		if len(r.Ignored()) != r.IgnoredCount() {
			t.Fatalf("%d ignored lines kept, IgnoredCount %d", len(r.Ignored()), r.IgnoredCount())
		}
		for _, l := range r.Ignored() {
			if l.Line < 1 || l.Line > r.Lines() {
				t.Fatalf("ignored line %d outside 1..%d", l.Line, r.Lines())
			}
		}
		if d := (Parser{}).Parse(body); d.Ignored() != nil || d.IgnoredCount() != r.IgnoredCount() {
			t.Fatalf("without KeepIgnored: %d lines kept, IgnoredCount %d, want none and %d", len(d.Ignored()), d.IgnoredCount(), r.IgnoredCount())
		}
		if !r.Check("fuzzbot", "/robots.txt").Allowed {
			t.Fatal("/robots.txt must always be allowed")
		}
		if r.RetainedBytes() <= 0 {
			t.Fatal("RetainedBytes must be positive")
		}
		pace, paced := r.Pace("fuzzbot")
		if paced && (pace.Interval < 0 || pace.Interval > maxPace || pace.Line < 1 || pace.Line > r.Lines() ||
			pace.Directive != DirectiveCrawlDelay && pace.Directive != DirectiveRequestRate) {
			t.Fatalf("pace %+v out of bounds (%d lines)", pace, r.Lines())
		}
		usage := r.Usage("fuzzbot", path)
		checkUsageLines(t, body, r, usage)
		if again := r.Usage("fuzzbot", path); !slices.Equal(again, usage) {
			t.Fatalf("Usage is not deterministic: %+v, then %+v", usage, again)
		}
		// The parse must not keep a view of the body: scribbling over the
		// body changes no verdict.
		before, rule := r.Check("fuzzbot", path), pace.Rule()
		for i := range body {
			body[i] = 'x'
		}
		after := r.Check("fuzzbot", path)
		if before.Allowed != after.Allowed || before.Reason() != after.Reason() {
			t.Fatalf("verdict changed after the body was overwritten: %q -> %q", before.Reason(), after.Reason())
		}
		if again, _ := r.Pace("fuzzbot"); again.Rule() != rule {
			t.Fatalf("pace changed after the body was overwritten: %q -> %q", rule, again.Rule())
		}
		if again := r.Usage("fuzzbot", path); !slices.Equal(again, usage) {
			t.Fatalf("usage changed after the body was overwritten: %+v -> %+v", usage, again)
		}
	})
}

// checkUsageLines fails t unless every usage line is a line of body that
// says what the line says, and they are in file order, each once.
func checkUsageLines(t *testing.T, body []byte, r *Robots, usage []UsageLine) {
	t.Helper()
	if usage != nil && len(usage) == 0 || !r.HasUsage() && usage != nil {
		t.Fatalf("Usage %#v, HasUsage %v", usage, r.HasUsage())
	}
	if len(usage) == 0 {
		return
	}
	read := map[int]Line{}
	for l := range lines(decodeText(body)) {
		read[l.Number] = l
	}
	for i, u := range usage {
		l := read[u.Line]
		path, expr := splitUsage(l.Value)
		if l.Directive != u.Directive || path != u.Path || expr != u.Value || u.Value == "" {
			t.Fatalf("usage %+v, but line %d reads %+v", u, u.Line, l)
		}
		if i > 0 && u.Line <= usage[i-1].Line {
			t.Fatalf("usage lines out of order: %+v", usage)
		}
	}
}

// FuzzUsage compares Usage with a brute-force reading of the lines of the
// token's groups: every reading of the path, each with its query-less
// form for the anchored paths, matched by the textbook matcher.
func FuzzUsage(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, "fuzzbot", "/some/path?q=1")
		f.Add(s, "ExampleBot", "/x/../ai-ok/%2e/doc.pdf?x")
	}
	f.Fuzz(func(t *testing.T, body, token, path string) {
		r := Parser{}.Parse([]byte(body))
		got := r.Usage(token, path)
		checkUsageLines(t, []byte(body), r, got)
		rs := r.ruleSetFor(token)
		if rs.s == nil {
			if got != nil {
				t.Fatalf("no group, but Usage %+v", got)
			}
			return
		}
		var kept []*usageRule
		for _, gi := range rs.usageGroups() {
			g := &r.rare.usage[gi]
			for i := range g.rules {
				kept = append(kept, &g.rules[i])
			}
		}
		want := map[int]bool{}
		plan := planReadings(rs.usageLoad(), path)
		if plan.cost > MaxDecisionCost || plan.stop != stopNever {
			for _, u := range kept {
				want[u.Line] = true
			}
		} else {
			forms := []string{path}
			if readings, ok := readingsOf(path); ok {
				for _, reading := range readings {
					forms = append(forms, reading.Path)
				}
			}
			for _, form := range forms {
				norm := normalizePath(form)
				bare, _, hasQuery := strings.Cut(norm, "?")
				matches := func(u *usageRule) bool {
					return u.Path == "" || referenceMatch(u.pattern, norm) || hasQuery && u.pattern.anchored && referenceMatch(u.pattern, bare)
				}
				best := int32(-1)
				for _, u := range kept {
					if u.Directive == DirectiveContentUsage && matches(u) {
						best = max(best, u.pattern.octets)
					}
				}
				for _, u := range kept {
					if matches(u) && (u.Directive == DirectiveContentSignal || u.pattern.octets == best) {
						want[u.Line] = true
					}
				}
			}
		}
		if len(got) != len(want) {
			t.Fatalf("Usage %+v, want lines %v", got, want)
		}
		for _, u := range got {
			if !want[u.Line] {
				t.Fatalf("Usage %+v, want lines %v", got, want)
			}
		}
	})
}

// Appending "Disallow: /" to the group a crawler uses never makes the file
// more permissive for it.
func FuzzDisallowAllIsNeverMorePermissive(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, "fuzzbot", "/example/page.html")
	}
	f.Fuzz(func(t *testing.T, body, token, path string) {
		if len(body) > DefaultMaxBytes/2 || strings.HasPrefix(body, "\xFF\xFE") || strings.HasPrefix(body, "\xFE\xFF") {
			return // past the limit, or UTF-16: appended ASCII would not be read as written
		}
		original := Parser{}.Parse([]byte(body))
		v := original.Check(token, path)
		name, global := ProductName(token)
		var header string
		switch {
		case v.Group != "":
			header = "User-agent: " + v.Group // the group the crawler uses
		case global || name == "":
			header = "User-agent: *"
		default:
			header = "User-agent: " + name
		}
		extended := Parser{}.Parse([]byte(body + "\n" + header + "\nDisallow: /\n"))
		w := extended.Check(token, path)
		if !v.Allowed && w.Allowed {
			t.Fatalf("appending %q + Disallow: / allowed %q for %q: %s -> %s", header, path, token, v.Reason(), w.Reason())
		}
	})
}

func FuzzCheck(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, "FooBot", "/example/page.html")
		f.Add(s, "barbot", "/a%2fb/%E3%83%84?x=$*")
	}
	f.Fuzz(func(t *testing.T, body, token, path string) {
		r := Parser{}.Parse([]byte(body))
		v := r.Check(token, path)
		switch v.Cause {
		case CauseRule:
			if v.Rule.IsZero() || v.Rule.Allow != v.Allowed {
				t.Fatalf("rule verdict %+v", v)
			}
		case CauseNoMatchingRule, CauseNoGroup, CauseRobotsTxt:
			if !v.Allowed || !v.Rule.IsZero() {
				t.Fatalf("%v verdict must allow with no rule: %+v", v.Cause, v)
			}
		default:
			t.Fatalf("unknown cause %v", v.Cause)
		}
		// Normalising twice changes nothing, so the verdict is the same.
		if w := r.Check(token, normalizePath(path)); w.Allowed != v.Allowed || w.Rule != v.Rule {
			t.Fatalf("verdict differs for the normalised path: %q vs %q", v.Reason(), w.Reason())
		}
		// Tokens compare case-insensitively.
		if w := r.Check(strings.ToUpper(token), path); isASCII(token) && (w.Allowed != v.Allowed || w.Rule != v.Rule) {
			t.Fatalf("verdict differs for the upper-cased token: %q vs %q", v.Reason(), w.Reason())
		}
		// The verdict is the one a brute-force reading of the rules gives.
		rs := r.ruleSetFor(token)
		if rs.s == nil || v.Cause == CauseRobotsTxt {
			return
		}
		norm := normalizePath(path)
		var best *keptRule
		for _, rule := range allRules(rs) {
			if !referenceMatch(rule.pattern, norm) {
				continue
			}
			if best == nil || rule.pattern.octets > best.pattern.octets ||
				rule.pattern.octets == best.pattern.octets && rule.Allow && !best.Allow {
				best = rule
			}
		}
		switch {
		case best == nil && v.Cause != CauseNoMatchingRule:
			t.Fatalf("no rule matches %q but the verdict is %q", norm, v.Reason())
		case best != nil && (v.Rule.IsZero() || best.Allow != v.Allowed || best.pattern.octets != ruleOctets(v.Rule)):
			t.Fatalf("%q: brute force picks %s, Check picked %q", norm, best, v.Reason())
		}
	})
}

// FuzzMatch compares the linear matcher with a textbook dynamic program.
func FuzzMatch(f *testing.F) {
	f.Add("/*a*a*b$", "/aaab")
	f.Add("/fish*.php", "/fishheads/catfish.php?x")
	f.Add("*.gif$", "/a.gif")
	f.Add("/a**b", "/ab")
	f.Fuzz(func(t *testing.T, pat, path string) {
		p, ok := compilePattern(pat)
		if !ok {
			return
		}
		norm := normalizePath(path)
		if got, want := p.match(norm), referenceMatch(p, norm); got != want {
			t.Fatalf("pattern %q (expr %q anchored %v) on %q: match %v, reference %v", pat, p.expr, p.anchored, norm, got, want)
		}
	})
}

// referenceMatch is an O(len(expr)*len(path)) dynamic program over the
// pattern: reach[j] says whether path[:j] can be matched so far.
func referenceMatch(p pattern, path string) bool {
	reach := make([]bool, len(path)+1)
	reach[0] = true
	for i := 0; i < len(p.expr); i++ {
		next := make([]bool, len(path)+1)
		for j := 0; j <= len(path); j++ {
			if !reach[j] {
				continue
			}
			if p.expr[i] == '*' {
				for k := j; k <= len(path); k++ {
					next[k] = true
				}
				break
			}
			if j < len(path) && path[j] == p.expr[i] {
				next[j+1] = true
			}
		}
		reach = next
	}
	if p.anchored {
		return reach[len(path)]
	}
	for _, ok := range reach {
		if ok {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// FuzzDisallowsAllIsSound: when DisallowsAll says a crawler may fetch
// nothing, no path but /robots.txt is allowed to it.
func FuzzDisallowsAllIsSound(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, "/example/page.html")
	}
	f.Add("User-agent: *\nDisallow: /\nAllow: /robots.txt\nAllow: /*.gif$\nDisallow: /*.gif\n", "/a.gif")
	f.Fuzz(func(t *testing.T, body, path string) {
		if !strings.HasPrefix(path, "/") || isRobotsTxt(path) {
			return
		}
		r := Parser{}.Parse([]byte(body))
		if _, all := r.DisallowsAll("fuzzbot"); all {
			if v := r.Check("fuzzbot", path); v.Allowed {
				t.Fatalf("DisallowsAll, but %q is allowed: %s", path, v.Reason())
			}
		}
	})
}
