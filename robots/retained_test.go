package robots

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// retainedShapes are files built to keep as much memory per byte as the
// parser allows, each line as short as it can be: distinct user-agent
// names (a rule set each), short rules of every kind, sitemaps, and the
// spellings that make the parser keep a second copy of a string (an
// upper-case name, a pattern it normalises).
var retainedShapes = []struct {
	name, head string
	line       func(i int) string
}{
	{"names", "", func(i int) string { return "User-agent: a" + base36(i) + "\n" }},
	{"names-short", "", func(i int) string { return "user-agent:" + base36(i) + "\n" }},
	{"names-upper", "", func(i int) string { return "useragent " + upperName(i) + "\n" }},
	{"names-rule", "", func(i int) string { return "user-agent:" + base36(i) + "\nallow:/\n" }},
	{"names-delay", "", func(i int) string { return "user-agent:" + upperName(i) + "\ncrawl-delay:1\n" }},
	{"index-pages", "User-agent: *\n", func(i int) string { return "Allow: /" + base36(i) + "/index.htm\n" }},
	{"index-pages-short", "user-agent:*\n", func(i int) string { return "allow:/" + base36(i) + "/index.htm\n" }},
	{"stars", "User-agent: *\n", func(i int) string { return "Disallow:/*" + base36(i) + "\n" }},
	{"short-rules", "user-agent:*\n", func(i int) string { return "allow:/" + base36(i) + "\n" }},
	{"short-rules-cr", "user-agent:*\r", func(i int) string { return "allow:/" + base36(i) + "\r" }},
	{"anchored", "user-agent:*\n", func(i int) string { return "allow:/" + base36(i) + "$\n" }},
	{"normalised", "user-agent:*\n", func(i int) string { return "allow:/%7e" + base36(i) + "\n" }},
	{"normalised-stars", "user-agent:*\n", func(i int) string { return "allow:*%7e" + base36(i) + "**$\n" }},
	{"sitemaps", "", func(i int) string { return "sitemap:" + base36(i) + "\n" }},
	{"junk", "", func(i int) string { return "x:" + base36(i) + "\n" }},
}

func base36(i int) string { return strconv.FormatInt(int64(i), 36) }

// upperName is a distinct product name for i that starts upper-case, so
// that the parser keeps it and its lower-cased key apart.
func upperName(i int) string { return string(rune('A'+i%26)) + base36(i/26) }

// shapeBody repeats line(i) after head, i = 0, 1, ..., as long as the body
// stays within size bytes.
func shapeBody(head string, line func(i int) string, size int) []byte {
	b := []byte(head)
	for i := 0; ; i++ {
		l := line(i)
		if len(b)+len(l) > size {
			return b
		}
		b = append(b, l...)
	}
}

// checkRetainedBound fails t unless r keeps within the bound for what it
// parsed.
func checkRetainedBound(t *testing.T, r *Robots) {
	t.Helper()
	if limit := MaxRetainedPerByte*int64(r.ParsedBytes()) + MaxRetainedBase; r.RetainedBytes() > limit {
		t.Fatalf("%d bytes parsed retain %d bytes (%.1f per byte), past MaxRetainedPerByte × %d + MaxRetainedBase = %d",
			r.ParsedBytes(), r.RetainedBytes(), float64(r.RetainedBytes())/float64(max(r.ParsedBytes(), 1)), r.ParsedBytes(), limit)
	}
}

// TestRetainedBound: the files that keep the most memory per byte, at the
// default parse limit, at a larger one, and cut by the limit, keep within
// MaxRetained.
func TestRetainedBound(t *testing.T) {
	for _, s := range retainedShapes {
		t.Run(s.name, func(t *testing.T) {
			body := shapeBody(s.head, s.line, DefaultMaxBytes)
			r := Parse(body)
			checkRetainedBound(t, r)
			if r.RetainedBytes() > MaxRetained(0) {
				t.Errorf("RetainedBytes %d > MaxRetained(0) %d", r.RetainedBytes(), MaxRetained(0))
			}
			t.Logf("%d bytes retain %d (%.2f per byte)", r.ParsedBytes(), r.RetainedBytes(), float64(r.RetainedBytes())/float64(r.ParsedBytes()))

			// Past the parse limit: only what was parsed counts.
			cut := Parser{MaxBytes: DefaultMaxBytes / 2}.Parse(body)
			if !cut.Truncated() && len(body) > DefaultMaxBytes/2 {
				t.Fatal("not truncated")
			}
			checkRetainedBound(t, cut)
			if cut.RetainedBytes() > MaxRetained(DefaultMaxBytes/2) {
				t.Errorf("cut: RetainedBytes %d > MaxRetained %d", cut.RetainedBytes(), MaxRetained(DefaultMaxBytes/2))
			}
		})
	}
	big := shapeBody("", retainedShapes[0].line, 2*DefaultMaxBytes)
	checkRetainedBound(t, Parser{MaxBytes: 2 * DefaultMaxBytes}.Parse(big))
}

// TestRetainedBoundMeasured: for the costliest shape, the heap the parsed
// file really keeps is within the bound too, not only the estimate.
func TestRetainedBoundMeasured(t *testing.T) {
	body := shapeBody(retainedShapes[2].head, retainedShapes[2].line, DefaultMaxBytes)
	measured, estimate := retainedHeap(Parser{}, body)
	if limit := MaxRetained(len(body)); measured > limit {
		t.Errorf("%d bytes keep %d bytes of heap (estimate %d), past %d", len(body), measured, estimate, limit)
	}
	t.Logf("%d bytes keep %d bytes of heap (estimate %d)", len(body), measured, estimate)
}

// FuzzRetainedBound checks the bound on any body, and on the body repeated
// up to 64 KiB, where the cost per byte of a structure shows beyond the
// constant.
func FuzzRetainedBound(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, s := range retainedShapes {
		f.Add(shapeBody(s.head, s.line, 256))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkRetainedBound(t, Parse(body))
		if len(body) == 0 || len(body) > 16<<10 {
			return
		}
		// Repeated, a group header becomes many groups; end the body with
		// a line break so that its last line stays whole.
		unit := body
		if !strings.HasSuffix(string(unit), "\n") {
			unit = append(unit[:len(unit):len(unit)], '\n')
		}
		checkRetainedBound(t, Parse(bytes.Repeat(unit, (64<<10)/len(unit))))
	})
}
