package robots

import (
	"math/bits"
	"strings"
	"unsafe"
)

// UsageLine is a Content-Usage or Content-Signal line of a group: what a
// site says its content may be used for. Package robots reads where a line
// applies (its group, its path); package robots/usage reads what it says.
type UsageLine struct {
	Directive Directive // DirectiveContentUsage or DirectiveContentSignal
	Line      int
	// Path is the path pattern the line is scoped to, as written; ""
	// when it names none (it speaks for every path). A value starting
	// with '/' or '*' starts with a path, up to the first space or tab
	// (draft-ietf-aipref-attach-05 §3.2); Content-Signal lines are read
	// the same way.
	Path string
	// Value is the preference expression as written, after any path:
	// "train-ai=n, search=y", "search=yes, ai-train=no".
	Value string
}

// MaxUsageLines bounds the Content-Usage and Content-Signal lines a file
// keeps; the lines past it are ignored (IgnoredTooManyUsage). Real files
// have a handful. Each request may return every one of them, and match
// each against every reading of its path: the bound keeps a file of
// 500 KiB of usage lines from making every request costly.
const MaxUsageLines = 256

// draftUsage is a usage line as read, its strings still views of the body.
type draftUsage struct {
	directive   Directive
	line        int
	path, value string
}

// usageRule is a usage line as kept, with its path compiled.
type usageRule struct {
	UsageLine
	// pattern is Path compiled; its expr is "" when the line has no path:
	// it matches every path, at length 0.
	pattern pattern
}

// matches reports whether the rule's path matches a normalised path or,
// when the path has a query (from index query; -1 without one), the
// path without it, as a static file server reads it: only an anchored
// pattern can match the latter and not the former.
func (u *usageRule) matches(path string, query int) bool {
	return u.pattern.expr == "" || u.pattern.match(path) || query >= 0 && u.pattern.anchored && u.pattern.match(path[:query])
}

// usageGroup is the usage lines of one group, in file order.
type usageGroup struct {
	rules []usageRule
	load  ruleLoad // of the paths; zero when no line has one
}

// splitUsage cuts a usage value into its path and its expression: a value
// starting with '/' or '*' starts with a path pattern, which runs to the
// first SP or HTAB; any other value is an expression alone.
func splitUsage(value string) (path, expr string) {
	if value == "" || value[0] != '/' && value[0] != '*' {
		return "", value
	}
	i := strings.IndexAny(value, " \t")
	if i < 0 {
		return value, ""
	}
	return value[:i], trimSpace(value[i+1:])
}

