// Package report reads robotsgate's audit log and sums it up for an
// auditor: which crawlers came, how often each tried to fetch what
// robots.txt forbids, on which origins and rules, when robots.txt failed,
// when origins held requests back (Retry-After, backoff), which
// crawlers named themselves other than they are, and what the operator's
// policy refused or allowed against robots.txt (its exceptions used, its
// versions in force), and what sites' usage preferences refused, withheld
// or would have (per crawler and per preference) and what each origin
// states.
//
// A [Reader] streams any number of log files (plain or gzip) in memory
// bounded by the number of distinct crawlers and origins: the top rules
// and paths are kept in Space-Saving sketches and the timeline in at most
// a few thousand buckets, whatever the log's length. [Report] is the
// result; it renders as aligned text, one JSON document or one
// self-contained HTML page.
package report

import "time"

// Report is what a log says. Its JSON names are the report's public
// format (README.md, "Auditing crawlers").
type Report struct {
	Generated time.Time `json:"generated"`
	Filter    Filter    `json:"filter"`
	Sources   []Source  `json:"sources"`
	// From and To are the times of the first and last record counted;
	// zero when none was.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Records were counted; FilteredOut were well formed but outside
	// the filter.
	Records     int64 `json:"records"`
	FilteredOut int64 `json:"filtered_out"`
	// Malformed lines are neither JSON audit records nor blank; the first
	// few are listed.
	Malformed int64      `json:"malformed"`
	Problems  []LineNote `json:"malformed_lines"`
	Totals    Counts     `json:"totals"`
	// Crawlers come busiest first, then by name; Origins likewise.
	Crawlers []Crawler `json:"crawlers"`
	Origins  []Origin  `json:"origins"`
	// TopRules and TopPaths are the refusals (enforced or would-be)
	// counted most, by rule and by URL.
	TopRules []RuleCount `json:"top_rules"`
	TopPaths []PathCount `json:"top_paths"`
	// Exceptions are every exception of the operator's policy that
	// allowed a request robots.txt disallowed, by file and line. Past
	// the first 1,000 they are not listed: ExceptionsOmitted counts the
	// requests those allowed.
	Exceptions        []ExceptionUse `json:"exceptions"`
	ExceptionsOmitted int64          `json:"exceptions_omitted,omitempty"`
	// PolicyVersions are the versions of the policy file in force, by
	// their first record; "" stands for records without one (no policy
	// loaded) and is listed only beside a version. Past the first 100
	// they are not listed: PolicyVersionsOmitted counts their records.
	PolicyVersions        []PolicyVersion `json:"policy_versions"`
	PolicyVersionsOmitted int64           `json:"policy_versions_omitted,omitempty"`
	// UsageRefusals are the sites' usage preferences that refused a
	// crawler's purpose, by origin, form, label, value and purpose, the
	// most requests first: at most as many as the top lists hold.
	// UsageRefusalsOmitted counts the requests of those not listed.
	UsageRefusals        []UsageRefusal `json:"usage_refusals"`
	UsageRefusalsOmitted int64          `json:"usage_refusals_omitted,omitempty"`
	Timeline             Timeline       `json:"timeline"`
}

// PolicySeen reports whether the log shows an operator's policy: a
// version loaded, or a record the policy decided or shaped.
func (rep *Report) PolicySeen() bool {
	c := &rep.Totals
	return len(rep.PolicyVersions) > 0 || len(rep.Exceptions) > 0 || rep.ExceptionsOmitted > 0 ||
		c.RefusedByPolicy+c.WouldBeRefusedByPolicy+c.AllowedByException+c.PacedByPolicy > 0
}

// UsageSeen reports whether the log shows sites' usage preferences: a
// request they refused, withheld or would have, or an origin stating one.
func (rep *Report) UsageSeen() bool {
	c := &rep.Totals
	if c.RefusedByUsage+c.WithheldByUsage+c.WouldBeRefusedByUsage > 0 || len(rep.UsageRefusals) > 0 || rep.UsageRefusalsOmitted > 0 {
		return true
	}
	for i := range rep.Origins {
		if len(rep.Origins[i].UsageStated) > 0 {
			return true
		}
	}
	return false
}

