package robots

import (
	"strconv"
	"strings"
	"testing"
)

// sixteenReadings is a path of exactly size bytes with 16 readings and a
// query, filled with fill.
func sixteenReadings(tb testing.TB, size int, fill string) string {
	tb.Helper()
	head, query := "/a/./b//c;d%2Fe/", "?q=1"
	var b strings.Builder
	b.WriteString(head)
	for b.Len()+len(query)+len(fill) <= size {
		b.WriteString(fill)
	}
	b.WriteString(strings.Repeat("x", size-b.Len()-len(query)))
	b.WriteString(query)
	path := b.String()
	if readings, _ := readingsOf(path); len(path) != size || len(readings) != 16 {
		tb.Fatalf("%d bytes with %d readings, want %d and 16", len(path), len(readings), size)
	}
	return path
}

// No file of the corpus is refused as too costly, for any group, for a
// URL of up to 2 KiB sent percent-encoded, as clients send them, with up
// to 16 readings. Raw non-ASCII bytes are matched escaped, three bytes
// each: such a URL is logged, not asserted.
func TestDecisionCostCorpus(t *testing.T) {
	shapes := []struct {
		name, path string
		assert     bool
	}{
		{"ascii", sixteenReadings(t, 2048, "abcdefgh/"), true},
		{"percent-encoded", sixteenReadings(t, 2048, "%E3%83%84"), true},
		{"raw UTF-8", sixteenReadings(t, 2048, "\xE3\x83\x84"), false},
	}
	for _, shape := range shapes {
		var worst int64
		var worstAt string
		refused := 0
		for name, body := range corpusFiles(t) {
			r := Parser{}.Parse(body)
			tokens := []string{"corpus-test-bot"} // the "*" groups
			for i := range r.sets {
				if s := &r.sets[i]; int32(i) != r.global {
					tokens = append(tokens, r.text[s.key:s.key+uint32(s.keyLen)])
				}
			}
			for _, token := range tokens {
				j := r.Prepare(token, shape.path)
				if v := j.Verdict(); v.Cause == CauseTooCostly || v.Cause == CauseAmbiguous {
					refused++
					if shape.assert {
						t.Errorf("%s, %s, %s path: %s", name, token, shape.name, v.Reason())
					}
				}
				if j.Cost() > worst {
					worst, worstAt = j.Cost(), name+", "+token
				}
			}
		}
		t.Logf("%s paths: costliest %s at %d (%.0f%% of MaxDecisionCost), %d groups refused", shape.name, worstAt, worst, 100*float64(worst)/MaxDecisionCost, refused)
	}
}

// A decision over the bound is refused without a rule being matched, and
// says what it would have cost.
func TestTooCostly(t *testing.T) {
	r := worstCaseRobots()
	path := worstCasePath()
	j := r.Prepare("bot", path)
	if j.Cost() <= MaxDecisionCost {
		t.Fatalf("cost %d, want over %d", j.Cost(), MaxDecisionCost)
	}
	if j.readings != nil {
		t.Errorf("%d readings listed, want none: the path as sent is over the bound alone", len(j.readings))
	}
	v := j.Verdict()
	want := "decision cost estimated at " + strconv.FormatInt(j.Cost(), 10) + ", over the bound of 10000000: refused as too costly to judge"
	if v.Allowed || v.Cause != CauseTooCostly || !v.Rule.IsZero() || v.Reading != nil || v.Group != "*" || v.Reason() != want {
		t.Errorf("verdict %+v\nreason %q, want %q", v, v.Reason(), want)
	}
	if w := r.CheckReadings("bot", path); w.Reason() != v.Reason() {
		t.Errorf("CheckReadings: %q, want %q", w.Reason(), v.Reason())
	}
	// A short path is judged by the same rules.
	if v := r.CheckReadings("bot", "/x/zq1"); v.Cause != CauseRule || v.Allowed {
		t.Errorf("/x/zq1: %s, want refused by a rule", v.Reason())
	}

	// A path whose readings pass the bound stops being listed there.
	small := rulesRobots(300, func(i int) string { return "/*zq" + strconv.Itoa(i) })
	j = small.Prepare("bot", path)
	if j.stop != stopMaxCost || len(j.readings) >= 32 {
		t.Errorf("%d readings listed, stop %d: want the listing stopped at the bound", len(j.readings), j.stop)
	}
	if v := j.Verdict(); v.Cause != CauseTooCostly || !strings.Contains(v.Reason(), "estimated at over ") {
		t.Errorf("verdict %s, want refused as too costly", v.Reason())
	}
}

// The estimate grows with what a decision does: the path's length, its
// readings, wildcard rules and, for a path with a query, anchored rules.
func TestDecisionCostGrows(t *testing.T) {
	literal := Parser{}.Parse([]byte("User-agent: *\nDisallow: /a\nDisallow: /b\n"))
	wildcard := Parser{}.Parse([]byte("User-agent: *\nDisallow: /a\nDisallow: /*b\n"))
	anchored := Parser{}.Parse([]byte("User-agent: *\nDisallow: /a\nDisallow: /*b$\n"))
	long := "/" + strings.Repeat("x", 999)
	for _, tt := range []struct {
		name          string
		cheap, costly int64
	}{
		{"longer path", literal.Prepare("bot", "/x").Cost(), literal.Prepare("bot", long).Cost()},
		{"readings", literal.Prepare("bot", long).Cost(), literal.Prepare("bot", "/./"+long).Cost()},
		{"wildcard", literal.Prepare("bot", long).Cost(), wildcard.Prepare("bot", long).Cost()},
		{"query and anchored rule", anchored.Prepare("bot", long).Cost(), anchored.Prepare("bot", long+"?q").Cost()},
	} {
		if tt.cheap <= 0 || tt.costly <= tt.cheap {
			t.Errorf("%s: cost %d, want more than %d", tt.name, tt.costly, tt.cheap)
		}
	}
	// A query adds nothing without an anchored rule to try it on.
	if with, without := wildcard.Prepare("bot", long+"?q").Cost(), wildcard.Prepare("bot", long+"&q").Cost(); with != without {
		t.Errorf("a query costs %d, the same bytes without one %d", with, without)
	}
	// Nothing to match, nothing to pay.
	for _, a := range []*Answer{nil, {Outcome: OutcomeUnreachable}, {Outcome: OutcomeUnavailable}, {Outcome: OutcomeOK, Robots: Parser{}.Parse(nil)}} {
		if c := a.Prepare("bot", long).Cost(); c != 0 {
			t.Errorf("%v: cost %d, want 0", a, c)
		}
	}
}

// Preparing and judging a path with nothing to read otherwise allocates
// nothing, a query and an anchored rule included.
func TestPrepareDoesNotAllocate(t *testing.T) {
	r := Parser{}.Parse([]byte(fileRobots))
	a := &Answer{Outcome: OutcomeOK, Robots: r}
	for _, path := range []string{"/doc.html", "/doc.html?x=1", "/w/load.php?modules=x", "/doc.pdf"} {
		if n := testing.AllocsPerRun(100, func() {
			j := a.Prepare("bot", path)
			if j.Cost() > MaxDecisionCost {
				t.Fatal("too costly")
			}
			j.Verdict()
		}); n != 0 {
			t.Errorf("%s: %v allocations", path, n)
		}
	}
}
