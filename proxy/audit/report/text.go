package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// WriteJSON writes the report as one indented JSON document.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("write JSON report: %w", err)
	}
	return nil
}

// timeLayout is how times read in text and HTML, always in UTC.
const timeLayout = "2006-01-02 15:04:05Z"

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeLayout)
}

// WriteText writes the report as aligned columns for a terminal.
func WriteText(w io.Writer, rep *Report) error {
	tw := &textWriter{w: w}
	tw.summary(rep)
	tw.crawlers(rep)
	tw.origins(rep)
	tw.rules(rep)
	tw.policy(rep)
	tw.usage(rep)
	tw.timeline(rep)
	if tw.err != nil {
		return fmt.Errorf("write text report: %w", tw.err)
	}
	return nil
}

type textWriter struct {
	w   io.Writer
	err error
}

func (t *textWriter) printf(format string, args ...any) {
	if t.err == nil {
		_, t.err = fmt.Fprintf(t.w, format, args...)
	}
}

// columns says how a table's first and last columns read: a name first
// is left aligned, free text last (a URL, a reason, a User-Agent) follows
// the others unaligned; every other cell is right aligned.
type columns struct{ nameFirst, textLast bool }

// table writes a titled table; rows are cells, already made safe.
func (t *textWriter) table(title string, shape columns, header []string, rows [][]string) {
	t.printf("\n%s\n", title)
	if len(rows) == 0 {
		t.printf("  (none)\n")
		return
	}
	if t.err != nil {
		return
	}
	width := utf8.RuneCountInString(header[0])
	for _, r := range rows {
		width = max(width, utf8.RuneCountInString(r[0]))
	}
	tw := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', tabwriter.AlignRight)
	line := func(cells []string) {
		fmt.Fprint(tw, "  ")
		for i, c := range cells {
			switch {
			case i == 0 && shape.nameFirst:
				// tabwriter aligns every cell right: padding the first
				// to one width aligns it left.
				fmt.Fprintf(tw, "%s%s\t", c, strings.Repeat(" ", width-utf8.RuneCountInString(c)))
			case i == len(cells)-1 && shape.textLast:
				fmt.Fprintf(tw, " %s", c)
			default:
				fmt.Fprintf(tw, "%s\t", c)
			}
		}
		fmt.Fprint(tw, "\n")
	}
	line(header)
	for _, r := range rows {
		line(r)
	}
	t.err = tw.Flush()
}

func (t *textWriter) summary(rep *Report) {
	t.printf("robotsgate compliance report (times in UTC)\n")
	for _, s := range rep.Sources {
		note := ""
		if s.Gzip {
			note += ", gzip"
		}
		if s.Truncated {
			note += ", last line cut (being written)"
		}
		if s.Error != "" {
			note += ", NOT READ TO ITS END: " + clean(s.Error, 200)
		}
		t.printf("Log:        %s (%s%s)\n", clean(s.Name, 200), Plural(s.Lines, "line", "lines"), note)
	}
	if f := describeFilter(rep.Filter); f != "" {
		t.printf("Filter:     %s\n", f)
	}
	t.printf("Span:       %s to %s\n", formatTime(rep.From), formatTime(rep.To))
	t.printf("Records:    %s counted, %s outside the filter, %s malformed\n",
		number(rep.Records), number(rep.FilteredOut), number(rep.Malformed))
	for _, p := range rep.Problems {
		t.printf("            %s:%d: %s\n", clean(p.Source, 200), p.Line, clean(p.Error, 200))
	}
	if extra := rep.Malformed - int64(len(rep.Problems)); extra > 0 {
		t.printf("            ... and %s more\n", number(extra))
	}
	c := rep.Totals
	t.printf("Requests:   %s: %s allowed, %s refused, %s would be refused (audit mode); compliance %s\n",
		number(c.Requests), number(c.Allowed), number(c.Refused), number(c.WouldBeRefused), percent(c.Compliance))
	t.printf("Pacing:     %s delayed, %s too early (429), %s would be too early (audit mode)\n",
		number(c.Delayed), number(c.TooEarly), number(c.WouldBeTooEarly))
	t.printf("Held:       %s the origin's hold (its Retry-After, or backoff after its failures)\n",
		Plural(c.Held, "request met", "requests met"))
	if rep.PolicySeen() {
		t.printf("Policy:     %s refused by the operator's policy (of the refused), %s would be (audit mode); %s allowed by an exception robots.txt disallowed; %s paced by the crawler's own bound\n",
			number(c.RefusedByPolicy), number(c.WouldBeRefusedByPolicy), number(c.AllowedByException), number(c.PacedByPolicy))
	}
	if rep.UsageSeen() {
		t.printf("Usage:      %s refused by a site's usage preference (of the refused), %s withheld (of the allowed: the body not delivered); %s would be refused or withheld (audit mode, or responses only recorded)\n",
			number(c.RefusedByUsage), number(c.WithheldByUsage), number(c.WouldBeRefusedByUsage))
	}
	t.printf("Other:      %s refused by ROBOTSGATE_DENY_DESTINATIONS, %s without a verdict; %s relayed\n",
		number(c.DeniedDestination), number(c.Errors), bytesWords(c.Bytes))
	t.printf("Seen:       %s, %s\n", Plural(int64(len(rep.Crawlers)), "crawler", "crawlers"), Plural(int64(len(rep.Origins)), "origin", "origins"))
}

