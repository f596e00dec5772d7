package robots

import (
	"slices"
	"strings"
	"testing"
)

const readingsRobots = "User-agent: *\n" + // 1
	"Disallow: /private/\n" + // 2
	"Allow: /private/open/\n" + // 3
	"Disallow: /*.cgi$\n" // 4

// readingsOf lists the readings of pathAndQuery as CheckReadings finds
// them, with no bound on their cost; ok is false past MaxReadings.
func readingsOf(pathAndQuery string) (readings []Reading, ok bool) {
	readings, _, stop := expandReadings(pathAndQuery, nil, 0)
	return readings, stop != stopMaxReadings
}

func TestCheckReadings(t *testing.T) {
	r := Parser{}.Parse([]byte(readingsRobots))
	tests := []struct {
		path    string
		allowed bool
		reading string // the disallowed reading; "" when the path as sent was
	}{
		{"/index.html", true, ""},
		{"/.well-known/security.txt", true, ""},
		{"/a/b;c", true, ""},
		{"/public/../index.html", true, ""},
		{"/private/open/page", true, ""},
		{"/private/open/./page", true, ""},
		{"/x..y/private", true, ""},
		{"/private/x", false, ""},
		{"/x/../private/x", false, "/private/x"},
		{"/./private/x", false, "/private/x"},
		{"//private/x", false, "/private/x"},
		{"/private%2Fx", false, "/private/x"},
		{"/private%2fx", false, "/private/x"},
		{"/x/%2E%2E/private/x", false, "/private/x"},
		{"/x/.%2e/private/x", false, "/private/x"},
		{"/private;x/y", false, "/private/y"},
		{"/private;jsessionid=1/y?q=1", false, "/private/y?q=1"},
		{"/private/open/../x", false, "/private/x"},
		{"/private%2F..%2Fprivate%2Fx|", false, "/private/../private/x|"},
		{"/a/..;/private/x", false, "/private/x"},
		{`/private\x`, false, "/private/x"},
		{"/private%5Cx", false, "/private/x"},
		{"/x//..//private/y", false, "/private/y"},
		{"/run.cgi;v=1", false, "/run.cgi"},
		{"/run.cgi?v=1", false, "/run.cgi"},
		{"/x/../run.cgi?v=1", false, "/x/../run.cgi"},
		// The query is never rewritten: "?/../private/" is not a path.
		{"/search?/../private/", true, ""},
	}
	for _, tt := range tests {
		checkReading(t, r.CheckReadings("somebot", tt.path), tt.path, tt.allowed, tt.reading)
	}
}

// checkReading checks a verdict of CheckReadings: allowed or not, and the
// reading it names ("" for the path as sent).
func checkReading(t *testing.T, v Verdict, path string, allowed bool, reading string) {
	t.Helper()
	if v.Allowed != allowed {
		t.Errorf("%s: allowed %v (%s), want %v", path, v.Allowed, v.Reason(), allowed)
		return
	}
	got := ""
	if v.Reading != nil {
		got = v.Reading.Path
	}
	if got != reading {
		t.Errorf("%s: refused reading %q, want %q (%s)", path, got, reading, v.Reason())
	}
	if reading != "" && !strings.Contains(v.Reason(), "when read as "+reading+" (") {
		t.Errorf("%s: reason %q does not name the reading", path, v.Reason())
	}
}

// fileRobots are rules about files, which a static server serves whatever
// the query, and for "/doc.pdf/." as path.Clean reads it.
const fileRobots = "User-agent: *\n" + // 1
	"Disallow: /*.pdf$\n" + // 2
	"Disallow: /w/\n" + // 3
	"Allow: /w/load.php?\n" + // 4
	"Disallow: /search$\n" + // 5
	"Allow: /search?q=\n" + // 6
	"Disallow: /*?$\n" // 7

