package robots

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"
)

// A parsed file is kept in a compact form, close to the file's own size:
// every string it keeps (patterns as normalised and as written, product
// names, pace values, sitemaps, usage lines) is a view of one text, and
// the rules, groups and product names are slices of small records that
// hold no pointer, shared by the whole file, which the garbage collector
// does not scan: a cache of a million parsed files costs it nothing to
// walk. Rule, Verdict.Group, Pace.Value and the rest handed out are views
// of that text and cost no allocation.

// MaxParseBytes bounds the parse limit: [Parser.MaxBytes] above it is read
// as MaxParseBytes. It keeps line numbers and offsets into the kept text
// within the 32-bit fields of the compact form (see rule).
const MaxParseBytes = 64 << 20

// rule is one allow or disallow rule as kept: 16 bytes, no pointer. Its
// normalised pattern (pattern.expr) is text[off:off+n]; the pattern as
// written, wlen bytes, starts there too when it is the same or the same
// followed by the anchoring '$', and ends there otherwise
// (ruleWrittenBefore).
type rule struct {
	off    uint32
	meta   uint32 // line<<ruleFlagBits | flags
	n      uint16 // a line is at most MaxLineBytes, its normal form 3 times that
	octets uint16 // pattern.octets
	star   uint16 // pattern.star; noStar when the pattern has no '*'
	wlen   uint16
}

// The flags of a rule's meta.
const (
	ruleAllow = 1 << iota
	ruleImplied
	ruleAnchored
	ruleSingle // exactly one '*' (pattern.single)
	ruleWrittenBefore
	ruleFlagBits = iota
)

// noStar is rule.star for a pattern without '*': longer than any pattern.
const noStar = math.MaxUint16

func (x *rule) line() int      { return int(x.meta >> ruleFlagBits) }
func (x *rule) allow() bool    { return x.meta&ruleAllow != 0 }
func (x *rule) implied() bool  { return x.meta&ruleImplied != 0 }
func (x *rule) anchored() bool { return x.meta&ruleAnchored != 0 }

// order is the rule's place in rule order (see ruleOrder) as one number:
// longest pattern first, allow first on a tie, then by line, the rule
// itself before the one its index page implies.
func (x *rule) order() uint64 {
	return uint64(math.MaxUint16-x.octets)<<34 | uint64(x.meta&ruleAllow^ruleAllow)<<33 |
		uint64(x.meta>>ruleFlagBits)<<1 | uint64(x.meta>>1&1)
}

// ruleOrder is the order in which rules are tried, the first matching one
// deciding: longest pattern first, allow first on a tie (RFC 9309
// §2.2.2); the line and the implied flag make the order total, so it is
// the same on every run and however the rules are grouped.
func ruleOrder(a, b *rule) int { return cmp.Compare(a.order(), b.order()) }

// expr is the rule's normalised pattern.
func (r *Robots) expr(x *rule) string { return r.text[x.off : x.off+uint32(x.n)] }

// patternOf is the pattern of a rule as matched.
func (r *Robots) patternOf(x *rule) pattern {
	p := pattern{expr: r.expr(x), octets: int32(x.octets), anchored: x.anchored()}
	if x.star != noStar {
		p.wildcard, p.star, p.single = true, int32(x.star), x.meta&ruleSingle != 0
	}
	return p
}

// matches reports whether the rule matches a normalised path: matchExpr,
// its commonest cases, a literal and a single '*', decided inline.
func (r *Robots) matches(x *rule, path string) bool {
	expr := r.text[x.off : x.off+uint32(x.n)]
	if x.star == noStar {
		if x.meta&ruleAnchored != 0 {
			return path == expr
		}
		return len(path) >= len(expr) && path[:len(expr)] == expr
	}
	star := int(x.star)
	if len(path) < star || path[:star] != expr[:star] {
		return false
	}
	path, expr = path[star:], expr[star+1:]
	if x.meta&ruleSingle != 0 { // the commonest wildcard, without a call
		if x.meta&ruleAnchored != 0 {
			return strings.HasSuffix(path, expr)
		}
		return strings.Contains(path, expr)
	}
	return matchPastStar(path, expr, x.meta&ruleAnchored != 0, false)
}