func describeFilter(f Filter) string {
	var parts []string
	if !f.Since.IsZero() {
		parts = append(parts, "since "+formatTime(f.Since))
	}
	if !f.Until.IsZero() {
		parts = append(parts, "until "+formatTime(f.Until))
	}
	if len(f.Tokens) > 0 {
		parts = append(parts, "token "+clean(strings.Join(f.Tokens, ", "), 200))
	}
	if len(f.Origins) > 0 {
		parts = append(parts, "origin "+clean(strings.Join(f.Origins, ", "), 200))
	}
	return strings.Join(parts, "; ")
}

// countHeader names the columns every crawler and origin row has,
// countCells fills them; held adds HELD, which an origin's row has,
// policy the refusals of the operator's policy and the exceptions, when
// the log shows a policy, usage the refusals of sites' usage
// preferences, when the log shows them.
func countHeader(held, policy, usage bool) []string {
	h := []string{"REQUESTS", "ALLOWED", "REFUSED", "WOULD-BE"}
	if policy {
		h = append(h, "BY-POLICY", "WOULD-BY-POLICY", "BY-EXCEPTION")
	}
	if usage {
		h = append(h, "BY-USAGE", "WITHHELD", "WOULD-BY-USAGE")
	}
	h = append(h, "COMPLIANCE", "DELAYED", "429", "WOULD-429")
	if held {
		h = append(h, "HELD")
	}
	return append(h, "BYTES")
}

func countCells(c *Counts, held, policy, usage bool) []string {
	cells := []string{number(c.Requests), number(c.Allowed), number(c.Refused), number(c.WouldBeRefused)}
	if policy {
		cells = append(cells, number(c.RefusedByPolicy), number(c.WouldBeRefusedByPolicy), number(c.AllowedByException))
	}
	if usage {
		cells = append(cells, number(c.RefusedByUsage), number(c.WithheldByUsage), number(c.WouldBeRefusedByUsage))
	}
	cells = append(cells, percent(c.Compliance), number(c.Delayed), number(c.TooEarly), number(c.WouldBeTooEarly))
	if held {
		cells = append(cells, number(c.Held))
	}
	return append(cells, bytesWords(c.Bytes))
}

