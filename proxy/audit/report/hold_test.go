package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

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
		fmt.Fprintf(&log, `{"time":"%s","verdict":"allow","origin":"https://o.example","pace":"backoff","hold_cause":"backoff","hold_status":%d,"hold_error":%q,"pace_group":%q,"hold_origin":%q,"forwarded":false,"status":429}`+"\n",
			holdAt(float64(i)).Format(time.RFC3339), 500+i, huge, "domain:"+huge, "https://"+huge)
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
		if len(in.HoldOrigin) > nameBound || !utf8.ValidString(in.HoldOrigin) || !strings.HasPrefix(in.HoldOrigin, "https://é") {
			t.Errorf("incident %d keeps the origin that set it in %d bytes, want it cut whole characters within %d", k, len(in.HoldOrigin), nameBound)
		}
	}
}

// TestHoldIncidentEnds: a success of the origin ends an incident whether
// its request met the hold (it waited the hold out) or not; records that
// met a hold set before that success, logged after it, still count in
// it; a counted failure does not end it. A request whose client hung up
// while held counts as gone, not as waited.
func TestHoldIncidentEnds(t *testing.T) {
	const (
		held = `{"time":"%s","token":"GPTBot","verdict":"allow","origin":"https://o.example","mode":"enforce","pace":"held","hold_cause":"retry-after","hold_status":503,"hold_at":"%s","hold_until":"%s","forwarded":false,"status":429}`
		// A wait-mode record, forwarded when the hold ended.
		waited = `{"time":"%s","token":"CCBot","verdict":"allow","origin":"https://o.example","mode":"enforce","pace":"waited","waited_ms":1000,"hold_cause":"retry-after","hold_status":503,"hold_at":"%s","hold_until":"%s","forwarded":true,"status":%[4]d,"upstream_status":%[4]d}`
		gone   = `{"time":"%s","token":"CCBot","verdict":"allow","origin":"https://o.example","mode":"enforce","pace":"gone","waited_ms":500,"hold_cause":"retry-after","hold_status":503,"hold_at":"%s","hold_until":"%s","forwarded":false,"status":503,"error":"the client left while held"}`
		plain  = `{"time":"%s","token":"GPTBot","verdict":"allow","origin":"https://o.example","mode":"enforce","forwarded":true,"status":%[2]d,"upstream_status":%[2]d}`
		// A record that gives its pace alone, no hold_at.
		bare = `{"time":"%s","token":"GPTBot","verdict":"allow","origin":"https://o.example","mode":"enforce","pace":"held","hold_cause":"retry-after","hold_status":503,"forwarded":false,"status":429}`
	)
	at := func(s float64) string { return holdAt(s).Format(time.RFC3339Nano) }
	lines := []string{
		fmt.Sprintf(plain, at(1), 503),
		fmt.Sprintf(held, at(2), at(1), at(3)),
		fmt.Sprintf(waited, at(2.5), at(1), at(3), 200), // its 200 ends the incident...
		fmt.Sprintf(waited, at(2.6), at(1), at(3), 200), // ...released with it, logged after: the same incident
		fmt.Sprintf(gone, at(2.7), at(1), at(3)),        // its client hung up while held
		fmt.Sprintf(plain, at(5), 503),                  // the origin fails again
		fmt.Sprintf(held, at(6), at(5), at(8)),          // a new hold: a new incident, of the same kind
		fmt.Sprintf(waited, at(6.5), at(5), at(8), 500), // a counted failure does not end it
		fmt.Sprintf(held, at(9), at(8.5), at(12)),
		fmt.Sprintf(plain, at(13), 200), // the origin's recovery ends it
		fmt.Sprintf(bare, at(14)),       // no hold_at: not shown to belong to the one ended
	}
	_, rep := readLogs(t, Options{}, []byte(strings.Join(lines, "\n")+"\n"))
	want := []HoldIncident{
		{Cause: "retry-after", Status: 503, From: holdAt(2), To: holdAt(2.7), Requests: 4, Refused: 1, Waited: 2, Gone: 1, HeldUntil: holdAt(3)},
		{Cause: "retry-after", Status: 503, From: holdAt(6), To: holdAt(9), Requests: 3, Refused: 2, Waited: 1, HeldUntil: holdAt(12)},
		{Cause: "retry-after", Status: 503, From: holdAt(14), To: holdAt(14), Requests: 1, Refused: 1},
	}
	if got := rep.Origins[0].HoldIncidents; !reflect.DeepEqual(got, want) {
		t.Errorf("hold incidents\n got %+v\nwant %+v", got, want)
	}

	var out bytes.Buffer
	if err := WriteText(&out, rep); err != nil {
		t.Fatal(err)
	}
	// REQUESTS 429 WAITED GONE FORWARDED HELD UNTIL
	if row := `(?m)^\s+https://o\.example\s+2026-11-25 10:00:02Z\s+2026-11-25 10:00:02Z\s+4\s+1\s+2\s+1\s+0\s+2026-11-25 10:00:03Z held: 503 Retry-After$`; !regexp.MustCompile(row).MatchString(out.String()) {
		t.Errorf("the text has no row %s:\n%s", row, out.String())
	}
	got := renderPage(t, rep).rows(t, "incidents")[0]
	if want := []string{"https://o.example", "held: 503 Retry-After", "2026-11-25 10:00:02Z", "2026-11-25 10:00:02Z", "4", "1", "2", "1", "0", "2026-11-25 10:00:03Z"}; !slices.Equal(got, want) {
		t.Errorf("#incidents first row %q, want %q", got, want)
	}
}

