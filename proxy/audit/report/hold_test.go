package report

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// holdLog is an audit log, written out line by line as the proxy writes
// it, of two origins: shop, whose 503 with Retry-After holds it, then
// whose 500s back it off, then whose connection is refused; and news,
// held once, whose lines come between shop's. The second of each
// record's time is its number here.
const holdLog = `{"time":"2026-11-25T10:00:00Z","token":"GPTBot","verdict":"allow","origin":"https://shop.example","mode":"enforce","forwarded":true,"status":200,"upstream_status":200}
{"time":"2026-11-25T10:00:01Z","token":"GPTBot","verdict":"allow","origin":"https://shop.example","mode":"enforce","forwarded":true,"status":503,"upstream_status":503}
{"time":"2026-11-25T10:00:02Z","token":"GPTBot","verdict":"allow","origin":"https://shop.example","mode":"enforce","pace":"held","hold_cause":"retry-after","hold_status":503,"hold_at":"2026-11-25T10:00:01.5Z","hold_until":"2026-11-25T10:00:04.5Z","forwarded":false,"status":429}
{"time":"2026-11-25T10:00:02Z","token":"CCBot","verdict":"allow","origin":"https://news.example","mode":"enforce","pace":"held","hold_cause":"retry-after","hold_status":429,"hold_at":"2026-11-25T10:00:01Z","hold_until":"2026-11-25T11:00:00Z","forwarded":false,"status":429}
{"time":"2026-11-25T10:00:03Z","token":"CCBot","verdict":"allow","origin":"https://shop.example","mode":"enforce","pace":"held","hold_cause":"retry-after","hold_status":503,"hold_at":"2026-11-25T10:00:01.5Z","hold_until":"2026-11-25T10:00:04.5Z","forwarded":false,"status":429}
{"time":"2026-11-25T10:00:03Z","token":"CCBot","verdict":"allow","origin":"https://news.example","mode":"enforce","forwarded":true,"status":200,"upstream_status":200}
{"time":"2026-11-25T10:00:03.5Z","token":"bingbot","verdict":"allow","origin":"https://shop.example","mode":"enforce","pace":"waited","waited_ms":1000,"hold_cause":"retry-after","hold_status":503,"hold_at":"2026-11-25T10:00:01.5Z","hold_until":"2026-11-25T10:00:04.5Z","forwarded":true,"status":200,"upstream_status":200}
{"time":"2026-11-25T10:00:04Z","token":"Googlebot","verdict":"allow","origin":"https://shop.example","mode":"audit","pace":"held","hold_cause":"retry-after","hold_status":503,"hold_at":"2026-11-25T10:00:01.5Z","hold_until":"2026-11-25T10:00:04.5Z","forwarded":true,"status":200,"upstream_status":200}
{"time":"2026-11-25T10:00:05Z","token":"GPTBot","verdict":"disallow","origin":"https://shop.example","mode":"enforce","forwarded":false,"status":403}
{"time":"2026-11-25T10:00:06Z","token":"GPTBot","verdict":"allow","origin":"https://shop.example","mode":"enforce","forwarded":true,"status":500,"upstream_status":500}
{"time":"2026-11-25T10:00:07Z","token":"GPTBot","verdict":"allow","origin":"https://shop.example","mode":"enforce","pace":"backoff","hold_cause":"backoff","hold_status":500,"backoff_step":1,"hold_at":"2026-11-25T10:00:06Z","hold_until":"2026-11-25T10:00:08Z","forwarded":false,"status":429}
{"time":"2026-11-25T10:00:08Z","token":"GPTBot","verdict":"allow","origin":"https://shop.example","mode":"enforce","forwarded":true,"status":500,"upstream_status":500}
{"time":"2026-11-25T10:00:09Z","token":"GPTBot","verdict":"allow","origin":"https://shop.example","mode":"enforce","pace":"backoff","hold_cause":"backoff","hold_status":500,"backoff_step":2,"hold_at":"2026-11-25T10:00:08Z","hold_until":"2026-11-25T10:00:11Z","forwarded":false,"status":429}
{"time":"2026-11-25T10:00:10Z","token":"CCBot","verdict":"allow","origin":"https://shop.example","mode":"enforce","pace":"backoff","hold_cause":"backoff","hold_status":500,"backoff_step":2,"hold_at":"2026-11-25T10:00:08Z","hold_until":"2026-11-25T10:00:11Z","forwarded":false,"status":429}
{"time":"2026-11-25T10:00:12Z","token":"GPTBot","verdict":"allow","origin":"https://shop.example","mode":"enforce","forwarded":true,"status":404,"upstream_status":404}
{"time":"2026-11-25T10:00:13Z","token":"GPTBot","verdict":"allow","origin":"https://shop.example","mode":"enforce","pace":"backoff","hold_cause":"backoff","hold_status":500,"backoff_step":3,"hold_at":"2026-11-25T10:00:12.5Z","hold_until":"2026-11-25T10:00:20Z","forwarded":false,"status":429}
{"time":"2026-11-25T10:00:14Z","token":"GPTBot","verdict":"allow","origin":"https://shop.example","mode":"enforce","pace":"backoff","hold_cause":"backoff","hold_error":"connection refused","backoff_step":1,"pace_group":"address:127.0.0.1","hold_at":"2026-11-25T10:00:13.5Z","hold_until":"2026-11-25T10:00:15Z","forwarded":false,"status":429}
{"time":"2026-11-25T10:00:15Z","token":"GPTBot","verdict":"allow","origin":"https://shop.example","mode":"enforce","pace":"held","forwarded":false,"status":429}
`

