package robots

import (
	"math"
	"strconv"
	"strings"
)

// A Judgement is a decision of [Robots.CheckReadings] prepared but not yet
// made: the rules that apply, the readings of the path, and an estimate of
// what matching them will cost, so that a proxy can weigh the work before
// it is done. Preparing costs little: it lists the readings of a path that
// has any; for any other it reads the path a few times and, like Check,
// allocates only when the path needs percent-normalising.
type Judgement struct {
	outcome Outcome
	detail  string  // the account of an outcome that is not OK
	p       product // its s is nil when no group applies
	path    string  // as sent
	readingPlan
}

// readingPlan is the readings of a path and what matching them against
// rules will cost.
type readingPlan struct {
	norm     string // as sent, normalised
	query    int    // where the query starts in norm; -1 without one, or without anchored rules
	readings []Reading
	cost     int64
	stop     expansionStop
}

// Prepare prepares the decision of [Robots.CheckReadings] for the token
// and pathAndQuery.
func (r *Robots) Prepare(token, pathAndQuery string) Judgement {
	rs := r.ruleSetFor(token)
	j := Judgement{outcome: OutcomeOK, p: rs, path: pathAndQuery}
	if rs.s == nil || rs.s.groups.len() == 0 && rs.s.usage().len() == 0 {
		return j // nothing to match
	}
	load := rs.load()
	if rs.s.usage().len() > 0 {
		// The usage lines are matched against the same readings
		// (Judgement.Usage): the estimate is of both.
		u := rs.usageLoad()
		load.all.plus(u.all)
		load.anchored.plus(u.anchored)
	}
	j.readingPlan = planReadings(load, pathAndQuery)
	return j
}

// planReadings normalises pathAndQuery, lists its readings and estimates
// the cost of matching each against rules of the given load. The listing
// stops once the estimate passes MaxDecisionCost; a path that has nothing
// to read otherwise is not listed (readings is nil).
func planReadings(load ruleLoad, pathAndQuery string) readingPlan {
	norm, escaped := normalizeCounting(pathAndQuery)
	p := readingPlan{norm: norm, query: -1}
	if load.hasAnchored() {
		p.query = strings.IndexByte(norm, '?') // only anchored rules read it
	}
	p.cost = load.readingCost(len(norm), p.query, 0)
	if p.cost > MaxDecisionCost || !mayReadOtherwise(pathAndQuery) {
		return p
	}
	// A reading is never longer than the path as sent, and has no more
	// bytes to escape, nor bytes a step may act on, than it: its normalised
	// form is at most 2*escaped bytes longer than it.
	specials := specialBytes(pathAndQuery)
	p.cost += costSpecial * int64(specials)
	p.readings, p.cost, p.stop = expandReadings(pathAndQuery, func(form string) int64 {
		bare := strings.IndexByte(form, '?')
		if bare >= 0 {
			bare += 2 * escaped
		}
		return load.readingCost(len(form)+2*escaped, bare, specials)
	}, p.cost)
	return p
}

// Prepare prepares the decision of [Answer.CheckReadings] for the token
// and pathAndQuery: nothing to estimate unless the outcome is OK.
func (a *Answer) Prepare(token, pathAndQuery string) Judgement {
	switch {
	case a == nil:
		return Judgement{detail: "robots.txt not fetched"}
	case a.Outcome == OutcomeOK:
		return a.Robots.Prepare(token, pathAndQuery)
	}
	return Judgement{outcome: a.Outcome, detail: a.Detail}
}

// Cost is the estimated work of the decision, in the units of
// MaxDecisionCost: 0 when no rule is to be matched, at most a few units
// per byte plus the work of the rules for a path without readings. Past
// MaxDecisionCost it may be a partial sum: the readings were no longer
// listed.
func (j Judgement) Cost() int64 { return j.cost }

