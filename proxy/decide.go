package proxy

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"robotsgate/cache"
	"robotsgate/proxy/destination"
	"robotsgate/proxy/identity"
	"robotsgate/proxy/netcause"
	"robotsgate/proxy/pace"
	"robotsgate/proxy/signing"
	"robotsgate/robots"
	"robotsgate/robots/fetch"
)

// decision is one request on its way through the proxy: its canonical
// target, the verdict, and the facts its audit record is built of when it
// is over (see record.go).
type decision struct {
	s *Server
	// start is when the request arrived, with the monotonic clock reading.
	start  time.Time
	asked  asked
	who    who
	target target
	outURL url.URL // the target as the transport is given it
	lookup lookup
	// done says the record is written. A byte beside ruling's, in what
	// would be padding: the decision keeps its size class.
	done bool
	// ruling is how the verdict was reached: verdict is robots.txt's when
	// judged, why the reason of any other.
	ruling  ruling
	verdict robots.Verdict
	why     string
	// maxForwards is the Max-Forwards value to send on, "" to send none.
	maxForwards string
	// delay is the pace in force for the request's identity, and
	// admission its passage through pacing, ended by finish.
	delay     pace.Delay
	admission pace.Admission
	outcome   outcome
	relay     relayState // forward's
	// fetchCtx is the context robots.txt is looked up on (fetchContext).
	fetchCtx fetch.ClientContext
	// policy is what the operator's policy says of the request, nil
	// without one (see policy.go): apart, so that a request costs no
	// larger decision when no policy is loaded.
	policy *policyState
	// usage is what the site's usage preferences say of the request, nil
	// when it states none (see usage.go).
	usage *usageState
	// signedBy is the key that signed the forwarded request, nil when
	// none did (see sign.go).
	signedBy *signing.Key
}

func (s *Server) newDecision(r *http.Request, tun *tunnel) *decision {
	d := &decision{s: s, start: time.Now()}
	d.asked = asked{client: r.RemoteAddr, method: r.Method, userAgent: r.UserAgent()}
	if tun != nil {
		d.asked.tunnel = tun.authority
	}
	return d
}

// serveProxied judges a request read plainly (tun == nil) or inside a
// tunnel, as cred's when it is not nil, and forwards it or answers it.
func (s *Server) serveProxied(w http.ResponseWriter, r *http.Request, tun *tunnel, cred *identity.Credential) {
	d, answer := s.decide(r, tun, cred)
	if answer != nil {
		answer.write(w, r)
		return
	}
	d.forward(w, r)
}

// closeIfChunked closes a chunked request's connection after the answer,
// whatever the answer (a verdict, a 407): Go's reader drops a
// Content-Length sent beside Transfer-Encoding before a handler sees it,
// and RFC 9112 §6.1 requires closing after that ambiguous request.
func closeIfChunked(w http.ResponseWriter, r *http.Request) {
	if len(r.TransferEncoding) > 0 {
		w.Header().Set("Connection", "close")
	}
}

// decide builds the canonical target and judges it. It returns the answer
// to send, its record written, or nil when the request is to be forwarded.
func (s *Server) decide(r *http.Request, tun *tunnel, cred *identity.Credential) (*decision, *page) {
	d := s.newDecision(r, tun)
	t := &d.target
	perr := parseTarget(r, tun, s.opts.Client.MaxURLBytes, t)
	if perr == nil && !t.outgoingURL(&d.outURL) {
		perr = badRequest("the path starts with // and has characters that would have to be re-encoded to be sent on; percent-encode them")
	}
	if perr != nil {
		d.asked.url = describeRequest(r, tun)
		p := d.failPage(perr.status, perr.why, nil)
		p.header.Set("Connection", "close")
		return d, p
	}
	d.asked.url, d.asked.origin = t.url, t.origin
	if s.stopping.Load() {
		return d, d.failPage(http.StatusServiceUnavailable, "robotsgate is shutting down", nil)
	}
	if p := d.auditUnwritable(); p != nil {
		return d, p
	}
	d.identify(cred)
	if err := s.opts.Destinations.Check(t.host); err != nil {
		return d, d.destinationPage(err)
	}
	if p := d.applyPolicy(r, t.host); p != nil {
		return d, p
	}
	if p := d.checkMaxForwards(r); p != nil {
		return d, p
	}

	path := t.pathAndQuery
	var result *fetch.Result
	if readsRobotsTxt(r, path) {
		// Never paced: a crawler reads robots.txt to learn the pace.
		d.verdict = robots.Verdict{Allowed: true, Cause: robots.CauseRobotsTxt}
	} else {
		var info cache.Info
		var err error
		result, info, err = s.opts.Rules.Get(d.fetchContext(r), t.origin)
		if err != nil {
			return d, d.failPage(http.StatusGatewayTimeout, "the client went away before robots.txt was fetched", err)
		}
		if p := d.noFetchSlot(result); p != nil {
			return d, p
		}
		d.noteRobots(result, info)
		if denied := deniedDestination(result.Err); denied != nil {
			return d, d.destinationPage(denied)
		}
		if p := d.judge(r, result, path); p != nil {
			return d, p
		}
	}
	d.ruling = judged

	if !d.verdict.Allowed && s.opts.Mode == ModeEnforce {
		d.outcome.status = http.StatusForbidden
		d.finish()
		return d, forbiddenPage(r, d)
	}
	if result != nil {
		if p := d.pace(r, result); p != nil {
			return d, p
		}
	}
	return d, nil
}

