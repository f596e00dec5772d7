package robots

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// DefaultMaxBytes is the parse limit when none is set: RFC 9309 §2.5 asks
// for at least 500 KiB.
const DefaultMaxBytes = 500 << 10

// Parser parses robots.txt bodies. The zero value is ready to use.
type Parser struct {
	// MaxBytes is the parse limit: bytes past it are dropped and the
	// result says so ([Robots.Truncated]). Zero or less means
	// DefaultMaxBytes.
	MaxBytes int
	// KeepIgnored keeps every ignored line ([Robots.Ignored]) for a tool
	// that shows them. Without it only their number is kept
	// ([Robots.IgnoredCount]): a list of them would cost a cache that
	// never shows it many times the memory of the rules on a file of
	// junk.
	KeepIgnored bool
}

// Parse parses body. It never fails: a malformed file yields the rules
// that parse, and the lines that did not are counted by
// [Robots.IgnoredCount] (and kept, with [Parser.KeepIgnored]). The body is
// not retained and may be reused once Parse returns. The result keeps memory
// linear in the bytes parsed (see [MaxRetainedPerByte]): the groups naming
// a product are merged as RFC 9309 says when it is judged, and each group
// is kept once however many products it names.
func (p Parser) Parse(body []byte) *Robots {
	limit := p.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBytes
	}
	b := builder{robots: &Robots{}, keepIgnored: p.KeepIgnored}
	if len(body) > limit {
		b.robots.truncated = true
		body = body[:limit]
	}
	b.robots.parsed = len(body)
	// Each line is added once the next one is seen: the last line of a
	// truncated body was cut at the limit, and a cut rule would be a
	// different rule, so it is dropped.
	var pending Line
	for line := range lines(decodeText(body)) {
		if pending.Number > 0 {
			b.add(pending)
		}
		pending = line
	}
	if b.robots.truncated {
		b.ignore(pending.Number, IgnoredPastLimit, "")
	} else {
		b.add(pending)
	}
	b.robots.lines = pending.Number
	return b.finish()
}

// group is one group as written: consecutive user-agent lines and the
// records that follow them.
type group struct {
	rules    []draftRule
	usage    []draftUsage
	compiled int // index of the compiled group once finished; -1 without rules
	usageAt  int // likewise among the groups with usage lines
}

// draftRule is a rule as read, its value still a view of the body.
type draftRule struct {
	value string
	line  int
	allow bool
}

type builder struct {
	robots *Robots
	groups []*group
	// names maps each lower-cased product name ("*" for the global
	// groups) to the groups naming it.
	names map[string]*nameGroups
	// current is the group being filled; open means its user-agent lines
	// may still grow (no rule since the last user-agent line).
	current *group
	open    bool
	// head is the names of the user-agent lines since the last rule or
	// pace line, those a pace line speaks for; headDone means the next
	// user-agent line starts a new head.
	head        []*nameGroups
	headDone    bool
	sitemaps    map[string]bool
	keepIgnored bool
}

type nameGroups struct {
	key, name string
	lines     []int
	groups    []*group
	pace      Pace // its value still a view of the body
}

func (b *builder) ignore(line int, reason IgnoreReason, key string) {
	b.robots.ignoredCount++
	if b.keepIgnored {
		b.robots.ignored = append(b.robots.ignored, IgnoredLine{Line: line, Reason: reason, Key: key})
	}
}

func (b *builder) add(line Line) {
	if line.TooLong {
		b.ignore(line.Number, IgnoredTooLong, "")
	}
	switch line.Directive {
	case DirectiveNone:
		if !line.IsEmpty && !line.IsComment {
			b.ignore(line.Number, IgnoredNotRecord, "")
		}
	case DirectiveUnknown:
		b.ignore(line.Number, IgnoredUnknownKey, line.Key)
	case DirectiveUnsupported:
		b.ignore(line.Number, IgnoredUnsupportedKey, line.Key)
	case DirectiveUserAgent:
		b.userAgent(line)
	case DirectiveAllow, DirectiveDisallow:
		b.rule(line)
	case DirectiveSitemap:
		if line.Value != "" && !b.sitemaps[line.Value] {
			if b.sitemaps == nil {
				b.sitemaps = make(map[string]bool)
			}
			b.sitemaps[line.Value] = true
			b.robots.sitemaps = append(b.robots.sitemaps, line.Value)
		}
	case DirectiveCrawlDelay, DirectiveRequestRate:
		b.pace(line)
	case DirectiveContentUsage, DirectiveContentSignal:
		b.usage(line)
	}
}

