package usage

import (
	"slices"
	"strconv"
)

// Judge judges purposes by the statements: refused when, for one of the
// purposes (in order), a statement that speaks for it refuses it. Which
// statements speak for a purpose is the vocabulary's (see [Vocabulary]);
// a purpose no row names is never refused. Within one expression (the
// statements of one robots.txt line, or of one response header) the
// narrowest label stated for the purpose decides, so "bots=n, search=y"
// allows search, and at equal depth a refusal wins; across expressions
// any refusal wins over any allowance (draft-ietf-aipref-vocab-08 §5.1).
// TDMRep's header supersedes its tdmrep.json (TDMRep §3.3). By is the
// first deciding refusal in statement order.
func Judge(purposes []string, statements []Statement) Verdict {
	if len(statements) == 0 {
		return Verdict{}
	}
	tdmHeader := false
	for i := range statements {
		if statements[i].Form == FormTDMRep && statements[i].Header != "" {
			tdmHeader = true
			break
		}
	}
	for _, p := range purposes {
		for i := range statements {
			s := &statements[i]
			if s.Allows || (tdmHeader && s.Form == FormTDMRep && s.Header == "") {
				continue
			}
			if s.Unread {
				if knownPurpose(p) {
					return Verdict{Refused: true, Purpose: p, By: *s}
				}
				continue
			}
			d, ok := depth(s.Form, s.Label, p)
			if !ok || narrowerStated(statements, s, p, d) {
				continue
			}
			return Verdict{Refused: true, Purpose: p, By: *s}
		}
	}
	return Verdict{}
}

// narrowerStated reports whether the expression s belongs to states a
// label narrower than depth d for purpose p: that label then decides
// instead of s.
func narrowerStated(statements []Statement, s *Statement, p string, d int) bool {
	if d == 0 {
		return false
	}
	for i := range statements {
		t := &statements[i]
		if t.Form != s.Form || t.Line != s.Line || t.Header != s.Header {
			continue
		}
		if td, ok := depth(t.Form, t.Label, p); ok && td < d {
			return true
		}
	}
	return false
}

// String names the statement as records list the preferences a site
// states: "content-signal ai-train=no (line 3)",
// "x-robots-tag noai (header X-Robots-Tag)".
func (s Statement) String() string {
	b := make([]byte, 0, 64)
	b = append(b, s.Form.String()...)
	b = append(b, ' ')
	b = append(b, s.Label...)
	if s.Unread {
		b = append(b, "(not read)"...)
	}
	if s.Value != "" {
		b = append(b, '=')
		b = append(b, s.Value...)
	}
	switch {
	case s.Line > 0:
		b = append(b, " (line "...)
		b = strconv.AppendInt(b, int64(s.Line), 10)
		b = append(b, ')')
	case s.Header != "":
		b = append(b, " (header "...)
		b = append(b, s.Header...)
		b = append(b, ')')
	case s.Form == FormTDMRep:
		b = append(b, " (tdmrep.json)"...)
	}
	return string(b)
}

// Where says where a statement is made, as records and pages say it:
// "robots.txt line 7", "response header" or "tdmrep.json".
func (s Statement) Where() string {
	switch {
	case s.Unread:
		return "robots.txt line " + strconv.Itoa(s.Line) + ", not read: past the " + strconv.Itoa(maxLabels) + " labels read for one request, taken as a refusal"
	case s.Line > 0:
		return "robots.txt line " + strconv.Itoa(s.Line)
	case s.Header != "":
		return "response header"
	}
	return "tdmrep.json"
}

// Source names what states it apart from robots.txt: the response header
// ("Content-Usage"), or "tdmrep.json"; "" for a robots.txt line.
func (s Statement) Source() string {
	switch {
	case s.Line > 0:
		return ""
	case s.Header != "":
		return s.Header
	}
	return "tdmrep.json"
}

// Reason explains a refusal in a few words, as the audit record and check
// give it: "usage: Content-Usage: train-ai=n (robots.txt line 7) refuses
// ai-train"; "" when v refuses nothing.
func (v Verdict) Reason() string {
	if !v.Refused {
		return ""
	}
	return "usage: " + v.By.Text + " (" + v.By.Where() + ") refuses " + v.Purpose
}

// Stated lists statements as an audit record's usage_stated does, each
// once: "content-signal ai-train=no (line 3)".
func Stated(statements []Statement) []string {
	out := make([]string, 0, len(statements))
	for _, s := range statements {
		if text := s.String(); !slices.Contains(out, text) {
			out = append(out, text)
		}
	}
	return out
}

// Union is the purposes of a and b, a's first, each once; a itself when b
// adds nothing.
func Union(a, b []string) []string {
	out := a
	for _, p := range b {
		if !slices.Contains(out, p) {
			if len(out) == len(a) {
				out = slices.Clip(slices.Clone(a))
			}
			out = append(out, p)
		}
	}
	return out
}