// UsageRefusal is a site's usage preference that refused a crawler's
// purpose, and the requests it refused.
type UsageRefusal struct {
	Origin string `json:"origin"`
	// Form is content-usage, content-signal, tdmrep or x-robots-tag.
	Form string `json:"form"`
	// Label and Value are as the site wrote them: train-ai, n.
	Label   string `json:"label"`
	Value   string `json:"value"`
	Purpose string `json:"purpose"` // the crawler's purpose refused
	// Line is the robots.txt line, Header the response header (or
	// tdmrep.json), that stated it, as the latest record says.
	Line   int    `json:"line,omitempty"`
	Header string `json:"header,omitempty"`
	// Requests it refused: Refused answered 403 before the fetch,
	// Withheld had their response's body withheld, Recorded were
	// forwarded and delivered (audit mode, or responses only recorded).
	Requests int64     `json:"requests"`
	Refused  int64     `json:"refused"`
	Withheld int64     `json:"withheld"`
	Recorded int64     `json:"recorded"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	// Crawlers are those of its requests, most first (at most 10).
	Crawlers []CrawlerSeen `json:"crawlers"`
}

// Preference is the preference as pages show it: "train-ai=n", or the
// label alone when it has no value (X-Robots-Tag's "noai").
func (u UsageRefusal) Preference() string {
	return preference(u.Label, u.Value)
}

// preference is label=value, or label alone when value is empty.
func preference(label, value string) string {
	if value == "" {
		return label
	}
	return label + "=" + value
}

// ExceptionUse is one exception of the policy and the requests it
// allowed.
type ExceptionUse struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Rule   string `json:"rule"`             // the exception's allow pattern
	Reason string `json:"reason,omitempty"` // the latest logged
	// Requests it allowed, from the first to the last.
	Requests int64     `json:"requests"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	// Origins and Crawlers are those of its requests, most first; at
	// most 10 are listed, and a count may exceed the truth by its
	// overcount when more were seen than are kept.
	Origins  []Seen        `json:"origins"`
	Crawlers []CrawlerSeen `json:"crawlers"`
}

// CrawlerSeen is a crawler, named as in Crawlers, and how many records
// of it were counted.
type CrawlerSeen struct {
	Name      string `json:"name"`
	By        string `json:"by"`
	Count     int64  `json:"count"`
	Overcount int64  `json:"overcount,omitempty"`
}

// PolicyVersion is a version of the policy file and the records that
// carried it.
type PolicyVersion struct {
	Version  string    `json:"version"` // "" for records without a policy
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Requests int64     `json:"requests"`
}

// Filter is which records count. Zero fields let every record through.
type Filter struct {
	// Since is inclusive, Until exclusive.
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// Tokens match a record's token or credential, case aside.
	Tokens []string `json:"tokens,omitempty"`
	// Origins match a record's origin ("https://example.com:8443") or
	// its host ("example.com", "example.com:8443").
	Origins []string `json:"origins,omitempty"`
}

// Source is one log read.
type Source struct {
	Name  string `json:"name"` // the file, "-" for standard input
	Lines int64  `json:"lines"`
	Gzip  bool   `json:"gzip,omitempty"`
	// Truncated says the last line had no line break and did not parse:
	// a record being written, not counted and not malformed.
	Truncated bool `json:"truncated,omitempty"`
	// Error says why the source could not be read to its end; what was
	// read before counts.
	Error string `json:"error,omitempty"`
}

// LineNote is a line that could not be read as a record.
type LineNote struct {
	Source string `json:"source"`
	Line   int64  `json:"line"`
	Error  string `json:"error"`
}