func TestCheckReadingsOfFileNames(t *testing.T) {
	r := Parser{}.Parse([]byte(fileRobots))
	tests := []struct {
		path    string
		allowed bool
		reading string // the disallowed reading; "" when the path as sent was
		steps   string
	}{
		{"/doc.html", true, "", ""},
		{"/doc.pdf", false, "", ""},
		{"/doc.pdf?x=1", false, "/doc.pdf", "query dropped"},
		{"/doc.pdf?", false, "", ""}, // "/*?$" matches it as sent
		{"/doc.pdf?x=1&y=.pdf", false, "", ""},
		{"/doc.pdf/.", false, "/doc.pdf", "dot segments removed, no trailing /"},
		{"/doc.pdf/%2E", false, "/doc.pdf", "dot segments removed, no trailing /"},
		{"/a/doc.pdf/b/..", false, "/a/doc.pdf", "dot segments removed, no trailing /"},
		{"/doc.pdf/.?x=1", false, "/doc.pdf", "dot segments removed, no trailing /, then query dropped"},
		{"/x//doc.pdf/.;v=2?x", false, "/x//doc.pdf", ";params dropped, then dot segments removed, no trailing /, then query dropped"},
		// Readings not judged: a trailing slash removed, path info, case
		// folding, an escaped '?'.
		{"/doc.pdf/", true, "", ""},
		{"/doc.pdf/x", true, "", ""},
		{"/doc.PDF", true, "", ""},
		{"/doc.pdf%3Fx=1", true, "", ""},
		// A rule that allows the URL with its query is the site's word on
		// it: "Disallow: /w/" matches the query-less form, but the URL too,
		// and the longer allow wins for both.
		{"/w/load.php?modules=site", true, "", ""},
		{"/x/../w/load.php?modules=site", true, "", ""},
		{"/w/load.php", false, "", ""},
		{"/w/index.php?title=x", false, "", ""},
		// "Disallow: /search$" is dodged by no query but the one a longer
		// rule allows.
		{"/search", false, "", ""},
		{"/search?q=robots", true, "", ""},
		{"/search?lang=en", false, "/search", "query dropped"},
		{"/search/?lang=en", true, "", ""},
	}
	for _, tt := range tests {
		v := r.CheckReadings("somebot", tt.path)
		checkReading(t, v, tt.path, tt.allowed, tt.reading)
		if v.Reading != nil && v.Reading.StepsString() != tt.steps {
			t.Errorf("%s: steps %q, want %q", tt.path, v.Reading.StepsString(), tt.steps)
		}
	}
}

