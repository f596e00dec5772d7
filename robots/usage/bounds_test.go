package usage

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"robotsgate/robots"
)

func TestBounds(t *testing.T) {
	labels := func(n int) string { return strings.Repeat("x=n, ", n-1) + "train-ai=n" }
	long := "train-ai=n;why=\"" + strings.Repeat("a", maxValue) + "\""     // one label, over 4 KiB
	near := "train-ai=n;why=\"" + strings.Repeat("a", maxValue-100) + "\"" // one label, under 4 KiB
	tests := []struct {
		name  string
		lines []robots.UsageLine
		h     http.Header
		want  int // statements
	}{
		{"64 labels are read", []robots.UsageLine{cu(1, "", labels(64))}, nil, 1},
		{"65 labels state nothing", []robots.UsageLine{cu(1, "", labels(65))}, nil, 0},
		{"a value past the bound costs one label, the rest is read", []robots.UsageLine{cu(1, "", labels(65)), cs(2, "ai-train=no")}, nil, 1},
		{"the budget is per call, a line past it unread", []robots.UsageLine{cu(1, "", labels(40)), cu(2, "", labels(24)), cs(3, "ai-train=no")}, nil, 3},
		{"a 60 KB value states nothing", []robots.UsageLine{cu(1, "", strings.Repeat("a=n,", 15000)+"train-ai=n")}, nil, 0},
		{"a value over 4 KiB states nothing, the rest is read", []robots.UsageLine{cu(1, "", long), cu(2, "", "search=y")}, nil, 1},
		{"4 KiB values: two are read, the third unread", []robots.UsageLine{cu(1, "", near), cu(2, "", near), cu(3, "", near)}, nil, 3},
		{"a 60 KB signal states nothing", []robots.UsageLine{cs(1, strings.Repeat("ai-train=no,", 5000))}, nil, 0},
		{"a signal repeated: 64 statements", []robots.UsageLine{cs(1, strings.Repeat("ai-train=no,", 63)+"ai-train=no")}, nil, maxLabels},
		{"lines past the 64th: the first unread", manyLines(1000), nil, maxLabels + 1},
		{"a 60 KB header states nothing", nil, http.Header{"Content-Usage": {strings.Repeat("a=n,", 15000) + "train-ai=n"}}, 0},
		{"header lines add up", nil, http.Header{"Content-Usage": {strings.Repeat("a", 3000) + "=n", strings.Repeat("a", 3000) + "=n", "train-ai=n"}}, 0},
		{"too many header lines", nil, http.Header{"Content-Usage": append(make([]string, 100), "train-ai=n")}, 0},
		{"65 labels in header lines", nil, http.Header{"Content-Usage": {labels(30), labels(35)}}, 0},
		{"64 labels in header lines", nil, http.Header{"Content-Usage": {labels(30), labels(34)}}, 1},
		{"x-robots-tag lines past the 64th unread", nil, http.Header{"X-Robots-Tag": append(make([]string, 64), "noai")}, 0},
		{"a 60 KB x-robots-tag line unread", nil, http.Header{"X-Robots-Tag": {strings.Repeat("noindex,", 7500) + "noai"}}, 0},
		{"x-robots-tag within the bound", nil, http.Header{"X-Robots-Tag": {strings.Repeat("noindex,", 63) + "noai"}}, 1},
		{"each header has its budget", nil, http.Header{"Content-Usage": {labels(64)}, "X-Robots-Tag": {strings.Repeat("noindex,", 63) + "noai"}, "Tdm-Reservation": {"1"}}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := append(FromRobots(tt.lines), FromResponse(tt.h, "GPTBot")...)
			if len(st) != tt.want {
				t.Fatalf("%d statements, want %d", len(st), tt.want)
			}
			for i, s := range st {
				if len(s.Text) > maxText || !utf8.ValidString(s.Text) {
					t.Fatalf("Text of %d bytes: %q", len(s.Text), s.Text)
				}
				if s.Unread != (strings.Contains(tt.name, "unread") && tt.lines != nil && i == len(st)-1) {
					t.Errorf("statement %d (%s) unread: %v", i, s, s.Unread)
				}
			}
		})
	}
}

// manyLines is a file's worth of one-label lines, each a new statement.
func manyLines(n int) []robots.UsageLine {
	lines := make([]robots.UsageLine, n)
	for i := range lines {
		lines[i] = cu(i+1, "", "train-ai=n")
	}
	return lines
}

// The cost of a 60 KB header is the length check, not a parse.
func TestBoundedCost(t *testing.T) {
	big := http.Header{
		"Content-Usage":   {strings.Repeat("a=n,", 15000)},
		"X-Robots-Tag":    {strings.Repeat("noindex,", 7500)},
		"Tdm-Reservation": make([]string, 10000),
	}
	if a := testing.AllocsPerRun(10, func() { FromResponse(big, "GPTBot") }); a != 0 {
		t.Errorf("FromResponse on 60 KB headers: %v allocations", a)
	}
}