// Counts sums up records. Every record is a request; its robots.txt
// verdict makes it allowed, refused or would-be-refused, or an error
// when no verdict was reached.
type Counts struct {
	Requests int64 `json:"requests"`
	// Allowed: robots.txt allowed it (whether or not pacing then held it
	// back).
	Allowed int64 `json:"allowed"`
	// Refused: robots.txt disallowed it and the proxy answered 403
	// (enforce mode).
	Refused int64 `json:"refused"`
	// WouldBeRefused: robots.txt disallowed it and the proxy forwarded it
	// anyway (audit mode), or would have but for pacing's 429.
	WouldBeRefused int64 `json:"would_be_refused"`
	// Compliance is Allowed / (Allowed + Refused + WouldBeRefused): the
	// share of judged requests robots.txt allowed (or an exception of
	// the policy; a refusal by the policy counts against it). Absent
	// when none was judged.
	Compliance *float64 `json:"compliance,omitempty"`
	// Delayed were held until their Crawl-delay slot, or until the
	// origin's hold ended (wait mode), or until their client hung up.
	Delayed int64 `json:"delayed"`
	// TooEarly were answered 429 for coming before their Crawl-delay
	// slot, past the origin's connection bound or while the origin held
	// requests back; WouldBeTooEarly were forwarded anyway (pacing in
	// audit mode).
	TooEarly        int64 `json:"too_early"`
	WouldBeTooEarly int64 `json:"would_be_too_early"`
	// Held met an origin's hold (its Retry-After, or a backoff after its
	// failures), whatever pacing then did: each also counts in TooEarly,
	// Delayed or WouldBeTooEarly.
	Held int64 `json:"held"`
	// RefusedByPolicy and WouldBeRefusedByPolicy are the part of Refused
	// and of WouldBeRefused that the operator's policy refused, not
	// robots.txt: a site outside the crawler's (policy kind destination)
	// or a rule of the policy (kind rule). Refused - RefusedByPolicy were
	// refused by robots.txt.
	RefusedByPolicy        int64 `json:"refused_by_policy"`
	WouldBeRefusedByPolicy int64 `json:"would_be_refused_by_policy"`
	// AllowedByException is the part of Allowed that robots.txt
	// disallowed and an exception of the policy allowed.
	AllowedByException int64 `json:"allowed_by_exception"`
	// PacedByPolicy were held or refused by the crawler's own min_delay or
	// max_concurrency of the policy; each also counts in Delayed,
	// TooEarly or WouldBeTooEarly.
	PacedByPolicy int64 `json:"paced_by_policy"`
	// RefusedByUsage is the part of Refused that a site's usage
	// preference refused (robots.txt's Content-Usage or Content-Signal,
	// or tdmrep.json), not robots.txt's rules nor the policy: Refused -
	// RefusedByPolicy - RefusedByUsage were refused by robots.txt.
	RefusedByUsage int64 `json:"refused_by_usage"`
	// WithheldByUsage is the part of Allowed whose response stated a
	// usage preference refusing the crawler's purpose: its body was not
	// delivered (ROBOTSGATE_USAGE_RESPONSES=withhold).
	WithheldByUsage int64 `json:"withheld_by_usage"`
	// WouldBeRefusedByUsage were forwarded and delivered though a usage
	// preference refused the crawler's purpose (ROBOTSGATE_USAGE=audit,
	// or responses only recorded): part of WouldBeRefused when robots.txt
	// stated it, of Allowed when the response did.
	WouldBeRefusedByUsage int64 `json:"would_be_refused_by_usage"`
	// DeniedDestination were refused by ROBOTSGATE_DENY_DESTINATIONS, not
	// by robots.txt; they count in neither Refused nor Compliance.
	DeniedDestination int64 `json:"denied_destination"`
	// Errors reached no verdict: a malformed request, 407, 421, 503.
	Errors int64 `json:"errors"`
	// Bytes of response bodies relayed from origins.
	Bytes     int64     `json:"bytes"`
	FirstSeen time.Time `json:"first_seen,omitzero"`
	LastSeen  time.Time `json:"last_seen,omitzero"`
}

