package robots

import (
	"strconv"
	"strings"
)

// An origin does not always serve the path it was asked for byte for byte:
// web servers and frameworks remove dot segments, merge slashes, decode
// %2F, treat a backslash as a slash or drop ";params" before they look a
// path up. A gate that judges only the raw bytes lets "/x/../private/"
// through a "Disallow: /private/". [Robots.CheckReadings] judges every
// reading an origin may apply, in any combination and order, and allows a
// request only when all of them are allowed.

// Step is one way an origin may rewrite a path before serving it.
type Step uint8

const (
	// StepDotSegments removes "." and ".." segments as RFC 3986 §5.2.4
	// does; "%2E" counts as a dot.
	StepDotSegments Step = iota
	// StepMergeSlashes reads "//" as "/" (nginx merge_slashes, Apache
	// MergeSlashes).
	StepMergeSlashes
	// StepDecodeSlashes reads "%2F" as "/" (servers that decode before
	// routing).
	StepDecodeSlashes
	// StepBackslashes reads "\" and "%5C" as "/" (IIS, Windows file
	// servers).
	StepBackslashes
	// StepDropParams drops ";params" from every segment (servlet
	// containers: "/private;jsessionid=1/x" is "/private/x").
	StepDropParams

	numSteps
)

// String names the step for people: "dot segments removed", ...
func (s Step) String() string {
	switch s {
	case StepDotSegments:
		return "dot segments removed"
	case StepMergeSlashes:
		return "// merged"
	case StepDecodeSlashes:
		return "%2F decoded"
	case StepBackslashes:
		return `\ read as /`
	case StepDropParams:
		return ";params dropped"
	}
	return "step"
}

