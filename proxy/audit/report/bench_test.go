package report

import (
	"bytes"
	"compress/gzip"
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
// log on disk (in the page cache) is read at: plain, gzip-compressed, and
// 1 GiB of records in one stream (memory stays bounded: see maxrss in the
// figures in proxy/cmd/report/README.md).
func BenchmarkRead(b *testing.B) {
	const records = 100_000
	log := sampleLog(b, records)
	var compressed bytes.Buffer
	zw := gzip.NewWriter(&compressed)
	if _, err := zw.Write(log); err != nil {
		b.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	repeats := int((1 << 30) / len(log))
	for _, bc := range []struct {
		name    string
		records int64
		open    func() io.Reader
	}{
		{"plain", records, func() io.Reader { return bytes.NewReader(log) }},
		{"gzip", records, func() io.Reader { return bytes.NewReader(compressed.Bytes()) }},
		{"1GiB", int64(records * repeats), func() io.Reader { return &repeatReader{data: log, left: repeats} }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(log)) * bc.records / records)
			b.ReportAllocs()
			for b.Loop() {
				rd := NewReader(Options{})
				if err := rd.Read(context.Background(), "audit.jsonl", bc.open()); err != nil {
					b.Fatal(err)
				}
				if rep := rd.Report(); rep.Records != bc.records {
					b.Fatalf("%d records, want %d", rep.Records, bc.records)
				}
			}
		})
	}
}

// repeatReader reads data left times over, without holding more than it.
type repeatReader struct {
	data []byte
	off  int
	left int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.off:])
	if r.off += n; r.off == len(r.data) {
		r.off, r.left = 0, r.left-1
	}
	return n, nil
}
