package proxy

import (
	"bytes"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"robotsgate/proxy/audit"
	"robotsgate/proxy/pace"
	"robotsgate/proxy/policy"
)

// PolicySource gives the operator's policy in force (package live keeps
// it, reloaded on SIGHUP); a request reads it once, when it is judged, and
// is judged by that policy to its end, whatever a reload puts in force
// meanwhile.
type PolicySource interface {
	Current() *policy.Policy
}

// policyState is what the operator's policy says of one request.
type policyState struct {
	// policy is the policy the request is judged by, from start to end,
	// and match what it says of this crawler at this site.
	policy *policy.Policy
	match  policy.Match
	// finding is what in it refused the site or changed robots.txt's
	// verdict; paceFinding and concurrencyFinding are the crawler's pace
	// bounds applied.
	finding, paceFinding, concurrencyFinding *policy.Finding
}

// applyPolicy finds what the operator's policy says of the request's
// crawler at host and refuses it, before any robots.txt fetch and in every
// mode, when the policy keeps the crawler off that site: a sandbox's
// boundary, like ROBOTSGATE_DENY_DESTINATIONS.
func (d *decision) applyPolicy(r *http.Request, host string) *page {
	if d.s.opts.Policy == nil {
		return nil
	}
	current := d.s.opts.Policy.Current()
	if current == nil {
		return nil
	}
	d.policy = &policyState{policy: current, match: current.Match(d.who.credential, d.who.token, host)}
	f := d.policy.match.Destination()
	if f == nil {
		return nil
	}
	d.policy.finding = f
	d.ruling, d.why = policyDenied, "the operator's policy keeps this crawler off this site: "+f.String()
	d.outcome.status = http.StatusForbidden
	d.finish()
	p := &page{status: http.StatusForbidden, header: http.Header{}}
	if wantsJSON(r.Header.Get("Accept")) {
		p.setJSON(d)
	} else {
		var b bytes.Buffer
		b.WriteString("403 Forbidden: the operator's policy keeps this crawler off this site; robotsgate does not connect there.\n\n")
		fmt.Fprintf(&b, "URL:         %s\n", d.asked.url)
		b.WriteString(crawlerLine(d))
		fmt.Fprintf(&b, "Policy:      %s\n", f)
		b.WriteString("\nrobotsgate is a proxy that makes crawlers obey robots.txt (RFC 9309) and its operator's policy.\n")
		p.body = b.Bytes()
		p.header.Set("Content-Type", "text/plain; charset=utf-8")
	}
	p.header.Set(decisionHeader, "deny-destination; token="+quoteHeader(shown(d.who.token))+policyParams(f))
	return p
}

// judgePolicy lets the policy's rules and exceptions speak after
// robots.txt: a rule refuses what robots.txt allows, an exception allows
// what a robots.txt rule refuses.
func (d *decision) judgePolicy(pathAndQuery string) {
	if d.policy == nil {
		return
	}
	allowed, f := d.policy.match.Judge(pathAndQuery, d.verdict)
	if f == nil || f.Kind == policy.KindRule && !d.verdict.Allowed {
		return // robots.txt decided: a refusal it makes is the site's own
	}
	// The verdict keeps robots.txt's rule and reason: the record and the
	// pages say what robots.txt said beside what the policy decided.
	d.policy.finding, d.verdict.Allowed = f, allowed
}

// policyDisallowsAll refuses a tunnel the proxy cannot look into when a
// rule of the policy refuses every path on its site: the only rule it can
// enforce there.
func (d *decision) policyDisallowsAll() bool {
	if d.policy == nil {
		return false
	}
	f := d.policy.match.DisallowsAll()
	if f == nil {
		return false
	}
	d.policy.finding, d.verdict.Allowed = f, false
	return true
}

// paceByPolicy applies the crawler's own pace bounds: its min_delay under
// the delay robots.txt asks, and its max_concurrency to who.
func (d *decision) paceByPolicy(who *pace.Identity) {
	if d.policy == nil {
		return
	}
	ps := d.policy
	if floor, f := ps.match.MinDelay(); f != nil {
		if d.delay = d.delay.AtLeast(floor, pace.SourcePolicy); d.delay.Source == pace.SourcePolicy {
			ps.paceFinding = f
		}
	}
	if n, f := ps.match.MaxConcurrency(); f != nil {
		who.MaxConns = n
		ps.concurrencyFinding = f
	}
}