func (b *builder) userAgent(line Line) {
	name, global := ProductName(line.Value)
	if !global && name == "" {
		b.ignore(line.Number, IgnoredNoProductName, "")
		return
	}
	// Only a rule (Content-Usage too: see usage) ends the list of
	// user-agent lines heading a group; sitemaps, crawl-delays,
	// Content-Signal and unknown records do not (RFC 9309 §2.2.4).
	if !b.open {
		b.current = &group{}
		b.groups = append(b.groups, b.current)
		b.open = true
	}
	key := "*"
	if global {
		name = "*"
	} else {
		key = lowerASCII(name)
	}
	if b.names == nil {
		b.names = make(map[string]*nameGroups)
	}
	ng := b.names[key]
	if ng == nil {
		ng = &nameGroups{key: key, name: name}
		b.names[key] = ng
	}
	ng.lines = append(ng.lines, line.Number)
	if b.headDone {
		b.head, b.headDone = b.head[:0], false
	}
	b.head = append(b.head, ng)
	if len(ng.groups) == 0 || ng.groups[len(ng.groups)-1] != b.current {
		ng.groups = append(ng.groups, b.current)
	}
}

func (b *builder) rule(line Line) {
	if b.current == nil {
		b.ignore(line.Number, IgnoredOutsideGroup, "")
		return
	}
	b.open, b.headDone = false, true
	switch {
	case line.Value == "":
		// "Disallow:" with no value is the classic way to allow all: it
		// matches nothing and deserves no warning.
	case line.Value[0] != '/' && line.Value[0] != '*':
		b.ignore(line.Number, IgnoredBadPattern, "")
	default:
		b.current.rules = append(b.current.rules, draftRule{value: line.Value, line: line.Number, allow: line.Directive == DirectiveAllow})
	}
}

// pace reads a Crawl-delay or Request-rate line. It speaks for the
// user-agent lines just above it, not for the whole group as a rule does:
// "User-agent: bingbot / Crawl-delay: 10 / User-agent: * / Crawl-delay: 1"
// is one group for the rules (RFC 9309 §2.2.4: only a rule ends a group's
// user-agent lines), and surely two paces.
func (b *builder) pace(line Line) {
	if b.current == nil {
		b.ignore(line.Number, IgnoredOutsideGroup, "")
		return
	}
	var interval time.Duration
	var ok bool
	if line.Directive == DirectiveCrawlDelay {
		interval, ok = parseCrawlDelay(line.Value)
		if !ok {
			b.ignore(line.Number, IgnoredBadCrawlDelay, "")
			return
		}
	} else {
		interval, ok = parseRequestRate(line.Value)
		if !ok {
			b.ignore(line.Number, IgnoredBadRequestRate, "")
			return
		}
	}
	p := Pace{Interval: interval, Directive: line.Directive, Line: line.Number, Value: line.Value}
	for _, ng := range b.head {
		if p.stricter(ng.pace) {
			ng.pace = p
		}
	}
	b.headDone = true
}

// usage reads a Content-Usage or Content-Signal line into the group being
// filled. A Content-Usage line is a rule (draft-ietf-aipref-attach-05 §3:
// "rule =/ content-usage"), so it ends the group's user-agent lines as
// Allow and Disallow do, whatever its value. Content-Signal is in no
// grammar: like a pace line it ends nothing, and unlike one it speaks for
// the whole group as written, every user-agent line of it, before or
// after: the group is what Cloudflare's files put it in, and the wider
// reading is the cautious one when a site says "no".
func (b *builder) usage(line Line) {
	if b.current == nil {
		b.ignore(line.Number, IgnoredOutsideGroup, "")
		return
	}
	if line.Directive == DirectiveContentUsage {
		b.open, b.headDone = false, true
	}
	path, expr := splitUsage(line.Value)
	switch {
	case expr == "":
		b.ignore(line.Number, IgnoredEmptyUsage, "")
	case b.robots.usageLines == MaxUsageLines:
		b.ignore(line.Number, IgnoredTooManyUsage, "")
	default:
		b.robots.usageLines++
		b.current.usage = append(b.current.usage, draftUsage{directive: line.Directive, line: line.Number, path: path, value: expr})
	}
}