// Apply rewrites the path part of pathAndQuery (the query is kept as is)
// the way the step says. It returns pathAndQuery itself when nothing
// changes.
func (s Step) Apply(pathAndQuery string) string {
	path, query := splitQuery(pathAndQuery)
	var out string
	switch s {
	case StepDotSegments:
		out = removeDotSegments(path)
	case StepMergeSlashes:
		out = mergeSlashes(path)
	case StepDecodeSlashes:
		out = replaceEscape(path, '2', 'f')
	case StepBackslashes:
		out = replaceEscape(strings.ReplaceAll(path, `\`, "/"), '5', 'c')
	case StepDropParams:
		out = dropParams(path)
	default:
		return pathAndQuery
	}
	if out == path {
		return pathAndQuery
	}
	return out + query
}

// MaxReadings bounds the distinct readings of one path that are judged. A
// path with more is refused as ambiguous (CauseAmbiguous): judging every
// one would let a client buy unbounded work with one request line.
const MaxReadings = 64

// Reading is one form of a path an origin may serve, with the steps that
// lead to it from the path as sent.
type Reading struct {
	Path  string
	Steps []Step
}

// StepsString names the steps: "dot segments removed, then // merged".
func (r Reading) StepsString() string {
	var b strings.Builder
	for i, s := range r.Steps {
		if i > 0 {
			b.WriteString(", then ")
		}
		b.WriteString(s.String())
	}
	return b.String()
}

// Readings returns every form pathAndQuery takes under any sequence of
// steps, the path as sent first, each with the shortest sequence that gives
// it; ok is false when there are more than MaxReadings (the first
// MaxReadings are returned). Every step only ever shortens a path or leaves
// it alone, so the set is finite.
func Readings(pathAndQuery string) (readings []Reading, ok bool) {
	readings = []Reading{{Path: pathAndQuery}}
	if !mayReadOtherwise(pathAndQuery) {
		return readings, true
	}
	for next := 0; next < len(readings); next++ {
		from := readings[next]
		for s := range numSteps {
			form := s.Apply(from.Path)
			if form == from.Path || containsReading(readings, form) {
				continue
			}
			if len(readings) == MaxReadings {
				return readings, false
			}
			steps := append(from.Steps[:len(from.Steps):len(from.Steps)], s)
			readings = append(readings, Reading{Path: form, Steps: steps})
		}
	}
	return readings, true
}

func containsReading(readings []Reading, path string) bool {
	for _, r := range readings {
		if r.Path == path {
			return true
		}
	}
	return false
}

// CheckReadings is Check for a proxy in front of origins that normalise
// paths: the request is allowed only when the path as sent and every
// reading of it (see [Readings]) are. A refusal's Verdict.Reading names the
// reading that was disallowed when it is not the path as sent. A path
// without anything to read otherwise costs what Check costs.
func (r *Robots) CheckReadings(token, pathAndQuery string) Verdict {
	v := r.Check(token, pathAndQuery)
	if !v.Allowed || !mayReadOtherwise(pathAndQuery) {
		return v
	}
	return judgeReadings(v, pathAndQuery, func(p string) Verdict { return r.Check(token, p) })
}

// judgeReadings returns the first disallowed reading's verdict, else
// allowed, the verdict of the path as sent.
func judgeReadings(allowed Verdict, pathAndQuery string, check func(string) Verdict) Verdict {
	readings, ok := Readings(pathAndQuery)
	if !ok {
		return Verdict{Cause: CauseAmbiguous, Detail: "more than " + strconv.Itoa(MaxReadings) + " readings of the path"}
	}
	for _, reading := range readings[1:] {
		if v := check(reading.Path); !v.Allowed {
			v.Reading = &reading
			return v
		}
	}
	return allowed
}

// mayReadOtherwise reports whether some step may change the path part of
// pathAndQuery: a dot segment, "//", ';', '\' or an escaped '.', '/' or
// '\'. Most paths have none, and are judged once.
func mayReadOtherwise(pathAndQuery string) bool {
	path, _ := splitQuery(pathAndQuery)
	segStart := 0
	for i := 0; i < len(path); i++ {
		switch path[i] {
		case ';', '\\':
			return true
		case '%':
			if i+2 < len(path) {
				switch hi, lo := path[i+1], toLowerASCII(path[i+2]); {
				case hi == '2' && (lo == 'e' || lo == 'f'), hi == '5' && lo == 'c':
					return true
				}
			}
		case '/':
			if i > 0 && path[i-1] == '/' || isDotSegment(path[segStart:i]) {
				return true
			}
			segStart = i + 1
		}
	}
	return isDotSegment(path[segStart:])
}

// isDotSegment reports whether seg is "." or "..", with dots possibly
// written as %2E.
func isDotSegment(seg string) bool {
	dots := 0
	for len(seg) > 0 {
		switch {
		case seg[0] == '.':
			seg = seg[1:]
		case len(seg) >= 3 && equalFoldASCII(seg[:3], "%2e"):
			seg = seg[3:]
		default:
			return false
		}
		dots++
	}
	return dots == 1 || dots == 2
}

func splitQuery(pathAndQuery string) (path, query string) {
	if i := strings.IndexByte(pathAndQuery, '?'); i >= 0 {
		return pathAndQuery[:i], pathAndQuery[i:]
	}
	return pathAndQuery, ""
}

// removeDotSegments is RFC 3986 §5.2.4 on a path that starts with '/',
// segment by segment: "." goes, ".." takes the segment before it along.
// A trailing dot segment leaves a trailing slash, as the RFC's does.
func removeDotSegments(path string) string {
	if !strings.HasPrefix(path, "/") {
		return path
	}
	segs := strings.Split(path[1:], "/")
	out := make([]string, 0, len(segs))
	for i, seg := range segs {
		last := i == len(segs)-1
		if !isDotSegment(seg) {
			out = append(out, seg)
			continue
		}
		if isDotDot(seg) && len(out) > 0 {
			out = out[:len(out)-1]
		}
		if last {
			out = append(out, "")
		}
	}
	return "/" + strings.Join(out, "/")
}

func isDotDot(seg string) bool {
	return isDotSegment(seg) && seg != "." && !equalFoldASCII(seg, "%2e")
}

func mergeSlashes(path string) string {
	if !strings.Contains(path, "//") {
		return path
	}
	var b strings.Builder
	b.Grow(len(path))
	for i := 0; i < len(path); i++ {
		if path[i] == '/' && i > 0 && path[i-1] == '/' {
			continue
		}
		b.WriteByte(path[i])
	}
	return b.String()
}

// replaceEscape turns every "%<hi><lo>" (lo, a lower-case hex letter, in
// either case) into '/': "%2F" for decoded slashes, "%5C" for backslashes.
func replaceEscape(path string, hi, lo byte) string {
	var b strings.Builder
	changed := false
	for i := 0; i < len(path); i++ {
		if path[i] == '%' && i+2 < len(path) && path[i+1] == hi && toLowerASCII(path[i+2]) == lo {
			if !changed {
				b.Grow(len(path))
				b.WriteString(path[:i])
				changed = true
			}
			b.WriteByte('/')
			i += 2
			continue
		}
		if changed {
			b.WriteByte(path[i])
		}
	}
	if !changed {
		return path
	}
	return b.String()
}

// dropParams removes from each segment everything from its first ';'.
func dropParams(path string) string {
	if strings.IndexByte(path, ';') < 0 {
		return path
	}
	var b strings.Builder
	b.Grow(len(path))
	inParam := false
	for i := 0; i < len(path); i++ {
		switch c := path[i]; {
		case c == '/':
			inParam = false
			b.WriteByte(c)
		case c == ';':
			inParam = true
		case !inParam:
			b.WriteByte(c)
		}
	}
	return b.String()
}
