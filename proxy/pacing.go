package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"robotsgate/proxy/egress"
	"robotsgate/proxy/netcause"
	"robotsgate/proxy/pace"
	"robotsgate/robots/fetch"
)

// pace holds a request that is going to the origin to the pace robots.txt
// asks for its identity (see package pace). It returns the 429 to send, its
// record written, or nil when the request goes on; then d.admission must
// end with finish.
func (d *decision) pace(r *http.Request, result *fetch.Result) *page {
	pacer := d.s.opts.Pacer
	if pacer == nil || pacer.Mode() == pace.ModeOff {
		return nil
	}
	asked, ok := result.Pace(d.who.token)
	d.delay = d.s.opts.PacePolicy.Delay(asked, ok)
	group := d.asked.origin
	if g := d.s.opts.PaceGroups; g != nil && g.By() != pace.ByHost {
		host := d.target.host
		if host == "" { // a blind tunnel: its origin is all there is
			if u, err := url.Parse(d.asked.origin); err == nil {
				host = u.Hostname()
			}
		}
		group = g.Group(r.Context(), d.asked.origin, host)
	}
	// A schedule this request starts is charged to its client (shareKey),
	// named when result was looked up (fetchContext).
	who := pace.Identity{Credential: d.who.credential, Token: d.who.token, Client: d.fetchCtx.Client}
	d.paceByPolicy(&who)
	d.admission = pacer.Admit(r.Context(), d.asked.origin, group, who, d.delay)
	a := &d.admission
	if a.ByFactor {
		d.delay.Source = pace.SourceFactor
	}
	if a.Allowed() {
		return nil
	}
	d.outcome.status = http.StatusTooManyRequests
	switch a.Outcome {
	case pace.Gone:
		d.outcome.cause = "the client went away while held for its slot"
	case pace.Full:
		d.outcome.cause = fullReason(d)
	}
	d.finish()
	return tooManyPage(r, d)
}

// observe tells the pacer how the origin answered the request sent at
// sent (resp, or err when no answer came), for the origin's holds and the
// delay factor. Only the origin's own failures count: not a client that
// went away, a refused destination, a certificate robotsgate does not
// trust, or the upstream proxy's trouble.
func (d *decision) observe(r *http.Request, resp *http.Response, err error, sent time.Time) {
	a := &d.admission
	if !a.Observes() {
		return
	}
	ans := pace.Answer{Sent: sent, Took: time.Since(sent), ForGroup: d.answerSpeaksForGroup(err)}
	if err != nil {
		if r.Context().Err() != nil || !netcause.Unanswered(err) {
			return
		}
		if _, viaProxy := egress.Problem(err); viaProxy {
			return
		}
		ans.Failure = netcause.Of(err)
	} else {
		ans.Status = resp.StatusCode
		if ans.Status == http.StatusTooManyRequests || ans.Status == http.StatusServiceUnavailable {
			ans.RetryAfter, ans.HasRetryAfter = retryAfterOf(resp.Header)
		}
	}
	a.Observe(r.Context(), ans)
}

// answerSpeaksForGroup reports whether the origin's answer (err: none
// came) may hold its whole group of hosts. By address, only one that came
// from the group's address: a name that resolves to another when dialled
// than when grouped (a short DNS lifetime, on purpose or not) must not
// hold the sites it was grouped with.
func (d *decision) answerSpeaksForGroup(err error) bool {
	addr, byAddress := strings.CutPrefix(d.paceGroup(), "address:")
	if !byAddress {
		return true
	}
	return err == nil && d.relay.answeredFrom(addr)
}

// maxRetryAfterSeconds bounds the delay-seconds read, far above any cap,
// so that the duration cannot overflow.
const maxRetryAfterSeconds = 1 << 30

// retryAfterOf reads an origin's Retry-After (RFC 9110 §10.2.3): a number
// of seconds, or an HTTP-date counted from the answer's Date (the origin's
// clock; robotsgate's when it sends none), a date past being 0. ok is
// false when there is none, or it reads as neither.
func retryAfterOf(h http.Header) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > maxRetryAfterSeconds {
			n = maxRetryAfterSeconds // only overflow fails: all digits
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	now, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		now = time.Now()
	}
	return max(t.Sub(now), 0), true
}

// fullReason says which table a request refused as pace.Full found full.
func fullReason(d *decision) string {
	if d.admission.ClientShare {
		return "this client holds its share of the Crawl-delay schedules robotsgate keeps (ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT=" +
			strconv.Itoa(d.s.opts.Pacer.MaxSchedulesPerClient()) + ")"
	}
	return "robotsgate's table of Crawl-delay schedules is full"
}

