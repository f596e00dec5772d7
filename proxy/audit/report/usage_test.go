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

	"golang.org/x/net/html"

	"robotsgate/proxy/audit"
)

// The records of each thing a site's usage preference does, as the proxy
// logs them.

// The fixtures below hold the shapes the proxy writes (usage.Statement's
// String for usage_stated, audit.UsageFindingOf for usage, and
// usage.Verdict's Reason): a refusal before the fetch names no robots.txt
// rule, and X-Robots-Tag's noai has no value.

// refusedRecord is a request robots.txt's Content-Usage line refused
// before the fetch: 403, the origin never asked.
func refusedRecord(at time.Time, origin string) audit.Record {
	r := allowed(at)
	r.Origin, r.URL, r.RobotsTxt, r.Group = origin, origin+"/articles/1", origin+"/robots.txt", "*"
	r.Verdict, r.Reason = "disallow", "usage: Content-Usage: train-ai=n (robots.txt line 7) refuses ai-train"
	r.Forwarded, r.Status, r.Upstream, r.Bytes = false, 403, 0, 0
	r.Purposes = []string{"ai-train"}
	r.Usage = audit.UsageFinding{Form: "content-usage", Line: 7, Label: "train-ai", Value: "n", Purpose: "ai-train", Verdict: audit.UsageRefused}
	r.UsageStated = []string{"content-usage train-ai=n (line 7)"}
	return r
}

// withheldRecord is a request whose response said tdm-reservation: 1: the
// origin answered, its body was not delivered.
func withheldRecord(at time.Time, origin string) audit.Record {
	r := allowed(at)
	r.Origin, r.URL = origin, origin+"/paper.pdf"
	r.Status, r.Bytes = 403, 0
	r.Purposes = []string{"ai-train"}
	r.Usage = audit.UsageFinding{Form: "tdmrep", Header: "Tdm-Reservation", Label: "tdm-reservation", Value: "1", Purpose: "ai-train", Verdict: audit.UsageWithheld}
	r.UsageStated = []string{"tdmrep tdm-reservation=1 (header Tdm-Reservation)"}
	return r
}

// recordedBefore is a request robots.txt's Content-Signal line
// refused, forwarded all the same (ROBOTSGATE_USAGE=audit).
func recordedBefore(at time.Time, origin string) audit.Record {
	r := refusedRecord(at, origin)
	r.Reason = "usage: Content-Signal: ai-train=no (robots.txt line 3) refuses ai-train"
	r.Forwarded, r.Status, r.Upstream, r.Bytes = true, 200, 200, 50
	r.Usage = audit.UsageFinding{Form: "content-signal", Line: 3, Label: "ai-train", Value: "no", Purpose: "ai-train", Verdict: audit.UsageRecorded}
	r.UsageStated = []string{"content-signal search=yes (line 3)", "content-signal ai-train=no (line 3)"}
	return r
}

// recordedAfter is a request whose response said X-Robots-Tag:
// noai, delivered all the same (ROBOTSGATE_USAGE_RESPONSES=record).
func recordedAfter(at time.Time, origin string) audit.Record {
	r := allowed(at)
	r.Origin, r.URL = origin, origin+"/img/1.png"
	r.Purposes = []string{"ai-train"}
	r.Usage = audit.UsageFinding{Form: "x-robots-tag", Header: "X-Robots-Tag", Label: "noai", Purpose: "ai-train", Verdict: audit.UsageRecorded}
	r.UsageStated = []string{"x-robots-tag noai (header X-Robots-Tag)"}
	return r
}