// TestHoldOrigin: under ROBOTSGATE_PACE_BY=domain one host's 503 holds
// the others of its domain; their incidents name the origin that set the
// hold, and a hold another host set is another incident.
func TestHoldOrigin(t *testing.T) {
	const line = `{"time":"%s","token":"GPTBot","verdict":"allow","origin":"%s","mode":"enforce","pace":"held","hold_cause":"retry-after","hold_status":503,%s"pace_group":"domain:example.com","hold_at":"%s","hold_until":"%s","forwarded":false,"status":429}`
	by := func(origin string) string { return `"hold_origin":"` + origin + `",` }
	at := func(s float64) string { return holdAt(s).Format(time.RFC3339) }
	log := strings.Join([]string{
		fmt.Sprintf(line, at(2), "https://www.example.com", "", at(1), at(5)),
		fmt.Sprintf(line, at(2), "https://shop.example.com", by("https://www.example.com"), at(1), at(5)),
		fmt.Sprintf(line, at(3), "https://shop.example.com", by("https://www.example.com"), at(1), at(5)),
		fmt.Sprintf(line, at(4), "https://shop.example.com", by("https://blog.example.com"), at(3.5), at(9)),
	}, "\n") + "\n"
	_, rep := readLogs(t, Options{}, []byte(log))
	origins := map[string][]HoldIncident{}
	for _, o := range rep.Origins {
		origins[o.Origin] = o.HoldIncidents
	}
	held := HoldIncident{Cause: "retry-after", Status: 503, PaceGroup: "domain:example.com"}
	www, byWWW, byBlog := held, held, held
	www.From, www.To, www.Requests, www.Refused, www.HeldUntil = holdAt(2), holdAt(2), 1, 1, holdAt(5)
	byWWW.HoldOrigin, byWWW.From, byWWW.To, byWWW.Requests, byWWW.Refused, byWWW.HeldUntil = "https://www.example.com", holdAt(2), holdAt(3), 2, 2, holdAt(5)
	byBlog.HoldOrigin, byBlog.From, byBlog.To, byBlog.Requests, byBlog.Refused, byBlog.HeldUntil = "https://blog.example.com", holdAt(4), holdAt(4), 1, 1, holdAt(9)
	if got := origins["https://www.example.com"]; !reflect.DeepEqual(got, []HoldIncident{www}) {
		t.Errorf("www's hold incidents\n got %+v\nwant %+v", got, []HoldIncident{www})
	}
	if got, want := origins["https://shop.example.com"], []HoldIncident{byWWW, byBlog}; !reflect.DeepEqual(got, want) {
		t.Errorf("shop's hold incidents\n got %+v\nwant %+v", got, want)
	}

	var js bytes.Buffer
	if err := WriteJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Origins []struct {
			HoldIncidents []map[string]any `json:"hold_incidents"`
		} `json:"origins"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var setBy []any
	for _, o := range doc.Origins {
		for _, in := range o.HoldIncidents {
			setBy = append(setBy, in["hold_origin"])
		}
	}
	// shop's two, by www and blog; www's own names none.
	if want := []any{"https://www.example.com", "https://blog.example.com", nil}; !reflect.DeepEqual(setBy, want) {
		t.Errorf("the JSON's hold_origin of the incidents: %q, want %q", setBy, want)
	}
	var txt bytes.Buffer
	if err := WriteText(&txt, rep); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{
		" held: 503 Retry-After (group domain:example.com) (set by https://www.example.com)\n",
		" held: 503 Retry-After (group domain:example.com) (set by https://blog.example.com)\n",
		" held: 503 Retry-After (group domain:example.com)\n",
	} {
		if !strings.Contains(txt.String(), kind) {
			t.Errorf("the text has no incident %q:\n%s", kind, txt.String())
		}
	}
	if kinds := renderPage(t, rep).column(t, "incidents", 1); !slices.Contains(kinds, "held: 503 Retry-After (group domain:example.com) (set by https://www.example.com)") {
		t.Errorf("#incidents kinds %q, want the one set by www", kinds)
	}
}

// TestHoldTextsShared: the hold incidents of every origin share one copy
// of each text; past the budget of distinct texts a new one is cut short
// and kept by its incident alone.
func TestHoldTextsShared(t *testing.T) {
	long := strings.Repeat("dial tcp 192.0.2.1:443: i/o timeout; ", 25) // 925 bytes
	var log bytes.Buffer
	for i := range 12 { // 3 origins, 2 incidents each (a status of two), 2 records each
		fmt.Fprintf(&log, `{"time":"%s","verdict":"allow","origin":"https://o%d.example","pace":"backoff","hold_cause":"backoff","hold_status":%d,"hold_error":%q,"pace_group":"domain:example","hold_origin":"https://www.example","forwarded":false,"status":429}`+"\n",
			holdAt(float64(i)).Format(time.RFC3339), i%3, 500+i/6, long)
	}
	_, rep := readLogs(t, Options{}, log.Bytes())
	var incidents []HoldIncident
	for _, o := range rep.Origins {
		incidents = append(incidents, o.HoldIncidents...)
	}
	if len(incidents) != 6 {
		t.Fatalf("%d hold incidents, want 6: %+v", len(incidents), incidents)
	}
	for _, in := range incidents {
		first := incidents[0]
		if in.Error != long || unsafe.StringData(in.Error) != unsafe.StringData(first.Error) ||
			unsafe.StringData(in.PaceGroup) != unsafe.StringData(first.PaceGroup) ||
			unsafe.StringData(in.HoldOrigin) != unsafe.StringData(first.HoldOrigin) ||
			unsafe.StringData(in.Cause) != unsafe.StringData(first.Cause) {
			t.Fatalf("an incident keeps its own copy of a text: %+v", in)
		}
	}

	var kept texts
	text := func(i int) string { return fmt.Sprintf("%08d", i) + long }
	n := 0
	for ; kept.bytes+len(text(n))+textOverhead <= holdTextBudget; n++ {
		kept.keep(text(n), holdErrorBound)
	}
	if cut := kept.keep(text(n), holdErrorBound); cut != cutText(text(n), shortHoldText) || len(cut) > shortHoldText {
		t.Errorf("a text past the budget is kept as %d bytes %q, want it cut to %d", len(cut), cut, shortHoldText)
	}
	if kept.bytes > holdTextBudget || len(kept.kept) != n {
		t.Errorf("%d texts kept in %d bytes, want %d within %d", len(kept.kept), kept.bytes, n, holdTextBudget)
	}
	again := strings.Clone(text(0))
	if got := kept.keep(again, holdErrorBound); got != again || unsafe.StringData(got) == unsafe.StringData(again) {
		t.Errorf("a text kept before the budget was spent is not given back as the copy kept")
	}
}