func (t *textWriter) crawlers(rep *Report) {
	policy, usage := rep.PolicySeen(), rep.UsageSeen()
	// Purposes come from the policy, or ROBOTSGATE_PURPOSES for usage
	// preferences.
	purposes := policy || usage
	header := append(append([]string{"CRAWLER", "BY"}, countHeader(false, policy, usage)...), "ORIGINS", "UA-MISMATCH", "FIRST SEEN", "LAST SEEN")
	if purposes {
		header = append(header, "PURPOSES")
	}
	var rows, agents [][]string
	var liars [][]string
	for i := range rep.Crawlers {
		c := &rep.Crawlers[i]
		name := crawlerName(c)
		row := append(append([]string{name, c.By}, countCells(&c.Counts, false, policy, usage)...),
			number(int64(c.Origins)), number(c.UAMismatches), formatTime(c.FirstSeen), formatTime(c.LastSeen))
		if purposes {
			row = append(row, clean(strings.Join(c.Purposes, ", "), 200))
		}
		rows = append(rows, row)
		for _, ua := range c.UserAgents {
			agents = append(agents, []string{name, c.By, number(ua.Count) + approx(ua.Overcount), quoted(ua.Value)})
		}
		if c.UAMismatches > 0 {
			var claimed []string
			for _, s := range c.ClaimedTokens {
				claimed = append(claimed, quoted(s.Value)+" ×"+number(s.Count))
			}
			liars = append(liars, []string{name, c.By, number(c.UAMismatches), strings.Join(claimed, ", ")})
		}
	}
	t.table("CRAWLERS (by credential when there is one, else by product token)", columns{nameFirst: true, textLast: purposes}, header, rows)
	// BY tells a credential from a token of the same name in every table.
	t.table("USER-AGENTS SEEN", columns{true, true}, []string{"CRAWLER", "BY", "REQUESTS", "USER-AGENT"}, agents)
	t.table("USER-AGENT MISMATCHES (the User-Agent names another token than the one judged)", columns{true, true},
		[]string{"CRAWLER", "BY", "REQUESTS", "TOKENS THE USER-AGENT CLAIMED"}, liars)
}

// crawlerName is how a crawler is shown: its credential or token, and
// "(no token)" for clients whose User-Agent gave none.
func crawlerName(c *Crawler) string {
	if c.Name == "" {
		return "(no token)"
	}
	return clean(c.Name, 100)
}

func (t *textWriter) origins(rep *Report) {
	policy, usage := rep.PolicySeen(), rep.UsageSeen()
	header := append(append([]string{"ORIGIN"}, countHeader(true, policy, usage)...), "CRAWLERS", "ROBOTS OK", "4XX", "RESTRICTED", "UNREACHABLE", "STALE")
	if usage {
		header = append(header, "USAGE PREFERENCES STATED")
	}
	var rows, incidents [][]string
	for i := range rep.Origins {
		o := &rep.Origins[i]
		r := o.Robots
		origin := clean(o.Origin, 200)
		row := append(append([]string{origin}, countCells(&o.Counts, true, policy, usage)...), number(int64(o.Crawlers)),
			number(r.OK), number(r.Unavailable), number(r.Restricted), number(r.Unreachable), number(r.Stale))
		if usage {
			row = append(row, statedText(o))
		}
		rows = append(rows, row)
		for _, in := range incidentRows(o) {
			switch {
			case in.Omitted > 0:
				incidents = append(incidents, []string{origin, "", "", "", "", "", "", "", "", "... " + Plural(in.Omitted, in.OmittedOne, in.OmittedMany)})
			case in.Hold != nil:
				h := in.Hold
				incidents = append(incidents, []string{origin, formatTime(h.From), formatTime(h.To), number(h.Requests),
					number(h.Refused), number(h.Waited), number(h.Gone), number(h.Forwarded), formatTime(h.HeldUntil), holdKind(h, 200)})
			default:
				r := in.Robots
				incidents = append(incidents, []string{origin, formatTime(r.From), formatTime(r.To), number(r.Requests),
					"-", "-", "-", "-", "-", robotsKind(r)})
			}
		}
	}
	t.table("ORIGINS", columns{nameFirst: true, textLast: usage}, header, rows)
	t.table("INCIDENTS (robots.txt not fetched fine; the origin holding requests back: its Retry-After, or backoff after its failures)",
		columns{true, true}, []string{"ORIGIN", "FROM", "TO", "REQUESTS", "429", "WAITED", "GONE", "FORWARDED", "HELD UNTIL", "INCIDENT"}, incidents)
}

