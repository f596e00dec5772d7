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
	// DefaultMaxBytes; more than MaxParseBytes means MaxParseBytes.
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
	limit = min(limit, MaxParseBytes)
	b := builder{robots: &Robots{}, keepIgnored: p.KeepIgnored}
	if len(body) > limit {
		b.robots.truncated = true
		body = body[:limit]
	}
	b.robots.parsed = int32(len(body))
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
	b.robots.lines = int32(pending.Number)
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
	sitemapList []string // in file order, views of the body
	ignored     []IgnoredLine
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
		b.ignored = append(b.ignored, IgnoredLine{Line: line, Reason: reason, Key: key})
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
			b.sitemapList = append(b.sitemapList, line.Value)
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
// groups naming it, and keeps the result in the compact form, every
// string it keeps copied out of the body into one text.
func (b *builder) finish() *Robots {
	r := b.robots
	c := b.sizedCompactor()
	scratch := make([]compiledRule, 0, c.largest)
	for _, g := range b.groups {
		scratch = compileRules(scratch[:0], g.rules)
		g.compiled = c.addGroup(scratch)
	}
	usageAll, usageGroups := compileUsage(b.groups, int(r.usageLines))
	usageAt := c.placeUsage(usageAll)

	keys := make([]string, 0, len(b.names))
	for key := range b.names {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	var spec nameSpec
	for _, key := range keys {
		ng := b.names[key]
		spec = nameSpec{key: key, name: ng.name, lines: ng.lines, groups: spec.groups[:0], usage: spec.usage[:0], pace: ng.pace}
		for _, g := range ng.groups {
			if g.compiled >= 0 {
				spec.groups = append(spec.groups, g.compiled)
			}
			if g.usageAt >= 0 {
				spec.usage = append(spec.usage, g.usageAt)
			}
		}
		c.addName(&spec)
	}
	c.addSitemaps(b.sitemapList)
	c.finish(r)
	r.retained = r.compactSize()
	if len(c.paces) > 0 || len(usageGroups) > 0 || len(b.ignored) > 0 {
		rare := &rareParts{paces: slices.Clone(c.paces), usage: keepUsage(r.text, usageAll, usageGroups, usageAt), ignored: slices.Clip(b.ignored)}
		r.retained += allocSize(int(unsafe.Sizeof(*rare))) + usageSize(usageAll, usageGroups) +
			allocSize(int(unsafe.Sizeof(paceRecord{}))*len(rare.paces)) +
			allocSize(int(unsafe.Sizeof(IgnoredLine{}))*cap(rare.ignored))
		for i := range rare.ignored {
			rare.ignored[i].Key = strings.Clone(rare.ignored[i].Key)
			r.retained += allocSize(len(rare.ignored[i].Key))
		}
		r.rare = rare
	}
	return r
}

// sizedCompactor is a compactor whose slices have room for the whole
// file, so that building it grows none: the rules (the implied ones
// included: duplicates dropped make it an upper bound), the groups, the
// names and their lines, and most of the text.
func (b *builder) sizedCompactor() compactor {
	var rules, groups, largest, lines, refs, text int
	for _, g := range b.groups {
		n := len(g.rules)
		for _, d := range g.rules {
			text += len(d.value)
			if d.allow && impliedPattern(d.value) != "" {
				n++
			}
		}
		if n > 0 {
			groups++
		}
		rules, largest = rules+n, max(largest, n)
	}
	for key, ng := range b.names {
		lines, refs, text = lines+len(ng.lines), refs+len(ng.groups), text+len(key)+len(ng.name)
	}
	for _, s := range b.sitemapList {
		text += len(s) + 1
	}
	c := compactor{
		text: make([]byte, 0, text), rules: make([]rule, 0, rules), groups: make([]ruleGroup, 0, groups),
		sets: make([]ruleSet, 0, len(b.names)), lines: make([]int, 0, lines), largest: largest,
	}
	c.indices = make([]uint32, 0, refs+rules/4)
	if groups > 1 {
		// Only then may a value repeat in another group.
		c.placed = make(map[string]rule, rules)
	}
	return c
}

// allocSize rounds a request up as Go's allocator does: to its size
// class up to 32 KiB, to whole pages of 8 KiB above.
func allocSize(n int) int64 {
	classes := [...]uint16{0, 8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
		288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792,
		2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728,
		10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}
	if n > 32768 {
		return int64(n+8191) &^ 8191
	}
	i, _ := slices.BinarySearch(classes[:], uint16(n))
	return int64(classes[i])
}

// compileRules compiles the rules of a group and appends them to dst, in
// file order, each implied rule after the rule implying it.
func compileRules(dst []compiledRule, drafts []draftRule) []compiledRule {
	for _, d := range drafts {
		p, ok := compilePattern(d.value)
		if !ok {
			continue
		}
		dst = append(dst, newCompiledRule(d.value, p, d.line, d.allow, false))
		if d.allow {
			// Google-specific, kept because sites mean it: the index
			// page of a directory is the directory's own URL.
			if implied := impliedPattern(d.value); implied != "" {
				if ip, ok := compilePattern(implied); ok {
					dst = append(dst, newCompiledRule(d.value, ip, d.line, true, true))
				}
			}
		}
	}
	return dst
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