// ruleAt is the i-th rule as handed out.
func (r *Robots) ruleAt(i int) Rule {
	x := &r.rules[i]
	start := x.off
	if x.meta&ruleWrittenBefore != 0 {
		start -= uint32(x.wlen)
	}
	return Rule{Pattern: r.text[start : start+uint32(x.wlen)], Line: int32(x.line()), Allow: x.allow(), Implied: x.implied()}
}

// span is a range of one of a file's shared slices.
type span struct{ start, end uint32 }

func (s span) len() int { return int(s.end - s.start) }

// ruleGroup is the rules of one group, rules[rules.start:rules.end] in
// rule order: the first that matches a path is the group's verdict on
// it.
type ruleGroup struct {
	load  ruleLoad
	rules span
	// anchored is the span of Robots.indices holding the indices of the
	// rules anchored with '$', in order: the only ones that can match the
	// query-less form of a path and not the path itself.
	anchored span
}

// ruleSet is what applies to one product: the groups naming it, whose
// rules RFC 9309 merges. A group is kept once however many products it
// names, and each of them refers to it: a merged copy per product would
// keep names × rules for a file of many names sharing a group of many
// rules, each also naming a group of its own. Matching takes the first
// match of each group and the earliest of those in rule order, which is
// the first match of the merged rules.
type ruleSet struct {
	// key (the lower-cased name, "*" for the global groups) and name (as
	// first written) are offsets into the text.
	key, name       uint32
	keyLen, nameLen uint16 // a name is on one line
	// lines is the span of Robots.agentLines holding the user-agent
	// lines that selected these groups; groups the span of
	// Robots.indices holding the indices of those of them with rules (in
	// Robots.groups), in file order, followed up to usageEnd by those of
	// the groups with usage lines (in rareParts.usage).
	lines, groups span
	usageEnd      uint32
	// pace is 1 + the index of the pace in rareParts.paces; 0 when no
	// group asks for one.
	pace uint32
}

// usage is the span of Robots.indices holding the indices of the groups
// with usage lines.
func (s *ruleSet) usage() span { return span{s.groups.end, s.usageEnd} }

// paceRecord is a Pace as kept, its value in the text.
type paceRecord struct {
	interval  time.Duration
	line      uint32
	value     uint32
	valueLen  uint8 // at most maxPaceValue
	directive Directive
}

// product is the rule set of one product in its file; s is nil when no
// group applies.
type product struct {
	r *Robots
	s *ruleSet
}

// name is the product name as first written, "*" for the global groups.
func (p product) name() string {
	return p.r.text[p.s.name : p.s.name+uint32(p.s.nameLen)]
}

// agentLines are the user-agent lines that selected the groups, a view
// that an append cannot write through.
func (p product) agentLines() []int {
	return p.r.agentLines[p.s.lines.start:p.s.lines.end:p.s.lines.end]
}

// groups are the indices of the groups with rules.
func (p product) groups() []uint32 { return p.r.indices[p.s.groups.start:p.s.groups.end] }

// usageGroups are the indices of the groups with usage lines.
func (p product) usageGroups() []uint32 { return p.r.indices[p.s.groups.end:p.s.usageEnd] }

// pace is what the groups ask of the product's pace; false when they ask
// nothing.
func (p product) pace() (Pace, bool) {
	if p.s.pace == 0 {
		return Pace{}, false
	}
	x := &p.r.rare.paces[p.s.pace-1]
	return Pace{Interval: x.interval, Directive: x.directive, Line: int(x.line), Value: p.r.text[x.value : x.value+uint32(x.valueLen)]}, true
}