// Crawler is one identity: a proxy credential when the client gave one,
// else the product token judged.
type Crawler struct {
	Name string `json:"name"` // "" is the token of clients with none: only "*" groups applied
	// By is "credential" or "token"; "others" is the one row, named
	// OtherCrawlers, that counts together every crawler seen after the
	// first 10,000.
	By string `json:"by"`
	Counts
	Origins int `json:"origins"` // distinct origins requested
	// Tokens are the product tokens judged under a credential or in the
	// others row (absent for a token crawler: its name is its token).
	Tokens []Seen `json:"tokens,omitempty"`
	// UserAgents are the User-Agent strings seen, most used first.
	UserAgents []Seen `json:"user_agents"`
	// UAMismatches counts requests whose User-Agent named another token
	// than the one judged (a credential's or ROBOTSGATE_TOKEN);
	// ClaimedTokens are the tokens those User-Agents named.
	UAMismatches  int64  `json:"ua_mismatches"`
	ClaimedTokens []Seen `json:"claimed_tokens,omitempty"`
	// Purposes are those declared for it (by the policy, or
	// ROBOTSGATE_PURPOSES), in the order first seen (at most 16).
	Purposes []string `json:"purposes,omitempty"`
}

// Seen is a value and how many records carried it. A list of them is a
// bounded sketch: when it had to forget values, Count may exceed the
// truth by at most Overcount and rare values may be missing.
type Seen struct {
	Value     string `json:"value"`
	Count     int64  `json:"count"`
	Overcount int64  `json:"overcount,omitempty"`
}

// Origin is one site, as the robots.txt that applies to it.
type Origin struct {
	Origin string `json:"origin"`
	// Others marks the one row, named OtherOrigins, that counts together
	// every origin seen after the first 200,000.
	Others bool `json:"others,omitempty"`
	Counts
	Crawlers int `json:"crawlers"` // distinct crawlers
	// Robots counts requests by how robots.txt was had for them.
	Robots RobotsOutcomes `json:"robots"`
	// Incidents are the spans, in log order, when robots.txt was not
	// fetched fine; the latest few are kept and IncidentsOmitted says how
	// many earlier ones were not.
	Incidents        []Incident `json:"robots_incidents"`
	IncidentsOmitted int64      `json:"robots_incidents_omitted,omitempty"`
	// HoldIncidents are the spans, in log order, when the origin held
	// requests back; the latest few are kept and HoldIncidentsOmitted
	// says how many earlier ones were not.
	HoldIncidents        []HoldIncident `json:"hold_incidents"`
	HoldIncidentsOmitted int64          `json:"hold_incidents_omitted,omitempty"`
	// UsageStated are the usage preferences the origin states (its
	// robots.txt's and its responses'), in the order first seen:
	// "content-signal ai-train=no". At most 16 are kept; UsageStatedMore
	// says it stated more.
	UsageStated     []string `json:"usage_stated,omitempty"`
	UsageStatedMore bool     `json:"usage_stated_more,omitempty"`
}

// RobotsOutcomes counts requests by robots.txt outcome.
type RobotsOutcomes struct {
	OK int64 `json:"ok"`
	// Unavailable: a 4xx answer; no restrictions applied.
	Unavailable int64 `json:"unavailable"`
	// Restricted: 401 or 403 read as complete disallow
	// (ROBOTSGATE_ROBOTS_AUTH_DISALLOW).
	Restricted int64 `json:"restricted"`
	// Unreachable: 5xx, 429 or a network error with no copy to fall back
	// on: complete disallow.
	Unreachable int64 `json:"unreachable"`
	// Stale: unreachable, and the last good copy was obeyed.
	Stale int64 `json:"stale"`
}