// judge sets the verdict of robots.txt on the path, then the policy's and
// the site's usage preferences', a costly decision (its rules and usage
// lines together) waiting its turn at the costlyGate (it returns the
// answer when it found none), one over robots.MaxDecisionCost refused
// unjudged. It returns the answer of a usage refusal too.
func (d *decision) judge(r *http.Request, result *fetch.Result, pathAndQuery string) *page {
	j := result.Prepare(d.who.token, pathAndQuery)
	if j.Cost() <= costlyDecision || j.Cost() > robots.MaxDecisionCost {
		return d.judgePrepared(r, result, &j, pathAndQuery)
	}
	leave, err := d.s.costly.enter(r.Context(), d.shareKey())
	if err != nil {
		p := d.failPage(http.StatusServiceUnavailable,
			"robotsgate is busy judging paths that are costly to judge, this client's first; try again later", err)
		p.header.Set("Retry-After", "1")
		return p
	}
	p := d.judgePrepared(r, result, &j, pathAndQuery)
	leave()
	return p
}

// judgePrepared makes the prepared decision: robots.txt's verdict, the
// policy's word on it and, on a path they allow, the usage preferences'.
func (d *decision) judgePrepared(r *http.Request, result *fetch.Result, j *robots.Judgement, pathAndQuery string) *page {
	d.verdict, d.ruling = j.Verdict(), judged
	d.judgePolicy(pathAndQuery)
	if !d.verdict.Allowed {
		return nil // refused, or recorded in audit mode, by decide
	}
	return d.judgeUsage(r, result, j, pathAndQuery)
}

// readsRobotsTxt reports the one request every crawler may make whatever
// robots.txt says (RFC 9309 §2.2.2): a GET or HEAD, without a body, of
// exactly /robots.txt. Any other method, a query or another spelling of the
// path is judged and paced like any URL: those reach more than the file.
func readsRobotsTxt(r *http.Request, pathAndQuery string) bool {
	return pathAndQuery == "/robots.txt" && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		r.ContentLength == 0 && len(r.TransferEncoding) == 0
}

// identify settles the token judged: cred's, the pinned one, or the
// User-Agent's, which is recorded beside any other.
func (d *decision) identify(cred *identity.Credential) {
	uaToken := robots.ProductToken(d.asked.userAgent)
	token, fromUA := d.s.opts.Identity.Token(cred, uaToken)
	d.who.token = token
	if cred != nil {
		d.who.credential = cred.Name
	}
	if !fromUA {
		d.who.uaToken, d.who.uaTokenSet = uaToken, true
	}
}

// authenticate checks the client's proxy credential, if the proxy asks
// for one. It returns the credential (nil for an anonymous client the
// gate lets through), or false once it has answered 407.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (*identity.Credential, bool) {
	if s.opts.Identity.Mode() == identity.ModeOff {
		return nil, true
	}
	cred, failure := s.opts.Identity.Authenticate(r.Context(), r.Header["Proxy-Authorization"], r.RemoteAddr)
	if failure == nil {
		return cred, true
	}
	d := s.newDecision(r, nil)
	d.asked.url = describeRequest(r, nil)
	d.asked.blind = r.Method == http.MethodConnect
	p := d.failPage(http.StatusProxyAuthRequired, "proxy authentication required: "+failure.Error(), nil)
	p.header.Set("Proxy-Authenticate", `Basic realm="robotsgate"`)
	p.write(w, r)
	return nil, false
}