// retryAfter is Retry-After's value: whole seconds, rounded up, at least
// one.
func retryAfter(wait time.Duration) int {
	return max(1, int((wait+time.Second-1)/time.Second))
}

// seconds writes a duration as a number of seconds: "1", "0.5", "60".
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// paceValue renders a pacing outcome as X-Robotsgate-Decision's value:
// `too-early; token="GPTBot"; crawl-delay=1; source="crawl-delay";
// rule="Crawl-delay: 1"; line=2; retry-after=1; robots="https://example.com/robots.txt"`,
// `busy; token="GPTBot"; max-conns-per-origin=4; retry-after=1`, or
// `full; token="GPTBot"; max-schedules-per-client=65536; retry-after=1`
// (without the bound when the whole table is full).
func paceValue(d *decision) string {
	var b strings.Builder
	a := &d.admission
	switch a.Outcome {
	case pace.Busy:
		b.WriteString("busy")
	case pace.Full:
		b.WriteString("full")
	case pace.Held:
		b.WriteString("held")
	case pace.BackedOff:
		b.WriteString("backoff")
	default:
		b.WriteString("too-early")
	}
	b.WriteString("; token=")
	b.WriteString(quoteHeader(d.who.token))
	switch a.Outcome {
	case pace.Held, pace.BackedOff:
		holdParams(&b, a.Hold, d)
	case pace.Busy:
		if n, f := d.concurrencyBound(); a.IdentityBusy && f != nil {
			b.WriteString("; max-concurrency=")
			b.WriteString(strconv.Itoa(n))
			b.WriteString(`; scope="crawler"`)
			b.WriteString(policyParams(f))
			break
		}
		b.WriteString("; max-conns-per-origin=")
		b.WriteString(strconv.Itoa(d.s.opts.Pacer.MaxConnsPerOrigin()))
	case pace.Full:
		if a.ClientShare {
			b.WriteString("; max-schedules-per-client=")
			b.WriteString(strconv.Itoa(d.s.opts.Pacer.MaxSchedulesPerClient()))
		}
	default:
		b.WriteString("; crawl-delay=")
		b.WriteString(seconds(d.delay.Interval))
		b.WriteString("; source=")
		b.WriteString(quoteHeader(d.delay.Source.String()))
		if d.delay.Source == pace.SourceFactor {
			b.WriteString("; delay-factor=")
			b.WriteString(strconv.FormatFloat(d.s.opts.Pacer.DelayFactor(), 'f', -1, 64))
		}
		if d.delay.Source == pace.SourcePolicy {
			b.WriteString(policyParams(d.policy.paceFinding))
		}
		if asked := d.delay.Asked; asked.Line > 0 {
			b.WriteString("; rule=")
			b.WriteString(quoteHeader(asked.Rule()))
			b.WriteString("; line=")
			b.WriteString(strconv.Itoa(asked.Line))
		}
	}
	b.WriteString("; retry-after=")
	b.WriteString(strconv.Itoa(retryAfter(a.RetryAfter)))
	if a.Outcome == pace.TooEarly && paceFromRobots(d.delay.Source) {
		b.WriteString("; robots=")
		b.WriteString(quoteHeader(d.robotsURL()))
	}
	if a.Allowed() {
		b.WriteString("; mode=audit")
	}
	return b.String()
}

// holdParams writes the hold h that d met as X-Robotsgate-Decision's
// parameters: `origin-status=503; origin-date="Thu, 26 Nov 2026 11:00:00 GMT";
// hold-until="…"` and, for a backoff, `backoff-step=3`; `origin-error="…"`
// when no answer came; `scope="client"` when the pause is the client's
// own; the origin that answered, when another of the request's group, and
// the group.
func holdParams(b *strings.Builder, h *pace.Hold, d *decision) {
	if h.Status > 0 {
		b.WriteString("; origin-status=")
		b.WriteString(strconv.Itoa(h.Status))
	} else {
		b.WriteString("; origin-error=")
		b.WriteString(quoteHeader(h.Failure))
	}
	b.WriteString("; origin-date=")
	b.WriteString(quoteHeader(h.At.UTC().Format(http.TimeFormat)))
	if !h.RetryAfter {
		b.WriteString("; backoff-step=")
		b.WriteString(strconv.Itoa(h.Step))
	}
	b.WriteString("; hold-until=")
	b.WriteString(quoteHeader(h.Until.UTC().Format(http.TimeFormat)))
	if h.Client {
		b.WriteString(`; scope="client"`)
	}
	if o := holdOrigin(d); o != "" {
		b.WriteString("; origin=")
		b.WriteString(quoteHeader(o))
	}
	if d.paceGroup() != "" {
		b.WriteString("; group=")
		b.WriteString(quoteHeader(d.paceGroup()))
	}
}