// Incident is a span of requests that met one robots.txt outcome other
// than ok, without an ok request between them.
type Incident struct {
	Outcome  string    `json:"outcome"` // unavailable, restricted, unreachable or stale
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Requests int64     `json:"requests"`
	Status   int       `json:"robots_status,omitempty"` // the last HTTP status seen, if any
}

// HoldIncident is a span of requests that met one kind of hold of their
// origin (the same cause, status, connection failure, pace group and
// origin that set it), without a success of the origin between them: an
// origin's failure behind a new step of its backoff does not end the
// span, its recovery does. Requests that met a hold set before that
// success still count in it.
type HoldIncident struct {
	Cause  string `json:"cause"`            // retry-after or backoff
	Status int    `json:"status,omitempty"` // the origin's status that set the holds
	// Error is the connection failure that set them, in a few words.
	Error string `json:"error,omitempty"`
	// PaceGroup is the group held ("address:127.0.0.1"), when
	// ROBOTSGATE_PACE_BY groups otherwise than by host.
	PaceGroup string `json:"pace_group,omitempty"`
	// HoldOrigin is the origin whose answer set the holds, when it is
	// another host of the group.
	HoldOrigin string    `json:"hold_origin,omitempty"`
	From       time.Time `json:"from"`
	To         time.Time `json:"to"`
	// Requests met the hold: Refused were answered 429 without reaching
	// the origin (enforce), Waited were held until it ended and then
	// forwarded (wait mode), Gone were held until their client hung up
	// (wait mode), Forwarded were sent to the origin anyway (audit mode).
	Requests  int64 `json:"requests"`
	Refused   int64 `json:"refused"`
	Waited    int64 `json:"waited"`
	Gone      int64 `json:"gone"`
	Forwarded int64 `json:"forwarded"`
	// HeldUntil is the latest end of a hold seen, BackoffStep the most
	// failures in a row seen.
	HeldUntil   time.Time `json:"held_until,omitzero"`
	BackoffStep int       `json:"backoff_step,omitempty"`
}

// RuleCount is a rule that refused requests: robots.txt's, or the
// operator's policy's.
type RuleCount struct {
	Origin string `json:"origin"`
	// Policy is the policy file whose rule or site list refused; Line
	// is then the policy's line, Group empty, Rule as the policy wrote
	// it.
	Policy string `json:"policy,omitempty"`
	Group  string `json:"group"`
	// Rule is the pattern as written, the site's usage preference that
	// refused before the fetch ("usage: content-usage train-ai=n", Line
	// its robots.txt line), or the reason when no rule decided
	// ("robots.txt 503: complete disallow").
	Rule      string `json:"rule"`
	Line      int    `json:"line,omitempty"`
	Refused   int64  `json:"refused"` // refused and would-be-refused
	Overcount int64  `json:"overcount,omitempty"`
}

// PathCount is a URL that was refused.
type PathCount struct {
	URL       string `json:"url"`
	Refused   int64  `json:"refused"` // refused and would-be-refused
	Overcount int64  `json:"overcount,omitempty"`
}

// Timeline is the log over time, in equal intervals chosen from its span.
type Timeline struct {
	// Interval is the length of a bucket in words ("10s", "5m", "1h",
	// "1d"), IntervalSeconds in seconds.
	Interval        string   `json:"interval"`
	IntervalSeconds int64    `json:"interval_seconds"`
	Buckets         []Bucket `json:"buckets"`
}

// Bucket is one interval of the timeline, from Start.
type Bucket struct {
	Start             time.Time `json:"start"`
	Requests          int64     `json:"requests"`
	Allowed           int64     `json:"allowed"`
	Refused           int64     `json:"refused"`
	WouldBeRefused    int64     `json:"would_be_refused"`
	TooEarly          int64     `json:"too_early"`
	WouldBeTooEarly   int64     `json:"would_be_too_early"`
	DeniedDestination int64     `json:"denied_destination"`
	Errors            int64     `json:"errors"`
}
