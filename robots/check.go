package robots

import (
	"strconv"
	"strings"
)

// Verdict is the answer to "may this token fetch this path?", with what
// decided it.
type Verdict struct {
	Allowed bool
	Cause   Cause
	// Rule is the deciding rule when Cause is CauseRule; the zero Rule
	// otherwise (see [Rule.IsZero]).
	Rule Rule
	// Group is the user-agent value whose groups applied, as written in
	// the file ("*" for the global groups); empty when no group applied.
	Group string
	// GroupLines are the lines of the user-agent records that selected
	// those groups.
	GroupLines []int
	// Detail says how the robots.txt fetch went when that decided the
	// verdict (CauseUnavailable, CauseUnreachable): "robots.txt 503",
	// "robots.txt unreachable: connection refused".
	Detail string
	// Reading is, for a refusal by [Robots.CheckReadings], the reading of
	// the path that was disallowed when it is not the path as sent.
	Reading *Reading
}

// Cause says what decided a verdict.
type Cause uint8

const (
	// CauseRule: the longest matching allow or disallow rule.
	CauseRule Cause = iota
	// CauseNoMatchingRule: a group applies but none of its rules matches.
	CauseNoMatchingRule
	// CauseNoGroup: no group names the token and there is no "*" group.
	CauseNoGroup
	// CauseRobotsTxt: [Robots.Check] always allows /robots.txt itself,
	// without a query (RFC 9309 §2.2.2).
	CauseRobotsTxt
	// CauseUnavailable: the robots.txt fetch answered 4xx (RFC 9309
	// §2.3.1.3): no restrictions.
	CauseUnavailable
	// CauseUnreachable: the robots.txt fetch failed (5xx, 429, network
	// error; RFC 9309 §2.3.1.4), or answered 401/403 where those are set
	// to mean disallow: complete disallow.
	CauseUnreachable
	// CauseAmbiguous: the path has more readings than MaxReadings; it is
	// refused rather than judged in part.
	CauseAmbiguous
	// CauseTooCostly: judging the path would cost more than
	// MaxDecisionCost (see [Judgement]); it is refused without being
	// judged. Detail names the estimate and the bound.
	CauseTooCostly
)

func (c Cause) String() string {
	switch c {
	case CauseRule:
		return "rule"
	case CauseNoMatchingRule:
		return "no matching rule"
	case CauseNoGroup:
		return "no group applies"
	case CauseRobotsTxt:
		return "robots.txt is always allowed"
	case CauseUnavailable:
		return "no restrictions"
	case CauseUnreachable:
		return "complete disallow"
	case CauseAmbiguous:
		return "refused as ambiguous"
	case CauseTooCostly:
		return "refused as too costly to judge"
	}
	return "cause " + strconv.Itoa(int(c))
}

// Reason explains the verdict in a few words, for a 403 page, an audit
// record or the check command: "disallow: /private/ (line 7)", "no
// matching rule", ...
func (v Verdict) Reason() string {
	switch {
	case v.Cause == CauseRule && !v.Rule.IsZero() && v.Reading != nil:
		return v.Rule.String() + " when read as " + v.Reading.Path + " (" + v.Reading.StepsString() + ")"
	case v.Cause == CauseRule && !v.Rule.IsZero():
		return v.Rule.String()
	case v.Detail != "":
		return v.Detail + ": " + v.Cause.String()
	}
	return v.Cause.String()
}

// Check decides whether the crawler with the product token may fetch
// pathAndQuery (the path and query of the URL, as sent: see
// [PathAndQuery]).
//
// The token is compared whole and case-insensitively with the product
// names of the file's groups (see [ProductName]); every group naming it
// applies, merged. Without one, every "*" group applies; without those,
// nothing is disallowed. Within the chosen groups the rule with the
// longest pattern wins, allow over disallow on a tie; without a matching
// rule the path is allowed. "/robots.txt" itself, without a query, is
// always allowed (RFC 9309 §2.2.2).
//
// Check judges the path as sent, however long the work: a proxy calls
// [Robots.CheckReadings], which judges every reading within a bound. It
// does not allocate unless the path needs percent-normalising.
func (r *Robots) Check(token, pathAndQuery string) Verdict {
	path := normalizePath(pathAndQuery)
	if path == robotsTxtPath {
		return Verdict{Allowed: true, Cause: CauseRobotsTxt}
	}
	p := r.ruleSetFor(token)
	if p.s == nil {
		return Verdict{Allowed: true, Cause: CauseNoGroup}
	}
	return p.verdict(p.firstMatch(path))
}

// robotsTxtPath is the path Check exempts, normalised.
const robotsTxtPath = "/robots.txt"

// isRobotsTxt reports whether pathAndQuery is the path Check always
// allows: "/robots.txt" once percent-normalised ("/%72obots.txt" too), with
// no query. A proxy exempts less: GET and HEAD of exactly "/robots.txt"
// (see [Robots.CheckReadings]).
func isRobotsTxt(pathAndQuery string) bool { return normalizePath(pathAndQuery) == robotsTxtPath }

