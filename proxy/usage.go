package proxy

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"robotsgate/proxy/audit"
	"robotsgate/robots"
	"robotsgate/robots/fetch"
	"robotsgate/robots/usage"
)

// UsageMode says what a site's usage preferences do to a crawler whose
// purpose they refuse.
type UsageMode string

const (
	// UsageEnforce refuses the request with 403 before the fetch (while
	// ROBOTSGATE_MODE is enforce too).
	UsageEnforce UsageMode = "enforce"
	// UsageAudit forwards it and records the refusal it would have been.
	UsageAudit UsageMode = "audit"
	// UsageOff reads no preference at all.
	UsageOff UsageMode = "off"
)

// UnmarshalText accepts enforce, audit or off in any case.
func (m *UsageMode) UnmarshalText(text []byte) error {
	switch v := UsageMode(strings.ToLower(string(text))); v {
	case UsageEnforce, UsageAudit, UsageOff:
		*m = v
		return nil
	}
	return fmt.Errorf("%q is not valid; use %q, %q or %q", text, UsageEnforce, UsageAudit, UsageOff)
}

// UsageResponses says what becomes of a response whose headers refuse the
// crawler's purpose.
type UsageResponses string

const (
	// ResponsesRecord delivers it and records the refusal.
	ResponsesRecord UsageResponses = "record"
	// ResponsesWithhold answers 403 instead: the body never reaches the
	// crawler.
	ResponsesWithhold UsageResponses = "withhold"
)

// UnmarshalText accepts record or withhold in any case.
func (m *UsageResponses) UnmarshalText(text []byte) error {
	switch v := UsageResponses(strings.ToLower(string(text))); v {
	case ResponsesRecord, ResponsesWithhold:
		*m = v
		return nil
	}
	return fmt.Errorf("%q is not valid; use %q or %q", text, ResponsesRecord, ResponsesWithhold)
}

// UsageOptions say how sites' usage preferences are judged.
type UsageOptions struct {
	// Mode: "" means UsageEnforce.
	Mode UsageMode
	// Responses: "" means ResponsesRecord.
	Responses UsageResponses
	// Purposes are those of the crawler judged as Token (the operator's
	// pinned token), added to any its policy entries declare.
	Purposes []string
	Token    string
}

// usageState is what a site's usage preferences say of one request.
type usageState struct {
	purposes []string
	// stated are the site's statements for the request: robots.txt's and
	// tdmrep.json's, then the response's.
	stated []usage.Statement
	// refusal is the statement that refused a purpose, and action what
	// robotsgate did about it (audit.UsageRefused, UsageWithheld,
	// UsageRecorded); action is "" when nothing refused.
	refusal usage.Verdict
	action  string
	// afterFetch says the refusal came from the response.
	afterFetch bool
}

// purposes are the crawler's declared purposes: its policy entries', and
// the operator's for the pinned token.
func (d *decision) purposes() []string {
	var declared []string
	if d.policy != nil {
		declared = d.policy.match.Purposes()
	}
	u := &d.s.opts.Usage
	if len(u.Purposes) == 0 || !strings.EqualFold(d.who.token, u.Token) {
		return declared
	}
	return usage.Union(declared, u.Purposes)
}

// usageEnforced reports whether a refusal by a usage preference is
// enforced rather than recorded.
func (d *decision) usageEnforced() bool {
	return d.s.opts.Usage.Mode == UsageEnforce && d.s.opts.Mode == ModeEnforce
}

// judgeUsage judges the crawler's purposes by what robots.txt (and
// tdmrep.json) state for the path, before the fetch. It returns the 403
// when a preference refuses a purpose and that is enforced.
func (d *decision) judgeUsage(r *http.Request, result *fetch.Result, j *robots.Judgement, pathAndQuery string) *page {
	if d.s.opts.Usage.Mode == UsageOff {
		return nil
	}
	lines := j.Usage()
	if len(lines) == 0 && result.TDMRep == nil {
		return nil // the common case: the site states nothing
	}
	stated := usage.FromRobots(lines)
	if result.TDMRep != nil {
		stated = append(stated, result.TDMRep.Statements(pathAndQuery)...)
	}
	return d.judgeStated(r, stated, "robotsgate did not fetch the URL")
}

