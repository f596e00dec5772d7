package robots

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// retainedShapes are files built to keep as much memory per byte as the
// parser allows, each line as short as it can be: distinct user-agent
// names (a rule set each), short rules of every kind, sitemaps, the
// spellings that make the parser keep a second copy of a string (an
// upper-case name, a pattern it normalises), and names that share one
// group of many rules and each head a group of their own (issue 23: a
// merged copy per name kept names × rules). body(size) is the file, at
// most size bytes.
var retainedShapes = []struct {
	name string
	body func(size int) []byte
}{
	{"names", repeated("", func(i int) string { return "User-agent: a" + base36(i) + "\n" })},
	{"names-short", repeated("", func(i int) string { return "user-agent:" + base36(i) + "\n" })},
	{"names-upper", repeated("", func(i int) string { return "useragent " + upperName(i) + "\n" })},
	{"names-rule", repeated("", func(i int) string { return "user-agent:" + base36(i) + "\nallow:/\n" })},
	{"names-delay", repeated("", func(i int) string { return "user-agent:" + upperName(i) + "\ncrawl-delay:1\n" })},
	{"index-pages", repeated("User-agent: *\n", func(i int) string { return "Allow: /" + base36(i) + "/index.htm\n" })},
	{"index-pages-short", repeated("user-agent:*\n", func(i int) string { return "allow:/" + base36(i) + "/index.htm\n" })},
	{"stars", repeated("User-agent: *\n", func(i int) string { return "Disallow:/*" + base36(i) + "\n" })},
	{"short-rules", repeated("user-agent:*\n", func(i int) string { return "allow:/" + base36(i) + "\n" })},
	{"short-rules-cr", repeated("user-agent:*\r", func(i int) string { return "allow:/" + base36(i) + "\r" })},
	{"anchored", repeated("user-agent:*\n", func(i int) string { return "allow:/" + base36(i) + "$\n" })},
	{"normalised", repeated("user-agent:*\n", func(i int) string { return "allow:/%7e" + base36(i) + "\n" })},
	{"normalised-stars", repeated("user-agent:*\n", func(i int) string { return "allow:*%7e" + base36(i) + "**$\n" })},
	{"sitemaps", repeated("", func(i int) string { return "sitemap:" + base36(i) + "\n" })},
	{"junk", repeated("", func(i int) string { return "x:" + base36(i) + "\n" })},
	{"usage-signals", repeated("user-agent:*\n", func(i int) string { return "content-signal:" + base36(i) + "\n" })},
	{"usage-paths", repeated("user-agent:*\n", func(i int) string { return "content-usage:/%7e" + base36(i) + " a\n" })},
	{"names-usage", repeated("", func(i int) string { return "user-agent:" + upperName(i) + "\ncontent-usage:*" + base36(i) + "$ a\n" })},
	{"shared-group", sharedGroup("user-agent: ", "allow: /")},
	{"shared-group-short", sharedGroup("useragent ", "allow:/")},
}

// repeated is a body of line(i) after head, i = 0, 1, ..., as long as it
// stays within size bytes.
func repeated(head string, line func(i int) string) func(size int) []byte {
	return func(size int) []byte { return shapeBody(head, line, size) }
}

// sharedGroup is issue 23's file, its records spelt "ua NAME" and "allow
// PATTERN": names 0 to n-1 head one group, whose rules allow /0 to /n-1,
// then each heads a group of its own allowing /; n is as large as size
// allows.
func sharedGroup(ua, allow string) func(size int) []byte {
	return func(size int) []byte {
		n, total := 0, 0
		for {
			if total += 2*len(ua+"\n") + 2*len(allow+"\n") + 3*len(base36(n)); total > size {
				break
			}
			n++
		}
		var b []byte
		for i := range n {
			b = append(b, ua+base36(i)+"\n"...)
		}
		for i := range n {
			b = append(b, allow+base36(i)+"\n"...)
		}
		for i := range n {
			b = append(b, ua+base36(i)+"\n"+allow+"\n"...)
		}
		return b
	}
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
			body := s.body(DefaultMaxBytes)
			r := Parser{}.Parse(body)
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
	big := retainedShapes[0].body(2 * DefaultMaxBytes)
	checkRetainedBound(t, Parser{MaxBytes: 2 * DefaultMaxBytes}.Parse(big))
}

// TestRetainedBoundMeasured: for the costliest shape, the heap the parsed
// file really keeps is within the bound too, not only the estimate.
func TestRetainedBoundMeasured(t *testing.T) {
	body := retainedShapes[2].body(DefaultMaxBytes)
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
		f.Add(s.body(256))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkRetainedBound(t, Parser{}.Parse(body))
		if len(body) == 0 || len(body) > 16<<10 {
			return
		}
		// Repeated, a group header becomes many groups; end the body with
		// a line break so that its last line stays whole.
		unit := body
		if !strings.HasSuffix(string(unit), "\n") {
			unit = append(unit[:len(unit):len(unit)], '\n')
		}
		checkRetainedBound(t, Parser{}.Parse(bytes.Repeat(unit, (64<<10)/len(unit))))
	})
}
