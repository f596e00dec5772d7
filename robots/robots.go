package robots

import (
	"strconv"
	"strings"
	"time"
)

// Robots is a parsed robots.txt. It is immutable, safe for concurrent use,
// and keeps no reference to the body it was parsed from. It is kept in a
// compact form (see compact.go): one text and slices of records without
// pointers.
type Robots struct {
	text       string      // every string kept
	rules      []rule      // every group's, group after group
	groups     []ruleGroup // the groups with rules, in file order
	sets       []ruleSet   // one per product name, by key
	indices    []uint32    // the spans of ruleGroup.anchored, ruleSet.groups and ruleSet.usage
	agentLines []int       // the spans of ruleSet.lines
	rare       *rareParts  // nil for a file without usage lines, or not parsed with Parser.KeepIgnored
	sitemaps   span        // of text: each URL followed by a line break
	global     int32       // the index in sets of "*"; -1 without a "*" group

	// Counts; MaxParseBytes bounds them all.
	ignoredCount, parsed, lines int32
	usageLines                  int32 // Content-Usage and Content-Signal lines kept
	truncated                   bool  // the body was longer than the parse limit
	retained                    int64
}

// rareParts is what few files have, kept apart so that the others do not
// pay for its fields.
type rareParts struct {
	paces   []paceRecord  // the paces of the product names that ask for one
	usage   []usageGroup  // the groups with usage lines, in file order
	ignored []IgnoredLine // only with Parser.KeepIgnored
}

// Pace is what robots.txt asks of a crawler's pace: an interval between
// the starts of two requests, from the line that asked for the longest one
// of the groups that apply (Crawl-delay or Request-rate; neither is in RFC
// 9309). Line is 0 when no line asks for any.
type Pace struct {
	Interval  time.Duration
	Directive Directive // DirectiveCrawlDelay or DirectiveRequestRate
	Line      int
	Value     string // as written: "10", "0.5", "1/5", "10/1m"
}

// Rule is the line as a site owner reads it: "Crawl-delay: 10".
func (p Pace) Rule() string {
	key := "Crawl-delay"
	if p.Directive == DirectiveRequestRate {
		key = "Request-rate"
	}
	return key + ": " + p.Value
}

// stricter reports whether p asks for a longer interval than q, or the
// same one earlier in the file.
func (p Pace) stricter(q Pace) bool {
	return q.Line == 0 || p.Interval > q.Interval || p.Interval == q.Interval && p.Line < q.Line
}

// Rule is one allow or disallow rule. The zero Rule is no rule (see
// [Rule.IsZero]).
type Rule struct {
	Pattern string // as written in the file
	// Line is 32 bits (robots.txt is parsed up to MaxParseBytes): a
	// Verdict, which holds a Rule, stays small enough for the decision a
	// proxy allocates per request.
	Line  int32
	Allow bool
	// Implied marks the rule Google's parser, and robotsgate, add for
	// "Allow: /dir/index.html": it allows "/dir/$" too, since that URL
	// serves the same page.
	Implied bool
}

// IsZero reports whether r is no rule: a verdict that no rule decided
// has the zero Rule.
func (r Rule) IsZero() bool { return r.Line == 0 }

// String describes the rule for people: "disallow: /private/ (line 7)".
func (r Rule) String() string {
	var b strings.Builder
	if r.Allow {
		b.WriteString("allow: ")
	} else {
		b.WriteString("disallow: ")
	}
	if r.Implied {
		b.WriteString(impliedPattern(r.Pattern))
	} else {
		b.WriteString(r.Pattern)
	}
	b.WriteString(" (line ")
	b.WriteString(strconv.Itoa(int(r.Line)))
	if r.Implied {
		b.WriteString(", implied by ")
		b.WriteString(r.Pattern)
	}
	b.WriteByte(')')
	return b.String()
}

// impliedPattern is the directory pattern an index page allows:
// "/dir/index.html" gives "/dir/$"; "" when the pattern names no index page.
func impliedPattern(written string) string {
	slash := strings.LastIndexByte(written, '/')
	if slash < 0 || !strings.HasPrefix(written[slash:], "/index.htm") {
		return ""
	}
	return written[:slash+1] + "$"
}

// IgnoredLine is a line that contributed nothing to the rules or, when it
// was too long, only its beginning.
type IgnoredLine struct {
	Line   int
	Reason IgnoreReason
	// Key is the record's key as written, for unknown and unsupported
	// records.
	Key string
}

func (l IgnoredLine) String() string {
	s := "line " + strconv.Itoa(l.Line) + ": " + l.Reason.String()
	if l.Key != "" {
		s += " " + strconv.Quote(l.Key)
	}
	return s
}

// IgnoreReason says why a line was ignored.
type IgnoreReason uint8