// One record of each kind: where it counts, in the totals, its crawler
// and its origin alike.
func TestUsageCountsOfOneRecord(t *testing.T) {
	const site = "https://news.example"
	for _, c := range []struct {
		name   string
		record func(at time.Time) audit.Record
		want   Counts // Requests, FirstSeen and LastSeen are filled in
	}{
		{"refused before the fetch", func(at time.Time) audit.Record { return refusedRecord(at, site) },
			Counts{Refused: 1, RefusedByUsage: 1, Compliance: rate(0)}},
		{"withheld after the fetch", func(at time.Time) audit.Record { return withheldRecord(at, site) },
			Counts{Allowed: 1, WithheldByUsage: 1, Compliance: rate(1)}},
		{"recorded before the fetch, forwarded", func(at time.Time) audit.Record { return recordedBefore(at, site) },
			Counts{WouldBeRefused: 1, WouldBeRefusedByUsage: 1, Compliance: rate(0), Bytes: 50}},
		{"recorded before the fetch, pacing's 429 in enforce mode", func(at time.Time) audit.Record {
			r := recordedBefore(at, site)
			r.Pace, r.Forwarded, r.Status, r.Upstream, r.Bytes = "too_early", false, 429, 0, 0
			return r
		}, Counts{WouldBeRefused: 1, WouldBeRefusedByUsage: 1, TooEarly: 1, Compliance: rate(0)}},
		{"recorded after the fetch", func(at time.Time) audit.Record { return recordedAfter(at, site) },
			Counts{Allowed: 1, WouldBeRefusedByUsage: 1, Compliance: rate(1), Bytes: 100}},
		{"preferences stated, none refused", func(at time.Time) audit.Record {
			r := allowed(at)
			r.UsageStated = []string{"content-signal search=yes (line 3)"}
			return r
		}, Counts{Allowed: 1, Compliance: rate(1), Bytes: 100}},
		{"refused on an allowed record counts as nothing", func(at time.Time) audit.Record {
			r := withheldRecord(at, site)
			r.Usage.Verdict = audit.UsageRefused
			return r
		}, Counts{Allowed: 1, Compliance: rate(1)}},
		{"withheld on a refused record counts as nothing", func(at time.Time) audit.Record {
			r := refusedRecord(at, site)
			r.Usage.Verdict = audit.UsageWithheld
			return r
		}, Counts{Refused: 1, Compliance: rate(0)}},
		{"a verdict this version does not know", func(at time.Time) audit.Record {
			r := refusedRecord(at, site)
			r.Usage.Verdict = "later"
			return r
		}, Counts{Refused: 1, Compliance: rate(0)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			at := t0.Add(90 * time.Second)
			_, rep := readLogs(t, Options{}, writeLog(t, c.record(at)))
			want := c.want
			want.Requests, want.FirstSeen, want.LastSeen = 1, at, at
			for what, got := range map[string]Counts{"totals": rep.Totals, "crawler": rep.Crawlers[0].Counts, "origin": rep.Origins[0].Counts} {
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s:\n got %s\nwant %s", what, showCounts(got), showCounts(want))
				}
			}
			listed := rep.UsageRefusalsOmitted
			for _, u := range rep.UsageRefusals {
				listed += u.Refused + u.Withheld + u.Recorded
			}
			if counted := want.RefusedByUsage + want.WithheldByUsage + want.WouldBeRefusedByUsage; listed != counted {
				t.Errorf("usage refusals list %d requests, the counts %d: %+v", listed, counted, rep.UsageRefusals)
			}
		})
	}
}

const (
	newsSite   = "https://news.example"
	papersSite = "https://papers.example"
	quietSite  = "https://quiet.example"
)

