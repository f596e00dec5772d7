package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"robotsgate/proxy/audit"
	"robotsgate/robots"
)

// decisionHeader carries a verdict for machines, on every 403 and, in
// audit mode, on responses enforcement would have refused.
const decisionHeader = "X-Robotsgate-Decision"

// decisionValue renders the verdict as a structured header value:
// `disallow; token="GPTBot"; rule="/private/"; line=7; robots="https://example.com/robots.txt"`.
func decisionValue(d *decision) string {
	var b strings.Builder
	if d.verdict.Allowed {
		b.WriteString("allow")
	} else {
		b.WriteString("disallow")
	}
	param := func(key, value string) {
		b.WriteString("; ")
		b.WriteString(key)
		b.WriteString("=")
		b.WriteString(quoteHeader(value))
	}
	param("token", shown(d.who.token))
	if f := d.decidedByPolicy(); f != nil {
		b.WriteString(policyParams(f))
	}
	if r := d.verdict.Rule; !r.IsZero() {
		param("rule", shown(r.Pattern))
		b.WriteString("; line=")
		b.WriteString(strconv.Itoa(int(r.Line)))
		if reading := d.verdict.Reading; reading != nil {
			param("reading", reading.Path)
		}
	} else {
		param("reason", d.verdict.Reason())
	}
	param("robots", d.robotsURL())
	if d.s.opts.Mode == ModeAudit {
		b.WriteString("; mode=audit")
	}
	return b.String()
}

// quoteHeader quotes s as a structured-field string: printable ASCII only,
// so other bytes are percent-encoded.
func quoteHeader(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7E:
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// setJSON makes p's body the refusal d in JSON: the decision in the words
// of the audit record and check -json.
func (p *page) setJSON(d *decision) {
	out := forbiddenJSON{Status: p.status, Decision: d.robotsDecision(), Policy: d.shownPolicyJSON()}
	if d.usage != nil && d.usage.action != "" {
		out.Purposes, out.Usage = d.usage.purposes, audit.UsageFindingOf(d.usage.refusal, d.usage.action)
	}
	out.UserAgent, out.Token, out.Rule = shown(out.UserAgent), shown(out.Token), shown(out.Rule)
	p.body, _ = json.MarshalIndent(out, "", "  ") // plain strings and ints: cannot fail
	p.body = append(p.body, '\n')
	p.header.Set("Content-Type", "application/json")
}

// forbiddenJSON is the 403 body for clients that accept only JSON: the
// decision in the words of the audit record and check -json.
type forbiddenJSON struct {
	Status int `json:"status"`
	robots.Decision
	// Policy is what in the operator's policy refused or shaped the
	// request, as the audit record's policy field says it.
	Policy audit.PolicyFinding `json:"policy,omitzero"`
	// Purposes and Usage are the crawler's purposes and the usage
	// preference that refused one, as the audit record says them.
	Purposes []string           `json:"purposes,omitempty"`
	Usage    audit.UsageFinding `json:"usage,omitzero"`
}

// forbiddenPage answers a disallowed request, in plain words or in JSON.
func forbiddenPage(req *http.Request, d *decision) *page {
	p := &page{status: http.StatusForbidden, header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}}}
	if wantsJSON(req.Header.Get("Accept")) {
		p.setJSON(d)
	} else if f := d.decidedByPolicy(); f != nil {
		p.body = policyForbiddenText(d, f)
	} else {
		p.body = forbiddenText(d)
	}
	p.header.Set(decisionHeader, decisionValue(d))
	return p
}

func forbiddenText(d *decision) []byte {
	v := d.verdict
	var b bytes.Buffer
	b.WriteString("403 Forbidden: robots.txt does not allow this crawler to fetch this URL.\n\n")
	fmt.Fprintf(&b, "URL:         %s\n", d.asked.url)
	b.WriteString(crawlerLine(d))
	fmt.Fprintf(&b, "robots.txt:  %s\n", d.robotsURL())
	if v.Group != "" {
		lines := make([]string, 0, min(len(v.GroupLines), maxShownLines+1))
		for i, l := range v.GroupLines {
			if i == maxShownLines {
				lines = append(lines, "…")
				break
			}
			lines = append(lines, strconv.Itoa(l))
		}
		fmt.Fprintf(&b, "Group:       User-agent: %s (line %s)\n", shown(v.Group), strings.Join(lines, ", "))
	}
	if r := v.Rule; !r.IsZero() {
		fmt.Fprintf(&b, "Rule:        Disallow: %s (line %d)\n", shown(r.Pattern), r.Line)
		if reading := v.Reading; reading != nil {
			fmt.Fprintf(&b, "Read as:     %s (%s), as an origin may read the path\n", reading.Path, reading.StepsString())
		}
	} else {
		fmt.Fprintf(&b, "Reason:      %s\n", v.Reason())
	}
	if v.Cause == robots.CauseUnreachable {
		b.WriteString("\nRFC 9309 §2.3.1.4: when robots.txt cannot be fetched, crawlers must assume complete disallow.\n")
		if d.lookup.untrusted {
			b.WriteString("robotsgate does not trust the origin's TLS certificate: " + upstreamCAHint + ".\n")
		}
	}
	b.WriteString("\nrobotsgate is a proxy that makes crawlers obey robots.txt (RFC 9309).\n")
	return b.Bytes()
}

