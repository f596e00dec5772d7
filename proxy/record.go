package proxy

import (
	"strings"
	"time"

	"robotsgate/cache"
	"robotsgate/proxy/audit"
	"robotsgate/proxy/pace"
	"robotsgate/robots"
)

// A decision collects facts on its way: what was asked (asked), by whom
// (who), how robots.txt was looked up (lookup), the verdict (ruling,
// verdict), the pace (delay, admission) and what became of the request
// (outcome). Its audit record is built from them once, by record, when the
// request is over (finish); nothing else writes a record field.

// asked is what the client asked for.
type asked struct {
	client, method, userAgent string
	// url is the URL requested: the canonical target, or the request as
	// sent when it was refused before it could be parsed (describeRequest);
	// host:port for a CONNECT.
	url string
	// origin is the origin whose robots.txt applies, once known.
	origin string
	// tunnel is, for a request read inside a tunnel, the CONNECT target.
	tunnel string
	// blind says only the host is judged: a tunnel robotsgate does not
	// look into, or a CONNECT refused for want of a credential.
	blind bool
}

// who is the identity judged.
type who struct {
	token, credential string
	// uaToken is the User-Agent's token, kept when the token judged came
	// from elsewhere (uaTokenSet): the record shows both.
	uaToken    string
	uaTokenSet bool
}

// lookup is how robots.txt was looked up, when it was.
type lookup struct {
	done    bool
	outcome robots.Outcome
	// status is robots.txt's HTTP status: three digits fit in 16 bits,
	// and keep a decision within its size class.
	status uint16
	cache  cache.Source
	// untrusted: robots.txt failed on the origin's certificate, which no
	// trusted CA signed; the 403 names the fix.
	untrusted bool
}

// ruling is how the verdict recorded was reached.
type ruling uint8

const (
	// unjudged: no verdict was reached; the request was refused first (a
	// malformed request, 407, 503, ...) and why says why. Verdict "error".
	unjudged ruling = iota
	// judged: robots.txt's verdict, decision.verdict.
	judged
	// destinationDenied: ROBOTSGATE_DENY_DESTINATIONS refused the
	// destination, whatever robots.txt says; why says which. Verdict
	// "disallow".
	destinationDenied
	// policyDenied: the operator's policy keeps the crawler off the site
	// (decision.finding), before robots.txt is looked up. Verdict
	// "disallow".
	policyDenied
	// passedUnjudged: let through with no robots.txt verdict, for the
	// reason in why: robotsgate answered itself (Max-Forwards: 0), or a
	// blind tunnel turned out to carry plain HTTP, whose requests are
	// judged one by one. Verdict "allow".
	passedUnjudged
)

// outcome is what became of the request.
type outcome struct {
	// status is the status robotsgate answered the client with: its own
	// answer, the origin's relayed, or, for a CONNECT, the tunnel's
	// "200 Connection established".
	status int
	// upstream is the origin's status, when it answered.
	upstream int
	// bytes are the response body bytes relayed from the origin.
	bytes int64
	// reached says the request went to the origin: the origin answered,
	// the request was written whole to a connection to it, or a blind
	// tunnel to it was opened.
	reached bool
	// cause is what went wrong, in a few words, when something did.
	cause string
}