// usageLog is a crawl of three sites by a training crawler, a search
// crawler and a credential: each form of preference refusing, withholding
// and only recorded, preferences stated and repeated, and a site stating
// nothing.
func usageLog(t *testing.T) []byte {
	t.Helper()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var recs []audit.Record
	for i := range 3 {
		recs = append(recs, refusedRecord(at(i), newsSite))
	}
	archiver := refusedRecord(at(5), newsSite)
	archiver.Credential, archiver.Token = "archiver", "ia_archiver"
	recs = append(recs, archiver)
	for i := range 2 {
		recs = append(recs, recordedBefore(at(10+i), newsSite))
	}
	for i := range 2 {
		recs = append(recs, withheldRecord(at(20+i), papersSite))
	}
	recs = append(recs, recordedAfter(at(30), papersSite))
	// A search crawler reads the news: the training opt-out does not
	// concern it, and the site's preferences are stated all the same.
	search := allowed(at(40))
	search.Token, search.UserAgent, search.Origin, search.URL = "Googlebot", "Googlebot/2.1", newsSite, newsSite+"/articles/1"
	search.Purposes = []string{"search"}
	search.UsageStated = []string{"content-usage train-ai=n (line 7)", "content-signal search=yes (line 3)"}
	quiet := allowed(at(41))
	quiet.Origin, quiet.URL = quietSite, quietSite+"/"
	recs = append(recs, search, quiet)
	return writeLog(t, recs...)
}

func TestUsageReport(t *testing.T) {
	_, rep := readLogs(t, Options{}, usageLog(t))
	if c := rep.Totals; c.Requests != 11 || c.RefusedByUsage != 4 || c.WithheldByUsage != 2 || c.WouldBeRefusedByUsage != 3 || c.Refused != 4 || c.WouldBeRefused != 2 {
		t.Errorf("totals: %s", showCounts(c))
	}
	byName := map[string]Crawler{}
	for _, c := range rep.Crawlers {
		byName[c.Name] = c
	}
	for name, want := range map[string][3]int64{"GPTBot": {3, 2, 3}, "archiver": {1, 0, 0}, "Googlebot": {0, 0, 0}} {
		c := byName[name]
		if got := [3]int64{c.RefusedByUsage, c.WithheldByUsage, c.WouldBeRefusedByUsage}; got != want {
			t.Errorf("%s: by usage, withheld, would be = %v, want %v", name, got, want)
		}
	}
	if p := byName["Googlebot"].Purposes; !slices.Equal(p, []string{"search"}) {
		t.Errorf("Googlebot's purposes %q", p)
	}

	// Each origin's preferences, once each, in the order first seen.
	stated := map[string][]string{}
	for _, o := range rep.Origins {
		stated[o.Origin] = o.UsageStated
		if o.UsageStatedMore {
			t.Errorf("%s: more stated than kept", o.Origin)
		}
	}
	wantStated := map[string][]string{
		newsSite:   {"content-usage train-ai=n (line 7)", "content-signal search=yes (line 3)", "content-signal ai-train=no (line 3)"},
		papersSite: {"tdmrep tdm-reservation=1 (header Tdm-Reservation)", "x-robots-tag noai (header X-Robots-Tag)"},
		quietSite:  nil,
	}
	if !reflect.DeepEqual(stated, wantStated) {
		t.Errorf("stated\n got %q\nwant %q", stated, wantStated)
	}

	wantRefusals := []UsageRefusal{
		{Origin: newsSite, Form: "content-usage", Label: "train-ai", Value: "n", Purpose: "ai-train", Line: 7,
			Requests: 4, Refused: 4, From: t0, To: t0.Add(5 * time.Second),
			Crawlers: []CrawlerSeen{{Name: "GPTBot", By: "token", Count: 3}, {Name: "archiver", By: "credential", Count: 1}}},
		{Origin: newsSite, Form: "content-signal", Label: "ai-train", Value: "no", Purpose: "ai-train", Line: 3,
			Requests: 2, Recorded: 2, From: t0.Add(10 * time.Second), To: t0.Add(11 * time.Second),
			Crawlers: []CrawlerSeen{{Name: "GPTBot", By: "token", Count: 2}}},
		{Origin: papersSite, Form: "tdmrep", Label: "tdm-reservation", Value: "1", Purpose: "ai-train", Header: "Tdm-Reservation",
			Requests: 2, Withheld: 2, From: t0.Add(20 * time.Second), To: t0.Add(21 * time.Second),
			Crawlers: []CrawlerSeen{{Name: "GPTBot", By: "token", Count: 2}}},
		{Origin: papersSite, Form: "x-robots-tag", Label: "noai", Purpose: "ai-train", Header: "X-Robots-Tag",
			Requests: 1, Recorded: 1, From: t0.Add(30 * time.Second), To: t0.Add(30 * time.Second),
			Crawlers: []CrawlerSeen{{Name: "GPTBot", By: "token", Count: 1}}},
	}
	if !reflect.DeepEqual(rep.UsageRefusals, wantRefusals) || rep.UsageRefusalsOmitted != 0 {
		t.Errorf("usage refusals\n got %+v\nwant %+v", rep.UsageRefusals, wantRefusals)
	}

	// Past -top, the rest are counted, the busiest listed.
	_, rep = readLogs(t, Options{Top: 2}, usageLog(t))
	if len(rep.UsageRefusals) != 2 || rep.UsageRefusals[0].Requests != 4 || rep.UsageRefusals[1].Requests != 2 || rep.UsageRefusalsOmitted != 3 {
		t.Errorf("top 2: %+v, %d omitted", rep.UsageRefusals, rep.UsageRefusalsOmitted)
	}
}