// DisallowsAll reports whether token may fetch nothing on the site but
// /robots.txt: the groups that apply have a rule disallowing every path
// ("/", "*", "/*$", ...) and every allow rule is either about /robots.txt
// or overruled where it matches (each is tried with its wildcards empty
// and filled). The verdict cites the rule that disallows everything. A
// proxy that cannot see paths (a tunnel it does not intercept) can refuse
// such a crawler outright and must let any other through.
func (r *Robots) DisallowsAll(token string) (Verdict, bool) {
	p := r.ruleSetFor(token)
	if p.s == nil {
		return Verdict{Allowed: true, Cause: CauseNoGroup}, false
	}
	everything := -1
	for _, gi := range p.groups() {
		g := &r.groups[gi]
		for i := g.rules.start; i < g.rules.end; i++ {
			x := &r.rules[i]
			if pat := r.patternOf(x); !x.allow() && pat.matchesEveryPath() {
				// The first of each group; the earliest of those is the
				// one the merged rules cite.
				if everything < 0 || ruleOrder(x, &r.rules[everything]) < 0 {
					everything = int(i)
				}
				break
			}
		}
	}
	if everything < 0 {
		return Verdict{}, false
	}
	for _, gi := range p.groups() {
		g := &r.groups[gi]
		for i := g.rules.start; i < g.rules.end; i++ {
			x := &r.rules[i]
			if !x.allow() {
				continue
			}
			for _, fill := range [...]string{"", "robotsgate-probe"} {
				path := strings.ReplaceAll(r.expr(x), "*", fill)
				if !strings.HasPrefix(path, "/") {
					path = "/" + path
				}
				if !isRobotsTxt(path) && r.Check(token, path).Allowed {
					return Verdict{}, false
				}
			}
		}
	}
	return p.verdict(everything), true
}

// firstMatch returns the index of the first rule in rule order, so the
// longest, of the merged rules of p that matches a normalised path; -1
// for none. It is the earliest of each group's first match, and a
// group's rules past the best match so far are not tried.
func (p product) firstMatch(path string) int {
	r := p.r
	text := r.text
	best, bestOrder := -1, uint64(0)
	for _, gi := range p.groups() {
		g := &r.groups[gi]
		for i := g.rules.start; i < g.rules.end; i++ {
			x := &r.rules[i]
			if best >= 0 && x.order() > bestOrder {
				break
			}
			// r.matches, its commonest outcomes decided in the loop.
			expr := text[x.off : x.off+uint32(x.n)]
			if x.star == noStar {
				if x.meta&ruleAnchored == 0 && !strings.HasPrefix(path, expr) || x.meta&ruleAnchored != 0 && path != expr {
					continue
				}
			} else if star := int(x.star); len(path) < star || path[:star] != expr[:star] {
				continue
			} else if rest, tail := path[star:], expr[star+1:]; x.meta&ruleSingle != 0 {
				if x.meta&ruleAnchored != 0 && !strings.HasSuffix(rest, tail) || x.meta&ruleAnchored == 0 && !strings.Contains(rest, tail) {
					continue
				}
			} else if !matchPastStar(rest, tail, x.meta&ruleAnchored != 0, false) {
				continue
			}
			best, bestOrder = int(i), x.order()
			break
		}
	}
	return best
}

// verdict is the verdict of the i-th rule, or of no matching rule when i
// is negative.
func (p product) verdict(i int) Verdict {
	if i < 0 {
		return Verdict{Allowed: true, Cause: CauseNoMatchingRule, Group: p.name(), GroupLines: p.agentLines()}
	}
	rule := p.r.ruleAt(i)
	return Verdict{Allowed: rule.Allow, Cause: CauseRule, Rule: rule, Group: p.name(), GroupLines: p.agentLines()}
}

// PathAndQuery returns the part of a URL that rules are matched against:
// path, parameters and query, without the fragment, always starting with
// '/'. It does not decode or re-encode anything. It accepts what crawlers
// pass around: absolute URLs, scheme-less "host/path", and paths.
func PathAndQuery(rawURL string) string {
	start := 0
	if strings.HasPrefix(rawURL, "//") {
		start = 2
	}
	schemeEnd := strings.Index(rawURL[start:], "://")
	early := strings.IndexAny(rawURL[start:], "/?;")
	if schemeEnd < 0 || (early >= 0 && early < schemeEnd) {
		schemeEnd = start
	} else {
		schemeEnd += start + 3
	}
	pathStart := strings.IndexAny(rawURL[schemeEnd:], "/?;")
	if pathStart < 0 {
		return "/"
	}
	pathStart += schemeEnd
	end := len(rawURL)
	if hash := strings.IndexByte(rawURL[start:], '#'); hash >= 0 {
		if hash+start < pathStart {
			return "/"
		}
		end = hash + start
	}
	if rawURL[pathStart] != '/' {
		return "/" + rawURL[pathStart:end]
	}
	return rawURL[pathStart:end]
}