// Each step, on its own: the path part rewritten and the query kept, but
// by StepDropQuery; the path itself returned when nothing changes.
func TestStepApply(t *testing.T) {
	tests := []struct {
		step     Step
		in, want string
	}{
		{StepDotSegments, "/a/./b/../c", "/a/c"},
		{StepDotSegments, "/doc.pdf/.", "/doc.pdf/"},
		{StepDotSegments, "/a/b/..", "/a/"},
		{StepDotSegments, "/a//..", "/a/"},
		{StepDotSegments, "/..", "/"},
		{StepDotSegments, "/a/%2e%2E/b?c/../d", "/b?c/../d"},
		{StepDotSegments, "/a.b/..c/...", "/a.b/..c/..."},
		{StepCleanDots, "/a/./b/../c", "/a/c"},
		{StepCleanDots, "/doc.pdf/.", "/doc.pdf"},
		{StepCleanDots, "/doc.pdf/%2E?x", "/doc.pdf?x"},
		{StepCleanDots, "/a/b/..", "/a"},
		{StepCleanDots, "/a/b/../", "/a/"},
		{StepCleanDots, "/a//.", "/a/"},
		{StepCleanDots, "/a/..", "/"},
		{StepCleanDots, "/.", "/"},
		{StepCleanDots, "/", "/"},
		{StepMergeSlashes, "//a///b/?x//y", "/a/b/?x//y"},
		{StepMergeSlashes, "/a/b", "/a/b"},
		{StepDecodeSlashes, "/a%2Fb%2fc%2?x%2F", "/a/b/c%2?x%2F"},
		{StepBackslashes, `/a\b%5Cc%5cd?\`, `/a/b/c/d?\`},
		{StepDropParams, "/a;x/b;y;z/c;?q;r", "/a/b/c?q;r"},
		{StepDropParams, "/a;x", "/a"},
		{StepDropQuery, "/a?b", "/a"},
		{StepDropQuery, "/a?", "/a"},
		{StepDropQuery, "/a?b?c", "/a"},
		{StepDropQuery, "/a", "/a"},
	}
	for _, tt := range tests {
		if got := tt.step.Apply(tt.in); got != tt.want {
			t.Errorf("%s: Apply(%q) = %q, want %q", tt.step, tt.in, got, tt.want)
		}
	}
	names := make(map[string]bool)
	for s := range numSteps {
		if name := s.String(); name == "step" || names[name] {
			t.Errorf("step %d is named %q", s, name)
		} else {
			names[name] = true
		}
	}
}

// readingsOf lists each form once, by its shortest steps, the query-less
// ones aside.
func TestReadingsOfFileName(t *testing.T) {
	readings, ok := readingsOf("/doc.pdf/.?x=1")
	var got []string
	for _, r := range readings {
		got = append(got, r.Path+" ("+r.StepsString()+")")
	}
	want := []string{"/doc.pdf/.?x=1 ()", "/doc.pdf/?x=1 (dot segments removed)", "/doc.pdf?x=1 (dot segments removed, no trailing /)"}
	if !ok || !slices.Equal(got, want) {
		t.Errorf("readingsOf = %q, %v; want %q", got, ok, want)
	}
}

func TestCheckReadingsReasonNamesSteps(t *testing.T) {
	r := Parser{}.Parse([]byte(readingsRobots))
	v := r.CheckReadings("somebot", "/x/..%2Fprivate/y")
	want := "disallow: /private/ (line 2) when read as /private/y (%2F decoded, then dot segments removed)"
	if v.Reason() != want {
		t.Errorf("reason %q, want %q", v.Reason(), want)
	}
}

// CheckReadings exempts nothing: the proxy lets GET and HEAD of exactly
// /robots.txt through before it asks. Every other request for it is a URL
// like any other, whatever the outcome of the fetch.
func TestCheckReadingsExemptsNothing(t *testing.T) {
	disallowAll := Parser{}.Parse([]byte("User-agent: *\nDisallow: /\n"))
	ok := &Answer{Outcome: OutcomeOK, Robots: Parser{}.Parse([]byte(readingsRobots))}
	unreachable := &Answer{Outcome: OutcomeUnreachable, Detail: "robots.txt 503"}
	unavailable := &Answer{Outcome: OutcomeUnavailable, Detail: "robots.txt 404"}
	tests := []struct {
		name    string
		check   func(token, path string) Verdict
		path    string
		allowed bool
		reason  string
	}{
		{"disallow all", disallowAll.CheckReadings, "/robots.txt", false, "disallow: / (line 2)"},
		{"disallow all", disallowAll.CheckReadings, "/robots.txt?x=1", false, "disallow: / (line 2)"},
		{"disallow all", disallowAll.CheckReadings, "/x/../robots.txt", false, "disallow: / (line 2)"},
		{"ok", ok.CheckReadings, "/robots.txt?x=1", true, "no matching rule"},
		{"ok", ok.CheckReadings, "/a/../private/", false, "disallow: /private/ (line 2) when read as /private/ (dot segments removed)"},
		{"unreachable", unreachable.CheckReadings, "/robots.txt", false, "robots.txt 503: complete disallow"},
		{"unreachable", unreachable.CheckReadings, "/robots.txt?x", false, "robots.txt 503: complete disallow"},
		{"unreachable", unreachable.CheckReadings, "/x/../robots.txt", false, "robots.txt 503: complete disallow"},
		{"unavailable", unavailable.CheckReadings, "/robots.txt?x", true, "robots.txt 404: no restrictions"},
		{"unavailable", unavailable.CheckReadings, "/a/../private/", true, "robots.txt 404: no restrictions"},
		{"not fetched", (*Answer)(nil).CheckReadings, "/robots.txt", false, "robots.txt not fetched: complete disallow"},
	}
	for _, tt := range tests {
		v := tt.check("bot", tt.path)
		if v.Allowed != tt.allowed || v.Reason() != tt.reason {
			t.Errorf("%s: CheckReadings(%q) = %v %q, want %v %q", tt.name, tt.path, v.Allowed, v.Reason(), tt.allowed, tt.reason)
		}
	}
	// Check, for RFC 9309's sake, still exempts the path alone.
	if v := unreachable.Check("bot", "/robots.txt"); !v.Allowed || v.Cause != CauseRobotsTxt {
		t.Errorf("Answer.Check(/robots.txt) while unreachable: %s", v.Reason())
	}
	if v := unreachable.Check("bot", "/robots.txt?x"); v.Allowed {
		t.Errorf("Answer.Check(/robots.txt?x) while unreachable: %s", v.Reason())
	}
}

func TestReadingsAreBounded(t *testing.T) {
	// Found by a random search: the order of the steps matters at every
	// escape, dot and ';' here, and the readings multiply.
	path := `/%2F%2e%5C/./..;\.a/%2F%2e%5C/./..;\.a`
	readings, ok := readingsOf(path)
	if ok || len(readings) != MaxReadings {
		t.Fatalf("Readings: %d readings, ok %v; want %d and not ok", len(readings), ok, MaxReadings)
	}
	v := Parser{}.Parse([]byte("User-agent: *\nAllow: /\n")).CheckReadings("bot", path)
	if v.Allowed || v.Cause != CauseAmbiguous {
		t.Errorf("a path with too many readings: %s, want refused as ambiguous", v.Reason())
	}
}

func TestMayReadOtherwise(t *testing.T) {
	for path, want := range map[string]bool{
		"/":               false,
		"/index.html":     false,
		"/a.b/c..d/...":   false,
		"/.well-known/x":  false,
		"/a?b//c;d/../e":  false,
		"/%41%42":         false,
		"/a/.":            true,
		"/a/..":           true,
		"/a/./b":          true,
		"/%2e/":           true,
		"/a//b":           true,
		"/a;b":            true,
		`/a\b`:            true,
		"/a%2fb":          true,
		"/a%5cb":          true,
		"/a%2E":           true,
		"/a/%2e%2E":       true,
		"/a/%2":           false,
		"/a/..%2":         false, // "%2" is no escape, so "..%2" is no dot segment
		"/trailing%2F?x=": true,
	} {
		if got := mayReadOtherwise(path); got != want {
			t.Errorf("mayReadOtherwise(%q) = %v, want %v", path, got, want)
		}
		if !want {
			if readings, _ := readingsOf(path); len(readings) != 1 {
				t.Errorf("%q: %d readings, want the path alone", path, len(readings))
			}
		}
	}
}

// referenceStep is each Step written again, differently: the RFC 3986
// §5.2.4 loop over input and output buffers, regular expressions and
// replacers. The fuzz target below checks the fast paths against it.
func referenceStep(s Step, pathAndQuery string) string {
	path, query := splitQuery(pathAndQuery)
	switch s {
	case StepDotSegments, StepCleanDots:
		dotted := strings.NewReplacer("%2E", ".", "%2e", ".").Replace(path)
		path = referenceRemoveDots(dotted)
		// path.Clean's reading: no slash is left for a final dot segment.
		if s == StepCleanDots && path != "/" && (strings.HasSuffix(dotted, "/.") || strings.HasSuffix(dotted, "/..")) {
			path = strings.TrimSuffix(path, "/")
		}
	case StepMergeSlashes:
		for strings.Contains(path, "//") {
			path = strings.ReplaceAll(path, "//", "/")
		}
	case StepDecodeSlashes:
		path = strings.NewReplacer("%2F", "/", "%2f", "/").Replace(path)
	case StepBackslashes:
		path = strings.NewReplacer(`\`, "/", "%5C", "/", "%5c", "/").Replace(path)
	case StepDropParams:
		segs := strings.Split(path, "/")
		for i, seg := range segs {
			segs[i], _, _ = strings.Cut(seg, ";")
		}
		path = strings.Join(segs, "/")
	case StepDropQuery:
		query = ""
	}
	return path + query
}

// referenceRemoveDots is RFC 3986 §5.2.4 as the RFC writes it.
func referenceRemoveDots(in string) string {
	var out []string // output buffer, as segments each starting with "/"
	for in != "" {
		switch {
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "/..":
			in = "/"
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "." || in == "..":
			in = ""
		default:
			next := strings.IndexByte(in[1:], '/')
			if next < 0 {
				out, in = append(out, in), ""
			} else {
				out, in = append(out, in[:next+1]), in[next+1:]
			}
		}
	}
	return strings.Join(out, "")
}

// referenceBest is the longest rule of rs matching any of paths (allow
// first on a tie), by brute force over every rule; nil when none matches.
func referenceBest(rs product, paths ...string) *keptRule {
	var best *keptRule
	for _, rule := range allRules(rs) {
		matches := false
		for _, p := range paths {
			matches = matches || referenceMatch(rule.pattern, normalizePath(p))
		}
		if matches && (best == nil || rule.pattern.octets > best.pattern.octets ||
			rule.pattern.octets == best.pattern.octets && rule.Allow && !best.Allow) {
			best = rule
		}
	}
	return best
}

// referenceRefuses reports whether a reading is refused: its longest
// matching rule, or the longest rule matching it or its query-less form,
// disallows.
func referenceRefuses(rs product, reading string) bool {
	if best := referenceBest(rs, reading); best != nil && !best.Allow {
		return true
	}
	best := referenceBest(rs, reading, referenceStep(StepDropQuery, reading))
	return best != nil && !best.Allow
}

// FuzzCheckReadings: whenever CheckReadings allows a path, every reading
// of it by up to three steps, computed by the reference steps, is allowed
// by a brute-force judge too, beside its query-less form; whenever it
// refuses a path by a rule, the reading it names is what its steps make of
// the path, and the brute-force judge refuses it too.
func FuzzCheckReadings(f *testing.F) {
	for _, s := range []string{readingsRobots, fileRobots, "User-agent: *\nDisallow: /a\nAllow: /a/b/\nDisallow: /*;\nDisallow: /*%2F\n"} {
		for _, p := range []string{"/x/../private/x", "/private/open/../x", "/a;b/c", "//a", "/b/%2e%2E/a", `/q\a`, "/a/b/..;/c", "/ok?/../a",
			"/doc.pdf/.?x=1", "/a/doc.pdf/b/..", "/w/load.php?x", "/search?lang=en", "/robots.txt?x", "/x.cgi?"} {
			f.Add(s, p)
		}
	}
	f.Fuzz(func(t *testing.T, body, path string) {
		if !strings.HasPrefix(path, "/") || len(path) > 256 {
			return
		}
		for s := range numSteps {
			if got, want := s.Apply(path), referenceStep(s, path); normalizePath(got) != normalizePath(want) {
				t.Fatalf("%s: Apply(%q) = %q, the reference makes %q", s, path, got, want)
			}
		}
		r := Parser{}.Parse([]byte(body))
		rs := r.ruleSetFor("fuzzbot")
		v := r.CheckReadings("fuzzbot", path)
		if rs.s == nil {
			if !v.Allowed || v.Cause != CauseNoGroup {
				t.Fatalf("%q: no group applies, but %s", path, v.Reason())
			}
			return
		}
		if !v.Allowed {
			if v.Cause != CauseRule {
				return // ambiguous, or too costly: refused unjudged
			}
			reading := path
			if v.Reading != nil {
				for _, s := range v.Reading.Steps {
					reading = referenceStep(s, reading)
				}
				if normalizePath(reading) != normalizePath(v.Reading.Path) {
					t.Fatalf("%q: refused as %q after %s, but those steps make %q", path, v.Reading.Path, v.Reading.StepsString(), reading)
				}
				if steps := v.Reading.Steps; steps[len(steps)-1] == StepDropQuery {
					reading = path
					for _, s := range steps[:len(steps)-1] {
						reading = referenceStep(s, reading)
					}
				}
			}
			if !referenceRefuses(rs, reading) {
				t.Fatalf("%q refused (%s), but the brute-force judge allows %q", path, v.Reason(), reading)
			}
			return
		}
		if referenceRefuses(rs, path) {
			t.Fatalf("%q allowed (%s), but the brute-force judge refuses it", path, v.Reason())
		}
		// Every form by up to three steps, each judged once.
		forms, judged := []string{path}, map[string]bool{path: true}
		for range 3 {
			for _, form := range forms {
				for s := range pathSteps {
					next := referenceStep(s, form)
					if judged[next] {
						continue
					}
					if referenceRefuses(rs, next) {
						t.Fatalf("%q allowed (%s), but its reading %q (after %s) is not", path, v.Reason(), next, s)
					}
					judged[next] = true
					forms = append(forms, next)
				}
			}
			if len(forms) > 200 {
				break
			}
		}
	})
}