// judgeTunnelUsage judges a tunnel the proxy cannot look into by the
// preferences robots.txt and tdmrep.json state for every path of the
// site: refused when they refuse the crawler's purpose (and that is
// enforced).
func (d *decision) judgeTunnelUsage(r *http.Request, result *fetch.Result) *page {
	if d.s.opts.Usage.Mode == UsageOff {
		return nil
	}
	var stated []usage.Statement
	if result.Outcome == robots.OutcomeOK {
		stated = usage.FromRobots(result.Robots.UsageEverywhere(d.who.token))
	}
	stated = append(stated, result.TDMRep.Everywhere()...)
	return d.judgeStated(r, stated, "robotsgate did not open the tunnel: they speak for every path of the site")
}

// judgeStated judges the crawler's purposes by what the site states before
// the fetch, and returns the 403 when a refusal is enforced; done says
// what robotsgate did not do.
func (d *decision) judgeStated(r *http.Request, stated []usage.Statement, done string) *page {
	if len(stated) == 0 {
		return nil
	}
	u := &usageState{purposes: d.purposes(), stated: stated}
	d.usage = u
	u.refusal = usage.Judge(u.purposes, stated)
	if !u.refusal.Refused {
		return nil
	}
	if !d.usageEnforced() {
		u.action = audit.UsageRecorded
		return nil
	}
	u.action = audit.UsageRefused
	d.outcome.status = http.StatusForbidden
	d.finish()
	return d.usagePage(r, "403 Forbidden: the site's usage preferences refuse this crawler's purpose; "+done+".")
}

// judgeResponse judges the crawler's purposes by what the origin's
// response states (Content-Usage, tdm-reservation, X-Robots-Tag: noai).
// It returns true when the response is withheld: its body must not be
// delivered, and d's answer was written.
func (d *decision) judgeResponse(w http.ResponseWriter, r *http.Request, resp *http.Response) bool {
	if d.s.opts.Usage.Mode == UsageOff {
		return false
	}
	stated := usage.FromResponse(resp.Header, d.who.token)
	if len(stated) == 0 {
		return false
	}
	// robots.txt and tdmrep.json are what a crawler learns the rules
	// from: recorded, never withheld.
	metadata := d.verdict.Cause == robots.CauseRobotsTxt || d.target.pathAndQuery == "/.well-known/tdmrep.json"
	u := d.usage
	if u == nil {
		u = &usageState{purposes: d.purposes()}
		d.usage = u
	}
	u.stated = append(u.stated, stated...)
	if u.refusal.Refused {
		return false // already refused by robots.txt: recorded as such
	}
	if u.refusal = usage.Judge(u.purposes, stated); !u.refusal.Refused {
		return false
	}
	u.afterFetch = true
	if !d.usageEnforced() || d.s.opts.Usage.Responses != ResponsesWithhold || metadata {
		u.action = audit.UsageRecorded
		return false
	}
	u.action = audit.UsageWithheld
	// The origin's body is read no further: its connection is not reused.
	resp.Body.Close()
	d.outcome.status = http.StatusForbidden
	p := d.usagePage(r, "403 Forbidden: the response's usage preferences refuse this crawler's purpose; robotsgate withheld the body the origin sent.")
	d.finish()
	p.write(w, r)
	return true
}