// The report reads several logs (rotated ones) into one sum, and its
// timeline merges buckets as the span grows: counts merged from parts
// equal the counts of the whole.
func TestUsageCountsMerge(t *testing.T) {
	whole := usageLog(t)
	lines := bytes.SplitAfter(whole, []byte("\n"))
	first, second := bytes.Join(lines[:5], nil), bytes.Join(lines[5:], nil)
	_, all := readLogs(t, Options{}, whole)
	_, split := readLogs(t, Options{}, second, first)
	if !reflect.DeepEqual(all.Totals, split.Totals) || !reflect.DeepEqual(all.UsageRefusals, split.UsageRefusals) {
		t.Errorf("read in two parts:\n got %s\nwant %s", showCounts(split.Totals), showCounts(all.Totals))
	}
	var one, two Counts
	for _, part := range []struct {
		log []byte
		to  *Counts
	}{{first, &one}, {second, &two}} {
		_, rep := readLogs(t, Options{}, part.log)
		*part.to = rep.Totals
	}
	one.merge(&two)
	one.Compliance = nil
	one.finish()
	if !reflect.DeepEqual(one, all.Totals) {
		t.Errorf("merged:\n got %s\nwant %s", showCounts(one), showCounts(all.Totals))
	}

	// A span of more fine buckets than are kept: coarsened buckets keep
	// every usage count.
	var recs []audit.Record
	for i := range maxFineBuckets + 10 {
		recs = append(recs, refusedRecord(t0.Add(time.Duration(i)*time.Second), newsSite))
	}
	rd, rep := readLogs(t, Options{}, writeLog(t, recs...))
	if rd.agg.timeline.width == 0 {
		t.Fatal("the timeline was not coarsened")
	}
	var inBuckets int64
	for _, b := range rd.agg.timeline.buckets {
		inBuckets += b.RefusedByUsage
	}
	if inBuckets != int64(len(recs)) || rep.Totals.RefusedByUsage != int64(len(recs)) {
		t.Errorf("%d refused by usage in the buckets, %d in all, want %d", inBuckets, rep.Totals.RefusedByUsage, len(recs))
	}
}

