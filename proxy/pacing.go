package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

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
	// A schedule this request starts is charged to its client (shareKey),
	// named when result was looked up (fetchContext).
	who := pace.Identity{Credential: d.who.credential, Token: d.who.token, Client: d.fetchCtx.Client}
	d.admission = pacer.Admit(r.Context(), d.asked.origin, who, d.delay)
	a := &d.admission
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
	default:
		b.WriteString("too-early")
	}
	b.WriteString("; token=")
	b.WriteString(quoteHeader(d.who.token))
	switch a.Outcome {
	case pace.Busy:
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
		if asked := d.delay.Asked; asked.Line > 0 {
			b.WriteString("; rule=")
			b.WriteString(quoteHeader(asked.Rule()))
			b.WriteString("; line=")
			b.WriteString(strconv.Itoa(asked.Line))
		}
	}
	b.WriteString("; retry-after=")
	b.WriteString(strconv.Itoa(retryAfter(a.RetryAfter)))
	if a.Outcome == pace.TooEarly {
		b.WriteString("; robots=")
		b.WriteString(quoteHeader(d.robotsURL()))
	}
	if a.Allowed() {
		b.WriteString("; mode=audit")
	}
	return b.String()
}

// tooManyJSON is the 429 body for clients that accept only JSON.
type tooManyJSON struct {
	forbiddenJSON
	CrawlDelay       float64 `json:"crawl_delay"`
	CrawlDelaySource string  `json:"crawl_delay_source,omitempty"`
	CrawlDelayLine   int     `json:"crawl_delay_line,omitempty"`
	Pace             string  `json:"pace"`
	RetryAfter       int     `json:"retry_after"`
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
		if d.delay.Interval > 0 { // as in the record
			out.CrawlDelay, out.CrawlDelaySource, out.CrawlDelayLine = d.delay.Interval.Seconds(), d.delay.Source.String(), d.delay.Asked.Line
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
		fmt.Fprintf(&b, "429 Too Many Requests: %s already has as many requests in flight as robotsgate lets through (ROBOTSGATE_MAX_CONNS_PER_ORIGIN=%d).\n\n",
			d.asked.origin, d.s.opts.Pacer.MaxConnsPerOrigin())
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
	if d.admission.Outcome == pace.TooEarly {
		fmt.Fprintf(&b, "robots.txt:  %s\n", d.robotsURL())
		fmt.Fprintf(&b, "Delay:       %ss between the starts of two requests, %s\n", seconds(d.delay.Interval), delayOrigin(d.delay))
	}
	fmt.Fprintf(&b, "Retry after: %ds\n", after)
	b.WriteString("\nrobotsgate is a proxy that makes crawlers obey robots.txt (RFC 9309) and the pace it asks.\n")
	return b.Bytes()
}

// delayOrigin says where a delay came from, for people.
func delayOrigin(d pace.Delay) string {
	switch d.Source {
	case pace.SourceDefault:
		return "the proxy's default (ROBOTSGATE_DEFAULT_CRAWL_DELAY): robots.txt asks none of this crawler"
	case pace.SourceCap:
		return fmt.Sprintf("the proxy's cap (ROBOTSGATE_MAX_CRAWL_DELAY) on %q (line %d)", d.Asked.Rule(), d.Asked.Line)
	}
	return fmt.Sprintf("as %q asks (line %d)", d.Asked.Rule(), d.Asked.Line)
}
