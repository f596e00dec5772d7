package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"

	"robotsgate/proxy/audit"
)

// fullReport is a report with every part filled: crawlers by token and
// by credential, mismatches, incidents (some omitted), refusals, a
// malformed line and a cut last line.
func fullReport(t *testing.T) *Report {
	t.Helper()
	log := sampleLog(t, 2000)
	var recs []audit.Record
	// More URLs than the sketch holds, more User-Agents than a crawler
	// keeps: counts with an overcount.
	for i := range sketchCapacity + 100 {
		r := refused(t0.Add(time.Duration(i) * time.Second))
		r.Credential, r.UAMismatch, r.Pace = "acme", true, "waited"
		r.URL = fmt.Sprintf("https://example.com/private/%d", i)
		r.UserAgent = fmt.Sprintf("AcmeBot/%d", i%(crawlerValues+8))
		claimed := "Googlebot"
		r.UAToken = &claimed
		if i%2 == 0 && i < 2*maxIncidents+4 {
			r.RobotsOutcome, r.RobotsStatus, r.Forwarded = "unreachable", 503, true
		}
		recs = append(recs, r)
		// Holds of the origin, each of another status: more incidents
		// than an origin keeps.
		if i < maxIncidents+4 {
			h := allowed(r.Time)
			h.Credential, h.Pace, h.Forwarded, h.Status = "acme", "backoff", false, 429
			h.HoldCause, h.HoldStatus, h.BackoffStep, h.PaceGroup = "backoff", 500+i, i+1, "address:127.0.0.1"
			h.HoldAt, h.HoldUntil = r.Time, r.Time.Add(time.Minute)
			recs = append(recs, h)
		}
	}
	log = append(append(log, encode(t, recs...)...), "junk\n{"...)
	_, rep := readLogs(t, Options{Filter: Filter{Since: t0.Add(-time.Hour), Tokens: []string{"acme", "GPTBot", "bingbot"}}}, log)
	omitted, overcount := false, rep.TopPaths[len(rep.TopPaths)-1].Overcount > 0
	for _, o := range rep.Origins {
		omitted = omitted || o.IncidentsOmitted > 0 && o.HoldIncidentsOmitted > 0
	}
	for _, c := range rep.Crawlers {
		overcount = overcount && (c.By == "token" || c.UserAgents[0].Overcount > 0)
	}
	if rep.Malformed != 1 || !rep.Sources[0].Truncated || len(rep.Crawlers) != 3 || !omitted || !overcount {
		t.Fatalf("the report lacks parts: %d malformed, %+v, %d crawlers, incidents omitted: %v, overcounts: %v",
			rep.Malformed, rep.Sources, len(rep.Crawlers), omitted, overcount)
	}
	return rep
}

