package robots

import (
	"bytes"
	"strings"
)

// An origin does not always serve the path it was asked for byte for byte:
// web servers and frameworks remove dot segments, merge slashes, decode
// %2F, treat a backslash as a slash or drop ";params" before they look a
// path up, and a static file server ignores the query. A gate that judges
// only the raw bytes lets "/x/../private/" through a "Disallow: /private/"
// and "/doc.pdf?x=1" through a "Disallow: /*.pdf$". [Robots.CheckReadings]
// judges every reading an origin may apply, in any combination and order,
// and allows a request only when all of them are allowed.

// Step is one way an origin may rewrite a path before serving it.
type Step uint8

const (
	// StepDotSegments removes "." and ".." segments as RFC 3986 §5.2.4
	// does; "%2E" counts as a dot. A final dot segment leaves a trailing
	// slash: "/a/b/.." is "/a/".
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
	// StepCleanDots removes dot segments as Go's path.Clean and Python's
	// posixpath.normpath do, the file servers built on them (Python's
	// http.server, Go's http.FileServer) opening the result: like
	// StepDotSegments, but a final dot segment leaves no trailing slash,
	// so "/doc.pdf/." is "/doc.pdf" and "/a/b/.." is "/a".
	StepCleanDots
	// StepDropQuery drops the query, "?" included, even an empty one: a
	// static file server sends /doc.pdf for "/doc.pdf?x=1". It is not a
	// reading of its own: [Robots.CheckReadings] judges the
	// query-less form of each reading beside it, the longest rule that
	// matches either deciding (see there).
	StepDropQuery

	numSteps
)

// pathSteps are the steps expandReadings combines: every one but
// StepDropQuery.
const pathSteps = StepDropQuery

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
	case StepCleanDots:
		return "dot segments removed, no trailing /"
	case StepDropQuery:
		return "query dropped"
	}
	return "step"
}

// Apply rewrites pathAndQuery the way the step says: the path part, the
// query kept as it is, or, for StepDropQuery, the query. It returns
// pathAndQuery itself when nothing changes.
func (s Step) Apply(pathAndQuery string) string {
	out, changed := s.appendTo(nil, pathAndQuery)
	if !changed {
		return pathAndQuery
	}
	return string(out)
}