func TestUsageText(t *testing.T) {
	_, rep := readLogs(t, Options{}, usageLog(t))
	var out bytes.Buffer
	if err := WriteText(&out, rep); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		`(?m)^Usage:      4 refused by a site's usage preference \(of the refused\), 2 withheld \(of the allowed: the body not delivered\); 3 would be refused or withheld`,
		`(?m)^\s+CRAWLER\s+BY\s+REQUESTS\s+ALLOWED\s+REFUSED\s+WOULD-BE\s+BY-USAGE\s+WITHHELD\s+WOULD-BY-USAGE\s+COMPLIANCE.*PURPOSES$`,
		`(?m)^\s+GPTBot\s+token\s+9\s+4\s+3\s+2\s+3\s+2\s+3\s+.* ai-train$`,
		`(?m)^\s+Googlebot\s+token\s+1\s+1\s+0\s+0\s+0\s+0\s+0\s+.* search$`,
		`(?m)^\s+ORIGIN\s+REQUESTS.*BY-USAGE\s+WITHHELD\s+WOULD-BY-USAGE.*STALE USAGE PREFERENCES STATED$`,
		`(?m)^\s+https://news.example\s+.* content-usage train-ai=n \(line 7\), content-signal search=yes \(line 3\), content-signal ai-train=no \(line 3\)$`,
		`(?m)^\s+https://quiet.example\s+.* -$`,
		`(?m)^USAGE REFUSALS`,
		`(?m)^\s+https://news.example\s+content-usage\s+line 7\s+train-ai=n\s+ai-train\s+4\s+0\s+0\s+2026-11-25 10:00:00Z\s+2026-11-25 10:00:05Z GPTBot ×3, archiver \(credential\) ×1$`,
		`(?m)^\s+https://papers.example\s+tdmrep\s+Tdm-Reservation\s+tdm-reservation=1\s+ai-train\s+0\s+2\s+0\s+`,
		`(?m)^\s+https://papers.example\s+x-robots-tag\s+X-Robots-Tag\s+noai\s+ai-train\s+0\s+0\s+1\s+`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("the text lacks %s:\n%s", want, text)
		}
	}
	// No policy in this log: its columns stay away.
	for _, absent := range []string{"BY-POLICY", "EXCEPTIONS USED"} {
		if strings.Contains(text, absent) {
			t.Errorf("the text shows %q", absent)
		}
	}
}

func TestUsageJSON(t *testing.T) {
	_, rep := readLogs(t, Options{}, usageLog(t))
	var out bytes.Buffer
	if err := WriteJSON(&out, rep); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Totals   map[string]any `json:"totals"`
		Crawlers []map[string]any
		Origins  []struct {
			Origin      string   `json:"origin"`
			UsageStated []string `json:"usage_stated"`
		}
		UsageRefusals []map[string]any `json:"usage_refusals"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]float64{"refused_by_usage": 4, "withheld_by_usage": 2, "would_be_refused_by_usage": 3} {
		if doc.Totals[key] != want {
			t.Errorf("totals.%s = %v, want %v", key, doc.Totals[key], want)
		}
		if _, ok := doc.Crawlers[0][key]; !ok {
			t.Errorf("a crawler has no %s", key)
		}
	}
	if doc.Origins[0].Origin != newsSite || len(doc.Origins[0].UsageStated) != 3 {
		t.Errorf("origins %+v", doc.Origins)
	}
	if len(doc.UsageRefusals) != 4 {
		t.Fatalf("%d usage refusals", len(doc.UsageRefusals))
	}
	first := doc.UsageRefusals[0]
	for key, want := range map[string]any{"origin": newsSite, "form": "content-usage", "label": "train-ai", "value": "n", "purpose": "ai-train",
		"line": 7.0, "requests": 4.0, "refused": 4.0, "withheld": 0.0, "recorded": 0.0} {
		if first[key] != want {
			t.Errorf("usage_refusals[0].%s = %v, want %v", key, first[key], want)
		}
	}

	// A log without usage has the counts, zero, and an empty list.
	_, rep = readLogs(t, Options{}, writeLog(t, allowed(t0)))
	out.Reset()
	if err := WriteJSON(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"usage_refusals": []`, `"refused_by_usage": 0`, `"withheld_by_usage": 0`, `"would_be_refused_by_usage": 0`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the JSON lacks %s", want)
		}
	}
	if strings.Contains(out.String(), `"usage_stated"`) {
		t.Error("an origin stating nothing has usage_stated")
	}
}