// paceGroup is the group of hosts the request was paced with, when it is
// not its origin alone (ROBOTSGATE_PACE_BY).
func (d *decision) paceGroup() string {
	if g := d.admission.Group(); g != d.asked.origin {
		return g
	}
	return ""
}

// holdOrigin is the origin whose answer set the hold d met, when it is
// not d's own (a group's sibling); "" otherwise.
func holdOrigin(d *decision) string {
	if h := d.admission.Hold; h != nil && h.Origin != d.asked.origin {
		return h.Origin
	}
	return ""
}

// holdWords says what the origin said, for people: "answered 503 Service
// Unavailable with Retry-After", "answered 500 Internal Server Error",
// "did not answer (connection refused)".
func holdWords(h *pace.Hold) string {
	what := "did not answer (" + h.Failure + ")"
	if h.Status > 0 {
		what = "answered " + strconv.Itoa(h.Status) + " " + http.StatusText(h.Status)
	}
	if h.RetryAfter {
		return what + " with Retry-After"
	}
	return what
}

// tooManyJSON is the 429 body for clients that accept only JSON.
type tooManyJSON struct {
	forbiddenJSON
	CrawlDelay       float64 `json:"crawl_delay"`
	CrawlDelaySource string  `json:"crawl_delay_source,omitempty"`
	CrawlDelayLine   int     `json:"crawl_delay_line,omitempty"`
	Pace             string  `json:"pace"`
	RetryAfter       int     `json:"retry_after"`
	*holdJSON
}

// holdJSON is the hold a request met, in the audit record's words.
type holdJSON struct {
	HoldCause   string    `json:"hold_cause"`
	HoldStatus  int       `json:"hold_status,omitempty"`
	HoldError   string    `json:"hold_error,omitempty"`
	HoldOrigin  string    `json:"hold_origin,omitempty"`
	HoldAt      time.Time `json:"hold_at"`
	HoldUntil   time.Time `json:"hold_until"`
	BackoffStep int       `json:"backoff_step,omitempty"`
	PaceGroup   string    `json:"pace_group,omitempty"`
}

// holdCause is the audit record's name for what set h: "retry-after" or
// "backoff".
func holdCause(h *pace.Hold) string {
	if h.RetryAfter {
		return "retry-after"
	}
	return "backoff"
}

// tooManyPage answers a request that came too early, or found its origin's
// connections all in use: 429 with Retry-After, in plain words or JSON.
func tooManyPage(req *http.Request, d *decision) *page {
	after := retryAfter(d.admission.RetryAfter)
	p := &page{status: http.StatusTooManyRequests, header: http.Header{
		"Content-Type": {"text/plain; charset=utf-8"},
		"Retry-After":  {strconv.Itoa(after)},
	}}
	if wantsJSON(req.Header.Get("Accept")) {
		out := tooManyJSON{
			forbiddenJSON: forbiddenJSON{Status: http.StatusTooManyRequests, Decision: d.robotsDecision()},
			Pace:          d.admission.Outcome.String(), RetryAfter: after,
		}
		if d.delay.Interval > 0 || d.delay.Source == pace.SourceFactor { // as in the record
			out.CrawlDelay, out.CrawlDelaySource, out.CrawlDelayLine = d.delay.Interval.Seconds(), d.delay.Source.String(), d.delay.Asked.Line
		}
		if h := d.admission.Hold; h != nil {
			out.holdJSON = &holdJSON{HoldCause: holdCause(h), HoldStatus: h.Status, HoldError: h.Failure, HoldOrigin: holdOrigin(d),
				HoldAt: h.At.UTC(), HoldUntil: h.Until.UTC(), PaceGroup: d.paceGroup()}
			if !h.RetryAfter {
				out.BackoffStep = h.Step
			}
		}
		p.body, _ = json.MarshalIndent(out, "", "  ") // plain strings and numbers: cannot fail
		p.body = append(p.body, '\n')
		p.header.Set("Content-Type", "application/json")
	} else {
		p.body = tooManyText(d, after)
	}
	p.header.Set(decisionHeader, paceValue(d))
	return p
}