// Verdict makes the decision: the verdict of [Robots.CheckReadings], or a
// refusal (CauseTooCostly) without matching anything when Cost is over
// MaxDecisionCost.
func (j Judgement) Verdict() Verdict {
	switch j.outcome {
	case OutcomeOK:
	case OutcomeUnavailable:
		return Verdict{Allowed: true, Cause: CauseUnavailable, Detail: j.detail}
	default:
		return Verdict{Cause: CauseUnreachable, Detail: j.detail}
	}
	rs := j.p
	switch {
	case rs.s == nil:
		return Verdict{Allowed: true, Cause: CauseNoGroup}
	case rs.s.groups.len() == 0:
		return rs.verdict(-1)
	case j.cost > MaxDecisionCost:
		estimate := "decision cost estimated at " + strconv.FormatInt(j.cost, 10)
		if j.stop == stopMaxCost {
			estimate = "decision cost estimated at over " + strconv.FormatInt(j.cost, 10)
		}
		return rs.refusal(CauseTooCostly, estimate+", over the bound of "+strconv.Itoa(MaxDecisionCost))
	}
	decider, queryDropped := rs.checkReading(j.norm, j.query)
	if rs.disallows(decider) {
		v := rs.verdict(decider)
		if queryDropped {
			v.Reading = &Reading{Path: withoutQuery(j.path), Steps: []Step{StepDropQuery}}
		}
		return v
	}
	if j.stop == stopMaxReadings {
		return rs.refusal(CauseAmbiguous, "more than "+strconv.Itoa(MaxReadings)+" readings of the path")
	}
	for _, reading := range j.readings[min(1, len(j.readings)):] {
		norm := normalizePath(reading.Path)
		rule, queryDropped := rs.checkReading(norm, strings.IndexByte(norm, '?'))
		if !rs.disallows(rule) {
			continue
		}
		if queryDropped {
			reading.Path = withoutQuery(reading.Path)
			reading.Steps = append(reading.Steps[:len(reading.Steps):len(reading.Steps)], StepDropQuery)
		}
		v := rs.verdict(rule)
		v.Reading = &reading
		return v
	}
	return rs.verdict(decider)
}

// CheckReadings is Check for a proxy in front of origins that rewrite
// paths: the request is allowed only when the path as sent and every
// reading an origin may make of it are (see [Step]). A refusal's
// Verdict.Reading names the reading that was disallowed when it is not the
// path as sent. It is Prepare(token, pathAndQuery).Verdict(): a decision
// estimated over MaxDecisionCost is refused unjudged.
//
// Each reading with a query is judged with its query-less form beside it
// (StepDropQuery): the longest rule matching either decides, so
// "Disallow: /*.pdf$" refuses "/doc.pdf?x=1", while a longer rule that
// allows the URL with its query, the site's own word about it ("Allow:
// /w/load.php?" beside "Disallow: /w/"), keeps it allowed. Only a rule
// anchored with '$' can match the query-less form and not the URL, so
// without one no extra work is done.
//
// Unlike Check, CheckReadings exempts nothing, /robots.txt included: a
// proxy lets GET and HEAD of exactly "/robots.txt" through before it asks,
// and judges every other request for it (another method, a query, another
// spelling) like any URL. A path without anything to read otherwise costs
// what Check costs.
func (r *Robots) CheckReadings(token, pathAndQuery string) Verdict {
	j := r.Prepare(token, pathAndQuery)
	return j.Verdict()
}

// CheckReadings is [Robots.CheckReadings] when the outcome is OK; when it
// is not, it exempts nothing either: robots.txt unavailable allows every
// path, anything else refuses every one, "/robots.txt?x" as any other.
func (a *Answer) CheckReadings(token, pathAndQuery string) Verdict {
	j := a.Prepare(token, pathAndQuery)
	return j.Verdict()
}

// checkReading judges a normalised path by the rules, and, when it has a
// query (from index query, -1 without one), its query-less form beside it:
// a disallowed path is refused; an allowed one is refused when a rule
// before the one allowing it (if any) in rule order matches the
// query-less form and disallows it. Only a rule anchored with '$' can
// match the query-less form and not the path, and the rules before the
// deciding one do not match the path, so only those are tried. It returns
// the index of the deciding rule (-1 for none) and whether it decided on
// the query-less form.
func (p product) checkReading(path string, query int) (decider int, queryDropped bool) {
	decider = p.firstMatch(path)
	if p.disallows(decider) || query < 0 {
		return decider, false
	}
	r := p.r
	bare := path[:query]
	// The first anchored rule to match the query-less form, in rule order
	// across the groups, speaks for it; an allow there keeps the path's
	// own verdict. Only rules before the decider can speak, and in a
	// later group only those before the first found: none whose order()
	// is bound or more. order() is never MaxUint64, the bound while there
	// is neither, when no order needs computing.
	first, bound := -1, uint64(math.MaxUint64)
	if decider >= 0 {
		bound = r.rules[decider].order()
	}
	for _, gi := range p.groups() {
		g := &r.groups[gi]
		for _, a := range r.indices[g.anchored.start:g.anchored.end] {
			x := &r.rules[a]
			if bound != math.MaxUint64 && x.order() >= bound {
				break
			}
			if r.matches(x, bare) {
				first, bound = int(a), x.order()+1
				break
			}
		}
	}
	if p.disallows(first) {
		return first, true
	}
	return decider, false
}

// disallows reports whether the i-th rule, if any (i >= 0), disallows.
func (p product) disallows(i int) bool { return i >= 0 && !p.r.rules[i].allow() }

// refusal refuses a path for cause, without a rule.
func (p product) refusal(cause Cause, detail string) Verdict {
	return Verdict{Cause: cause, Detail: detail, Group: p.name(), GroupLines: p.agentLines()}
}

func withoutQuery(pathAndQuery string) string {
	path, _ := splitQuery(pathAndQuery)
	return path
}