// statedText writes the usage preferences an origin states: "content-
// signal ai-train=no, content-usage train-ai=n", "-" for none.
func statedText(o *Origin) string {
	if len(o.UsageStated) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(o.UsageStated)+1)
	for _, s := range o.UsageStated {
		parts = append(parts, clean(s, 100))
	}
	if o.UsageStatedMore {
		parts = append(parts, "and more")
	}
	return strings.Join(parts, ", ")
}

// incidentRow is a row of the incidents table: a robots.txt incident, a
// hold incident, or how many earlier ones of a kind were not kept.
type incidentRow struct {
	Robots                  *Incident
	Hold                    *HoldIncident
	Omitted                 int64
	OmittedOne, OmittedMany string
}

// incidentRows are an origin's incidents, robots.txt's and holds
// together by their start, after the note of those not kept.
func incidentRows(o *Origin) []incidentRow {
	var rows []incidentRow
	if o.IncidentsOmitted > 0 {
		rows = append(rows, incidentRow{Omitted: o.IncidentsOmitted, OmittedOne: "earlier robots.txt incident", OmittedMany: "earlier robots.txt incidents"})
	}
	if o.HoldIncidentsOmitted > 0 {
		rows = append(rows, incidentRow{Omitted: o.HoldIncidentsOmitted, OmittedOne: "earlier hold incident", OmittedMany: "earlier hold incidents"})
	}
	robots, holds := o.Incidents, o.HoldIncidents
	for len(robots) > 0 || len(holds) > 0 {
		if len(holds) == 0 || len(robots) > 0 && !holds[0].From.Before(robots[0].From) {
			rows = append(rows, incidentRow{Robots: &robots[0]})
			robots = robots[1:]
		} else {
			rows = append(rows, incidentRow{Hold: &holds[0]})
			holds = holds[1:]
		}
	}
	return rows
}

// robotsKind says what a robots.txt incident was: "robots.txt
// unreachable: 503".
func robotsKind(in *Incident) string {
	kind := "robots.txt " + clean(in.Outcome, 40)
	if in.Status != 0 {
		kind += ": " + strconv.Itoa(in.Status)
	}
	return kind
}

// holdKind says what held an origin's requests back: "held: 503
// Retry-After", "backoff: 500, step up to 4", "backoff: connection
// refused, step up to 2"; the group, when there is one, and the origin
// that set the hold, when another did, follow. Texts from the log are
// cleaned and cut at limit runes.
func holdKind(h *HoldIncident, limit int) string {
	var what string
	switch {
	case h.Status != 0 && h.Error != "":
		what = strconv.Itoa(h.Status) + " (" + clean(h.Error, limit) + ")"
	case h.Status != 0:
		what = strconv.Itoa(h.Status)
	default:
		what = clean(h.Error, limit)
	}
	kind := clean(h.Cause, 40)
	if h.Cause == "retry-after" {
		kind, what = "held", strings.TrimSpace(what+" Retry-After")
	}
	if what != "" {
		kind += ": " + what
	}
	if h.BackoffStep > 0 {
		kind += ", step up to " + strconv.Itoa(h.BackoffStep)
	}
	if h.PaceGroup != "" {
		kind += " (group " + clean(h.PaceGroup, limit) + ")"
	}
	if h.HoldOrigin != "" {
		kind += " (set by " + clean(h.HoldOrigin, limit) + ")"
	}
	return kind
}

