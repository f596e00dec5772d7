package robots

import "strings"

// MaxDecisionCost bounds the work of one decision by
// [Robots.CheckReadings], in cost units (below): a decision estimated
// above it is refused (CauseTooCostly) without a rule being matched. It is
// about 10 ms of CPU at worst, and no file of the test corpus comes near it
// for paths of up to 2 KiB with up to 16 readings; a robots.txt of 26,000
// "Disallow: /*zqN" rules and an 8 KiB path would cost about a second.
const MaxDecisionCost = 10_000_000

// A decision's cost is estimated before any work is done, from the
// lengths of the path's readings and figures the rules got at parse time,
// in units of about a nanosecond of CPU at worst on the machine the
// weights were measured on (see BenchmarkDecisionCost): it is an upper
// bound, and most decisions cost far less, since most rules fail at their
// first bytes. Weights ending in 16 are in sixteenths of a unit.
const (
	// costRule: a rule tried, its loop turn and first comparison.
	costRule = 8
	// costGroup: each group past the first of those naming a product,
	// tried after the others.
	costGroup = 8
	// costWildcard: a pattern with '*' set up; costStar: each '*', one
	// more substring search started.
	costWildcard = 16
	costStar     = 12
	// costPatternByte16: each byte of a pattern compared.
	costPatternByte16 = 1
	// costScan16: each byte of the path a wildcard pattern searches for
	// a literal of two bytes or more, which an adversarial path makes cost
	// up to 1.5 ns whatever the literal's length; costScanByte16 for a
	// single byte (a vectorised IndexByte).
	costScan16     = 32
	costScanByte16 = 1
	// costReadingByte16: each byte of a reading, normalised, scanned for
	// readings, and copied by every step.
	costReadingByte16 = 128
	// costSpecial: each byte a step may act on ('/', '.', '%', ';', '\\')
	// in a path that has readings, for each of its readings.
	costSpecial = 16
)

// workload is what matching one path against a list of rules costs at
// worst: base16 plus perByte16 for each byte of the path, in sixteenths
// of a unit.
type workload struct {
	base16, perByte16 int64
}

// of is the cost of matching a path of n bytes, in units.
func (w workload) of(n int) int64 { return (w.base16 + w.perByte16*int64(n)) / 16 }

// plus adds the work of other rules.
func (w *workload) plus(v workload) {
	w.base16 += v.base16
	w.perByte16 += v.perByte16
}

// add counts p among the patterns tried.
func (w *workload) add(p *pattern) {
	w.base16 += 16*costRule + costPatternByte16*int64(len(p.expr))
	if !p.wildcard {
		return
	}
	// The literal before the first '*' is compared in place; so is the
	// last when the pattern is anchored. Every other is searched for along
	// the path.
	stars, longest := 0, 0
	for rest := p.expr[p.star+1:]; ; stars++ {
		star := strings.IndexByte(rest, '*')
		if star < 0 {
			if !p.anchored {
				longest = max(longest, len(rest))
			}
			break
		}
		longest = max(longest, star)
		rest = rest[star+1:]
	}
	w.base16 += 16 * (costWildcard + costStar*int64(stars+1))
	switch {
	case longest > 1:
		w.perByte16 += costScan16
	case longest == 1:
		w.perByte16 += costScanByte16
	}
}

// ruleLoad is what matching a path against a list of rules costs at
// worst: all of them, and the anchored ones alone (tried on the
// query-less form of a path with a query).
type ruleLoad struct {
	all, anchored workload
}

// hasAnchored reports whether the rules include an anchored one: each
// adds to the base.
func (l *ruleLoad) hasAnchored() bool { return l.anchored.base16 > 0 }

// load is the load of every rule of p, the sum of its groups': summed at
// each decision rather than kept, since a sum per product would cost
// every product naming more than one group a copy.
func (p product) load() ruleLoad {
	groups := p.groups()
	if len(groups) == 1 {
		return p.r.groups[groups[0]].load
	}
	var l ruleLoad
	for _, gi := range groups {
		g := &p.r.groups[gi]
		l.all.plus(g.load.all)
		l.anchored.plus(g.load.anchored)
	}
	extra := 16 * costGroup * int64(len(groups)-1)
	l.all.base16 += extra
	if l.hasAnchored() {
		l.anchored.base16 += extra
	}
	return l
}

// readingCost estimates judging one reading: normalising it, n bytes once
// normalised, finding its own readings when it has specials bytes a step
// may act on, matching it against every rule and, when it has a query,
// its first bare bytes against the anchored rules (bare is -1 without a
// query).
func (l *ruleLoad) readingCost(n, bare, specials int) int64 {
	cost := l.all.of(n) + costReadingByte16*int64(n)/16 + costSpecial*int64(specials)
	if bare >= 0 && l.hasAnchored() {
		cost += l.anchored.of(bare)
	}
	return cost
}

// specialBytes counts the bytes of pathAndQuery a step may act on: no
// reading of it has more.
func specialBytes(pathAndQuery string) int {
	n := 0
	for _, c := range [...]string{"/", ".", "%", ";", `\`} {
		n += strings.Count(pathAndQuery, c)
	}
	return n
}
