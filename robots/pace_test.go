package robots

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPaceValues(t *testing.T) {
	for _, c := range []struct {
		line     string
		interval time.Duration // 0 with ok false: ignored
		ok       bool
	}{
		{"Crawl-delay: 10", 10 * time.Second, true},
		{"Crawl-delay: 0.5", 500 * time.Millisecond, true},
		{"Crawl-delay: .5", 500 * time.Millisecond, true},
		{"Crawl-delay: 10.", 10 * time.Second, true},
		{"Crawl-delay: 0", 0, true},
		{"crawl-delay: 1 # between page requests", time.Second, true},
		{"Crawl-delay: 86400", 24 * time.Hour, true},
		{"Crawl-delay: 999999999999", 24 * time.Hour, true}, // read as the longest
		{"Crawl-delay: 1" + string(make([]byte, 400)), 0, false},
		{"Crawl-delay: soon", 0, false},
		{"Crawl-delay: " + strings.Repeat("0", 40) + "1", 0, false}, // quoted back to crawlers: kept short
		{"Request-rate: 1/" + strings.Repeat("0", 40) + "1", 0, false},
		{"Crawl-delay: -1", 0, false},
		{"Crawl-delay: +1", 0, false},
		{"Crawl-delay: 1e3", 0, false},
		{"Crawl-delay: 0x10", 0, false},
		{"Crawl-delay: Inf", 0, false},
		{"Crawl-delay: NaN", 0, false},
		{"Crawl-delay: 1.2.3", 0, false},
		{"Crawl-delay: 10s", 0, false},
		{"Crawl-delay: .", 0, false},
		{"Crawl-delay:", 0, false},
		{"Request-rate: 1/5", 5 * time.Second, true},
		{"Request-rate: 1/5s", 5 * time.Second, true},
		{"Request-rate: 10/1m", 6 * time.Second, true},
		{"Request-rate: 60/1h", time.Minute, true},
		{"Request-rate: 1/10M", 10 * time.Minute, true},
		{"Request-rate: 3/1", time.Second / 3, true},
		{"Request-rate: 2/0.5", 250 * time.Millisecond, true},
		{"Request-rate: 1 / 30", 30 * time.Second, true},
		{"Request-rate: 1/10m 0600-0845", 10 * time.Minute, true},
		{"Request-rate: 1/1000h", 24 * time.Hour, true},
		{"Request-rate: 1/10m tonight", 0, false},
		{"Request-rate: 0/5", 0, false},
		{"Request-rate: 1/0", 0, false},
		{"Request-rate: 1/", 0, false},
		{"Request-rate: /5", 0, false},
		{"Request-rate: 5", 0, false},
		{"Request-rate: 1/5d", 0, false},
		{"Request-rate: -1/5", 0, false},
		{"Request-rate: 99999999999/1", 0, false},
		{"Request-rate: ", 0, false},
		{"Request_rate: 1/5", 5 * time.Second, true}, // a misspelling Google-style parsers accept for other keys
	} {
		r := Parser{KeepIgnored: true}.Parse([]byte("User-agent: bot\n" + c.line + "\n"))
		p, ok := r.Pace("bot")
		if ok != c.ok || p.Interval != c.interval {
			t.Errorf("%q: Pace = %v %v, want %v %v", c.line, p.Interval, ok, c.interval, c.ok)
			continue
		}
		if ok && p.Line != 2 {
			t.Errorf("%q: line %d, want 2", c.line, p.Line)
		}
		if ignored := r.Ignored(); ok == (len(ignored) > 0) {
			t.Errorf("%q: ignored %v, want ignored only when not read", c.line, ignored)
		}
	}
}

// TestPaceChoice: the groups that apply are those of the rules, the
// longest interval wins across keys and groups, and a tie goes to the first
// line.
func TestPaceChoice(t *testing.T) {
	body := "User-agent: a\n" + // 1
		"Crawl-delay: 2\n" + // 2
		"Request-rate: 1/3\n" + // 3: stricter
		"Disallow: /x\n" + // 4
		"\n" + // 5
		"User-agent: b\n" + // 6
		"Request-rate: 1/4\n" + // 7
		"Crawl-delay: 4\n" + // 8: same interval, later
		"\n" + // 9
		"User-agent: *\n" + // 10
		"Crawl-delay: 1\n" + // 11
		"\n" + // 12
		"User-agent: a\n" + // 13
		"Crawl-delay: 2.5\n" + // 14: a second group for a: merged, not stricter
		"\n" + // 15
		"User-agent: c\n" + // 16
		"Disallow: /\n" // 17: no pace, and * does not apply to c
	r := Parser{}.Parse([]byte(body))
	for _, c := range []struct {
		token string
		rule  string
		line  int
		ok    bool
	}{
		{"a", "Request-rate: 1/3", 3, true},
		{"A", "Request-rate: 1/3", 3, true},
		{"b", "Request-rate: 1/4", 7, true},
		{"other", "Crawl-delay: 1", 11, true},
		{"", "Crawl-delay: 1", 11, true},
		{"c", "", 0, false},
	} {
		p, ok := r.Pace(c.token)
		if ok != c.ok || ok && (p.Rule() != c.rule || p.Line != c.line) {
			t.Errorf("Pace(%q) = %q line %d %v, want %q line %d %v", c.token, p.Rule(), p.Line, ok, c.rule, c.line, c.ok)
		}
	}
	// One group for the rules, two paces: a pace line speaks for the
	// user-agent lines just above it. A pace after a rule still belongs
	// to its group's names.
	r = Parser{}.Parse([]byte("User-agent: bingbot\nCrawl-delay: 10\nUser-agent: *\nCrawl-delay: 1\nDisallow: /x\nRequest-rate: 1/2\n"))
	for token, want := range map[string]string{"bingbot": "Crawl-delay: 10", "other": "Request-rate: 1/2"} {
		if p, _ := r.Pace(token); p.Rule() != want {
			t.Errorf("Pace(%q) = %q, want %q", token, p.Rule(), want)
		}
		if v := r.Check(token, "/x"); v.Allowed {
			t.Errorf("%s may fetch /x: the group's rule applies to both names", token)
		}
	}
	if _, ok := (*Robots)(nil).Pace("a"); ok {
		t.Error("a nil Robots asks for a pace")
	}
}

func TestBadPaceReported(t *testing.T) {
	r := Parser{KeepIgnored: true}.Parse([]byte("Crawl-delay: 5\nUser-agent: *\nRequest-rate: often\nCrawl-delay: soon\n"))
	got := ignoredLines(r)
	want := []string{
		"line 1: record before any user-agent line",
		"line 3: request-rate is not requests/period, such as 1/5 (seconds), 1/10m or 60/1h",
		"line 4: crawl-delay is not a number of seconds, such as 10 or 0.5",
	}
	if !slices.Equal(got, want) {
		t.Errorf("ignored:\n%q\nwant\n%q", got, want)
	}
}