func TestUsageHTML(t *testing.T) {
	_, rep := readLogs(t, Options{}, usageLog(t))
	p := renderPage(t, rep)
	for id, want := range map[string]string{"total-refused-by-usage": "4", "total-withheld-by-usage": "2", "total-would-be-refused-by-usage": "3"} {
		if got := text(p.byID(t, id)); got != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
	// Crawler, requests, allowed, refused, would be, by usage, withheld,
	// would be by usage, ...; purposes last.
	crawlers := p.rows(t, "crawlers")
	if gpt := crawlers[0]; len(gpt) != 20 || !slices.Equal(gpt[:8], []string{"GPTBot token", "9", "4", "3", "2", "3", "2", "3"}) || gpt[19] != "ai-train" {
		t.Errorf("GPTBot's row: %q", gpt)
	}
	origins := p.rows(t, "origins")
	if news := origins[0]; len(news) != 23 || news[22] != "content-usage train-ai=n (line 7), content-signal search=yes (line 3), content-signal ai-train=no (line 3)" {
		t.Errorf("news.example's row: %q", news)
	}
	if quiet := origins[2]; quiet[22] != "-" {
		t.Errorf("quiet.example's row: %q", quiet)
	}
	refusals := p.rows(t, "usage-refusals")
	want := []string{newsSite, "content-usage", "line 7", "train-ai=n", "ai-train", "4", "0", "0", "2026-11-25 10:00:00Z", "2026-11-25 10:00:05Z",
		"GPTBot token ×3, archiver credential ×1"}
	if len(refusals) != 4 || !slices.Equal(refusals[0], want) {
		t.Errorf("usage refusals %q\nwant first %q", refusals, want)
	}
	if got := refusals[2][2]; got != "Tdm-Reservation" {
		t.Errorf("tdmrep's where: %q", got)
	}
	// noai has no value: its preference is the label alone.
	if got := refusals[3][3]; got != "noai" {
		t.Errorf("x-robots-tag's preference: %q", got)
	}
	// The head of each table has as many cells as its rows.
	for _, id := range []string{"crawlers", "origins", "usage-refusals"} {
		heads := find(p.byID(t, id), func(n *html.Node) bool { return n.Data == "th" })
		if rows := p.rows(t, id); len(heads) != len(rows[0]) {
			t.Errorf("#%s: %d headings, %d cells", id, len(heads), len(rows[0]))
		}
	}
}

// A log without usage preferences shows none of their columns and
// tables.
func TestNoUsageNoUsageColumns(t *testing.T) {
	_, rep := readLogs(t, Options{}, writeLog(t, allowed(t0), refused(t0.Add(time.Second))))
	if rep.UsageSeen() {
		t.Fatal("usage seen")
	}
	var out bytes.Buffer
	if err := WriteText(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"Usage:", "BY-USAGE", "USAGE REFUSALS", "USAGE PREFERENCES STATED", "PURPOSES"} {
		if strings.Contains(out.String(), absent) {
			t.Errorf("the text shows %q", absent)
		}
	}
	p := renderPage(t, rep)
	if found := find(p.root, func(n *html.Node) bool { return attr(n, "id") == "usage-section" }); len(found) != 0 {
		t.Error("the page has a usage section")
	}
	if got := len(p.rows(t, "origins")[0]); got != 19 {
		t.Errorf("an origin row has %d cells, want 19", got)
	}
}

// rawLine is an audit line as a log from elsewhere may hold it: not
// bounded by audit.Writer.
func rawLine(tb testing.TB, fields map[string]any) []byte {
	tb.Helper()
	line, err := json.Marshal(fields)
	if err != nil {
		tb.Fatal(err)
	}
	return append(line, '\n')
}

// A hostile log: huge values, thousands of distinct preferences and
// refusals. What the report keeps stays within its bounds.
func TestUsageBoundsHold(t *testing.T) {
	var log bytes.Buffer
	huge := strings.Repeat("é", 40_000)
	at := t0.Format(time.RFC3339)
	// One origin states thousands of distinct preferences, some huge,
	// and repeats the first ones.
	for i := range 200 {
		stated := []string{"content-signal ai-train=no (line 2)"}
		for j := range 20 {
			stated = append(stated, fmt.Sprintf("content-usage x%d-%d=n (line %d)", i, j, j+3))
		}
		if i%50 == 0 {
			stated = append(stated, huge)
		}
		log.Write(rawLine(t, map[string]any{"time": at, "verdict": "allow", "origin": "https://flood.example", "token": "GPTBot", "usage_stated": stated}))
	}
	// Many origins state distinct preferences past the report's table.
	for i := range maxStatedValues + 100 {
		log.Write(rawLine(t, map[string]any{"time": at, "verdict": "allow", "origin": fmt.Sprintf("https://o%d.example", i), "token": "GPTBot",
			"usage_stated": []string{fmt.Sprintf("content-usage y%d=n (header Content-Usage)", i)}}))
	}
	// Refusals by more distinct preferences than are counted one by one,
	// with huge texts.
	for i := range maxUsageRefusals + 50 {
		log.Write(rawLine(t, map[string]any{"time": at, "verdict": "disallow", "origin": "https://refuse.example", "token": "GPTBot", "forwarded": false,
			"reason": "usage: Content-Usage: " + huge + " (robots.txt line 7) refuses " + huge,
			"usage":  map[string]any{"form": "content-usage" + huge, "label": fmt.Sprintf("l%d", i) + huge, "value": huge, "purpose": huge, "header": huge, "line": 7, "verdict": "refused"}}))
	}
	_, rep := readLogs(t, Options{Top: 5}, log.Bytes())
	if rep.Malformed != 0 {
		t.Fatalf("%d malformed: %+v", rep.Malformed, rep.Problems)
	}
	distinct := map[string]bool{}
	var more int
	for _, o := range rep.Origins {
		if len(o.UsageStated) > maxStated {
			t.Fatalf("%s keeps %d preferences", o.Origin, len(o.UsageStated))
		}
		for _, s := range o.UsageStated {
			if len(s) > wordBound {
				t.Fatalf("%s keeps a preference of %d bytes", o.Origin, len(s))
			}
			distinct[s] = true
		}
		if o.UsageStatedMore {
			more++
		}
		if o.Origin == "https://flood.example" {
			if len(o.UsageStated) != maxStated || o.UsageStated[0] != "content-signal ai-train=no (line 2)" || !o.UsageStatedMore {
				t.Errorf("flood.example states %q, more %v", o.UsageStated, o.UsageStatedMore)
			}
		}
	}
	if len(distinct) > maxStatedValues {
		t.Errorf("%d distinct preferences kept", len(distinct))
	}
	// The origins past the table say they stated more than is listed.
	if more < 100 {
		t.Errorf("%d origins say they stated more, want at least 100", more)
	}
	if c := rep.Totals; c.RefusedByUsage != maxUsageRefusals+50 {
		t.Errorf("%d refused by usage", c.RefusedByUsage)
	}
	if len(rep.UsageRefusals) != 5 || rep.UsageRefusalsOmitted != maxUsageRefusals+50-5 {
		t.Errorf("%d usage refusals listed, %d requests omitted", len(rep.UsageRefusals), rep.UsageRefusalsOmitted)
	}
	for _, u := range rep.UsageRefusals {
		for _, s := range []string{u.Form, u.Label, u.Value, u.Purpose, u.Header} {
			if len(s) > wordBound {
				t.Fatalf("a usage refusal keeps %d bytes", len(s))
			}
		}
	}
	for _, r := range rep.TopRules {
		if !strings.HasPrefix(r.Rule, "usage: ") || len(r.Rule) > len("usage: ")+3*wordBound+1 {
			t.Fatalf("a usage refusal's rule of %d bytes: %.80q", len(r.Rule), r.Rule)
		}
	}
	for _, w := range []func(*bytes.Buffer, *Report) error{
		func(b *bytes.Buffer, r *Report) error { return WriteText(b, r) },
		func(b *bytes.Buffer, r *Report) error { return WriteJSON(b, r) },
		func(b *bytes.Buffer, r *Report) error { return WriteHTML(b, r) },
	} {
		var out bytes.Buffer
		if err := w(&out, rep); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), huge[:1000]) {
			t.Error("a huge value is shown whole")
		}
	}
}