// compileUsage gathers the usage lines of every group into one array,
// group after group, and the groups that have any into another, whose
// entries are views of the first; each group's usageAt is set.
func compileUsage(groups []*group, lines int) ([]usageRule, []usageGroup) {
	n := 0
	for _, g := range groups {
		g.usageAt = -1
		if len(g.usage) > 0 {
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	all := make([]usageRule, 0, lines)
	compiled := make([]usageGroup, 0, n)
	for _, g := range groups {
		if len(g.usage) == 0 {
			continue
		}
		start := len(all)
		var load ruleLoad
		for _, d := range g.usage {
			u := usageRule{UsageLine: UsageLine{Directive: d.directive, Line: d.line, Path: d.path, Value: d.value}}
			if d.path != "" {
				// A path starts with '/' or '*': it always compiles.
				u.pattern, _ = compilePattern(d.path)
				load.all.add(&u.pattern)
				if u.pattern.anchored {
					load.anchored.add(&u.pattern)
				}
			}
			all = append(all, u)
		}
		g.usageAt = len(compiled)
		compiled = append(compiled, usageGroup{rules: all[start:len(all):len(all)], load: load})
	}
	return all, compiled
}

// placeUsage places the strings of the usage lines in the text: for each
// line, the offsets of its path, its pattern and its value, in that order.
func (c *compactor) placeUsage(all []usageRule) []uint32 {
	if len(all) == 0 {
		return nil
	}
	at := make([]uint32, 0, 3*len(all))
	for i := range all {
		u := &all[i]
		path := c.put(u.Path)
		expr := path
		if !strings.HasPrefix(u.Path, u.pattern.expr) {
			expr = c.put(u.pattern.expr)
		}
		at = append(at, path, expr, c.put(u.Value))
	}
	return at
}

// keepUsage makes the strings of the usage lines views of text, where
// placeUsage placed them, and returns the groups.
func keepUsage(text string, all []usageRule, groups []usageGroup, at []uint32) []usageGroup {
	for i := range all {
		u := &all[i]
		view := func(off uint32, s string) string { return text[off : off+uint32(len(s))] }
		u.Path, u.pattern.expr, u.Value = view(at[3*i], u.Path), view(at[3*i+1], u.pattern.expr), view(at[3*i+2], u.Value)
	}
	return groups
}

// usageSize is the heap the usage lines keep, their strings aside.
func usageSize(all []usageRule, groups []usageGroup) int64 {
	return allocSize(int(unsafe.Sizeof(usageRule{}))*cap(all)) + allocSize(int(unsafe.Sizeof(usageGroup{}))*cap(groups))
}

// usageSet marks usage lines of a rule set, numbered across its groups in
// file order: a rule set has at most MaxUsageLines of them.
type usageSet [(MaxUsageLines + 63) / 64]uint64

func (s *usageSet) add(i int)      { s[i/64] |= 1 << (i % 64) }
func (s *usageSet) remove(i int)   { s[i/64] &^= 1 << (i % 64) }
func (s *usageSet) has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }

func (s *usageSet) union(t *usageSet) {
	for i := range s {
		s[i] |= t[i]
	}
}

func (s *usageSet) count() (n int) {
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// HasUsage reports whether any group of the file has a usage line: without
// one, [Robots.Usage] has nothing to say and need not be asked.
func (r *Robots) HasUsage() bool {
	return r != nil && r.usageLines > 0
}

// Usage returns the usage lines that apply to token at pathAndQuery, in
// file order: those of the groups [Robots.Check] selects for token (a
// product with groups of its own does not see the "*" groups' lines). Of
// their Content-Usage lines, those whose path matches longest, as Allow
// and Disallow match (a line without a path matches every path, at length
// 0); all of them on a tie, since the draft combines equal paths' values
// (any n wins). Of their Content-Signal lines, every one without a path,
// and every one whose path matches: signals are not ranked. Each reading
// of the path (see [Step]) is matched as the path as sent is, and with a
// query its query-less form too (StepDropQuery), so that no spelling of a
// path escapes a preference: the result is the union. /robots.txt is a
// path like any other.
//
// Matching is bounded as [Robots.CheckReadings]'s is: when the path has
// more than MaxReadings readings, or matching them would cost more than
// MaxDecisionCost, every usage line of the groups is returned, which
// states more preferences, never fewer. nil when none applies; Usage
// costs nothing measurable and does not allocate on a file without usage
// lines.
func (r *Robots) Usage(token, pathAndQuery string) []UsageLine {
	if r == nil || r.usageLines == 0 {
		return nil
	}
	j := r.Prepare(token, pathAndQuery)
	return j.Usage()
}

// Usage is [Robots.Usage] on the readings the judgement listed, whose cost
// [Judgement.Cost] includes: a proxy weighs both before it matches either.
func (j *Judgement) Usage() []UsageLine {
	rs := j.p
	if j.outcome != OutcomeOK || rs.s == nil || rs.s.usage().len() == 0 {
		return nil
	}
	if rs.usageLoad().all.base16 == 0 {
		return rs.usageLines(nil) // no line names a path: all apply
	}
	if j.cost > MaxDecisionCost || j.stop != stopNever {
		return rs.usageLines(nil)
	}
	var picked usageSet
	rs.pickUsage(&picked, j.norm, j.query)
	for _, reading := range j.readings[min(1, len(j.readings)):] {
		norm := normalizePath(reading.Path)
		rs.pickUsage(&picked, norm, strings.IndexByte(norm, '?'))
	}
	return rs.usageLines(&picked)
}

// Usage is [Robots.Usage] when the outcome is OK, nil otherwise.
func (a *Answer) Usage(token, pathAndQuery string) []UsageLine {
	if a == nil || a.Outcome != OutcomeOK {
		return nil
	}
	return a.Robots.Usage(token, pathAndQuery)
}

// usageLoad is the load of every path of the usage lines of rs, as
// [product.load] sums its rules'.
func (p product) usageLoad() ruleLoad {
	groups := p.usageGroups()
	if len(groups) == 1 {
		return p.r.rare.usage[groups[0]].load
	}
	var l ruleLoad
	for _, g := range groups {
		l.all.plus(p.r.rare.usage[g].load.all)
		l.anchored.plus(p.r.rare.usage[g].load.anchored)
	}
	extra := 16 * costGroup * int64(len(groups)-1)
	if l.all.base16 > 0 {
		l.all.base16 += extra
	}
	if l.hasAnchored() {
		l.anchored.base16 += extra
	}
	return l
}

// pickUsage adds to picked the usage lines of rs that apply to one
// reading, normalised, with its query from index query (-1: none): the
// longest matching Content-Usage lines, every matching Content-Signal
// line.
func (rs product) pickUsage(picked *usageSet, path string, query int) {
	var matched usageSet
	best := int32(-1)
	i := 0
	for _, gi := range rs.usageGroups() {
		g := &rs.r.rare.usage[gi]
		for k := range g.rules {
			u := &g.rules[k]
			if u.matches(path, query) {
				matched.add(i)
				if u.Directive == DirectiveContentUsage {
					best = max(best, u.pattern.octets)
				}
			}
			i++
		}
	}
	if best >= 0 {
		// Only the longest Content-Usage lines apply.
		i = 0
		for _, gi := range rs.usageGroups() {
			g := &rs.r.rare.usage[gi]
			for k := range g.rules {
				if u := &g.rules[k]; u.Directive == DirectiveContentUsage && u.pattern.octets < best {
					matched.remove(i)
				}
				i++
			}
		}
	}
	picked.union(&matched)
}

// usageLines returns the usage lines of rs that picked marks, in file
// order; every one when picked is nil. nil when there are none.
func (rs product) usageLines(picked *usageSet) []UsageLine {
	n := 0
	if picked != nil {
		n = picked.count()
	} else {
		for _, gi := range rs.usageGroups() {
			n += len(rs.r.rare.usage[gi].rules)
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]UsageLine, 0, n)
	i := 0
	for _, gi := range rs.usageGroups() {
		g := &rs.r.rare.usage[gi]
		for k := range g.rules {
			if picked == nil || picked.has(i) {
				out = append(out, g.rules[k].UsageLine)
			}
			i++
		}
	}
	return out
}

// UsageEverywhere returns the usage lines that apply to token at every
// path of the site, for a proxy that cannot see paths (a tunnel it does
// not intercept): every Content-Signal line without a path or with one
// matching every path ("/", "/*"); and, when every Content-Usage line of
// the groups is such a line, the longest of them (a line naming a narrower
// path might outrank them on its paths). nil when none does.
func (r *Robots) UsageEverywhere(token string) []UsageLine {
	if r == nil || r.usageLines == 0 {
		return nil
	}
	rs := r.ruleSetFor(token)
	if rs.s == nil || rs.s.usage().len() == 0 {
		return nil
	}
	everywhere := func(u *usageRule) bool { return u.Path == "" || u.pattern.matchesEveryPath() }
	best, scoped := int32(-1), false
	for _, gi := range rs.usageGroups() {
		g := &rs.r.rare.usage[gi]
		for k := range g.rules {
			if u := &g.rules[k]; u.Directive == DirectiveContentUsage {
				scoped = scoped || !everywhere(u)
				best = max(best, u.pattern.octets)
			}
		}
	}
	var picked usageSet
	i := 0
	for _, gi := range rs.usageGroups() {
		g := &rs.r.rare.usage[gi]
		for k := range g.rules {
			u := &g.rules[k]
			switch {
			case u.Directive == DirectiveContentSignal && everywhere(u),
				u.Directive == DirectiveContentUsage && !scoped && u.pattern.octets == best:
				picked.add(i)
			}
			i++
		}
	}
	return rs.usageLines(&picked)
}