// maxPace bounds an interval: a longer one is read as this long. It is a
// typo, or a refusal better written as "Disallow: /", and a proxy caps it
// far lower anyway.
const maxPace = 24 * time.Hour

// maxPaceValue bounds a pace value: real ones are a few bytes, and the
// value is quoted back to crawlers in 429 answers.
const maxPaceValue = 32

// parseCrawlDelay reads a Crawl-delay value: a decimal number of seconds
// ("10", "0.5", ".5", "10."), nothing else (no sign, exponent, hex, unit).
func parseCrawlDelay(v string) (time.Duration, bool) {
	if len(v) > maxPaceValue {
		return 0, false
	}
	seconds, ok := parseDecimal(v)
	if !ok {
		return 0, false
	}
	return secondsToDuration(seconds), true
}

// parseRequestRate reads a Request-rate value, requests/period: "1/5" is
// one request every 5 seconds; the period may end in s, m or h ("1/10m",
// "60/1h"). A visit-time window after it ("1/5 0600-0845") is accepted
// and not honoured: the rate then applies all day, the stricter reading.
func parseRequestRate(v string) (time.Duration, bool) {
	if len(v) > maxPaceValue {
		return 0, false
	}
	if i := strings.LastIndexByte(v, ' '); i >= 0 && isTimeWindow(v[i+1:]) {
		v = v[:i]
	}
	requests, period, ok := strings.Cut(v, "/")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(trimSpace(requests), 10, 32)
	if err != nil || n == 0 {
		return 0, false
	}
	period = trimSpace(period)
	unit := 1.0
	if len(period) > 0 {
		switch period[len(period)-1] {
		case 's', 'S':
			period = period[:len(period)-1]
		case 'm', 'M':
			period, unit = period[:len(period)-1], 60
		case 'h', 'H':
			period, unit = period[:len(period)-1], 3600
		}
	}
	seconds, ok := parseDecimal(period)
	if !ok || seconds == 0 {
		return 0, false
	}
	return secondsToDuration(seconds * unit / float64(n)), true
}

// isTimeWindow reports whether s is a visit-time window, "0600-0845".
func isTimeWindow(s string) bool {
	from, to, ok := strings.Cut(s, "-")
	return ok && len(from) == 4 && len(to) == 4 && isDigits(from) && isDigits(to)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// parseDecimal reads digits with at most one '.', at least one digit.
func parseDecimal(s string) (float64, bool) {
	digits, dots := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return 0, false
		}
	}
	if digits == 0 || dots > 1 {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil || math.IsInf(f, 1) // a huge number is only long
}

// secondsToDuration converts, saturating at maxPace.
func secondsToDuration(seconds float64) time.Duration {
	if seconds >= maxPace.Seconds() {
		return maxPace
	}
	return time.Duration(math.Round(seconds * float64(time.Second)))
}

