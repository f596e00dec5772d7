package robots

import (
	"cmp"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// keptRule is a rule of a parsed file as handed out, with its pattern.
type keptRule struct {
	Rule
	pattern pattern
}

// allRules lists every rule of p, group after group.
func allRules(p product) []*keptRule {
	var all []*keptRule
	for _, gi := range p.groups() {
		g := &p.r.groups[gi]
		for i := g.rules.start; i < g.rules.end; i++ {
			all = append(all, &keptRule{p.r.ruleAt(int(i)), p.r.patternOf(&p.r.rules[i])})
		}
	}
	return all
}

// ruleOctets is the length of a rule's pattern for "longest match wins".
func ruleOctets(rule Rule) int32 {
	value := rule.Pattern
	if rule.Implied {
		value = impliedPattern(value)
	}
	p, _ := compilePattern(value)
	return p.octets
}

// handedOut is a compiled rule as a verdict hands it out.
func handedOut(c *compiledRule) Rule {
	return Rule{Pattern: c.written, Line: int32(c.rec.line()), Allow: c.rec.allow(), Implied: c.rec.implied()}
}

// The differential tests below compare the parser and matcher, which keep
// each group once, with a reference that merges copies of every group
// naming a product into one list, as RFC 9309 describes it: on files of
// a small grammar, where names often head several groups, each also
// shared with other names.

// groupNames are the user-agent values of generated files: key is the
// lower-cased product name the value gives, name the name as written.
var groupNames = []struct{ value, name, key string }{
	{"a", "a", "a"},
	{"b", "b", "b"},
	{"c", "c", "c"},
	{"*", "*", "*"},
	{"A", "A", "a"},
	{"Bot", "Bot", "bot"},
	{"bot", "bot", "bot"},
	{"*c*", "c", "c"},
}

// groupPatterns are the rule values of generated files: prefixes of each
// other, wildcards, anchors, queries, index pages, escapes, and values
// that never match.
var groupPatterns = [32]string{
	"/", "", "*", "/*", "/$", "/*$", "/a", "/a/",
	"/a$", "/a*", "/*a", "/*a$", "/a/b", "/a/index.html", "/a/index.htm", "/%61",
	"/a%2Fb", "/a?", "/a?x", "/*?x", "/*x$", "/a?x$", "/b", "/b*",
	"/*b$", "/ab", "/a*b", "/a*b$", "x", "/a/$", "/index.html", "/a$b",
}

// groupTokens are the crawlers judged: each name, another case, and one
// that no group names.
var groupTokens = []string{"a", "A", "b", "c", "bot", "BOT", "other"}

// groupPaths are the paths judged on every generated file.
var groupPaths = []string{
	"/", "/a", "/a/", "/a/b", "/a?x", "/a?", "/ab", "/b", "/a/index.html", "/a/index.htm",
	"/%61", "/a%2Fb", "/a/b?x", "/x", "/robots.txt", "/a/./b", "/a//b", "/A", "/b?x", "/ab?x",
	"/a/b/..", "/a;x?x", "/a$b", "/ab/index.html?x", "/a/%2e%2e/b",
}

// refName is what the reference keeps of one product: the name as first
// written, its user-agent lines and the groups naming it (indices into
// refFile.groups).
type refName struct {
	name   string
	lines  []int
	groups []int
}

// refFile is a generated file as the reference reads it.
type refFile struct {
	groups [][]compiledRule // each group's rules, compiled, in file order
	names  map[string]*refName
}

// genGroupsFile writes a robots.txt from spec, one line per byte, and
// reads it as RFC 9309 says: consecutive user-agent lines head a group,
// only a rule ends that list.
func genGroupsFile(spec []byte) (string, *refFile) {
	var body strings.Builder
	ref := &refFile{names: make(map[string]*refName)}
	open := false
	for i, c := range spec {
		line, kind, arg := i+1, c%8, int(c/8)
		switch kind {
		case 0, 1, 2:
			n := groupNames[arg%len(groupNames)]
			body.WriteString("User-agent: " + n.value + "\n")
			if !open {
				ref.groups = append(ref.groups, nil)
				open = true
			}
			rn := ref.names[n.key]
			if rn == nil {
				rn = &refName{name: n.name}
				ref.names[n.key] = rn
			}
			rn.lines = append(rn.lines, line)
			if g := len(ref.groups) - 1; len(rn.groups) == 0 || rn.groups[len(rn.groups)-1] != g {
				rn.groups = append(rn.groups, g)
			}
		case 3, 4, 5:
			allow := kind == 3
			value := groupPatterns[arg]
			if allow {
				body.WriteString("Allow: " + value + "\n")
			} else {
				body.WriteString("Disallow: " + value + "\n")
			}
			if len(ref.groups) == 0 {
				continue // before any user-agent line
			}
			open = false
			g := &ref.groups[len(ref.groups)-1]
			if p, ok := compilePattern(value); ok {
				*g = append(*g, newCompiledRule(value, p, line, allow, false))
				if implied := impliedPattern(value); allow && implied != "" {
					ip, _ := compilePattern(implied)
					*g = append(*g, newCompiledRule(value, ip, line, true, true))
				}
			}
		case 6:
			body.WriteString("Crawl-delay: " + strconv.Itoa(arg) + "\n")
		case 7:
			if arg%2 == 0 {
				body.WriteString("\n")
			} else {
				body.WriteString("# note\n")
			}
		}
	}
	return body.String(), ref
}

// merged is the merged copy of the rules of every group naming rn, in
// the order they are tried: longest first, allow first on a tie, then by
// line, the rule itself before the one its index page implies; adjacent
// duplicates dropped.
func (f *refFile) merged(rn *refName) []compiledRule {
	var rules []compiledRule
	for _, g := range rn.groups {
		rules = append(rules, f.groups[g]...)
	}
	slices.SortFunc(rules, func(a, b compiledRule) int {
		switch {
		case a.pattern.octets != b.pattern.octets:
			return cmp.Compare(b.pattern.octets, a.pattern.octets)
		case a.rec.allow() != b.rec.allow():
			if a.rec.allow() {
				return -1
			}
			return 1
		case a.rec.line() != b.rec.line():
			return cmp.Compare(a.rec.line(), b.rec.line())
		case a.rec.implied() != b.rec.implied():
			if a.rec.implied() {
				return 1
			}
			return -1
		}
		return 0
	})
	return slices.CompactFunc(rules, func(a, b compiledRule) bool { return a.rec.allow() == b.rec.allow() && a.pattern == b.pattern })
}

// lookup is the product the groups of which apply to token, "*" when it
// has none; nil when no group applies.
func (f *refFile) lookup(token string) *refName {
	if rn := f.names[strings.ToLower(token)]; rn != nil {
		return rn
	}
	return f.names["*"]
}

// check is Check by the merged copy: the first rule matching the
// normalised path decides.
func (f *refFile) check(token, path string) Verdict {
	rn := f.lookup(token)
	if rn == nil {
		return Verdict{Allowed: true, Cause: CauseNoGroup}
	}
	rules := f.merged(rn)
	norm := normalizePath(path)
	for i := range rules {
		if referenceMatch(rules[i].pattern, norm) {
			return Verdict{Allowed: rules[i].rec.allow(), Cause: CauseRule, Rule: handedOut(&rules[i]), Group: rn.name, GroupLines: rn.lines}
		}
	}
	return Verdict{Allowed: true, Cause: CauseNoMatchingRule, Group: rn.name, GroupLines: rn.lines}
}

// robots is the file as a Robots whose every product has one group, the
// merged copy, for the judgements built on Check: CheckReadings,
// DisallowsAll. With one group, the matcher tries the rules in order, as
// it did when it merged them.
func (f *refFile) robots() *Robots {
	var c compactor
	for _, key := range slices.Sorted(maps.Keys(f.names)) {
		rn := f.names[key]
		spec := nameSpec{key: key, name: rn.name, lines: rn.lines}
		if g := c.addGroup(f.merged(rn)); g >= 0 {
			spec.groups = []int{g}
		}
		c.addName(&spec)
	}
	r := &Robots{}
	c.finish(r)
	return r
}

// verdictDiff describes how got differs from want, "" when it does not:
// the verdict, its cause and detail, the deciding rule, the group and
// the reading.
func verdictDiff(got, want Verdict) string {
	ruleOf := func(v Verdict) string {
		if v.Rule.IsZero() {
			return "no rule"
		}
		return v.Rule.String() + " allow=" + strconv.FormatBool(v.Rule.Allow)
	}
	readingOf := func(v Verdict) string {
		if v.Reading == nil {
			return "as sent"
		}
		return v.Reading.Path + " after " + v.Reading.StepsString()
	}
	switch {
	case got.Allowed != want.Allowed || got.Cause != want.Cause || got.Detail != want.Detail:
		return "verdict " + got.Reason() + ", want " + want.Reason()
	case ruleOf(got) != ruleOf(want):
		return "rule " + ruleOf(got) + ", want " + ruleOf(want)
	case got.Group != want.Group || !slices.Equal(got.GroupLines, want.GroupLines):
		return "group " + got.Group + " " + intsString(got.GroupLines) + ", want " + want.Group + " " + intsString(want.GroupLines)
	case readingOf(got) != readingOf(want):
		return "reading " + readingOf(got) + ", want " + readingOf(want)
	}
	return ""
}

func intsString(lines []int) string {
	s := make([]string, len(lines))
	for i, l := range lines {
		s[i] = strconv.Itoa(l)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// checkGroupsFile judges every token on paths in the file spec gives, by
// the parser and by the reference, and fails t at the first difference.
func checkGroupsFile(t *testing.T, spec []byte, paths ...string) {
	t.Helper()
	body, ref := genGroupsFile(spec)
	r := Parser{}.Parse([]byte(body))
	merged := ref.robots()
	for _, token := range groupTokens {
		if rs, want := r.ruleSetFor(token), ref.lookup(token); (rs.s == nil) != (want == nil) {
			t.Fatalf("%q, token %s: a rule set %v, the reference %v", body, token, rs.s != nil, want != nil)
		}
		for _, path := range paths {
			if !isRobotsTxt(path) {
				if d := verdictDiff(r.Check(token, path), ref.check(token, path)); d != "" {
					t.Fatalf("%q, token %s, Check %q: %s", body, token, path, d)
				}
			}
			if d := verdictDiff(r.CheckReadings(token, path), merged.CheckReadings(token, path)); d != "" {
				t.Fatalf("%q, token %s, CheckReadings %q: %s", body, token, path, d)
			}
		}
		got, all := r.DisallowsAll(token)
		want, wantAll := merged.DisallowsAll(token)
		if d := verdictDiff(got, want); all != wantAll || d != "" {
			t.Fatalf("%q, token %s: DisallowsAll %v, want %v: %s", body, token, all, wantAll, d)
		}
	}
}

// TestGroupsMatchMerged compares the matcher with the merged copies on
// random files where names head several groups.
func TestGroupsMatchMerged(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 9309))
	for range 3000 {
		spec := make([]byte, 1+rng.IntN(48))
		for i := range spec {
			spec[i] = byte(rng.Uint32())
		}
		paths := slices.Clone(groupPaths)
		for range 8 {
			paths = append(paths, randomGroupPath(rng))
		}
		checkGroupsFile(t, spec, paths...)
	}
}

// randomGroupPath is a path of the pieces groupPatterns are made of.
func randomGroupPath(rng *rand.Rand) string {
	pieces := []string{"/", "a", "b", "x", "?", "index.html", "%61", "%2F", "$", ".", ";"}
	path := "/"
	for range rng.IntN(7) {
		path += pieces[rng.IntN(len(pieces))]
	}
	return path
}

// reproSpec is the file of issue 23's memory blow-up, at four names: one
// group naming them all with a rule per name, then a group per name.
func reproSpec() []byte {
	var spec []byte
	ua := func(n int) byte { return byte(n * 8) } // kind 0: "User-agent: " + groupNames[n]
	rule := func(p int, kind byte) byte { return byte(p*8) + kind }
	for n := range 4 {
		spec = append(spec, ua(n))
	}
	for _, p := range []int{6, 22, 10, 8} { // "/a", "/b", "/*a", "/a$"
		spec = append(spec, rule(p, 4))
	}
	for n := range 4 {
		spec = append(spec, ua(n), rule(0, 3)) // "Allow: /"
	}
	return spec
}

// FuzzGroupsMatchMerged: the matcher and the merged copies agree on every
// file of the small grammar (one line per byte of spec) and every path.
func FuzzGroupsMatchMerged(f *testing.F) {
	f.Add(reproSpec(), "/a?x")
	f.Add([]byte{0, 8, 3 + 6*8, 4 + 8*8, 0, 3 + 21*8, 32, 4 + 11*8, 16, 5}, "/a/index.html?x")
	f.Add([]byte{24, 0, 4 + 2*8, 0, 8, 3 + 13*8, 7, 48, 4 + 8*8}, "/a")
	f.Fuzz(func(t *testing.T, spec []byte, path string) {
		if len(spec) > 512 || len(path) > 64 {
			return
		}
		paths := groupPaths
		if strings.HasPrefix(path, "/") {
			paths = append(slices.Clip(paths), path)
		}
		checkGroupsFile(t, spec, paths...)
	})
}