// describeRequest is what a refused request asked for, for its record:
// the target as sent, user information removed, made absolute with its
// Host inside a tunnel.
func describeRequest(r *http.Request, tun *tunnel) string {
	raw := redactUserinfo(r.RequestURI)
	if tun != nil && strings.HasPrefix(raw, "/") {
		return tun.scheme + "://" + r.Host + raw
	}
	return raw
}

// auditUnwritable refuses the request while the audit log cannot be
// written, unless the operator chose to carry on.
func (d *decision) auditUnwritable() *page {
	if d.s.opts.AuditOnError != AuditRefuse || d.s.opts.Audit.Healthy() {
		return nil
	}
	return d.failPage(http.StatusServiceUnavailable,
		"robotsgate cannot write its audit log, and refuses requests until it can (ROBOTSGATE_AUDIT_ON_ERROR=refuse)", nil)
}

// checkMaxForwards honours Max-Forwards on OPTIONS and TRACE (RFC 9110
// §7.6.2): at 0 the proxy answers itself, above it the count goes down by
// one on the way.
func (d *decision) checkMaxForwards(r *http.Request) *page {
	if r.Method != http.MethodOptions && r.Method != http.MethodTrace {
		return nil
	}
	values, ok := r.Header["Max-Forwards"]
	if !ok {
		return nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(values[0]), 10, 31)
	if err != nil || len(values) > 1 {
		return d.failPage(http.StatusBadRequest, "Max-Forwards is not one number", nil)
	}
	if n > 0 {
		d.maxForwards = strconv.FormatUint(n-1, 10)
		return nil
	}
	d.ruling, d.why = passedUnjudged, "Max-Forwards: 0: answered by robotsgate"
	d.outcome.status = http.StatusOK
	d.finish()
	if r.Method == http.MethodOptions {
		p := &page{status: http.StatusOK, header: http.Header{"Allow": {"GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS, TRACE"}}}
		return p
	}
	return tracePage(r)
}

func (d *decision) noteRobots(result *fetch.Result, info cache.Info) {
	d.lookup = lookup{done: true, outcome: result.Outcome, status: uint16(result.Status), cache: info.Source}
	if result.Err != nil && result.Outcome == robots.OutcomeUnreachable && netcause.NotTrusted(result.Err) {
		d.lookup.untrusted = true
		if info.Source == cache.SourceLoaded { // warn of fetches, not of cached failures
			d.s.originNotTrusted(d.asked.origin, "robots.txt fetch")
		}
	}
}

// robotsURL is the robots.txt that decided; built only when a response
// or header names it, not on every request.
func (d *decision) robotsURL() string { return d.asked.origin + "/robots.txt" }

// failPage records a request the proxy could not or would not judge and
// returns the answer.
func (d *decision) failPage(status int, why string, err error) *page {
	d.ruling, d.why = unjudged, why
	d.outcome.status = status
	if err != nil {
		d.outcome.cause = err.Error()
	}
	d.finish()
	p := plainPage(status, why+"\n")
	if status == http.StatusBadRequest {
		// A client that sends nonsense gets no second try on this
		// connection: what follows may not be framed as it thinks.
		p.header.Set("Connection", "close")
	}
	return p
}

// deniedDestination returns the destination policy's refusal in err.
func deniedDestination(err error) *destination.DeniedError {
	if err == nil {
		return nil // the usual case, without the allocation errors.As costs
	}
	var denied *destination.DeniedError
	if errors.As(err, &denied) {
		return denied
	}
	return nil
}

// denyDestination notes the destination policy's refusal, err, as the
// verdict, and returns its reason.
func (d *decision) denyDestination(err error) string {
	d.ruling, d.why = destinationDenied, err.Error()+" (ROBOTSGATE_DENY_DESTINATIONS); robotsgate does not connect there"
	return d.why
}

// destinationPage refuses a request to a destination the policy denies,
// in every mode: it is a boundary, not a robots.txt verdict.
func (d *decision) destinationPage(err error) *page {
	why := d.denyDestination(err)
	d.outcome.status = http.StatusForbidden
	d.finish()
	p := plainPage(http.StatusForbidden, "403 Forbidden: "+why+".\n")
	p.header.Set(decisionHeader, "deny-destination; reason="+quoteHeader(err.Error()))
	return p
}