func holdAt(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// TestHoldIncidents: a run of records meeting one kind of hold is one
// incident, with its requests as they ended; the origin's failure that
// raises the next step goes on with it, a request that never reached the
// origin too, and the origin's recovery ends it. Each origin has its own.
func TestHoldIncidents(t *testing.T) {
	_, rep := readLogs(t, Options{}, []byte(holdLog))
	origins := map[string]*Origin{}
	for i := range rep.Origins {
		origins[rep.Origins[i].Origin] = &rep.Origins[i]
	}
	shop, news := origins["https://shop.example"], origins["https://news.example"]
	want := []HoldIncident{
		{Cause: "retry-after", Status: 503, From: holdAt(2), To: holdAt(4), Requests: 4, Refused: 2, Waited: 1, Forwarded: 1, HeldUntil: holdAt(4.5)},
		// The 500s at 8 raised it a step, the 404 at 12 ended it.
		{Cause: "backoff", Status: 500, From: holdAt(7), To: holdAt(10), Requests: 3, Refused: 3, HeldUntil: holdAt(11), BackoffStep: 2},
		{Cause: "backoff", Status: 500, From: holdAt(13), To: holdAt(13), Requests: 1, Refused: 1, HeldUntil: holdAt(20), BackoffStep: 3},
		{Cause: "backoff", Error: "connection refused", PaceGroup: "address:127.0.0.1", From: holdAt(14), To: holdAt(14), Requests: 1, Refused: 1, HeldUntil: holdAt(15), BackoffStep: 1},
		// A record that gives its pace alone.
		{Cause: "retry-after", From: holdAt(15), To: holdAt(15), Requests: 1, Refused: 1},
	}
	if !reflect.DeepEqual(shop.HoldIncidents, want) {
		t.Errorf("shop's hold incidents\n got %+v\nwant %+v", shop.HoldIncidents, want)
	}
	wantNews := []HoldIncident{{Cause: "retry-after", Status: 429, From: holdAt(2), To: holdAt(2), Requests: 1, Refused: 1, HeldUntil: t0.Add(time.Hour)}}
	if !reflect.DeepEqual(news.HoldIncidents, wantNews) {
		t.Errorf("news's hold incidents\n got %+v\nwant %+v", news.HoldIncidents, wantNews)
	}
	// Held requests count in the pacing columns as they ended, and as
	// held besides.
	if c := shop.Counts; c.Held != 10 || c.TooEarly != 8 || c.WouldBeTooEarly != 1 || c.Delayed != 1 || c.Requests != 16 {
		t.Errorf("shop counts %+v, want 16 requests, 10 held: 8 answered 429, 1 would be, 1 delayed", c)
	}
	if c := rep.Totals; c.Held != 11 || c.TooEarly != 9 {
		t.Errorf("totals: %d held, %d too early; want 11 and 9", c.Held, c.TooEarly)
	}
	if shop.HoldIncidentsOmitted != 0 || len(shop.Incidents) != 0 {
		t.Errorf("%d hold incidents omitted, robots.txt incidents %+v", shop.HoldIncidentsOmitted, shop.Incidents)
	}
}

// The incident rows, in text and HTML: what held the origin, from, to,
// its requests and how they ended, the latest end of a hold; robots.txt's
// incidents among them by their start. The origins table counts held
// requests.
func TestHoldIncidentsShown(t *testing.T) {
	robotsDown := `{"time":"2026-11-25T10:00:06.5Z","token":"GPTBot","verdict":"disallow","origin":"https://shop.example","robots_outcome":"unreachable","robots_status":503,"mode":"enforce","forwarded":false,"status":403}` + "\n"
	_, rep := readLogs(t, Options{}, []byte(holdLog+robotsDown))

	var out bytes.Buffer
	if err := WriteText(&out, rep); err != nil {
		t.Fatal(err)
	}
	txt := out.String()
	rows := []string{
		`https://shop\.example\s+2026-11-25 10:00:02Z\s+2026-11-25 10:00:04Z\s+4\s+2\s+1\s+0\s+1\s+2026-11-25 10:00:04Z held: 503 Retry-After`,
		`https://shop\.example\s+2026-11-25 10:00:06Z\s+2026-11-25 10:00:06Z\s+1\s+-\s+-\s+-\s+-\s+- robots\.txt unreachable: 503`,
		`https://shop\.example\s+2026-11-25 10:00:07Z\s+2026-11-25 10:00:10Z\s+3\s+3\s+0\s+0\s+0\s+2026-11-25 10:00:11Z backoff: 500, step up to 2`,
		`https://shop\.example\s+2026-11-25 10:00:13Z\s+2026-11-25 10:00:13Z\s+1\s+1\s+0\s+0\s+0\s+2026-11-25 10:00:20Z backoff: 500, step up to 3`,
		`https://shop\.example\s+2026-11-25 10:00:14Z\s+2026-11-25 10:00:14Z\s+1\s+1\s+0\s+0\s+0\s+2026-11-25 10:00:15Z backoff: connection refused, step up to 1 \(group address:127\.0\.0\.1\)`,
		`https://shop\.example\s+2026-11-25 10:00:15Z\s+2026-11-25 10:00:15Z\s+1\s+1\s+0\s+0\s+0\s+- held: Retry-After`,
		`https://news\.example\s+2026-11-25 10:00:02Z\s+2026-11-25 10:00:02Z\s+1\s+1\s+0\s+0\s+0\s+2026-11-25 11:00:00Z held: 429 Retry-After`,
	}
	var at []int
	for _, row := range rows {
		loc := regexp.MustCompile(`(?m)^\s+` + row + `$`).FindStringIndex(txt)
		if loc == nil {
			t.Errorf("the text has no row %s:\n%s", row, txt)
			continue
		}
		at = append(at, loc[0])
	}
	if len(at) == len(rows) && !slices.IsSorted(at) {
		t.Errorf("incident rows out of order:\n%s", txt)
	}
	// ORIGIN REQUESTS ALLOWED REFUSED WOULD-BE COMPLIANCE DELAYED 429 WOULD-429 HELD
	if !regexp.MustCompile(`(?m)^\s+https://shop\.example\s+17\s+15\s+2\s+0\s+88\.2%\s+1\s+8\s+1\s+10\s`).MatchString(txt) {
		t.Errorf("the origins table has no row for shop with 10 held:\n%s", txt)
	}
	if !strings.Contains(txt, "9 too early (429), 1 would be too early (audit mode)\nHeld:       11 requests met the origin's hold") {
		t.Errorf("the summary does not count the held requests:\n%s", txt)
	}

	p := renderPage(t, rep)
	got := p.rows(t, "incidents")
	wantHTML := [][]string{
		{"https://shop.example", "held: 503 Retry-After", "2026-11-25 10:00:02Z", "2026-11-25 10:00:04Z", "4", "2", "1", "0", "1", "2026-11-25 10:00:04Z"},
		{"https://shop.example", "robots.txt unreachable: 503", "2026-11-25 10:00:06Z", "2026-11-25 10:00:06Z", "1", "-", "-", "-", "-", "-"},
		{"https://shop.example", "backoff: 500, step up to 2", "2026-11-25 10:00:07Z", "2026-11-25 10:00:10Z", "3", "3", "0", "0", "0", "2026-11-25 10:00:11Z"},
		{"https://shop.example", "backoff: 500, step up to 3", "2026-11-25 10:00:13Z", "2026-11-25 10:00:13Z", "1", "1", "0", "0", "0", "2026-11-25 10:00:20Z"},
		{"https://shop.example", "backoff: connection refused, step up to 1 (group address:127.0.0.1)", "2026-11-25 10:00:14Z", "2026-11-25 10:00:14Z", "1", "1", "0", "0", "0", "2026-11-25 10:00:15Z"},
		{"https://shop.example", "held: Retry-After", "2026-11-25 10:00:15Z", "2026-11-25 10:00:15Z", "1", "1", "0", "0", "0", "-"},
		{"https://news.example", "held: 429 Retry-After", "2026-11-25 10:00:02Z", "2026-11-25 10:00:02Z", "1", "1", "0", "0", "0", "2026-11-25 11:00:00Z"},
	}
	if !reflect.DeepEqual(got, wantHTML) {
		t.Errorf("#incidents rows\n got %q\nwant %q", got, wantHTML)
	}
	// Origin, 8 counts, then Held.
	if held := p.column(t, "origins", 9); !slices.Equal(held, []string{"10", "1"}) {
		t.Errorf("#origins Held column %q, want 10 and 1", held)
	}
	if got := text(p.byID(t, "total-held")); got != "11" {
		t.Errorf("held card %q, want 11", got)
	}
	headings := find(p.byID(t, "origins"), func(n *html.Node) bool { return n.Data == "th" })
	if len(headings) != len(p.rows(t, "origins")[0]) {
		t.Errorf("#origins has %d headings for %d cells a row", len(headings), len(p.rows(t, "origins")[0]))
	}
}

// An origin keeps its latest hold incidents, and says how many earlier
// ones it did not; a hold's texts from the log are kept within the audit
// log's bounds.
func TestHoldIncidentsBounded(t *testing.T) {
	const n = maxIncidents + 3
	var log bytes.Buffer
	huge := strings.Repeat("é", 50_000) // 100 KB
	for i := range n {
		fmt.Fprintf(&log, `{"time":"%s","verdict":"allow","origin":"https://o.example","pace":"backoff","hold_cause":"backoff","hold_status":%d,"hold_error":%q,"pace_group":%q,"forwarded":false,"status":429}`+"\n",
			holdAt(float64(i)).Format(time.RFC3339), 500+i, huge, "domain:"+huge)
	}
	_, rep := readLogs(t, Options{}, log.Bytes())
	o := rep.Origins[0]
	if len(o.HoldIncidents) != maxIncidents || o.HoldIncidentsOmitted != n-maxIncidents {
		t.Fatalf("%d hold incidents kept, %d omitted; want %d and %d", len(o.HoldIncidents), o.HoldIncidentsOmitted, maxIncidents, n-maxIncidents)
	}
	for k, in := range o.HoldIncidents {
		i := n - maxIncidents + k // the earliest are the ones dropped
		if in.Status != 500+i || !in.From.Equal(holdAt(float64(i))) || in.Requests != 1 {
			t.Errorf("incident %d: %+v, want status %d from second %d", k, in, 500+i, i)
		}
		if len(in.Error) > holdErrorBound || len(in.PaceGroup) > nameBound || !utf8.ValidString(in.Error) || !utf8.ValidString(in.PaceGroup) ||
			!strings.HasSuffix(in.Error, "é…") || !strings.HasPrefix(in.PaceGroup, "domain:é") {
			t.Errorf("incident %d keeps an error of %d bytes and a group of %d, want them cut whole characters within %d and %d",
				k, len(in.Error), len(in.PaceGroup), holdErrorBound, nameBound)
		}
	}
}