// ruleSetFor finds the groups for token, falling back to "*": the names
// are sorted by key; a few are compared in turn, lengths first, more are
// searched for by halves, the token lower-cased as it is compared.
func (r *Robots) ruleSetFor(token string) product {
	if r == nil {
		return product{}
	}
	if len(r.sets) <= 8 {
		for i := range r.sets {
			if s := &r.sets[i]; int(s.keyLen) == len(token) && compareLower(token, r.text[s.key:s.key+uint32(s.keyLen)]) == 0 {
				return product{r, s}
			}
		}
		return r.globalSet()
	}
	lo, hi := 0, len(r.sets)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		s := &r.sets[m]
		switch c := compareLower(token, r.text[s.key:s.key+uint32(s.keyLen)]); {
		case c == 0:
			return product{r, s}
		case c > 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return r.globalSet()
}

// globalSet is the "*" groups' rule set.
func (r *Robots) globalSet() product {
	if r.global < 0 {
		return product{}
	}
	return product{r, &r.sets[r.global]}
}

// compareLower compares token, lower-cased as ASCII, with key.
func compareLower(token, key string) int {
	n := min(len(token), len(key))
	for i := 0; i < n; i++ {
		if c, k := toLowerASCII(token[i]), key[i]; c != k {
			if c < k {
				return -1
			}
			return 1
		}
	}
	return cmp.Compare(len(token), len(key))
}

// compiledRule is a rule compiled at parse time, its strings views of the
// body until they are placed in the text.
type compiledRule struct {
	pattern pattern
	written string
	rec     rule // off and the ruleWrittenBefore flag are set once placed
}

func newCompiledRule(written string, p pattern, line int, allow, implied bool) compiledRule {
	meta := uint32(line) << ruleFlagBits
	if allow {
		meta |= ruleAllow
	}
	if implied {
		meta |= ruleImplied
	}
	if p.anchored {
		meta |= ruleAnchored
	}
	star := uint16(noStar)
	if p.wildcard {
		star = uint16(p.star)
		if p.single {
			meta |= ruleSingle
		}
	}
	return compiledRule{pattern: p, written: written, rec: rule{
		meta: meta, n: uint16(len(p.expr)), octets: uint16(p.octets), star: star, wlen: uint16(len(written)),
	}}
}

// compactor builds the compact form of a parsed file.
type compactor struct {
	text     []byte
	rules    []rule
	groups   []ruleGroup
	sets     []ruleSet
	indices  []uint32
	lines    []int
	paces    []paceRecord
	sitemaps span
	placed   map[string]rule // by value as written, the rules placed so far; nil with one group
	largest  int             // the most rules of a group
}

// put places s in the text and returns its offset.
func (c *compactor) put(s string) uint32 {
	off := uint32(len(c.text))
	c.text = append(c.text, s...)
	return off
}

// place places the strings of x in the text and sets its offset. The rule
// an index page implies shares the text of the rule implying it, just
// before it: its pattern is a prefix of that rule's.
func (c *compactor) place(x, prev *compiledRule) {
	expr := x.pattern.expr
	if x.rec.implied() && prev != nil && !prev.rec.implied() && prev.rec.line() == x.rec.line() && prev.written == x.written &&
		strings.HasPrefix(prev.pattern.expr, expr) {
		x.rec.off = prev.rec.off
		x.rec.meta |= prev.rec.meta & ruleWrittenBefore
		return
	}
	// Files repeat their rules in group after group: each value is kept
	// once.
	if at, ok := c.placed[x.written]; ok {
		x.rec.off = at.off
		x.rec.meta |= at.meta & ruleWrittenBefore
		return
	}
	x.rec.off = c.put(x.written)
	if w := x.written; w != expr && !(x.pattern.anchored && len(w) == len(expr)+1 && w[:len(expr)] == expr) {
		x.rec.off = c.put(expr)
		x.rec.meta |= ruleWrittenBefore
	}
	if c.placed != nil {
		c.placed[x.written] = x.rec
	}
}

// addGroup keeps the rules of a group, in the order drafts gives them,
// each implied rule after the rule implying it, and returns the group's
// index; -1 when it has none. rules is sorted in place.
func (c *compactor) addGroup(rules []compiledRule) int {
	if len(rules) == 0 {
		return -1
	}
	for i := range rules {
		var prev *compiledRule
		if i > 0 {
			prev = &rules[i-1]
		}
		c.place(&rules[i], prev)
	}
	slices.SortFunc(rules, func(a, b compiledRule) int { return ruleOrder(&a.rec, &b.rec) })
	// RFC 9309 allows dropping duplicate rules; the earliest line stays.
	// A duplicate in another group naming the same product is kept, and
	// never decides: the earlier one matches first.
	rules = slices.CompactFunc(rules, func(a, b compiledRule) bool {
		return a.rec.allow() == b.rec.allow() && a.pattern == b.pattern
	})
	g := ruleGroup{rules: span{uint32(len(c.rules)), uint32(len(c.rules) + len(rules))}}
	g.anchored.start = uint32(len(c.indices))
	for i := range rules {
		x := &rules[i]
		g.load.all.add(&x.pattern)
		if x.pattern.anchored {
			c.indices = append(c.indices, uint32(len(c.rules)))
			g.load.anchored.add(&x.pattern)
		}
		c.rules = append(c.rules, x.rec)
	}
	g.anchored.end = uint32(len(c.indices))
	c.groups = append(c.groups, g)
	return len(c.groups) - 1
}

// nameSpec is what a product name keeps, its strings views of the body.
type nameSpec struct {
	key, name string
	lines     []int
	groups    []int // indices of its groups with rules
	usage     []int // and with usage lines
	pace      Pace
}

// addName keeps a product name; names must be added in key order.
func (c *compactor) addName(n *nameSpec) {
	s := ruleSet{keyLen: uint16(len(n.key)), nameLen: uint16(len(n.name))}
	s.key = c.put(n.key)
	if s.name = s.key; n.name != n.key {
		s.name = c.put(n.name)
	}
	s.lines.start = uint32(len(c.lines))
	c.lines = append(c.lines, n.lines...)
	s.lines.end = uint32(len(c.lines))
	s.groups = c.addIndices(n.groups)
	s.usageEnd = c.addIndices(n.usage).end
	if n.pace.Line != 0 {
		c.paces = append(c.paces, paceRecord{interval: n.pace.Interval, line: uint32(n.pace.Line), directive: n.pace.Directive,
			value: c.put(n.pace.Value), valueLen: uint8(len(n.pace.Value))})
		s.pace = uint32(len(c.paces))
	}
	c.sets = append(c.sets, s)
}

func (c *compactor) addIndices(is []int) span {
	sp := span{start: uint32(len(c.indices))}
	for _, i := range is {
		c.indices = append(c.indices, uint32(i))
	}
	sp.end = uint32(len(c.indices))
	return sp
}

// addSitemaps keeps the sitemap URLs, each followed by a line break,
// which no value has.
func (c *compactor) addSitemaps(urls []string) {
	c.sitemaps.start = uint32(len(c.text))
	for _, u := range urls {
		c.put(u)
		c.text = append(c.text, '\n')
	}
	c.sitemaps.end = uint32(len(c.text))
}

// finish copies what was built into r, each slice of its exact length.
func (c *compactor) finish(r *Robots) {
	r.text = string(c.text)
	r.rules = exact(c.rules)
	r.groups = exact(c.groups)
	r.sets = exact(c.sets)
	r.indices = exact(c.indices)
	r.agentLines = exact(c.lines)
	r.sitemaps = c.sitemaps
	r.global = -1
	for i := range r.sets {
		if s := &r.sets[i]; r.text[s.key:s.key+uint32(s.keyLen)] == "*" {
			r.global = int32(i)
		}
	}
}

// exact is s, in an array of its length: a copy when s has spare room.
func exact[T any](s []T) []T {
	if len(s) == cap(s) {
		return s
	}
	return slices.Clone(s)
}

// compactSize is the heap the compact form keeps, each allocation
// rounded up as the allocator does.
func (r *Robots) compactSize() int64 {
	return allocSize(int(unsafe.Sizeof(*r))) + allocSize(len(r.text)) +
		allocSize(int(unsafe.Sizeof(rule{}))*len(r.rules)) +
		allocSize(int(unsafe.Sizeof(ruleGroup{}))*len(r.groups)) +
		allocSize(int(unsafe.Sizeof(ruleSet{}))*len(r.sets)) +
		allocSize(4*len(r.indices)) + allocSize(8*len(r.agentLines))
}