// crawlerLine says whose rules applied: "Crawler:     product token ...".
func crawlerLine(d *decision) string {
	token, ua := shown(d.who.token), shown(d.asked.userAgent)
	switch {
	case d.who.credential != "":
		return fmt.Sprintf("Crawler:     product token %q, of proxy credential %q (User-Agent %q)\n", token, shown(d.who.credential), ua)
	case d.who.uaTokenSet:
		return fmt.Sprintf("Crawler:     product token %q, set by the proxy's operator (User-Agent %q)\n", token, ua)
	case d.who.token == "":
		return fmt.Sprintf("Crawler:     no product token in User-Agent %q, so the \"User-agent: *\" group applies\n", ua)
	}
	return fmt.Sprintf("Crawler:     product token %q, from User-Agent %q\n", token, ua)
}

// maxShown bounds what an answer repeats of a value a client or an origin
// chose (a User-Agent, the token made of it, a rule): a 60 KB User-Agent
// must not cost a 200 KB answer.
const maxShown = 256

// maxShownLines bounds the user-agent lines an answer lists: a robots.txt
// may repeat one thousands of times.
const maxShownLines = 32

// shown is s cut to maxShown bytes, between characters, with its length.
func shown(s string) string {
	if len(s) <= maxShown {
		return s
	}
	end := maxShown
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "…[cut: " + strconv.Itoa(len(s)) + " bytes]"
}

// wantsJSON reports whether the client accepts JSON and no text.
func wantsJSON(accept string) bool {
	json := false
	for part := range strings.SplitSeq(accept, ",") {
		mediaType, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch {
		case mediaType == "application/json" || strings.HasSuffix(mediaType, "+json"):
			json = true
		case mediaType == "*/*" || strings.HasPrefix(mediaType, "text/"):
			return false
		}
	}
	return json
}

// page is an answer from the proxy itself, written to a client or, for a
// refused CONNECT, handed to goproxy as a response.
type page struct {
	status int
	header http.Header
	body   []byte
}

// plainPage is a short text answer.
func plainPage(status int, text string) *page {
	return &page{status: status, header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, body: []byte(text)}
}

func (p *page) write(w http.ResponseWriter, req *http.Request) {
	h := w.Header()
	for k, v := range p.header {
		h[k] = v
	}
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(p.body)))
	w.WriteHeader(p.status)
	if req.Method != http.MethodHead {
		w.Write(p.body)
	}
}

func (p *page) response(req *http.Request) *http.Response {
	header := p.header.Clone()
	header.Set("Cache-Control", "no-store")
	resp := &http.Response{
		Status:        strconv.Itoa(p.status) + " " + http.StatusText(p.status),
		StatusCode:    p.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		ContentLength: int64(len(p.body)),
		Body:          io.NopCloser(bytes.NewReader(p.body)),
		Request:       req,
		Close:         true,
	}
	return resp
}

// tracePage answers a TRACE that reached its last hop here (Max-Forwards:
// 0) with the request as received, less the fields that carry secrets
// (RFC 9110 §9.3.8).
func tracePage(req *http.Request) *page {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s %s\r\n", req.Method, req.RequestURI, req.Proto)
	if req.Host != "" {
		fmt.Fprintf(&b, "Host: %s\r\n", req.Host)
	}
	h := req.Header.Clone()
	for _, secret := range []string{"Authorization", "Proxy-Authorization", "Cookie"} {
		h.Del(secret)
	}
	h.Write(&b)
	b.WriteString("\r\n")
	return &page{status: http.StatusOK, header: http.Header{"Content-Type": {"message/http"}}, body: b.Bytes()}
}