func tooManyText(d *decision, after int) []byte {
	var b bytes.Buffer
	switch d.admission.Outcome {
	case pace.Busy:
		if n, f := d.concurrencyBound(); d.admission.IdentityBusy && f != nil {
			fmt.Fprintf(&b, "429 Too Many Requests: this crawler already has as many requests in flight to %s as the operator's policy lets it (max_concurrency: %d, %s).\n\n",
				d.asked.origin, n, f)
			break
		}
		fmt.Fprintf(&b, "429 Too Many Requests: %s already has as many requests in flight as robotsgate lets through (ROBOTSGATE_MAX_CONNS_PER_ORIGIN=%d).\n\n",
			d.asked.origin, d.s.opts.Pacer.MaxConnsPerOrigin())
	case pace.Held, pace.BackedOff:
		h := d.admission.Hold
		from, whose := d.asked.origin, "every crawler's requests"
		if o := holdOrigin(d); o != "" {
			from = o
		}
		if h.Client {
			whose = "this client's own requests (they failed in a row)"
		}
		fmt.Fprintf(&b, "429 Too Many Requests: %s %s at %s, and robotsgate holds %s to it until %s.\n\n",
			from, holdWords(h), h.At.UTC().Format(http.TimeFormat), whose, h.Until.UTC().Format(http.TimeFormat))
	case pace.Full:
		if d.admission.ClientShare {
			fmt.Fprintf(&b, "429 Too Many Requests: this client holds as many Crawl-delay schedules as one client may (ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT=%d): each crawler name it sends to an origin that asks for a delay holds one until the delay has passed.\n\n",
				d.s.opts.Pacer.MaxSchedulesPerClient())
		} else {
			b.WriteString("429 Too Many Requests: robotsgate is keeping the pace of as many crawlers as it can hold; try again shortly.\n\n")
		}
	default:
		b.WriteString("429 Too Many Requests: this crawler must wait longer between requests to this origin.\n\n")
	}
	fmt.Fprintf(&b, "URL:         %s\n", d.asked.url)
	b.WriteString(crawlerLine(d))
	switch d.admission.Outcome {
	case pace.TooEarly:
		if paceFromRobots(d.delay.Source) {
			fmt.Fprintf(&b, "robots.txt:  %s\n", d.robotsURL())
		}
		fmt.Fprintf(&b, "Delay:       %s\n", delayLine(d))
	case pace.Held, pace.BackedOff:
		if d.paceGroup() != "" {
			fmt.Fprintf(&b, "Shared by:   %s (ROBOTSGATE_PACE_BY)\n", d.paceGroup())
		}
		if h := d.admission.Hold; h.RetryAfter {
			b.WriteString("Hold:        as the origin's Retry-After asks, at most ROBOTSGATE_MAX_BACKOFF\n")
		} else {
			by := "with each failure in a row, by another client than the last"
			if h.Client {
				by = "with each failure in a row of this client's requests"
			}
			fmt.Fprintf(&b, "Hold:        backoff step %d: the pause doubles %s, from ROBOTSGATE_BACKOFF_BASE to ROBOTSGATE_MAX_BACKOFF\n", h.Step, by)
		}
	}
	fmt.Fprintf(&b, "Retry after: %ds\n", after)
	b.WriteString("\nrobotsgate is a proxy that makes crawlers obey robots.txt (RFC 9309) and the pace it asks.\n")
	return b.Bytes()
}

// delayLine says what delay a request came too early for, for people.
func delayLine(d *decision) string {
	if d.delay.Source == pace.SourceFactor {
		return fmt.Sprintf("ROBOTSGATE_DELAY_FACTOR=%s times this crawler's last response time from this origin, between the starts of two requests",
			strconv.FormatFloat(d.s.opts.Pacer.DelayFactor(), 'f', -1, 64))
	}
	if d.delay.Source == pace.SourcePolicy {
		return seconds(d.delay.Interval) + "s between the starts of two requests, the operator's policy's min_delay for this crawler (" + d.policy.paceFinding.String() + ")"
	}
	return seconds(d.delay.Interval) + "s between the starts of two requests, " + delayOrigin(d.delay)
}

// paceFromRobots reports whether a delay from source is robots.txt's (or
// what stands in for it where robots.txt says nothing), so that a refusal
// for it names robots.txt; the delay factor and the policy are the
// operator's.
func paceFromRobots(source pace.Source) bool {
	return source != pace.SourceFactor && source != pace.SourcePolicy
}

// delayOrigin says where a delay came from, for people.
func delayOrigin(d pace.Delay) string {
	switch d.Source {
	case pace.SourceDefault:
		return "the proxy's default (ROBOTSGATE_DEFAULT_CRAWL_DELAY): robots.txt asks none of this crawler"
	case pace.SourceMin:
		return "the proxy's floor (ROBOTSGATE_MIN_DELAY)"
	case pace.SourceCap:
		return fmt.Sprintf("the proxy's cap (ROBOTSGATE_MAX_CRAWL_DELAY) on %q (line %d)", d.Asked.Rule(), d.Asked.Line)
	}
	return fmt.Sprintf("as %q asks (line %d)", d.Asked.Rule(), d.Asked.Line)
}