// A usage refusal before the fetch names no robots.txt rule: the top
// refused rules count it by the preference and its robots.txt line (one
// line refusing two purposes is one rule), or by tdmrep.json, beside
// robots.txt's own rules.
func TestUsageTopRules(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var recs []audit.Record
	for i := range 3 {
		recs = append(recs, refusedRecord(at(i), newsSite))
	}
	// Another crawler, another purpose, the same line.
	input := refusedRecord(at(3), newsSite)
	input.Token, input.Purposes = "PerplexityBot", []string{"ai-input"}
	input.Reason = "usage: Content-Usage: train-ai=n (robots.txt line 7) refuses ai-input"
	input.Usage.Purpose = "ai-input"
	recs = append(recs, input, recordedBefore(at(4), newsSite))
	// robots.txt says nothing of usage; tdmrep.json reserves the path.
	tdm := refusedRecord(at(5), papersSite)
	tdm.Reason = "usage: tdm-reservation=1 (tdmrep.json) refuses ai-train"
	tdm.Usage = audit.UsageFinding{Form: "tdmrep", Header: "tdmrep.json", Label: "tdm-reservation", Value: "1", Purpose: "ai-train", Verdict: audit.UsageRefused}
	tdm.UsageStated = []string{"tdmrep tdm-reservation=1 (tdmrep.json)"}
	// A usage preference recorded from the response of a request
	// robots.txt disallowed in audit mode: robots.txt's rule refused it.
	both := refused(at(6))
	both.Origin, both.URL, both.Mode, both.Forwarded, both.Status, both.Upstream = papersSite, papersSite+"/private/x", "audit", true, 200, 200
	both.Usage = recordedAfter(at(6), papersSite).Usage
	recs = append(recs, tdm, both, recordedAfter(at(7), papersSite))
	_, rep := readLogs(t, Options{}, writeLog(t, recs...))

	want := []RuleCount{
		{Origin: newsSite, Group: "*", Rule: "usage: content-usage train-ai=n", Line: 7, Refused: 4},
		{Origin: newsSite, Group: "*", Rule: "usage: content-signal ai-train=no", Line: 3, Refused: 1},
		{Origin: papersSite, Group: "*", Rule: "/private/", Line: 4, Refused: 1},
		{Origin: papersSite, Rule: "usage: tdmrep tdm-reservation=1 (tdmrep.json)", Refused: 1},
	}
	slices.SortFunc(rep.TopRules, func(x, y RuleCount) int { return strings.Compare(x.Origin+x.Rule, y.Origin+y.Rule) })
	slices.SortFunc(want, func(x, y RuleCount) int { return strings.Compare(x.Origin+x.Rule, y.Origin+y.Rule) })
	if !reflect.DeepEqual(rep.TopRules, want) {
		t.Errorf("top rules\n got %+v\nwant %+v", rep.TopRules, want)
	}

	var out bytes.Buffer
	if err := WriteText(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{
		`(?m)^\s+4\s+https://news.example\s+\*\s+7 usage: content-usage train-ai=n$`,
		`(?m)^\s+1\s+https://papers.example\s+-\s+- usage: tdmrep tdm-reservation=1 \(tdmrep.json\)$`,
	} {
		if !regexp.MustCompile(row).MatchString(out.String()) {
			t.Errorf("the text lacks %s:\n%s", row, out.String())
		}
	}
	rows := renderPage(t, rep).rows(t, "rules")
	if !slices.ContainsFunc(rows, func(r []string) bool {
		return slices.Equal(r, []string{"4", newsSite, "*", "7", "usage: content-usage train-ai=n"})
	}) {
		t.Errorf("the page's rules: %q", rows)
	}
}