// record builds the audit record of d, every field, in the order of
// README's "Audit log" table. Three fields say what became of the request,
// each by one rule:
//
//   - status is the status robotsgate answered the client with: its own
//     answer (403, 429, 502, ...) or the origin's, relayed. A CONNECT's is
//     the answer to the CONNECT: 200 once the tunnel was opened to the
//     client, whatever it then carried. When something fails after that
//     status was sent (the origin's body breaks off, a blind tunnel cannot
//     reach the origin) the status stays the one sent, forwarded says
//     whether the origin was reached and error says what failed.
//   - forwarded is true only when the request went to the origin: the
//     origin answered, the request was written whole to a connection to
//     it, or a blind tunnel to it was opened. A request refused, answered
//     by robotsgate, or whose connection to the origin failed, is not.
//   - error is the cause of a failure, in a few words, and empty when
//     nothing failed: what went wrong upstream or in the tunnel, the
//     client leaving, the fault behind a refusal robotsgate could not
//     help (a robots.txt fetch slot, a full pace table). A verdict is no
//     failure: a 403 or a 429 for too early carries no error.
func (d *decision) record(rec *audit.Record) {
	*rec = audit.Record{Time: d.start, Client: d.asked.client, Method: d.asked.method}
	// url, user_agent and token; the verdict, from verdict to
	// reading_steps; robots_txt, robots_outcome and robots_status.
	rec.Decision = d.robotsDecision()
	rec.Origin, rec.Tunnel = d.asked.origin, d.asked.tunnel
	rec.Credential = d.who.credential
	if d.who.uaTokenSet {
		rec.UAToken = &d.who.uaToken
		rec.UAMismatch = !strings.EqualFold(d.who.uaToken, d.who.token)
	}
	rec.PathsChecked = !d.asked.blind
	if d.lookup.done {
		rec.RobotsCache = d.lookup.cache.String()
	}
	// "Crawl-delay: 0" holds nothing back: nothing to record, unless the
	// delay factor did.
	if d.delay.Interval > 0 || d.delay.Source == pace.SourceFactor {
		rec.CrawlDelay = d.delay.Interval.Seconds()
		rec.CrawlDelaySource = d.delay.Source.String()
		rec.CrawlDelayLine = d.delay.Asked.Line
	}
	rec.Pace = d.admission.Outcome.String()
	rec.WaitedMS = float64(d.admission.Waited) / float64(time.Millisecond)
	if h := d.admission.Hold; h != nil {
		rec.HoldCause, rec.HoldStatus, rec.HoldError = holdCause(h), h.Status, h.Failure
		rec.HoldAt, rec.HoldUntil, rec.HoldOrigin = h.At, h.Until, holdOrigin(d)
		if !h.RetryAfter {
			rec.BackoffStep = h.Step
		}
	}
	rec.PaceGroup = d.paceGroup()
	d.policyRecord(rec)
	d.usageRecord(rec)
	if d.signedBy != nil {
		rec.SignatureKeyID = d.signedBy.ID()
	}
	rec.DeniedDestination = d.ruling == destinationDenied
	rec.Mode = string(d.s.opts.Mode)
	rec.Forwarded = d.outcome.reached
	rec.Status = d.outcome.status
	rec.Upstream = d.outcome.upstream
	rec.Bytes = d.outcome.bytes
	rec.Duration = float64(time.Since(d.start)) / float64(time.Millisecond)
	rec.Error = d.outcome.cause
}

// robotsDecision is the request and its verdict in the words the audit
// record, check -json and the JSON refusals share.
func (d *decision) robotsDecision() robots.Decision {
	dec := robots.Decision{URL: d.asked.url, UserAgent: d.asked.userAgent, Token: d.who.token}
	switch d.ruling {
	case judged:
		dec.SetVerdict(d.verdict)
		// A usage preference judges after robots.txt and the policy: its
		// refusal is the last word.
		if d.usageRefusedFirst() {
			dec.Verdict, dec.Reason = robots.VerdictDisallow, d.usage.refusal.Reason()
			dec.Rule, dec.RuleLine = "", 0 // robots.txt's rule allowed it
			if d.usage.refusal.By.Line > 0 {
				dec.RobotsTxt = d.robotsURL()
			}
			break
		}
		if u := d.usage; u != nil && u.action == audit.UsageWithheld {
			// The fetch was allowed; the reason says why its answer was not.
			dec.Reason = u.refusal.Reason() + ": the response was withheld"
			break
		}
		if f := d.decidedByPolicy(); f != nil {
			dec.Reason = "policy: " + f.String()
			break
		}
		// robots.txt refused the request, or would have in enforce mode:
		// by a rule, or by the pace it asks for.
		if !d.verdict.Allowed || (d.admission.Outcome == pace.TooEarly && paceFromRobots(d.delay.Source) && !d.admission.Allowed()) {
			dec.RobotsTxt = d.robotsURL()
		}
	case destinationDenied, policyDenied:
		dec.Verdict, dec.Reason = robots.VerdictDisallow, d.why
	case passedUnjudged:
		dec.Verdict, dec.Reason = robots.VerdictAllow, d.why
	default:
		dec.Verdict, dec.Reason = robots.VerdictError, d.why
	}
	if d.lookup.done {
		dec.RobotsOutcome, dec.RobotsStatus = d.lookup.outcome.String(), int(d.lookup.status)
	}
	return dec
}

// finish writes the audit record once the request is over, and ends its
// passage through pacing.
func (d *decision) finish() {
	if d.done {
		return
	}
	d.done = true
	d.admission.Done()
	// A record escapes into the audit log's encoder: one from the pool
	// costs a request no allocation.
	rec, _ := d.s.records.Get().(*audit.Record)
	if rec == nil {
		rec = new(audit.Record)
	}
	d.record(rec)
	if err := d.s.opts.Audit.Write(rec); err != nil && d.s.auditErrs.CompareAndSwap(false, true) {
		d.s.log.Error("audit records are being dropped", "err", err)
	}
	d.s.metrics.observe(rec)
	*rec = audit.Record{} // holds nothing of the request while pooled
	d.s.records.Put(rec)
}