const (
	// IgnoredNotRecord: the line is not a "key: value" record.
	IgnoredNotRecord IgnoreReason = iota + 1
	// IgnoredUnknownKey: nobody defines this key.
	IgnoredUnknownKey
	// IgnoredUnsupportedKey: other crawlers define this key (host,
	// clean-param, noindex, ...); it has no effect here.
	IgnoredUnsupportedKey
	// IgnoredOutsideGroup: a rule, crawl-delay or usage line before any
	// user-agent line.
	IgnoredOutsideGroup
	// IgnoredBadPattern: the pattern starts with neither '/' nor '*', so it
	// can never match.
	IgnoredBadPattern
	// IgnoredNoProductName: the user-agent value names no product.
	IgnoredNoProductName
	// IgnoredBadCrawlDelay: the crawl-delay is not a number of seconds.
	IgnoredBadCrawlDelay
	// IgnoredBadRequestRate: the request-rate is not requests/period.
	IgnoredBadRequestRate
	// IgnoredTooLong: the line is longer than MaxLineBytes; only its
	// beginning was read.
	IgnoredTooLong
	// IgnoredPastLimit: the line crosses the parse limit; it and
	// everything after it were dropped.
	IgnoredPastLimit
	// IgnoredEmptyUsage: a Content-Usage or Content-Signal line that
	// states no preference (nothing, or only a path).
	IgnoredEmptyUsage
	// IgnoredTooManyUsage: the file already has MaxUsageLines usage
	// lines; the rest are not kept.
	IgnoredTooManyUsage
)

func (r IgnoreReason) String() string {
	switch r {
	case IgnoredNotRecord:
		return `not a "key: value" record`
	case IgnoredUnknownKey:
		return "unknown key"
	case IgnoredUnsupportedKey:
		return "unsupported key"
	case IgnoredOutsideGroup:
		return "record before any user-agent line"
	case IgnoredBadPattern:
		return "pattern starts with neither / nor *: never matches"
	case IgnoredNoProductName:
		return "user-agent value names no product token"
	case IgnoredBadCrawlDelay:
		return "crawl-delay is not a number of seconds, such as 10 or 0.5"
	case IgnoredBadRequestRate:
		return "request-rate is not requests/period, such as 1/5 (seconds), 1/10m or 60/1h"
	case IgnoredTooLong:
		return "line longer than " + strconv.Itoa(MaxLineBytes) + " bytes: the rest was ignored"
	case IgnoredPastLimit:
		return "past the parse limit: this line and the rest of the file were ignored"
	case IgnoredEmptyUsage:
		return "usage line states no preference"
	case IgnoredTooManyUsage:
		return "more than " + strconv.Itoa(MaxUsageLines) + " usage lines: the rest were ignored"
	}
	return "ignore reason " + strconv.Itoa(int(r))
}

// Sitemaps returns the sitemap URLs in file order, without duplicates,
// in a new slice of views of the kept text.
func (r *Robots) Sitemaps() []string {
	if r == nil || r.sitemaps.len() == 0 {
		return nil
	}
	text := r.text[r.sitemaps.start : r.sitemaps.end-1] // the last line break dropped
	return strings.Split(text, "\n")
}

// Ignored returns every line that did not fully count, in file order,
// when the file was parsed with [Parser.KeepIgnored]; nil otherwise.
func (r *Robots) Ignored() []IgnoredLine {
	if r == nil || r.rare == nil {
		return nil
	}
	return r.rare.ignored
}

// IgnoredCount is how many entries [Robots.Ignored] has, or would have
// with [Parser.KeepIgnored]: one per ignored line, two for a line too long
// whose beginning was ignored as well.
func (r *Robots) IgnoredCount() int {
	if r == nil {
		return 0
	}
	return int(r.ignoredCount)
}

// Truncated reports whether the body was longer than the parse limit.
func (r *Robots) Truncated() bool { return r != nil && r.truncated }

// ParsedBytes is how many bytes of the body were parsed.
func (r *Robots) ParsedBytes() int {
	if r == nil {
		return 0
	}
	return int(r.parsed)
}

// Lines is the number of lines parsed.
func (r *Robots) Lines() int {
	if r == nil {
		return 0
	}
	return int(r.lines)
}

// RetainedBytes estimates the memory the parsed file keeps alive, for
// charging it against a cache budget.
func (r *Robots) RetainedBytes() int64 {
	if r == nil {
		return 0
	}
	return r.retained
}

// Pace returns what the groups that apply to token ask of its pace (the
// same groups as its rules'); false when none of them asks anything.
func (r *Robots) Pace(token string) (Pace, bool) {
	p := r.ruleSetFor(token)
	if p.s == nil {
		return Pace{}, false
	}
	return p.pace()
}
