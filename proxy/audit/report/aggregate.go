package report

import (
	"cmp"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds of what a report keeps, whatever the log's length.
const (
	// DefaultTop is how many rules and paths the top lists show.
	DefaultTop = 20
	// sketchCapacity is how many refused rules, and refused paths, are
	// counted at once; the top lists are exact while fewer are seen.
	sketchCapacity = 1024
	// crawlerValues is how many User-Agents, tokens and claimed tokens
	// are counted per crawler, and listed.
	crawlerValues, crawlerValuesShown = 32, 10
	// maxIncidents is how many robots.txt incidents, and how many hold
	// incidents, are kept per origin.
	maxIncidents = 20
	// holdCauseBound, holdErrorBound and nameBound bound, in bytes, the
	// texts a hold incident keeps (its cause, connection failure, group
	// and the origin that set it), as the audit log bounds them: a log
	// from elsewhere may hold longer ones.
	holdCauseBound, holdErrorBound, nameBound = 64, 1024, 512
	// holdTextBudget bounds the hold incidents' distinct texts, each
	// kept once for the whole report and counted with textOverhead for
	// its entry in the table; past it a new text is cut to shortHoldText
	// and kept by its incident alone. Equal texts, as the many origins of
	// a group or one connection failure make, cost nothing more.
	holdTextBudget, textOverhead, shortHoldText = 32 << 20, 64, 64
	// maxProblems is how many malformed lines are listed.
	maxProblems = 10
	// maxCrawlers and maxOrigins bound the crawlers and origins counted
	// one by one: a bot rotating its User-Agent, or crawling a wildcard
	// domain, makes a new one per request. Those seen past the bound are
	// counted together, as one "others" row.
	maxCrawlers = 10_000
	maxOrigins  = 200_000
	// maxExceptions bounds the policy's exceptions listed: a policy has
	// a few, but a log from elsewhere may name any number.
	maxExceptions = 1000
	// maxPolicyVersions bounds the policy versions listed: one per
	// reload.
	maxPolicyVersions = 100
	// maxPurposes bounds a crawler's purposes kept.
	maxPurposes = 16
	// maxStated bounds the usage preferences kept per origin, and
	// maxStatedValues the distinct ones kept for the whole report: an
	// origin keeps its preferences as indexes into that one table, so a
	// preference as common as "content-signal ai-train=no" costs 4 bytes
	// an origin, and a log naming thousands of made-up ones costs at most
	// maxStatedValues of wordBound bytes.
	maxStated, maxStatedValues = 16, 4096
	// maxUsageRefusals bounds the usage refusals counted one by one (by
	// origin, form, label, value and purpose); those past it are counted
	// together as omitted.
	maxUsageRefusals = 1000
	// Bounds, in bytes, of the policy's texts a report keeps, as the
	// audit log bounds them.
	policyFileBound, policyRuleBound, policyReasonBound, wordBound = 256, 256, 512, 64
)

// Names of the rows that count together what is past the bounds.
const (
	OtherCrawlers = "(other crawlers)"
	OtherOrigins  = "(other origins)"
)

// record is the part of an audit record a report reads.
type record struct {
	Time              time.Time `json:"time"`
	URL               string    `json:"url"`
	UserAgent         string    `json:"user_agent"`
	Token             string    `json:"token"`
	Verdict           string    `json:"verdict"`
	Reason            string    `json:"reason"`
	Rule              string    `json:"rule"`
	RuleLine          int       `json:"rule_line"`
	Group             string    `json:"group"`
	RobotsOutcome     string    `json:"robots_outcome"`
	RobotsStatus      int       `json:"robots_status"`
	RobotsCache       string    `json:"robots_cache"`
	Credential        string    `json:"credential"`
	UAToken           *string   `json:"ua_token"`
	UAMismatch        bool      `json:"ua_mismatch"`
	Origin            string    `json:"origin"`
	Pace              string    `json:"pace"`
	HoldCause         string    `json:"hold_cause"`
	HoldStatus        int       `json:"hold_status"`
	HoldError         string    `json:"hold_error"`
	HoldOrigin        string    `json:"hold_origin"`
	HoldAt            time.Time `json:"hold_at"`
	HoldUntil         time.Time `json:"hold_until"`
	BackoffStep       int       `json:"backoff_step"`
	PaceGroup         string    `json:"pace_group"`
	DeniedDestination bool      `json:"denied_destination"`
	Policy            struct {
		File   string `json:"file"`
		Line   int    `json:"line"`
		Kind   string `json:"kind"`
		Rule   string `json:"rule"`
		Reason string `json:"reason"`
	} `json:"policy"`
	PolicyVersion string   `json:"policy_version"`
	Purposes      []string `json:"purposes"`
	Usage         struct {
		Form    string `json:"form"`
		Line    int    `json:"line"`
		Header  string `json:"header"`
		Label   string `json:"label"`
		Value   string `json:"value"`
		Purpose string `json:"purpose"`
		Verdict string `json:"verdict"`
	} `json:"usage"`
	UsageStated []string `json:"usage_stated"`
	Mode        string   `json:"mode"`
	Forwarded   bool     `json:"forwarded"`
	Upstream    int      `json:"upstream_status"`
	Bytes       int64    `json:"bytes"`
}

var errNotRecord = errors.New("not an audit record: no time or verdict")

// decode reads one line into r, which it clears first.
func (r *record) decode(line []byte) error {
	*r = record{}
	if err := json.Unmarshal(line, r); err != nil {
		return err
	}
	if r.Time.IsZero() || r.Verdict == "" {
		return errNotRecord
	}
	return nil
}

// kind is what a record counts as.
type kind struct {
	allowed, refused, wouldBeRefused, denied, errored bool
	delayed, tooEarly, wouldBeTooEarly                bool
	held                                              bool // met an origin's hold
	// What the operator's policy did: refused (counted in refused or
	// wouldBeRefused too), allowed by an exception (in allowed too),
	// paced (in delayed, tooEarly or wouldBeTooEarly too).
	byPolicy, byException, pacedByPolicy bool
	// What a site's usage preference did: refused before the fetch (in
	// refused too), withheld the response (in allowed too), or would
	// have done either (in wouldBeRefused or allowed too).
	usageRefused, usageWithheld, usageRecorded bool
}

// Kinds of a record's policy field (audit.PolicyFinding).
const (
	policyDestination    = "destination"
	policyException      = "exception"
	policyRule           = "rule"
	policyMinDelay       = "min-delay"
	policyMaxConcurrency = "max-concurrency"
)

// Verdicts of a record's usage field (audit.UsageFinding).
const (
	usageRefused  = "refused"
	usageWithheld = "withheld"
	usageRecorded = "recorded"
)

func classify(r *record) kind {
	var k kind
	switch r.Verdict {
	case "allow":
		k.allowed = true
		k.byException = r.Policy.Kind == policyException
	case "disallow":
		// The policy's refusal is one, whatever else the record says.
		k.byPolicy = r.Policy.Kind == policyDestination || r.Policy.Kind == policyRule
		switch {
		case r.DeniedDestination && !k.byPolicy:
			k.denied = true
		case r.Policy.Kind == policyDestination && !r.Forwarded:
			// A crawler kept off a site is refused in every mode.
			k.refused = true
		case r.Forwarded || r.Mode == "audit" || r.Usage.Verdict == usageRecorded:
			// In audit mode robots.txt refuses nothing, even when
			// pacing answered 429 instead of forwarding; nor does a
			// usage preference only recorded (ROBOTSGATE_USAGE=audit).
			k.wouldBeRefused = true
		default:
			k.refused = true
		}
	default:
		k.errored = true
	}
	switch r.Pace {
	case "waited", "gone":
		k.delayed = true
	case "too_early", "busy", "full", "held", "backoff":
		if r.Forwarded {
			k.wouldBeTooEarly = true
		} else {
			k.tooEarly = true
		}
	}
	k.held = r.HoldCause != "" || r.Pace == "held" || r.Pace == "backoff"
	k.pacedByPolicy = (r.Policy.Kind == policyMinDelay || r.Policy.Kind == policyMaxConcurrency) &&
		(k.delayed || k.tooEarly || k.wouldBeTooEarly)
	// Each is a part of what the record counts as, so that refused -
	// by policy - by usage were refused by robots.txt.
	switch r.Usage.Verdict {
	case usageRefused:
		k.usageRefused = k.refused && !k.byPolicy
	case usageWithheld:
		k.usageWithheld = k.allowed
	case usageRecorded:
		k.usageRecorded = k.allowed || k.wouldBeRefused && !k.byPolicy
	}
	return k
}

func (c *Counts) add(r *record, k kind) {
	c.Requests++
	c.Bytes += r.Bytes
	count(&c.Allowed, k.allowed)
	count(&c.Refused, k.refused)
	count(&c.WouldBeRefused, k.wouldBeRefused)
	count(&c.DeniedDestination, k.denied)
	count(&c.Errors, k.errored)
	count(&c.Delayed, k.delayed)
	count(&c.TooEarly, k.tooEarly)
	count(&c.WouldBeTooEarly, k.wouldBeTooEarly)
	count(&c.Held, k.held)
	count(&c.RefusedByPolicy, k.byPolicy && k.refused)
	count(&c.WouldBeRefusedByPolicy, k.byPolicy && k.wouldBeRefused)
	count(&c.AllowedByException, k.byException)
	count(&c.PacedByPolicy, k.pacedByPolicy)
	count(&c.RefusedByUsage, k.usageRefused)
	count(&c.WithheldByUsage, k.usageWithheld)
	count(&c.WouldBeRefusedByUsage, k.usageRecorded)
	if c.FirstSeen.IsZero() || r.Time.Before(c.FirstSeen) {
		c.FirstSeen = r.Time
	}
	if r.Time.After(c.LastSeen) {
		c.LastSeen = r.Time
	}
}

// merge adds o's counts to c's.
func (c *Counts) merge(o *Counts) {
	c.Requests += o.Requests
	c.Allowed += o.Allowed
	c.Refused += o.Refused
	c.WouldBeRefused += o.WouldBeRefused
	c.Delayed += o.Delayed
	c.TooEarly += o.TooEarly
	c.WouldBeTooEarly += o.WouldBeTooEarly
	c.Held += o.Held
	c.RefusedByPolicy += o.RefusedByPolicy
	c.WouldBeRefusedByPolicy += o.WouldBeRefusedByPolicy
	c.AllowedByException += o.AllowedByException
	c.PacedByPolicy += o.PacedByPolicy
	c.RefusedByUsage += o.RefusedByUsage
	c.WithheldByUsage += o.WithheldByUsage
	c.WouldBeRefusedByUsage += o.WouldBeRefusedByUsage
	c.DeniedDestination += o.DeniedDestination
	c.Errors += o.Errors
	c.Bytes += o.Bytes
	if c.FirstSeen.IsZero() || !o.FirstSeen.IsZero() && o.FirstSeen.Before(c.FirstSeen) {
		c.FirstSeen = o.FirstSeen
	}
	c.LastSeen = maxTime(c.LastSeen, o.LastSeen)
}

func count(n *int64, yes bool) {
	if yes {
		*n++
	}
}

// finish works out the compliance rate.
func (c *Counts) finish() {
	if judged := c.Allowed + c.Refused + c.WouldBeRefused; judged > 0 {
		rate := float64(c.Allowed) / float64(judged)
		c.Compliance = &rate
	}
}

// crawlerKey names a crawler: a credential's name as given, or a token
// in lower case (tokens match case-insensitively).
type crawlerKey struct {
	byCredential bool
	name         string
	others       bool // the row of crawlers past maxCrawlers
}

type crawlerStats struct {
	id            int
	key           crawlerKey
	name          string // as first seen
	counts        Counts
	origins       int
	userAgents    *sketch[string]
	tokens        *sketch[string] // under a credential
	mismatches    int64
	claimedTokens *sketch[string]
	purposes      []string
}

type originStats struct {
	id        int
	origin    string
	others    bool // the row of origins past maxOrigins
	counts    Counts
	crawlers  int
	robots    RobotsOutcomes
	incidents []Incident // the last is the one open, if its outcome is the latest seen
	omitted   int64
	latest    string // the latest robots.txt outcome seen

	// stated are the usage preferences it states, as indexes into
	// aggregate.stated, in the order first seen; statedMore says it
	// stated more than are kept.
	stated     []int32
	statedMore bool

	holds        []HoldIncident
	holdsOmitted int64
	holdOpen     bool // the last of holds goes on: no success of the origin ended it
	// holdAt is the latest time an origin's answer set a hold that the
	// last of holds met: a record meeting a hold set no later belongs to
	// it, even when logged after the success that ended it.
	holdAt time.Time
}

type ruleKey struct {
	origin, policy, group, rule string
	line                        int
}

// exceptionKey is an exception of the policy: its place and pattern.
type exceptionKey struct {
	file, rule string
	line       int
}

type exceptionStats struct {
	use      ExceptionUse // but its origins and crawlers
	origins  *sketch[string]
	crawlers *sketch[int] // crawlerStats.id
}

// usageKey is a usage preference that refused a purpose on an origin.
type usageKey struct {
	origin, form, label, value, purpose string
}

type usageStats struct {
	refusal  UsageRefusal // but its crawlers
	crawlers *sketch[int] // crawlerStats.id
}

// statedTable keeps each usage preference stated once for the whole
// report, up to maxStatedValues.
type statedTable struct {
	index  map[string]int32
	values []string
}

// add adds s, already cut to wordBound, and returns its index; false
// when there is no room.
func (t *statedTable) add(s string) (int32, bool) {
	if len(t.values) == maxStatedValues {
		return 0, false
	}
	if t.index == nil {
		t.index = make(map[string]int32)
	}
	id := int32(len(t.values))
	t.index[s], t.values = id, append(t.values, s)
	return id, true
}

type pairKey struct{ crawler, origin int }

// aggregate is the running sums of a report.
type aggregate struct {
	filter   matcher
	totals   Counts
	crawlers map[crawlerKey]*crawlerStats
	origins  map[string]*originStats
	pairs    map[pairKey]struct{}
	rules    *sketch[ruleKey]
	paths    *sketch[string]
	timeline *timeline

	records, filteredOut, malformed int64
	problems                        []LineNote

	exceptions        map[exceptionKey]*exceptionStats
	exceptionsOmitted int64
	versions          map[string]*PolicyVersion
	versionsOmitted   int64

	usage        map[usageKey]*usageStats
	usageOmitted int64 // requests of usage refusals past maxUsageRefusals
	stated       statedTable

	texts texts // the hold incidents' texts
}

// texts keeps one copy of each text of the hold incidents: 20 incidents
// of each of 200,000 origins would otherwise each hold their own.
type texts struct {
	kept  map[string]string
	bytes int // of the kept texts, with textOverhead each
}

// keep returns s cut to bound, as the report keeps it: the copy kept
// already when there is one.
func (t *texts) keep(s string, bound int) string {
	if s == "" {
		return ""
	}
	s = cutText(s, bound)
	if kept, ok := t.kept[s]; ok {
		return kept
	}
	if t.bytes+len(s)+textOverhead > holdTextBudget {
		return cutText(s, shortHoldText)
	}
	if t.kept == nil {
		t.kept = make(map[string]string)
	}
	t.kept[s] = s
	t.bytes += len(s) + textOverhead
	return s
}

func newAggregate(f Filter) *aggregate {
	return &aggregate{
		filter:     newMatcher(f),
		crawlers:   make(map[crawlerKey]*crawlerStats),
		origins:    make(map[string]*originStats),
		pairs:      make(map[pairKey]struct{}),
		rules:      newSketch[ruleKey](sketchCapacity),
		exceptions: make(map[exceptionKey]*exceptionStats),
		versions:   make(map[string]*PolicyVersion),
		usage:      make(map[usageKey]*usageStats),
		paths:      newSketch[string](sketchCapacity),
		timeline:   newTimeline(),
	}
}

func (a *aggregate) problem(source string, line int64, err error) {
	a.malformed++
	if len(a.problems) < maxProblems {
		a.problems = append(a.problems, LineNote{Source: source, Line: line, Error: err.Error()})
	}
}

// add counts one record.
func (a *aggregate) add(r *record) {
	if !a.filter.match(r) {
		a.filteredOut++
		return
	}
	a.records++
	k := classify(r)
	a.totals.add(r, k)
	a.timeline.bucket(r.Time).add(r, k)

	c := a.crawler(r)
	c.counts.add(r, k)
	c.userAgents.add(r.UserAgent)
	if c.tokens != nil {
		c.tokens.add(r.Token)
	}
	if r.UAMismatch {
		c.mismatches++
		if r.UAToken != nil {
			c.claimedTokens.add(*r.UAToken)
		}
	}
	c.notePurposes(r.Purposes)
	a.noteVersion(r)
	if k.byException {
		a.noteException(r, c)
	}
	if k.usageRefused || k.usageWithheld || k.usageRecorded {
		a.noteUsage(r, k, c)
	}

	if r.Origin == "" { // a request refused before its origin was known
		return
	}
	o := a.origin(r.Origin)
	o.counts.add(r, k)
	o.noteRobots(r)
	o.noteStated(r.UsageStated, &a.stated)
	o.noteHold(r, k, &a.texts)
	if _, seen := a.pairs[pairKey{c.id, o.id}]; !seen {
		a.pairs[pairKey{c.id, o.id}] = struct{}{}
		c.origins++
		o.crawlers++
	}
	if k.refused || k.wouldBeRefused {
		a.rules.add(refusedBy(r, k))
		a.paths.add(r.URL)
	}
}

// refusedBy is the rule that refused r: the policy's, the site's usage
// preference, or robots.txt's (its reason when no rule decided).
func refusedBy(r *record, k kind) ruleKey {
	if k.byPolicy {
		rule := cmp.Or(r.Policy.Rule, r.Policy.Kind)
		return ruleKey{origin: r.Origin, policy: cutText(cmp.Or(r.Policy.File, "?"), policyFileBound),
			rule: cutText(rule, policyRuleBound), line: r.Policy.Line}
	}
	if refusedByUsage(r) {
		// Keyed by the preference and its line, not by the reason, which
		// also names the purpose: one line refusing two purposes is one
		// rule.
		u := &r.Usage
		rule := "usage: " + cutText(u.Form, wordBound) + " " + preference(cutText(u.Label, wordBound), cutText(u.Value, wordBound))
		if u.Line == 0 {
			// tdmrep.json: no robots.txt line nor group states it.
			return ruleKey{origin: r.Origin, rule: rule + " (" + cutText(cmp.Or(u.Header, "?"), wordBound) + ")"}
		}
		return ruleKey{origin: r.Origin, group: r.Group, rule: rule, line: u.Line}
	}
	return ruleKey{origin: r.Origin, group: r.Group, rule: cmp.Or(r.Rule, r.Reason), line: r.RuleLine}
}

// refusedByUsage reports whether a site's usage preference refused r
// before the fetch (or would have): robots.txt's rule allowed it, so the
// record names no rule and its reason is the preference's.
func refusedByUsage(r *record) bool {
	return r.Rule == "" && (r.Usage.Verdict == usageRefused || r.Usage.Verdict == usageRecorded) &&
		strings.HasPrefix(r.Reason, "usage: ")
}

// notePurposes keeps the purposes not seen before, up to maxPurposes.
func (c *crawlerStats) notePurposes(purposes []string) {
	for _, p := range purposes {
		if len(c.purposes) == maxPurposes {
			return
		}
		if p = cutText(p, wordBound); !slices.Contains(c.purposes, p) {
			c.purposes = append(c.purposes, p)
		}
	}
}

// noteUsage counts r under the usage preference that refused one of its
// crawler's purposes.
func (a *aggregate) noteUsage(r *record, k kind, c *crawlerStats) {
	u := &r.Usage
	key := usageKey{origin: cutText(r.Origin, nameBound), form: cutText(u.Form, wordBound), label: cutText(u.Label, wordBound),
		value: cutText(u.Value, wordBound), purpose: cutText(u.Purpose, wordBound)}
	s, ok := a.usage[key]
	if !ok {
		if len(a.usage) == maxUsageRefusals {
			a.usageOmitted++
			return
		}
		s = &usageStats{
			refusal: UsageRefusal{Origin: key.origin, Form: key.form, Label: key.label, Value: key.value, Purpose: key.purpose,
				From: r.Time, To: r.Time},
			crawlers: newSketch[int](crawlerValues),
		}
		a.usage[key] = s
	}
	ref := &s.refusal
	ref.Requests++
	count(&ref.Refused, k.usageRefused)
	count(&ref.Withheld, k.usageWithheld)
	count(&ref.Recorded, k.usageRecorded)
	ref.From, ref.To = minTime(ref.From, r.Time), maxTime(ref.To, r.Time)
	// Where it is stated, as the latest record says.
	if u.Line > 0 && r.Time.Equal(ref.To) {
		ref.Line = u.Line
	}
	if u.Header != "" && r.Time.Equal(ref.To) {
		ref.Header = cutText(u.Header, wordBound)
	}
	s.crawlers.add(c.id)
}

// noteStated keeps the usage preferences not seen before on the origin,
// up to maxStated.
func (o *originStats) noteStated(stated []string, table *statedTable) {
	for _, s := range stated {
		s = cutText(s, wordBound)
		id, known := table.index[s]
		if known && slices.Contains(o.stated, id) {
			continue
		}
		if len(o.stated) == maxStated {
			o.statedMore = true
			return
		}
		if !known {
			var ok bool
			if id, ok = table.add(s); !ok {
				o.statedMore = true
				continue
			}
		}
		o.stated = append(o.stated, id)
	}
}

// noteVersion counts r under its policy version.
func (a *aggregate) noteVersion(r *record) {
	version := cutText(r.PolicyVersion, wordBound)
	v, ok := a.versions[version]
	if !ok {
		if len(a.versions) == maxPolicyVersions {
			a.versionsOmitted++
			return
		}
		v = &PolicyVersion{Version: version, From: r.Time, To: r.Time}
		a.versions[version] = v
	}
	v.Requests++
	v.From, v.To = minTime(v.From, r.Time), maxTime(v.To, r.Time)
}

// noteException counts r under the exception that allowed it.
func (a *aggregate) noteException(r *record, c *crawlerStats) {
	key := exceptionKey{file: cutText(r.Policy.File, policyFileBound), rule: cutText(r.Policy.Rule, policyRuleBound), line: r.Policy.Line}
	e, ok := a.exceptions[key]
	if !ok {
		if len(a.exceptions) == maxExceptions {
			a.exceptionsOmitted++
			return
		}
		e = &exceptionStats{
			use:     ExceptionUse{File: key.file, Line: key.line, Rule: key.rule, From: r.Time, To: r.Time},
			origins: newSketch[string](crawlerValues), crawlers: newSketch[int](crawlerValues),
		}
		a.exceptions[key] = e
	}
	e.use.Requests++
	e.use.From, e.use.To = minTime(e.use.From, r.Time), maxTime(e.use.To, r.Time)
	if r.Policy.Reason != "" && r.Time.Equal(e.use.To) {
		e.use.Reason = cutText(r.Policy.Reason, policyReasonBound)
	}
	e.origins.add(cutText(r.Origin, nameBound))
	e.crawlers.add(c.id)
}

func (a *aggregate) crawler(r *record) *crawlerStats {
	key, name := crawlerKey{name: strings.ToLower(r.Token)}, r.Token
	if r.Credential != "" {
		key, name = crawlerKey{byCredential: true, name: r.Credential}, r.Credential
	}
	if c, ok := a.crawlers[key]; ok {
		return c
	}
	if len(a.crawlers) >= maxCrawlers {
		key, name = crawlerKey{others: true}, OtherCrawlers
		if c, ok := a.crawlers[key]; ok {
			return c
		}
	}
	c := &crawlerStats{
		id: len(a.crawlers), key: key, name: name,
		userAgents:    newSketch[string](crawlerValues),
		claimedTokens: newSketch[string](crawlerValues),
	}
	if key.byCredential || key.others {
		c.tokens = newSketch[string](crawlerValues)
	}
	a.crawlers[key] = c
	return c
}

// by says how a crawler is named: "credential", "token" or "others".
func (c *crawlerStats) by() string {
	switch {
	case c.key.byCredential:
		return "credential"
	case c.key.others:
		return "others"
	}
	return "token"
}

func (a *aggregate) origin(name string) *originStats {
	if o, ok := a.origins[name]; ok {
		return o
	}
	others := len(a.origins) >= maxOrigins
	if others {
		// An origin's name cannot hold a space: this key is no origin's.
		name = OtherOrigins
		if o, ok := a.origins[name]; ok {
			return o
		}
	}
	o := &originStats{id: len(a.origins), origin: name, others: others}
	a.origins[name] = o
	return o
}

// noteRobots counts how robots.txt was had, and follows the spans when
// it was not had fine.
func (o *originStats) noteRobots(r *record) {
	outcome, status := r.RobotsOutcome, r.RobotsStatus
	switch {
	case outcome == "":
		return // /robots.txt itself, or no verdict reached
	case r.RobotsCache == "stale":
		// The record's status is the obeyed copy's (200), not the
		// failure's, which it does not say.
		outcome, status = "stale", 0
		o.robots.Stale++
	case outcome == "ok":
		o.robots.OK++
	case outcome == "unavailable":
		o.robots.Unavailable++
	case outcome == "restricted":
		o.robots.Restricted++
	case outcome == "unreachable":
		o.robots.Unreachable++
	default:
		return // an outcome this version does not know
	}
	latest := o.latest
	o.latest = outcome
	if outcome == "ok" {
		return
	}
	if latest == outcome && len(o.incidents) > 0 {
		in := &o.incidents[len(o.incidents)-1]
		in.Requests++
		in.From, in.To = minTime(in.From, r.Time), maxTime(in.To, r.Time)
		if status != 0 {
			in.Status = status
		}
		return
	}
	if len(o.incidents) == maxIncidents {
		o.incidents = slices.Delete(o.incidents, 0, 1)
		o.omitted++
	}
	o.incidents = append(o.incidents, Incident{Outcome: outcome, From: r.Time, To: r.Time, Requests: 1, Status: status})
}

// noteHold follows the spans when the origin held requests back. A
// success of the origin ends a span, whether its request met the hold
// (it waited the hold out, or was forwarded anyway) or not; a counted
// failure does not, nor does a request that never reached the origin.
// Records that met a hold set before that success still count in the
// span they belong to: those released together at a hold's end, and
// logged one after the other.
func (o *originStats) noteHold(r *record, k kind, shared *texts) {
	success := r.Forwarded && r.Upstream != 0 && !countedFailure(r.Upstream)
	if !k.held {
		if success {
			o.holdOpen = false
		}
		return
	}
	cause := r.HoldCause
	if cause == "" { // a record with the pace alone
		cause = "backoff"
		if r.Pace == "held" {
			cause = "retry-after"
		}
	}
	key := HoldIncident{
		Cause: shared.keep(cause, holdCauseBound), Status: r.HoldStatus, Error: shared.keep(r.HoldError, holdErrorBound),
		PaceGroup: shared.keep(r.PaceGroup, nameBound), HoldOrigin: shared.keep(r.HoldOrigin, nameBound),
	}
	var in *HoldIncident
	if n := len(o.holds); n > 0 && (o.holdOpen || !r.HoldAt.IsZero() && !r.HoldAt.After(o.holdAt)) && sameHold(&o.holds[n-1], &key) {
		in = &o.holds[n-1]
		in.From, in.To = minTime(in.From, r.Time), maxTime(in.To, r.Time)
	} else {
		if len(o.holds) == maxIncidents {
			o.holds = slices.Delete(o.holds, 0, 1)
			o.holdsOmitted++
		}
		key.From, key.To = r.Time, r.Time
		o.holds = appendIncident(o.holds, key)
		o.holdOpen, o.holdAt = true, time.Time{}
		in = &o.holds[len(o.holds)-1]
	}
	o.holdAt = maxTime(o.holdAt, r.HoldAt)
	in.Requests++
	switch {
	case r.Pace == "gone":
		in.Gone++
	case k.delayed:
		in.Waited++
	case r.Forwarded:
		in.Forwarded++
	default:
		in.Refused++
	}
	in.HeldUntil = maxTime(in.HeldUntil, r.HoldUntil)
	in.BackoffStep = max(in.BackoffStep, r.BackoffStep)
	if success {
		o.holdOpen = false
	}
}

// sameHold reports whether a and b are one kind of hold: the same
// cause, status, connection failure, group and origin that set it.
func sameHold(a, b *HoldIncident) bool {
	return a.Cause == b.Cause && a.Status == b.Status && a.Error == b.Error &&
		a.PaceGroup == b.PaceGroup && a.HoldOrigin == b.HoldOrigin
}

// appendIncident appends in to holds, growing it to maxIncidents at
// most: an origin's incidents take no room past what it keeps.
func appendIncident(holds []HoldIncident, in HoldIncident) []HoldIncident {
	if len(holds) == cap(holds) {
		grown := make([]HoldIncident, len(holds), min(max(2*cap(holds), 1), maxIncidents))
		copy(grown, holds)
		holds = grown
	}
	return append(holds, in)
}

// countedFailure reports whether an origin's status counts as a failure
// for backoff: 429 and every 5xx but 501.
func countedFailure(status int) bool {
	return status == 429 || status >= 500 && status <= 599 && status != 501
}

// cutText cuts s to at most limit bytes, between characters, marking
// the cut with "…".
func cutText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// report turns the sums into a Report.
func (a *aggregate) report(top int) *Report {
	rep := &Report{
		Records: a.records, FilteredOut: a.filteredOut, Malformed: a.malformed, Problems: a.problems,
		Totals: a.totals, From: a.totals.FirstSeen, To: a.totals.LastSeen,
		Crawlers: []Crawler{}, Origins: []Origin{}, TopRules: []RuleCount{}, TopPaths: []PathCount{},
	}
	if rep.Problems == nil {
		rep.Problems = []LineNote{}
	}
	rep.Totals.finish()
	for _, c := range a.crawlers {
		out := Crawler{
			Name: c.name, By: "token", Counts: c.counts, Origins: c.origins,
			UserAgents: seen(c.userAgents), UAMismatches: c.mismatches, ClaimedTokens: seen(c.claimedTokens),
		}
		out.By, out.Purposes = c.by(), slices.Clone(c.purposes)
		if c.tokens != nil {
			out.Tokens = seen(c.tokens)
		}
		out.Counts.finish()
		rep.Crawlers = append(rep.Crawlers, out)
	}
	slices.SortFunc(rep.Crawlers, func(x, y Crawler) int {
		if c := cmp.Compare(y.Requests, x.Requests); c != 0 {
			return c
		}
		if c := strings.Compare(x.Name, y.Name); c != 0 {
			return c
		}
		return strings.Compare(x.By, y.By)
	})
	for _, o := range a.origins {
		out := Origin{
			Origin: o.origin, Others: o.others, Counts: o.counts, Crawlers: o.crawlers, Robots: o.robots,
			// A copy: the last incident grows in place as reading goes on.
			Incidents: slices.Clone(o.incidents), IncidentsOmitted: o.omitted,
			HoldIncidents: slices.Clone(o.holds), HoldIncidentsOmitted: o.holdsOmitted,
		}
		if out.Incidents == nil {
			out.Incidents = []Incident{}
		}
		if out.HoldIncidents == nil {
			out.HoldIncidents = []HoldIncident{}
		}
		for _, id := range o.stated {
			out.UsageStated = append(out.UsageStated, a.stated.values[id])
		}
		out.UsageStatedMore = o.statedMore
		out.Counts.finish()
		rep.Origins = append(rep.Origins, out)
	}
	slices.SortFunc(rep.Origins, func(x, y Origin) int {
		if c := cmp.Compare(y.Requests, x.Requests); c != 0 {
			return c
		}
		return strings.Compare(x.Origin, y.Origin)
	})
	for _, e := range a.rules.top(top, compareRules) {
		rep.TopRules = append(rep.TopRules, RuleCount{
			Origin: e.key.origin, Policy: e.key.policy, Group: e.key.group, Rule: e.key.rule, Line: e.key.line,
			Refused: e.count, Overcount: e.overcount,
		})
	}
	a.policyReport(rep)
	a.usageReport(rep, top)
	for _, e := range a.paths.top(top, strings.Compare) {
		rep.TopPaths = append(rep.TopPaths, PathCount{URL: e.key, Refused: e.count, Overcount: e.overcount})
	}
	rep.Timeline = a.timeline.result(rep.From, rep.To)
	return rep
}

func compareRules(x, y ruleKey) int {
	return cmp.Or(strings.Compare(x.origin, y.origin), strings.Compare(x.policy, y.policy), strings.Compare(x.group, y.group),
		cmp.Compare(x.line, y.line), strings.Compare(x.rule, y.rule))
}

// policyReport lists the exceptions used, by file and line, and the
// policy versions, by their first record.
func (a *aggregate) policyReport(rep *Report) {
	rep.Exceptions, rep.ExceptionsOmitted = []ExceptionUse{}, a.exceptionsOmitted
	byID := make(map[int]*crawlerStats, len(a.crawlers))
	if len(a.exceptions) > 0 {
		for _, c := range a.crawlers {
			byID[c.id] = c
		}
	}
	for _, e := range a.exceptions {
		use := e.use
		use.Origins, use.Crawlers = seen(e.origins), []CrawlerSeen{}
		for _, s := range e.crawlers.top(crawlerValuesShown, cmp.Compare) {
			c := byID[s.key]
			use.Crawlers = append(use.Crawlers, CrawlerSeen{Name: c.name, By: c.by(), Count: s.count, Overcount: s.overcount})
		}
		rep.Exceptions = append(rep.Exceptions, use)
	}
	slices.SortFunc(rep.Exceptions, func(x, y ExceptionUse) int {
		return cmp.Or(strings.Compare(x.File, y.File), cmp.Compare(x.Line, y.Line), strings.Compare(x.Rule, y.Rule))
	})

	rep.PolicyVersions, rep.PolicyVersionsOmitted = []PolicyVersion{}, a.versionsOmitted
	none, only := a.versions[""], len(a.versions) == 1
	if none != nil && only && a.versionsOmitted == 0 {
		return // no policy in the log
	}
	for _, v := range a.versions {
		rep.PolicyVersions = append(rep.PolicyVersions, *v)
	}
	slices.SortFunc(rep.PolicyVersions, func(x, y PolicyVersion) int {
		return cmp.Or(x.From.Compare(y.From), strings.Compare(x.Version, y.Version))
	})
}

// usageReport lists the usage refusals counted most, at most top of
// them; the requests of the rest are counted as omitted.
func (a *aggregate) usageReport(rep *Report, top int) {
	rep.UsageRefusals, rep.UsageRefusalsOmitted = []UsageRefusal{}, a.usageOmitted
	byID := make(map[int]*crawlerStats, len(a.crawlers))
	if len(a.usage) > 0 {
		for _, c := range a.crawlers {
			byID[c.id] = c
		}
	}
	all := make([]*usageStats, 0, len(a.usage))
	for _, s := range a.usage {
		all = append(all, s)
	}
	slices.SortFunc(all, func(x, y *usageStats) int {
		a, b := &x.refusal, &y.refusal
		return cmp.Or(cmp.Compare(b.Requests, a.Requests), strings.Compare(a.Origin, b.Origin), strings.Compare(a.Form, b.Form),
			strings.Compare(a.Label, b.Label), strings.Compare(a.Value, b.Value), strings.Compare(a.Purpose, b.Purpose))
	})
	for i, s := range all {
		if i >= top {
			rep.UsageRefusalsOmitted += s.refusal.Requests
			continue
		}
		ref := s.refusal
		ref.Crawlers = []CrawlerSeen{}
		for _, e := range s.crawlers.top(crawlerValuesShown, cmp.Compare) {
			c := byID[e.key]
			ref.Crawlers = append(ref.Crawlers, CrawlerSeen{Name: c.name, By: c.by(), Count: e.count, Overcount: e.overcount})
		}
		rep.UsageRefusals = append(rep.UsageRefusals, ref)
	}
}

// seen lists a crawler's most common values.
func seen(s *sketch[string]) []Seen {
	out := []Seen{}
	for _, e := range s.top(crawlerValuesShown, strings.Compare) {
		out = append(out, Seen{Value: e.key, Count: e.count, Overcount: e.overcount})
	}
	return out
}