// finish compiles every group's rules once, gives each product name the
// groups naming it, then copies every string the result keeps out of the
// body's text.
func (b *builder) finish() *Robots {
	r := b.robots
	// The rules of every group in one array, group after group, as
	// matching walks them; the groups with rules in another, and a
	// pointer to each in a third: a name in a single group, the common
	// case, refers to a slice of the last and costs no list of its own.
	withRules, total := 0, 0
	for _, g := range b.groups {
		if len(g.rules) > 0 {
			withRules++
		}
		for _, d := range g.rules {
			total++
			if d.allow && impliedPattern(d.value) != "" {
				total++
			}
		}
	}
	// total bounds the rules compiled, so all never moves: the groups'
	// rules are views of it.
	all := make([]Rule, 0, total)
	compiled := make([]ruleGroup, 0, withRules)
	for _, g := range b.groups {
		g.compiled = -1
		start := len(all)
		if all = appendGroup(all, g.rules); len(all) > start {
			g.compiled = len(compiled)
			compiled = append(compiled, newRuleGroup(all[start:len(all):len(all)]))
		}
	}
	refs := make([]*ruleGroup, len(compiled))
	for i := range compiled {
		refs[i] = &compiled[i]
	}
	usageAll, usageGroups := compileUsage(b.groups, b.robots.usageLines)
	usageRefs := make([]*usageGroup, len(usageGroups))
	for i := range usageGroups {
		usageRefs[i] = &usageGroups[i]
	}

	named := make([]*ruleSet, 0, len(b.names))
	keys := make([]string, 0, len(b.names))
	var lists int64 // bytes of the group lists of names in several groups
	for _, ng := range b.names {
		rs := &ruleSet{name: ng.name, agentLines: slices.Clip(ng.lines), pace: ng.pace}
		rs.groups = groupsOf(ng.groups, func(g *group) int { return g.compiled }, refs, &lists)
		rs.usage = groupsOf(ng.groups, func(g *group) int { return g.usageAt }, usageRefs, &lists)
		named = append(named, rs)
		keys = append(keys, ng.key)
	}

	// The kept strings are views of the body's text: copy them, so the
	// result does not keep the whole text alive. A pattern that needs no
	// normalising, and a name without upper case, share one copy.
	var text int64
	keep := func(s *string) {
		*s = strings.Clone(*s)
		text += allocSize(len(*s))
	}
	for i := range all {
		rule := &all[i]
		same := rule.pattern.expr == rule.Pattern
		keep(&rule.Pattern)
		if same {
			rule.pattern.expr = rule.Pattern
		} else {
			keep(&rule.pattern.expr)
		}
	}
	for i := range usageAll {
		u := &usageAll[i]
		same := u.pattern.expr == u.Path
		keep(&u.Path)
		if same {
			u.pattern.expr = u.Path
		} else {
			keep(&u.pattern.expr)
		}
		keep(&u.Value)
	}
	for i, rs := range named {
		if rs.pace.Line != 0 {
			keep(&rs.pace.Value)
		}
		same := keys[i] == rs.name
		keep(&rs.name)
		if same {
			keys[i] = rs.name
		} else {
			keep(&keys[i])
		}
	}
	for i := range r.sitemaps {
		keep(&r.sitemaps[i])
	}
	for i := range r.ignored {
		keep(&r.ignored[i].Key)
	}

	if len(named) > 0 {
		r.agents = make(map[string]*ruleSet, len(named))
	}
	for i, rs := range named {
		if keys[i] == "*" {
			r.global = rs
		} else {
			r.agents[keys[i]] = rs
		}
	}
	r.sitemaps = slices.Clip(r.sitemaps)
	r.ignored = slices.Clip(r.ignored)
	r.retained = retainedSize(r, all, compiled, text) + usageSize(usageAll, usageGroups) + lists
	return r
}

// groupsOf returns the compiled groups of gs, in file order: at(g) is the
// index of g's in refs, -1 when it has none. A single one is a view of
// refs; a list of several costs a list of its own, whose bytes are added
// to lists.
func groupsOf[T any](gs []*group, at func(*group) int, refs []*T, lists *int64) []*T {
	n, last := 0, 0
	for _, g := range gs {
		if i := at(g); i >= 0 {
			n, last = n+1, i
		}
	}
	switch n {
	case 0:
		return nil
	case 1:
		return refs[last : last+1 : last+1]
	}
	out := make([]*T, 0, n)
	for _, g := range gs {
		if i := at(g); i >= 0 {
			out = append(out, refs[i])
		}
	}
	*lists += allocSize(8 * n)
	return out
}