func TestWriteJSONRoundTrips(t *testing.T) {
	rep := fullReport(t)
	var out bytes.Buffer
	if err := WriteJSON(&out, rep); err != nil {
		t.Fatal(err)
	}
	var back Report
	dec := json.NewDecoder(bytes.NewReader(out.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&back); err != nil {
		t.Fatal(err)
	}
	// JSON leaves out empty lists of claimed tokens; that is no change.
	for _, r := range []*Report{rep, &back} {
		for i := range r.Crawlers {
			if len(r.Crawlers[i].ClaimedTokens) == 0 {
				r.Crawlers[i].ClaimedTokens = nil
			}
		}
	}
	if !reflect.DeepEqual(&back, rep) {
		t.Errorf("the report read back differs:\n%s", out.Bytes())
	}
}

// hostile values a crawler or a log may carry into a report.
const (
	ansi      = "\x1b[31mred\x1b[0m\x1b]0;title\x07"
	bidi      = "abc\u202Edcba\u2066x\u2069"
	scriptTag = "<script>alert(1)</script>"
	imgTag    = `"><img src=x onerror=alert(1)>`
)

func hostileReport(t *testing.T) *Report {
	t.Helper()
	long := strings.Repeat("A", 10_000)
	var recs []audit.Record
	for i, v := range []string{ansi, "tab\there", "new\nline\r\n", bidi, long, scriptTag, imgTag, "\u0085\u009b31m\x7f"} {
		r := refused(t0.Add(time.Duration(i) * time.Second))
		r.UserAgent, r.Token, r.URL, r.Origin, r.Rule, r.Group = v+"ua", v+"tok", v+"url", v+"origin", v+"rule", v+"group"
		r.RobotsOutcome, r.RobotsStatus = "unreachable", 503
		r.Pace, r.HoldCause, r.HoldError, r.PaceGroup = "backoff", "backoff", v+"holderr", v+"pacegroup"
		// The same under a credential, whose User-Agent claims a token.
		cred := r
		claimed := v + "claimed"
		cred.Credential, cred.UAToken, cred.UAMismatch = v+"cred", &claimed, true
		// Allowed by an exception of a policy of the same words.
		exc := allowed(r.Time)
		exc.Origin, exc.Token = v+"origin", v+"tok"
		exc.Policy = audit.PolicyFinding{File: v + "polfile", Line: i, Kind: audit.PolicyException, Rule: v + "polrule", Reason: v + "polreason"}
		exc.PolicyVersion, exc.Purposes = v+"version", []string{v + "purpose"}
		recs = append(recs, r, cred, exc)
	}
	log := append(encode(t, recs...), ansi+scriptTag+"\n"...)
	rd := NewReader(Options{Now: t0})
	if err := rd.Read(t.Context(), "log"+ansi+imgTag, bytes.NewReader(log)); err != nil {
		t.Fatal(err)
	}
	rep := rd.Report()
	if rep.Records != int64(len(recs)) || rep.Malformed != 1 {
		t.Fatalf("%d records, %d malformed", rep.Records, rep.Malformed)
	}
	// Such a filter lets none of these records through: it is only shown.
	rep.Filter = Filter{Tokens: []string{ansi, scriptTag}, Origins: []string{imgTag, bidi}}
	return rep
}

func TestWriteTextIsSafe(t *testing.T) {
	rep := hostileReport(t)
	var out bytes.Buffer
	if err := WriteText(&out, rep); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !utf8.ValidString(text) {
		t.Error("the text is not valid UTF-8")
	}
	for i, r := range text {
		if r != '\n' && unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			t.Errorf("%U at byte %d: %q", r, i, text[max(0, i-20):min(len(text), i+20)])
		}
	}
	if strings.Contains(text, strings.Repeat("A", 301)) {
		t.Error("a 10 KB value is shown whole")
	}
	// The values are shown, made safe, not dropped.
	for _, want := range []string{"\uFFFD[31mred", "abc\uFFFDdcba", scriptTag + "ua", scriptTag + "holderr", scriptTag + "polreason", imgTag + "purpose", "tab\uFFFDherepolfile:1", "\uFFFD[31mred\uFFFD[0m\uFFFD]0;title\uFFFDpacegroup", "tab\uFFFDhere", strings.Repeat("A", 100) + "…"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q", want)
		}
	}
}

func TestClean(t *testing.T) {
	for _, c := range []struct {
		in    string
		limit int
		want  string
	}{
		{"GPTBot/1.0", 100, "GPTBot/1.0"},
		{"", 10, ""},
		{"\x1b[31mred", 100, "\uFFFD[31mred"},
		{"a\tb\nc\r\n", 100, "a\uFFFDb\uFFFDc\uFFFD\uFFFD"},
		{"\x00\x7f\u0085\u009b", 100, "\uFFFD\uFFFD\uFFFD\uFFFD"},             // NUL, DEL, C1 controls
		{"a\u202Eb\u200Fc\u2066d\u2069", 100, "a\uFFFDb\uFFFDc\uFFFDd\uFFFD"}, // bidi overrides, marks, isolates
		{"a\xffb", 100, "a\uFFFDb"},                                           // not UTF-8
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"héllo wörld", 4, "héll…"},
		{"\x1b\x1b\x1bxyz", 2, "\uFFFD\uFFFD…"},
		{"日本語のテキスト", 3, "日本語…"},
	} {
		if got := clean(c.in, c.limit); got != c.want {
			t.Errorf("clean(%q, %d) = %q, want %q", c.in, c.limit, got, c.want)
		}
	}
}