// concurrencyBound is the crawler's max_concurrency and where the policy
// says it; 0 and nil for none.
func (d *decision) concurrencyBound() (int, *policy.Finding) {
	if d.policy == nil {
		return 0, nil
	}
	return d.policy.match.MaxConcurrency()
}

// decidedByPolicy is the finding that changed robots.txt's verdict: an
// exception that allowed, or a rule that refused; nil when robots.txt
// alone decided.
func (d *decision) decidedByPolicy() *policy.Finding {
	if d.policy == nil {
		return nil
	}
	if f := d.policy.finding; f != nil && (f.Kind == policy.KindException || f.Kind == policy.KindRule) {
		return f
	}
	return nil
}

// policyShaping is the finding the record names: the one that decided the
// verdict, or else the pace bound that refused or held the request.
func (d *decision) policyShaping() *policy.Finding {
	ps := d.policy
	if ps == nil {
		return nil
	}
	if ps.finding != nil {
		return ps.finding
	}
	switch a := &d.admission; {
	case a.IdentityBusy && (a.Outcome == pace.Busy || a.Outcome == pace.Waited):
		return ps.concurrencyFinding
	case d.delay.Source == pace.SourcePolicy && (a.Outcome == pace.TooEarly || a.Outcome == pace.Waited):
		return ps.paceFinding
	}
	return nil
}

// policyRecord fills in the record's policy fields.
func (d *decision) policyRecord(rec *audit.Record) {
	if d.policy == nil {
		return
	}
	rec.PolicyVersion = d.policy.policy.Version()
	rec.Purposes = d.policy.match.Purposes()
	rec.Policy = d.policyJSON()
}

// policyJSON is the policy field of the record and of JSON refusals: what
// in the policy refused or shaped the request; zero for nothing.
func (d *decision) policyJSON() audit.PolicyFinding {
	return findingJSON(d.policyShaping())
}

// shownPolicyJSON is policyJSON for the crawler's eyes: the file by its
// name alone, as the pages name it; the server's paths stay in the audit
// log.
func (d *decision) shownPolicyJSON() audit.PolicyFinding {
	out := d.policyJSON()
	if out.File != "" {
		out.File = filepath.Base(out.File)
	}
	return out
}

// findingJSON is f in the audit record's words; zero for nil.
func findingJSON(f *policy.Finding) audit.PolicyFinding {
	if f == nil {
		return audit.PolicyFinding{}
	}
	return audit.PolicyFinding{File: f.File, Line: f.Line, Kind: f.Kind.String(), Rule: f.Rule, Reason: f.Reason}
}

// policyParams renders f as X-Robotsgate-Decision's parameters:
// `; policy="policy.yaml"; policy-line=12;
// policy-kind="exception"; policy-rule="allow: /reports/"; policy-reason="…"`.
func policyParams(f *policy.Finding) string {
	var b strings.Builder
	b.WriteString("; policy=")
	b.WriteString(quoteHeader(filepath.Base(f.File))) // the server's paths are not the crawler's business
	b.WriteString("; policy-line=")
	b.WriteString(strconv.Itoa(f.Line))
	b.WriteString("; policy-kind=")
	b.WriteString(quoteHeader(f.Kind.String()))
	if f.Rule != "" {
		b.WriteString("; policy-rule=")
		b.WriteString(quoteHeader(f.Rule))
	}
	if f.Reason != "" {
		b.WriteString("; policy-reason=")
		b.WriteString(quoteHeader(f.Reason))
	}
	return b.String()
}

// policyForbiddenText is the 403 page of a request a policy rule refused.
func policyForbiddenText(d *decision, f *policy.Finding) []byte {
	var b bytes.Buffer
	b.WriteString("403 Forbidden: the operator's policy does not allow this crawler to fetch this URL.\n\n")
	fmt.Fprintf(&b, "URL:         %s\n", d.asked.url)
	b.WriteString(crawlerLine(d))
	fmt.Fprintf(&b, "Policy:      %s\n", f)
	fmt.Fprintf(&b, "robots.txt:  %s allows it (%s); the policy adds rules of its own\n", d.robotsURL(), d.verdict.Reason())
	b.WriteString("\nrobotsgate is a proxy that makes crawlers obey robots.txt (RFC 9309) and its operator's policy.\n")
	return b.Bytes()
}