// retainedSize estimates the heap r keeps: the kept strings (text, already
// summed), the rules and the groups (each once, however many names it
// has), one header per name, the map and the two lists, each rounded up
// as the allocator does. The lists of groups of names in several groups
// are summed by the caller.
func retainedSize(r *Robots, rules []Rule, compiled []ruleGroup, text int64) int64 {
	n := allocSize(int(unsafe.Sizeof(*r))) + text + allocSize(int(unsafe.Sizeof(Rule{}))*cap(rules))
	n += allocSize(int(unsafe.Sizeof(ruleGroup{}))*cap(compiled)) + allocSize(8*len(compiled))
	for i := range compiled {
		n += allocSize(4 * cap(compiled[i].anchored))
	}
	perName := func(rs *ruleSet) int64 {
		return allocSize(int(unsafe.Sizeof(*rs))) + allocSize(8*cap(rs.agentLines)) + mapSlotBytes
	}
	for _, rs := range r.agents {
		n += perName(rs)
	}
	if r.global != nil {
		n += perName(r.global)
	}
	n += allocSize(int(unsafe.Sizeof("")) * cap(r.sitemaps))
	n += allocSize(int(unsafe.Sizeof(IgnoredLine{})) * cap(r.ignored))
	return n
}

// mapSlotBytes approximates one map entry with a string key and a pointer
// value, table overhead included.
const mapSlotBytes = 48

// allocSize rounds a request up roughly as Go's size classes do (the
// classes are at most 12.5% apart above 128 bytes).
func allocSize(n int) int64 {
	switch {
	case n == 0:
		return 0
	case n <= 16:
		return 16
	case n <= 128:
		return int64((n + 15) &^ 15)
	}
	return int64(n) + int64(n)/8
}

// appendGroup compiles the rules of a group and appends them to rules in
// rule order (see ruleOrder): the first matching rule is the group's
// verdict.
func appendGroup(rules []Rule, drafts []draftRule) []Rule {
	start := len(rules)
	for _, d := range drafts {
		p, ok := compilePattern(d.value)
		if !ok {
			continue
		}
		rules = append(rules, Rule{Pattern: d.value, Line: d.line, Allow: d.allow, pattern: p})
		if d.allow {
			// Google-specific, kept because sites mean it: the index
			// page of a directory is the directory's own URL.
			if implied := impliedPattern(d.value); implied != "" {
				if ip, ok := compilePattern(implied); ok {
					rules = append(rules, Rule{Pattern: d.value, Line: d.line, Allow: true, Implied: true, pattern: ip})
				}
			}
		}
	}
	group := rules[start:]
	slices.SortFunc(group, func(a, b Rule) int { return ruleOrder(&a, &b) })
	// RFC 9309 allows dropping duplicate rules; the earliest line stays.
	// A duplicate in another group naming the same product is kept, and
	// never decides: the earlier one matches first.
	group = slices.CompactFunc(group, func(a, b Rule) bool {
		return a.Allow == b.Allow && a.pattern == b.pattern
	})
	return rules[:start+len(group)]
}

// ProductName returns the product name a user-agent value in a robots.txt
// file names, and whether it is the global "*".
//
// The value is cut at the first character that cannot be part of an HTTP
// product token (RFC 9110 token characters, without '*'): "MJ12bot" and
// "Mail.RU_Bot" stay whole, "meta-webindexer/1.1" names
// "meta-webindexer", "FOO BAR" names "FOO" (as in Google's parser). RFC
// 9309 allows only letters, '-' and '_' in a token, but real crawlers have
// digits and dots in theirs (MJ12bot, 360Spider, archive.org_bot) and site
// owners write them so; cutting at the first digit, as Google does, would
// make "MJ12bot" name "MJ". Stars around a name ("*MJ12bot*", written by
// site owners who think in globs) are dropped. A value that is "*", or a
// '*' followed by something that is not a name, is the global group.
func ProductName(value string) (name string, global bool) {
	v := strings.TrimLeft(value, "*")
	starred := len(v) < len(value)
	end := 0
	for end < len(v) && isNameByte(v[end]) {
		end++
	}
	if starred && end == 0 {
		return "", true
	}
	return v[:end], false
}

func isNameByte(c byte) bool {
	if isAlnum(c) {
		return true
	}
	switch c {
	case '!', '$', '%', '&', '\'', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}