func (t *textWriter) rules(rep *Report) {
	var rules, paths [][]string
	for _, r := range rep.TopRules {
		line := "-"
		if r.Line != 0 {
			line = strconv.Itoa(r.Line)
		}
		group, rule := r.Group, clean(r.Rule, 200)
		switch {
		case r.Policy != "":
			group, rule = "(policy)", rule+" ("+clean(r.Policy, 100)+")"
		case group == "":
			group = "-"
		}
		rules = append(rules, []string{number(r.Refused) + approx(r.Overcount), clean(r.Origin, 100), clean(group, 60), line, rule})
	}
	for _, p := range rep.TopPaths {
		paths = append(paths, []string{number(p.Refused) + approx(p.Overcount), clean(p.URL, 300)})
	}
	t.table("TOP REFUSED RULES (refused and would-be-refused; robots.txt's, the operator's policy's, or a site's usage preference's)", columns{textLast: true}, []string{"REFUSED", "ORIGIN", "GROUP", "LINE", "RULE"}, rules)
	t.table("TOP REFUSED URLS", columns{textLast: true}, []string{"REFUSED", "URL"}, paths)
}

// policy lists, when the log shows a policy, the exceptions used and the
// policy versions in force.
func (t *textWriter) policy(rep *Report) {
	if !rep.PolicySeen() {
		return
	}
	var exceptions, versions [][]string
	for i := range rep.Exceptions {
		e := &rep.Exceptions[i]
		exceptions = append(exceptions, []string{clean(e.File, 100) + ":" + strconv.Itoa(e.Line), clean(e.Rule, 100), number(e.Requests),
			formatTime(e.From), formatTime(e.To), crawlersSeen(e.Crawlers), originsSeen(e.Origins), clean(e.Reason, 300)})
	}
	if rep.ExceptionsOmitted > 0 {
		exceptions = append(exceptions, []string{"...", "", number(rep.ExceptionsOmitted), "", "", "", "",
			Plural(rep.ExceptionsOmitted, "request", "requests") + " allowed by exceptions past the first " + number(maxExceptions) + ", not listed"})
	}
	t.table("EXCEPTIONS USED (the operator's policy allowed what robots.txt disallowed)", columns{true, true},
		[]string{"POLICY LINE", "ALLOW", "REQUESTS", "FIRST", "LAST", "CRAWLERS", "ORIGINS", "REASON"}, exceptions)
	for _, v := range rep.PolicyVersions {
		version := clean(v.Version, 64)
		if version == "" {
			version = "(no policy)"
		}
		versions = append(versions, []string{version, formatTime(v.From), formatTime(v.To), number(v.Requests)})
	}
	if rep.PolicyVersionsOmitted > 0 {
		versions = append(versions, []string{"...", "", "", number(rep.PolicyVersionsOmitted) + " records of versions past the first " + number(maxPolicyVersions)})
	}
	t.table("POLICY VERSIONS (the policy file in force; a new version is a reload)", columns{true, true},
		[]string{"VERSION", "FROM", "TO", "REQUESTS"}, versions)
}

// usage lists, when the log shows sites' usage preferences, those that
// refused a crawler's purpose.
func (t *textWriter) usage(rep *Report) {
	if !rep.UsageSeen() {
		return
	}
	var rows [][]string
	for i := range rep.UsageRefusals {
		u := &rep.UsageRefusals[i]
		rows = append(rows, []string{clean(u.Origin, 100), clean(u.Form, 64), usageWhere(u, 64), clean(u.Preference(), 130), clean(u.Purpose, 64),
			number(u.Refused), number(u.Withheld), number(u.Recorded), formatTime(u.From), formatTime(u.To), crawlersSeen(u.Crawlers)})
	}
	if rep.UsageRefusalsOmitted > 0 {
		rows = append(rows, []string{"...", "", "", "", "", "", "", "", "", "",
			Plural(rep.UsageRefusalsOmitted, "request", "requests") + " of usage refusals not listed"})
	}
	t.table("USAGE REFUSALS (a site's usage preference refused the crawler's purpose: 403 before the fetch, the body withheld, or only recorded)", columns{true, true},
		[]string{"ORIGIN", "FORM", "WHERE", "PREFERENCE", "PURPOSE", "REFUSED", "WITHHELD", "RECORDED", "FIRST", "LAST", "CRAWLERS"}, rows)
}