// usagePage is the answer to a request a usage preference refused, its
// record written: headline, then what stated the preference.
func (d *decision) usagePage(r *http.Request, headline string) *page {
	p := &page{status: http.StatusForbidden, header: http.Header{}}
	if wantsJSON(r.Header.Get("Accept")) {
		p.setJSON(d)
	} else {
		var b bytes.Buffer
		b.WriteString(headline)
		b.WriteString("\n\n")
		fmt.Fprintf(&b, "URL:         %s\n", d.asked.url)
		b.WriteString(crawlerLine(d))
		fmt.Fprintf(&b, "Purposes:    %s\n", strings.Join(d.usage.purposes, ", "))
		fmt.Fprintf(&b, "Preference:  %s\n", usageWhere(d.usage.refusal.By, d))
		label := shown(d.usage.refusal.By.Label)
		if v := d.usage.refusal.By.Value; v != "" { // noai has none
			label += "=" + shown(v)
		}
		fmt.Fprintf(&b, "Refuses:     %s (label %s)\n", d.usage.refusal.Purpose, label)
		b.WriteString("\nrobotsgate is a proxy that makes crawlers obey robots.txt (RFC 9309) and the usage preferences sites state.\n")
		p.body = b.Bytes()
		p.header.Set("Content-Type", "text/plain; charset=utf-8")
	}
	p.header.Set(decisionHeader, usageValue(d))
	return p
}

// usageWhere says where a statement is made, in a site owner's words:
// "Content-Usage: train-ai=n (https://example.com/robots.txt line 7)".
func usageWhere(s usage.Statement, d *decision) string {
	text := shown(s.Text)
	switch {
	case s.Line > 0:
		return text + " (" + d.robotsURL() + " line " + strconv.Itoa(s.Line) + ")"
	case s.Header != "":
		return text + " (response header)"
	case s.Form == usage.FormTDMRep:
		return text + " (" + strings.TrimSuffix(d.robotsURL(), "/robots.txt") + "/.well-known/tdmrep.json)"
	}
	return text
}

// usageValue is X-Robotsgate-Decision for a usage refusal:
// `usage-refused; token="GPTBot"; purpose="ai-train"; form="content-usage";
// line=7; label="train-ai"; value="n"; usage="Content-Usage: train-ai=n"`.
func usageValue(d *decision) string {
	u := d.usage
	by := u.refusal.By
	var b strings.Builder
	b.WriteString("usage-")
	b.WriteString(u.action)
	b.WriteString("; token=")
	b.WriteString(quoteHeader(shown(d.who.token)))
	b.WriteString("; purpose=")
	b.WriteString(quoteHeader(u.refusal.Purpose))
	b.WriteString("; form=")
	b.WriteString(quoteHeader(by.Form.String()))
	if by.Line > 0 {
		b.WriteString("; line=")
		b.WriteString(strconv.Itoa(by.Line))
		b.WriteString("; robots=")
		b.WriteString(quoteHeader(d.robotsURL()))
	}
	if by.Header != "" {
		b.WriteString("; header=")
		b.WriteString(quoteHeader(by.Header))
	}
	b.WriteString("; label=")
	b.WriteString(quoteHeader(shown(by.Label)))
	if by.Value != "" { // noai has none
		b.WriteString("; value=")
		b.WriteString(quoteHeader(shown(by.Value)))
	}
	b.WriteString("; usage=")
	b.WriteString(quoteHeader(shown(by.Text)))
	if u.action == audit.UsageRecorded && (d.s.opts.Mode == ModeAudit || d.s.opts.Usage.Mode == UsageAudit) {
		b.WriteString("; mode=audit")
	}
	return b.String()
}

// usageRefusedFirst reports a request a usage preference refused (or, not
// enforced, would have) before the fetch: its verdict is disallow.
func (d *decision) usageRefusedFirst() bool {
	u := d.usage
	return u != nil && u.action != "" && !u.afterFetch
}

// usageRecord fills in the record's usage fields.
func (d *decision) usageRecord(rec *audit.Record) {
	if rec.Purposes == nil {
		rec.Purposes = d.purposes()
	}
	u := d.usage
	if u == nil {
		return
	}
	rec.UsageStated = usage.Stated(u.stated)
	if u.action != "" {
		rec.Usage = audit.UsageFindingOf(u.refusal, u.action)
	}
}
