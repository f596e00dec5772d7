package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"robotsgate/proxy/audit"
	"robotsgate/robots"
)

// sampleLog is n audit records as the proxy writes them: a mix of
// crawlers, origins, verdicts and pacing over an hour.
func sampleLog(tb testing.TB, n int) []byte {
	tb.Helper()
	tokens := []string{"Googlebot", "bingbot", "GPTBot", "CCBot", "", "Applebot"}
	start := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	for i := range n {
		token := tokens[i%len(tokens)]
		origin := fmt.Sprintf("https://site%d.example", i%50)
		rec := audit.Record{
			Time:   start.Add(time.Duration(i) * 3600 * time.Second / time.Duration(n)),
			Client: fmt.Sprintf("10.0.0.%d:%d", i%200, 40000+i%20000),
			Method: "GET",
			Decision: robots.Decision{
				URL:           fmt.Sprintf("%s/articles/%d?page=%d", origin, i%5000, i%7),
				UserAgent:     "Mozilla/5.0 (compatible; " + token + "/2.1; +https://example.com/bot.html)",
				Token:         token,
				Verdict:       "allow",
				Reason:        "no matching rule",
				RobotsOutcome: "ok",
				RobotsStatus:  200,
			},
			Origin: origin, PathsChecked: true, RobotsCache: "hit", Mode: "enforce",
			Forwarded: true, Status: 200, Upstream: 200, Bytes: int64(1000 + i%9000), Duration: 12.5,
		}
		switch i % 10 {
		case 3:
			rec.Verdict, rec.Reason, rec.Rule, rec.RuleLine, rec.Group, rec.GroupLines = "disallow", "disallow: /private/ (line 4)", "/private/", 4, "*", []int{1}
			rec.URL = fmt.Sprintf("%s/private/%d", origin, i%300)
			rec.RobotsTxt, rec.Forwarded, rec.Status, rec.Upstream, rec.Bytes = origin+"/robots.txt", false, 403, 0, 0
		case 7:
			rec.CrawlDelay, rec.CrawlDelaySource, rec.CrawlDelayLine = 1, "crawl-delay", 2
			rec.Pace, rec.Forwarded, rec.Status, rec.Upstream, rec.Bytes = "too_early", false, 429, 0, 0
		}
		line, err := json.Marshal(&rec)
		if err != nil {
			tb.Fatal(err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// BenchmarkRead streams a log through a report; its MB/s is the rate a
// log on disk (in the page cache) is read at.
func BenchmarkRead(b *testing.B) {
	log := sampleLog(b, 100_000)
	b.SetBytes(int64(len(log)))
	b.ReportAllocs()
	for b.Loop() {
		rd := NewReader(Options{})
		if err := rd.Read(context.Background(), "audit.jsonl", bytes.NewReader(log)); err != nil {
			b.Fatal(err)
		}
		if rep := rd.Report(); rep.Records != 100_000 {
			b.Fatalf("%d records", rep.Records)
		}
	}
	_ = io.Discard
}