// usageWhere says where a usage preference is stated: "line 7", the
// response header, or both; "-" when the log says neither.
func usageWhere(u *UsageRefusal, limit int) string {
	var parts []string
	if u.Line > 0 {
		parts = append(parts, "line "+strconv.Itoa(u.Line))
	}
	if u.Header != "" {
		parts = append(parts, clean(u.Header, limit))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// crawlersSeen writes the crawlers of an exception: "acme (credential)
// ×3, GPTBot ×2".
func crawlersSeen(crawlers []CrawlerSeen) string {
	var parts []string
	for _, c := range crawlers {
		name := clean(c.Name, 100)
		if c.Name == "" {
			name = "(no token)"
		}
		if c.By != "token" {
			name += " (" + c.By + ")"
		}
		parts = append(parts, name+" ×"+number(c.Count)+approx(c.Overcount))
	}
	return strings.Join(parts, ", ")
}

// originsSeen writes the origins of an exception with their counts.
func originsSeen(origins []Seen) string {
	var parts []string
	for _, o := range origins {
		parts = append(parts, clean(o.Value, 100)+" ×"+number(o.Count)+approx(o.Overcount))
	}
	return strings.Join(parts, ", ")
}

func (t *textWriter) timeline(rep *Report) {
	var peak int64
	for _, b := range rep.Timeline.Buckets {
		peak = max(peak, b.Requests)
	}
	var rows [][]string
	for _, b := range rep.Timeline.Buckets {
		rows = append(rows, []string{formatTime(b.Start), number(b.Requests), number(b.Allowed), number(b.Refused),
			number(b.WouldBeRefused), number(b.TooEarly), number(b.WouldBeTooEarly), number(b.Errors), bar(b, peak)})
	}
	t.table("TIMELINE (per "+rep.Timeline.Interval+"; bar: # allowed, x refused or would be)", columns{textLast: true},
		[]string{"FROM", "REQUESTS", "ALLOWED", "REFUSED", "WOULD-BE", "429", "WOULD-429", "ERRORS", ""}, rows)
}

// bar draws a bucket 40 characters wide at the peak.
func bar(b Bucket, peak int64) string {
	const width = 40
	if peak == 0 {
		return ""
	}
	refused := int((b.Refused + b.WouldBeRefused) * width / peak)
	allowed := int(b.Allowed * width / peak)
	return strings.Repeat("#", allowed) + strings.Repeat("x", refused)
}

// Plural writes n as the report writes counts, with the word that agrees
// with it: "1 malformed line", "0 malformed lines", "1,200 lines".
func Plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return number(n) + " " + many
}

// number writes n with thousands separators.
func number(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func percent(rate *float64) string {
	if rate == nil {
		return "-"
	}
	return strconv.FormatFloat(*rate*100, 'f', 1, 64) + "%"
}

func approx(overcount int64) string {
	if overcount == 0 {
		return ""
	}
	return " (±" + number(overcount) + ")"
}

func bytesWords(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	// Up a unit once the value would round to 1024.0 in this one.
	v, exp := float64(n)/1024, 0
	for v >= 1023.95 && exp < 4 {
		v /= 1024
		exp++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + "KMGTP"[exp:exp+1] + "iB"
}

// quoted writes a value a crawler chose, in quotes, so that its spaces
// and its emptiness show.
func quoted(s string) string { return `"` + clean(s, 200) + `"` }

// clean makes a value from the log safe to print on a terminal: control
// characters (escape sequences, tabs that would break the columns, line
// breaks) and bidirectional overrides become U+FFFD, and it is cut at max
// runes.
func clean(s string, limit int) string {
	safe := true
	for _, r := range s {
		if unsafeRune(r) {
			safe = false
			break
		}
	}
	if safe && utf8.RuneCountInString(s) <= limit {
		return s
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == limit {
			b.WriteString("…")
			break
		}
		if unsafeRune(r) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == utf8.RuneError
}
