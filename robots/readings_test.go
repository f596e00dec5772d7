package robots

import (
	"regexp"
	"strings"
	"testing"
)

const readingsRobots = "User-agent: *\n" + // 1
	"Disallow: /private/\n" + // 2
	"Allow: /private/open/\n" + // 3
	"Disallow: /*.cgi$\n" // 4

func TestCheckReadings(t *testing.T) {
	r := Parse([]byte(readingsRobots))
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
		// The query is never rewritten: "?/../private/" is not a path.
		{"/search?/../private/", true, ""},
	}
	for _, tt := range tests {
		v := r.CheckReadings("somebot", tt.path)
		if v.Allowed != tt.allowed {
			t.Errorf("%s: allowed %v (%s), want %v", tt.path, v.Allowed, v.Reason(), tt.allowed)
			continue
		}
		got := ""
		if v.Reading != nil {
			got = v.Reading.Path
		}
		if got != tt.reading {
			t.Errorf("%s: refused reading %q, want %q (%s)", tt.path, got, tt.reading, v.Reason())
		}
		if tt.reading != "" && !strings.Contains(v.Reason(), "when read as "+tt.reading) {
			t.Errorf("%s: reason %q does not name the reading", tt.path, v.Reason())
		}
	}
}

func TestCheckReadingsReasonNamesSteps(t *testing.T) {
	r := Parse([]byte(readingsRobots))
	v := r.CheckReadings("somebot", "/x/..%2Fprivate/y")
	want := "disallow: /private/ (line 2) when read as /private/y (%2F decoded, then dot segments removed)"
	if v.Reason() != want {
		t.Errorf("reason %q, want %q", v.Reason(), want)
	}
}

// A robots.txt that could not be fetched allows only /robots.txt, which
// no rewriting reaches from another path.
func TestAnswerCheckReadings(t *testing.T) {
	unreachable := &Answer{Outcome: OutcomeUnreachable, Detail: "robots.txt 503"}
	if v := unreachable.CheckReadings("bot", "/robots.txt"); !v.Allowed {
		t.Errorf("/robots.txt refused: %s", v.Reason())
	}
	if v := unreachable.CheckReadings("bot", "/x/../robots.txt"); v.Allowed {
		t.Error("/x/../robots.txt allowed while robots.txt is unreachable")
	}
	ok := &Answer{Outcome: OutcomeOK, Robots: Parse([]byte(readingsRobots))}
	if v := ok.CheckReadings("bot", "/a/../private/"); v.Allowed || v.Reading == nil {
		t.Errorf("/a/../private/ through an Answer: %s", v.Reason())
	}
}

func TestReadingsAreBounded(t *testing.T) {
	// Found by a random search: the order of the steps matters at every
	// escape, dot and ';' here, and the readings multiply.
	path := `/%2F%2e%5C/./..;\.a/%2F%2e%5C/./..;\.a`
	readings, ok := Readings(path)
	if ok || len(readings) != MaxReadings {
		t.Fatalf("Readings: %d readings, ok %v; want %d and not ok", len(readings), ok, MaxReadings)
	}
	v := Parse([]byte("User-agent: *\nAllow: /\n")).CheckReadings("bot", path)
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
			if readings, _ := Readings(path); len(readings) != 1 {
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
	case StepDotSegments:
		path = referenceRemoveDots(strings.NewReplacer("%2E", ".", "%2e", ".").Replace(path))
	case StepMergeSlashes:
		path = regexp.MustCompile(`/+`).ReplaceAllString(path, "/")
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

// FuzzCheckReadings: whenever CheckReadings allows a path, every reading
// of it by up to three steps, computed by the reference steps, is allowed
// by Check too.
func FuzzCheckReadings(f *testing.F) {
	for _, s := range []string{readingsRobots, "User-agent: *\nDisallow: /a\nAllow: /a/b/\nDisallow: /*;\nDisallow: /*%2F\n"} {
		for _, p := range []string{"/x/../private/x", "/private/open/../x", "/a;b/c", "//a", "/b/%2e%2E/a", `/q\a`, "/a/b/..;/c", "/ok?/../a"} {
			f.Add(s, p)
		}
	}
	f.Fuzz(func(t *testing.T, body, path string) {
		if !strings.HasPrefix(path, "/") || len(path) > 256 {
			return
		}
		r := Parse([]byte(body))
		if !r.CheckReadings("fuzzbot", path).Allowed {
			return
		}
		forms := []string{path}
		for range 3 {
			for _, form := range forms {
				for s := range numSteps {
					next := referenceStep(s, form)
					if v := r.Check("fuzzbot", next); !v.Allowed {
						t.Fatalf("%q allowed, but its reading %q (after %s) is not: %s", path, next, s, v.Reason())
					}
					forms = append(forms, next)
				}
			}
			if len(forms) > 200 {
				break
			}
		}
	})
}
