package report

import (
	"fmt"
	"testing"
	"time"
)

// TestCrawlersAndOriginsPastTheBounds feeds more distinct crawlers and
// origins than a report counts one by one, as a bot rotating its
// User-Agent over a wildcard domain would: the rest are counted together
// in one row each, and nothing is lost.
func TestCrawlersAndOriginsPastTheBounds(t *testing.T) {
	const extra = 5
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	agg := newAggregate(Filter{})
	n := maxOrigins + extra
	for i := range n {
		agg.add(&record{
			Time: at, Verdict: "allow", Forwarded: true, RobotsOutcome: "ok",
			Token:     fmt.Sprintf("bot%d", i%(maxCrawlers+extra)),
			UserAgent: fmt.Sprintf("bot%d/1.0", i%(maxCrawlers+extra)),
			Origin:    fmt.Sprintf("https://h%d.example", i),
		})
	}
	rep := agg.report(DefaultTop)
	if len(rep.Crawlers) != maxCrawlers+1 || len(rep.Origins) != maxOrigins+1 {
		t.Fatalf("%d crawler rows and %d origin rows, want %d and %d", len(rep.Crawlers), len(rep.Origins), maxCrawlers+1, maxOrigins+1)
	}
	var others *Crawler
	var requests int64
	for i := range rep.Crawlers {
		requests += rep.Crawlers[i].Requests
		if rep.Crawlers[i].By == "others" {
			others = &rep.Crawlers[i]
		}
	}
	if requests != int64(n) {
		t.Errorf("crawler rows count %d requests, want %d", requests, n)
	}
	// Crawlers bot10000..bot10004 came after the bound, each
	// n/(maxCrawlers+extra) or one more times.
	if others == nil || others.Name != OtherCrawlers || others.Requests < extra*int64(n/(maxCrawlers+extra)) {
		t.Fatalf("others row = %+v", others)
	}
	if len(others.Tokens) != extra || len(others.UserAgents) != extra {
		t.Errorf("others row lists tokens %v and User-Agents %v, want the %d folded in", others.Tokens, others.UserAgents, extra)
	}
	var folded *Origin
	for i := range rep.Origins {
		if rep.Origins[i].Others {
			folded = &rep.Origins[i]
		}
	}
	if folded == nil || folded.Origin != OtherOrigins || folded.Requests != extra {
		t.Fatalf("others origin row = %+v, want %d requests", folded, extra)
	}
}