func TestNumber(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0", 7: "7", 999: "999", 1000: "1,000", 12345: "12,345", 999999: "999,999", 1234567: "1,234,567",
		math.MaxInt64: "9,223,372,036,854,775,807", -5: "-5",
	} {
		if got := number(n); got != want {
			t.Errorf("number(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		rate *float64
		want string
	}{
		{nil, "-"}, {rate(0), "0.0%"}, {rate(1), "100.0%"}, {rate(0.5), "50.0%"}, {rate(2.0 / 3), "66.7%"}, {rate(0.0004), "0.0%"},
	} {
		if got := percent(c.rate); got != c.want {
			t.Errorf("percent(%v) = %q, want %q", c.rate, got, c.want)
		}
	}
}

func TestBytesWords(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1: "1 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 10 << 20: "10.0 MiB",
		1<<20 - 1: "1.0 MiB", 3 << 30: "3.0 GiB", 1 << 40: "1.0 TiB", 5 << 50: "5.0 PiB", 1 << 60: "1024.0 PiB",
	} {
		if got := bytesWords(n); got != want {
			t.Errorf("bytesWords(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestWriteHTMLEscapes(t *testing.T) {
	rep := hostileReport(t)
	var out bytes.Buffer
	if err := WriteHTML(&out, rep); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	for _, raw := range []string{"<img", "<script>alert", "<IMG", "onerror=alert(1)>"} {
		if strings.Contains(page, raw) {
			i := strings.Index(page, raw)
			t.Errorf("raw %q in the page: %q", raw, page[max(0, i-100):min(len(page), i+100)])
		}
	}
	// Each value is on the page, escaped.
	for _, field := range []string{"ua", "url", "origin", "rule", "group", "cred", "claimed", "holderr", "pacegroup", "polfile", "polrule", "polreason", "version", "purpose"} {
		for _, v := range []string{scriptTag, imgTag} {
			escaped := html.EscapeString(v + field)
			if !strings.Contains(page, escaped) {
				t.Errorf("the page does not show %q escaped (%q)", v+field, escaped)
			}
		}
	}
}

// The page loads nothing and runs nothing but its own style and script,
// which its Content-Security-Policy names by their hashes.
func TestWriteHTMLIsSelfContained(t *testing.T) {
	rep := hostileReport(t)
	var out bytes.Buffer
	if err := WriteHTML(&out, rep); err != nil {
		t.Fatal(err)
	}
	var policy string
	var styles, scripts []string
	z := html.NewTokenizer(bytes.NewReader(out.Bytes()))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		tok := z.Token()
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		for _, a := range tok.Attr {
			switch name := strings.ToLower(a.Key); {
			case name == "src" || name == "href" || name == "srcset" || name == "action" || name == "formaction" ||
				name == "poster" || name == "background" || strings.HasSuffix(name, ":href") || strings.HasPrefix(name, "on"):
				t.Errorf("<%s %s=%q>", tok.Data, a.Key, a.Val)
			case name == "content" && tok.Data == "meta" && strings.Contains(a.Val, "default-src"):
				policy = a.Val
			}
		}
		switch tok.Data {
		case "style", "script":
			// The tokenizer reads the element's text raw, as a browser.
			if z.Next() != html.TextToken {
				t.Fatalf("<%s> without text", tok.Data)
			}
			text := string(z.Text())
			if tok.Data == "style" {
				styles = append(styles, text)
			} else {
				scripts = append(scripts, text)
			}
		case "link", "iframe", "object", "embed", "img", "base", "form":
			t.Errorf("a <%s> element", tok.Data)
		}
	}
	if len(styles) != 1 || len(scripts) != 1 {
		t.Fatalf("%d style and %d script elements, want one of each", len(styles), len(scripts))
	}
	if strings.Contains(styles[0], "url(") || strings.Contains(styles[0], "@import") {
		t.Error("the style loads something")
	}
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	want := "default-src 'none'; style-src " + hash(styles[0]) + "; script-src " + hash(scripts[0])
	if policy != want {
		t.Errorf("Content-Security-Policy %q, want %q", policy, want)
	}
	if !regexp.MustCompile(`^default-src 'none'; style-src '[^ ]+'; script-src '[^ ]+'$`).MatchString(policy) {
		t.Errorf("Content-Security-Policy %q", policy)
	}
}

// Reports at the edges FuzzRead reaches, written as HTML (which FuzzRead
// leaves out): no record, years 0 and 9999, negative bytes, odd verdicts.
func TestWriteHTMLOddReports(t *testing.T) {
	for name, log := range map[string]string{
		"no record": "",
		"years 0 and 9999": `{"time":"0000-01-01T00:00:00Z","verdict":"allow","origin":"x"}` + "\n" +
			`{"time":"9999-12-31T23:59:59-05:00","verdict":"disallow","robots_outcome":"unreachable","origin":"x"}`,
		"negative bytes": `{"time":"2026-11-25T10:00:00Z","verdict":"allow","bytes":-9223372036854775808}` + "\n" +
			`{"time":"2026-11-25T10:00:00Z","verdict":"allow","bytes":-1}`,
		"odd verdicts and paces": `{"time":"2026-11-25T10:00:00Z","verdict":"maybe","pace":"busy","forwarded":true}` + "\n" +
			`{"time":"2026-11-25T10:00:01Z","verdict":"disallow","denied_destination":true,"ua_mismatch":true}` + "\nnot json\n{",
	} {
		t.Run(name, func(t *testing.T) {
			_, rep := readLogs(t, Options{}, []byte(log))
			var out bytes.Buffer
			if err := WriteHTML(&out, rep); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "</html>") {
				t.Error("the page is not whole")
			}
		})
	}
}