func TestBound(t *testing.T) {
	tests := []struct{ in, want string }{
		{"short", "short"},
		{strings.Repeat("a", 200), strings.Repeat("a", 200)},
		{strings.Repeat("a", 201), strings.Repeat("a", 197) + "…"},
		{strings.Repeat("a", 196) + "ééx", strings.Repeat("a", 196) + "…"}, // a cut inside é backs off
	}
	for _, tt := range tests {
		if got := bound(tt.in); got != tt.want {
			t.Errorf("bound(%d bytes) = %q, want %q", len(tt.in), got, tt.want)
		}
	}
}

func TestJudgeAllocations(t *testing.T) {
	purposes := []string{PurposeSearch, PurposeAITrain, PurposeAIInput}
	if a := testing.AllocsPerRun(100, func() { Judge(purposes, nil) }); a != 0 {
		t.Errorf("Judge without statements: %v allocations", a)
	}
	st := FromRobots([]robots.UsageLine{cu(1, "", "bots=n, search=y"), cs(2, "search=yes,ai-train=no")})
	if a := testing.AllocsPerRun(100, func() { Judge(purposes, st) }); a != 0 {
		t.Errorf("Judge: %v allocations", a)
	}
}

var (
	cloudflareDefault = []robots.UsageLine{cs(3, "search=yes,ai-train=no")}
	aiprefLine        = []robots.UsageLine{cu(7, "/articles/", "train-ai=n, search=y")}
	sink              Verdict
	sinkStatements    []Statement
)

func BenchmarkFromRobots(b *testing.B) {
	for _, bc := range []struct {
		name  string
		lines []robots.UsageLine
	}{{"content-signal-default", cloudflareDefault}, {"aipref", aiprefLine}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkStatements = FromRobots(bc.lines)
			}
		})
	}
}

func BenchmarkJudge(b *testing.B) {
	for _, bc := range []struct {
		name  string
		lines []robots.UsageLine
	}{{"none", nil}, {"content-signal-default", cloudflareDefault}, {"aipref", aiprefLine}} {
		st := FromRobots(bc.lines)
		for _, p := range [][]string{{PurposeSearch}, {PurposeAITrain}} {
			b.Run(bc.name+"/"+p[0], func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					sink = Judge(p, st)
				}
			})
		}
	}
}

func BenchmarkFromResponse(b *testing.B) {
	h := http.Header{"Content-Type": {"text/html"}, "Content-Usage": {"train-ai=n"}, "X-Robots-Tag": {"noindex"}}
	b.ReportAllocs()
	for b.Loop() {
		sinkStatements = FromResponse(h, "GPTBot")
	}
}

// The worst a call costs within the bounds: 64 labels of 60 bytes, or
// two values of 4 KiB.
func BenchmarkFromRobotsWorst(b *testing.B) {
	key := strings.Repeat("k", 58)
	for _, bc := range []struct {
		name  string
		lines []robots.UsageLine
	}{
		{"content-usage-labels", []robots.UsageLine{cu(1, "", strings.Repeat(key+"=n,", 63)+"train-ai=n")}},
		{"content-usage-bytes", []robots.UsageLine{
			cu(1, "", "train-ai=n;a=\""+strings.Repeat("a", maxValue-20)+"\""),
			cu(2, "", "train-ai=n;a=\""+strings.Repeat("a", maxValue-20)+"\""),
		}},
		{"content-signal", []robots.UsageLine{cs(1, strings.Repeat(key+"=no,", 63)+"ai-train=no")}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkStatements = FromRobots(bc.lines)
			}
		})
	}
}

// TestNoBoundHidesARefusal: a path with more readings than robots judges
// one by one makes every usage line of the group apply, more than one
// request reads; the first line left unread refuses, so that a crafted
// path does not hide the site's refusal past the bound.
func TestNoBoundHidesARefusal(t *testing.T) {
	var file strings.Builder
	file.WriteString("User-agent: *\n")
	for i := range 40 {
		fmt.Fprintf(&file, "Content-Usage: /section-%d/ train-ai=y, search=y\n", i)
	}
	file.WriteString("Content-Usage: /members/ train-ai=n\n") // line 42
	r := robots.Parser{}.Parse([]byte(file.String()))
	for _, path := range []string{"/members/x", "/members/%2F%2e%5C/./..;%5C.a/%2F%2e%5C/./..;%5C.a"} {
		v := Judge([]string{PurposeAITrain}, FromRobots(r.Usage("bot", path)))
		if !v.Refused || v.By.Line != 42 && !v.By.Unread {
			t.Errorf("%s: %+v, want refused by line 42 or by a line left unread", path, v)
		}
	}
	if v := Judge([]string{PurposeAITrain}, FromRobots(r.Usage("bot", "/section-3/x"))); v.Refused {
		t.Errorf("/section-3/x: refused by %s, want allowed", v.By)
	}
}
