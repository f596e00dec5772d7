package robots

// Decision is a verdict in the words robotsgate reports it with,
// wherever it does: the check command's -json lines, the JSON body of a
// 403 and the audit record are all a Decision with fields of their own
// beside it, so a script reads the same names and values in each.
type Decision struct {
	URL       string `json:"url"`
	UserAgent string `json:"user_agent"`
	// Token is the product token judged; "" means only "*" groups apply.
	Token string `json:"token"`
	// Verdict is "allow" or "disallow"; the audit record also says
	// "error" when no verdict could be reached.
	Verdict string `json:"verdict"`
	// Reason says why in words: "disallow: /private/ (line 7)",
	// "robots.txt 503: complete disallow".
	Reason string `json:"reason"`
	// Rule is the pattern of the deciding rule as written, RuleLine its
	// line.
	Rule     string `json:"rule,omitempty"`
	RuleLine int    `json:"rule_line,omitempty"`
	// Group is the user-agent group that applied, "*" for the global one;
	// GroupLines are the lines of the user-agent records that chose it.
	Group      string `json:"group,omitempty"`
	GroupLines []int  `json:"group_lines,omitempty"`
	// Reading is the reading of the path that was disallowed, when it is
	// not the path as sent; ReadingSteps say how an origin gets there.
	Reading      string `json:"reading,omitempty"`
	ReadingSteps string `json:"reading_steps,omitempty"`
	// RobotsTxt is where the rules came from: the robots.txt URL, or the
	// file the check command was given. The audit record names it for
	// refusals only; for the rest its origin field says it, and building
	// the URL would cost every allowed request.
	RobotsTxt string `json:"robots_txt,omitempty"`
	// RobotsOutcome is how fetching robots.txt ended (see [Outcome]) and
	// RobotsStatus its HTTP status, when there was one.
	RobotsOutcome string `json:"robots_outcome,omitempty"`
	RobotsStatus  int    `json:"robots_status,omitempty"`
}

// Words for [Decision.Verdict].
const (
	VerdictAllow    = "allow"
	VerdictDisallow = "disallow"
	// VerdictError: no verdict could be reached (a malformed request, the
	// proxy shutting down); only the audit record says it.
	VerdictError = "error"
)

// SetVerdict fills in the fields that v decides: Verdict, Reason, Rule,
// RuleLine, Group, GroupLines, Reading and ReadingSteps.
func (d *Decision) SetVerdict(v Verdict) {
	d.Verdict = VerdictAllow
	if !v.Allowed {
		d.Verdict = VerdictDisallow
	}
	d.Reason = v.Reason()
	d.Group, d.GroupLines = v.Group, v.GroupLines
	d.Rule, d.RuleLine = "", 0
	if !v.Rule.IsZero() {
		d.Rule, d.RuleLine = v.Rule.Pattern, int(v.Rule.Line)
	}
	d.Reading, d.ReadingSteps = "", ""
	if v.Reading != nil {
		d.Reading, d.ReadingSteps = v.Reading.Path, v.Reading.StepsString()
	}
}