// appendTo appends what the step makes of pathAndQuery to dst, and reports
// whether it changed anything; when not, dst is returned as it was. Runs
// of bytes the step keeps are found with vectorised searches and copied
// whole.
func (s Step) appendTo(dst []byte, pathAndQuery string) ([]byte, bool) {
	path, query := splitQuery(pathAndQuery)
	out, changed := dst, false
	switch s {
	case StepDotSegments:
		out, changed = appendDotsRemoved(dst, path, true)
	case StepMergeSlashes:
		out, changed = appendSlashesMerged(dst, path)
	case StepDecodeSlashes:
		out, changed = appendEscapesAsSlash(dst, path, '2', 'f', false)
	case StepBackslashes:
		out, changed = appendEscapesAsSlash(dst, path, '5', 'c', true)
	case StepDropParams:
		out, changed = appendParamsDropped(dst, path)
	case StepCleanDots:
		out, changed = appendDotsRemoved(dst, path, false)
	case StepDropQuery:
		return append(dst, path...), query != ""
	}
	if !changed {
		return dst, false
	}
	return append(out, query...), true
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

// expansionStop says why expandReadings stopped early.
type expansionStop uint8

const (
	stopNever       expansionStop = iota // every reading was found
	stopMaxReadings                      // more than MaxReadings
	stopMaxCost                          // the cost passed MaxDecisionCost
)

// expandReadings returns every form pathAndQuery takes under any sequence
// of steps but StepDropQuery, the path as sent first, each with the
// shortest sequence that gives it, at most MaxReadings of them. Every step
// only ever shortens a path or leaves it alone, so the set is finite.
// With cost, each reading past the first adds what judging it costs to
// spent, which starts at the first's, and the listing stops once the sum
// passes MaxDecisionCost. Each step writes into one scratch buffer, and
// only a form not seen before is copied out of it.
func expandReadings(pathAndQuery string, cost func(reading string) int64, spent int64) ([]Reading, int64, expansionStop) {
	readings := []Reading{{Path: pathAndQuery}}
	if !mayReadOtherwise(pathAndQuery) {
		return readings, spent, stopNever
	}
	scratch := make([]byte, 0, len(pathAndQuery))
	for next := 0; next < len(readings); next++ {
		from := readings[next]
		for s := range pathSteps {
			var changed bool
			if scratch, changed = s.appendTo(scratch[:0], from.Path); !changed || seen(readings, scratch) {
				continue
			}
			if len(readings) == MaxReadings {
				return readings, spent, stopMaxReadings
			}
			form := string(scratch)
			if cost != nil {
				if spent += cost(form); spent > MaxDecisionCost {
					return readings, spent, stopMaxCost
				}
			}
			steps := append(from.Steps[:len(from.Steps):len(from.Steps)], s)
			readings = append(readings, Reading{Path: form, Steps: steps})
		}
	}
	return readings, spent, stopNever
}

// seen reports whether form is among readings, without copying it.
func seen(readings []Reading, form []byte) bool {
	for _, r := range readings {
		if r.Path == string(form) {
			return true
		}
	}
	return false
}

// mayReadOtherwise reports whether some step but StepDropQuery may change
// the path part of pathAndQuery: a dot segment, "//", ';', '\\' or an
// escaped '.', '/' or '\\'. Most paths have none, and are judged once.
func mayReadOtherwise(pathAndQuery string) bool {
	path, _ := splitQuery(pathAndQuery)
	if _, dots := dotSegmentAt(path, 0); dots > 0 {
		return true
	}
	for i := 0; i < len(path); i++ {
		// One test passes over the bytes no step acts on.
		if c := path[i]; c < 64 && stepBytes>>c&1 == 0 || c >= 64 && c != '\\' {
			continue
		}
		switch path[i] {
		case ';', '\\':
			return true
		case '%':
			if i+2 < len(path) {
				switch hi, lo := path[i+1], path[i+2]|0x20; {
				case hi == '2' && (lo == 'e' || lo == 'f'), hi == '5' && lo == 'c':
					return true
				}
			}
		case '/':
			if _, dots := dotSegmentAt(path, i+1); dots > 0 || i+1 < len(path) && path[i+1] == '/' {
				return true
			}
		}
	}
	return false
}

// stepBytes has a bit set for each byte below 64 that may start what a
// step acts on: '/', '%' and ';' (and '\\', above 64).
const stepBytes = 1<<'/' | 1<<'%' | 1<<';'

// dotSegmentAt reports whether a dot segment starts at path[i], with its
// number of dots (0 when it is none), and where it ends: a '/' or the end
// of path. It reads at most the seven bytes a dot segment may take.
func dotSegmentAt(path string, i int) (end, dots int) {
	for j := i; ; dots++ {
		switch {
		case dots > 2:
			return j, 0
		case j == len(path) || path[j] == '/':
			return j, dots
		case path[j] == '.':
			j++
		case path[j] == '%' && j+2 < len(path) && path[j+1] == '2' && path[j+2]|0x20 == 'e':
			j += 3
		default:
			return j, 0
		}
	}
}

func splitQuery(pathAndQuery string) (path, query string) {
	if i := strings.IndexByte(pathAndQuery, '?'); i >= 0 {
		return pathAndQuery[:i], pathAndQuery[i:]
	}
	return pathAndQuery, ""
}

// appendDotsRemoved appends to dst what RFC 3986 §5.2.4 makes of a path
// that starts with '/', segment by segment: "." goes, ".." takes the
// segment before it along. A final dot segment leaves a trailing slash
// when trailingSlash is set, as the RFC's does, and none otherwise, as
// path.Clean's does (but "/" stays). changed is false when path has no
// dot segment.
func appendDotsRemoved(dst []byte, path string, trailingSlash bool) (out []byte, changed bool) {
	if !strings.HasPrefix(path, "/") {
		return dst, false
	}
	finder := newDotSegments(path)
	start, end, dots := finder.next(0)
	if start < 0 {
		return dst, false
	}
	// dst[base:] holds the segments kept so far, each with its '/'.
	base := len(dst)
	dst = append(dst, path[:start-1]...)
	for {
		// path[start:end] is a dot segment; end is a '/' or len(path).
		if dots == 2 {
			if slash := bytes.LastIndexByte(dst[base:], '/'); slash >= 0 {
				dst = dst[:base+slash]
			}
		}
		if end == len(path) {
			if trailingSlash || len(dst) == base {
				dst = append(dst, '/')
			}
			return dst, true
		}
		// Dot segments come in runs: look at the next segment in place
		// before searching for one.
		if e, d := dotSegmentAt(path, end+1); d > 0 {
			start, end, dots = end+1, e, d
			continue
		}
		slash := end
		if start, end, dots = finder.next(slash); start < 0 {
			return append(dst, path[slash:]...), true
		}
		dst = append(dst, path[slash:start-1]...)
	}
}

// dotSegments finds the dot segments of a path, left to right: the '/'
// before each candidate is found with a vectorised search for "/." and
// "/%", each search resumed only once passed, so that finding them all
// costs one pass.
type dotSegments struct {
	path     string
	dot, pct int // the next "/." and "/%" found; -1 when there is none
}

func newDotSegments(path string) dotSegments {
	return dotSegments{path: path, dot: -2, pct: -2}
}

// next returns where the first dot segment preceded by a '/' at or after
// from starts and ends, and its number of dots; start is -1 when there is
// none.
func (d *dotSegments) next(from int) (start, end, dots int) {
	for {
		d.dot = resume(d.path, "/.", d.dot, from)
		d.pct = resume(d.path, "/%", d.pct, from)
		slash := d.dot
		if slash < 0 || d.pct >= 0 && d.pct < slash {
			slash = d.pct
		}
		if slash < 0 {
			return -1, -1, 0
		}
		if end, dots := dotSegmentAt(d.path, slash+1); dots > 0 {
			return slash + 1, end, dots
		}
		from = slash + 1
	}
}

// resume returns the index of the first sep in s at or after from, given
// found, that of an earlier search (-1: none left, -2: none made).
func resume(s, sep string, found, from int) int {
	if found == -1 || found >= from {
		return found
	}
	if i := strings.Index(s[from:], sep); i >= 0 {
		return from + i
	}
	return -1
}

// appendSlashesMerged appends path to dst with every run of slashes read
// as one; changed is false when it has none.
func appendSlashesMerged(dst []byte, path string) (out []byte, changed bool) {
	i := strings.Index(path, "//")
	if i < 0 {
		return dst, false
	}
	for i >= 0 {
		dst = append(dst, path[:i+1]...)
		path = strings.TrimLeft(path[i:], "/")
		i = strings.Index(path, "//")
	}
	return append(dst, path...), true
}

// appendEscapesAsSlash appends path to dst with every "%<hi><lo>" (lo, a
// lower-case hex letter, in either case) read as '/', and every '\\' too
// when backslash is set: "%2F" for decoded slashes, "%5C" and '\\' for
// backslashes. changed is false when there is none.
func appendEscapesAsSlash(dst []byte, path string, hi, lo byte, backslash bool) (out []byte, changed bool) {
	done := 0 // path[:done] is in dst
	pct, bs := -2, -2
	if !backslash {
		bs = -1
	}
	for from := 0; ; {
		pct = resume(path, "%", pct, from)
		bs = resume(path, `\`, bs, from)
		i, width := pct, 3
		if i < 0 || bs >= 0 && bs < i {
			i, width = bs, 1
		}
		if i < 0 {
			break
		}
		from = i + 1
		if width == 3 && !(i+2 < len(path) && path[i+1] == hi && path[i+2]|0x20 == lo) {
			continue
		}
		dst = append(append(dst, path[done:i]...), '/')
		done, from, changed = i+width, i+width, true
	}
	if !changed {
		return dst, false
	}
	return append(dst, path[done:]...), true
}

// appendParamsDropped appends path to dst without everything from the
// first ';' of each segment; changed is false when it has no ';'.
func appendParamsDropped(dst []byte, path string) (out []byte, changed bool) {
	i := strings.IndexByte(path, ';')
	if i < 0 {
		return dst, false
	}
	for i >= 0 {
		dst = append(dst, path[:i]...)
		path = path[i:]
		if slash := strings.IndexByte(path, '/'); slash >= 0 {
			path = path[slash:]
		} else {
			path = ""
		}
		i = strings.IndexByte(path, ';')
	}
	return append(dst, path...), true
}
