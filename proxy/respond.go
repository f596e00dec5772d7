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
	param("token", d.rec.Token)
	if r := d.verdict.Rule; r != nil {
		param("rule", r.Pattern)
		b.WriteString("; line=")
		b.WriteString(strconv.Itoa(r.Line))
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

// forbiddenJSON is the 403 body for clients that accept only JSON.
type forbiddenJSON struct {
	Status     int       `json:"status"`
	Decision   string    `json:"decision"`
	URL        string    `json:"url"`
	Token      string    `json:"token"`
	UserAgent  string    `json:"user_agent"`
	RobotsTxt  string    `json:"robots_txt"`
	Reason     string    `json:"reason"`
	Rule       *ruleJSON `json:"rule,omitempty"`
	Group      string    `json:"group,omitempty"`
	GroupLines []int     `json:"group_lines,omitempty"`
}

type ruleJSON struct {
	Directive string `json:"directive"`
	Pattern   string `json:"pattern"`
	Line      int    `json:"line"`
}

// forbidden answers a disallowed request, in plain words or in JSON.
func forbidden(req *http.Request, d *decision) *http.Response {
	v := d.verdict
	var body []byte
	contentType := "text/plain; charset=utf-8"
	if wantsJSON(req.Header.Get("Accept")) {
		out := forbiddenJSON{
			Status: http.StatusForbidden, Decision: "disallow", URL: d.rec.URL, Token: d.rec.Token,
			UserAgent: d.rec.UserAgent, RobotsTxt: d.robotsURL(), Reason: v.Reason(), Group: v.Group, GroupLines: v.GroupLines,
		}
		if r := v.Rule; r != nil {
			out.Rule = &ruleJSON{Directive: "disallow", Pattern: r.Pattern, Line: r.Line}
		}
		body, _ = json.MarshalIndent(out, "", "  ") // plain strings and ints: cannot fail
		body = append(body, '\n')
		contentType = "application/json"
	} else {
		body = forbiddenText(d)
	}
	resp := newResponse(req, http.StatusForbidden, contentType, body)
	resp.Header.Set(decisionHeader, decisionValue(d))
	return resp
}

func forbiddenText(d *decision) []byte {
	v := d.verdict
	var b bytes.Buffer
	b.WriteString("403 Forbidden: robots.txt does not allow this crawler to fetch this URL.\n\n")
	fmt.Fprintf(&b, "URL:         %s\n", d.rec.URL)
	if d.rec.Token == "" {
		fmt.Fprintf(&b, "Crawler:     no product token in User-Agent %q, so the \"User-agent: *\" group applies\n", d.rec.UserAgent)
	} else {
		fmt.Fprintf(&b, "Crawler:     product token %q, from User-Agent %q\n", d.rec.Token, d.rec.UserAgent)
	}
	fmt.Fprintf(&b, "robots.txt:  %s\n", d.robotsURL())
	if v.Group != "" {
		lines := make([]string, len(v.GroupLines))
		for i, l := range v.GroupLines {
			lines[i] = strconv.Itoa(l)
		}
		fmt.Fprintf(&b, "Group:       User-agent: %s (line %s)\n", v.Group, strings.Join(lines, ", "))
	}
	if r := v.Rule; r != nil {
		fmt.Fprintf(&b, "Rule:        Disallow: %s (line %d)\n", r.Pattern, r.Line)
	} else {
		fmt.Fprintf(&b, "Reason:      %s\n", v.Reason())
	}
	if v.Cause == robots.CauseUnreachable {
		b.WriteString("\nRFC 9309 §2.3.1.4: when robots.txt cannot be fetched, crawlers must assume complete disallow.\n")
	}
	b.WriteString("\nrobotsgate is a proxy that makes crawlers obey robots.txt (RFC 9309).\n")
	return b.Bytes()
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

// plainResponse is a short text answer from the proxy itself.
func plainResponse(req *http.Request, status int, text string) *http.Response {
	return newResponse(req, status, "text/plain; charset=utf-8", []byte(text))
}

func newResponse(req *http.Request, status int, contentType string, body []byte) *http.Response {
	resp := &http.Response{
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {contentType}, "Cache-Control": {"no-store"}},
		ContentLength: int64(len(body)),
		Body:          io.NopCloser(bytes.NewReader(body)),
		Request:       req,
	}
	if req != nil && req.Method == http.MethodHead {
		resp.Body = http.NoBody
	}
	return resp
}
