package usage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"robotsgate/robots"
)

// TDMRep follows the W3C TDM Reservation Protocol, Final Community Group
// Report of 10 May 2024 (https://www.w3.org/community/reports/tdmrep/CG-FINAL-tdmrep-20240510/),
// section "TDM File on the Origin Server" and its "Use of regular
// expressions":
//   - the file is a JSON array of rules, each an object with a "location"
//     pattern and a "tdm-reservation" of 1 (reserved) or 0 (not reserved),
//     and optionally a "tdm-policy" URL;
//   - a location matches as an RFC 9309 (draft-koster-rep) path pattern:
//     "*" is any run of characters, a final "$" ends the pattern, matching
//     is case-sensitive, percent-encoded unreserved characters are decoded
//     before comparing, and a literal "*" or "$" of a URL is written %2A or
//     %24 in a pattern;
//   - "the most specific match is the first in sequence": the first rule in
//     the file whose location matches applies, whatever comes after it;
//   - no rule matching, or a tdm-reservation other than 0 or 1 (a protocol
//     error), leaves the reservation unset: no statement.
//
// robotsgate's own choices, each in the direction of honouring what a site
// evidently means: a reservation written as the string "1" (or "0") counts
// as the number; a rule with no usable location matches nothing (it is
// counted among the problems, see [TDMRep.Problems]); and, as for
// robots.txt, every reading of a path an origin may serve (see
// [robots.Step]) is matched, so that no spelling of a path escapes a
// reservation.

// Bounds of a tdmrep.json.
const (
	// MaxTDMRepRules is the most rules a tdmrep.json may have; a file with
	// more is refused whole. Real files have a handful.
	MaxTDMRepRules = 1024
	// tdmTextBytes bounds a rule's Statement.Text.
	tdmTextBytes = 512
	// tdmProblemBytes bounds the description of the first problem.
	tdmProblemBytes = 256
	// tdmMatchWork bounds the bytes one Statements call compares (readings
	// made and rules tried on them): well under a millisecond, as it runs
	// on every request to the origin outside the costly-decision gate. A
	// path whose readings cost more, or that has more than
	// robots.MaxReadings of them, is taken to be covered by the file's
	// first reservation.
	tdmMatchWork = 256 << 10
)

// A statement's Text starts with tdmTextPrefix, or, for a reservation
// assumed (see Statements), tdmAssumedPrefix.
const (
	tdmTextPrefix    = "tdmrep.json: "
	tdmAssumedPrefix = "tdmrep.json, assumed for a path too costly to match: "
)

// reservation values of a rule; unset is a protocol error.
const (
	tdmUnset int8 = iota - 1
	tdmNotReserved
	tdmReserved
)

// TDMRep is a parsed /.well-known/tdmrep.json (see ParseTDMRep). It is
// immutable and safe for concurrent use; a nil *TDMRep states nothing.
type TDMRep struct {
	rules []tdmRule
	// ignored counts the rules with no usable location and the rules
	// whose reservation is unset; problem describes the first.
	ignored int
	problem string
}

// tdmRule is one rule, its location compiled.
type tdmRule struct {
	// location is the rule's location compiled as a robots.txt pattern,
	// which TDMRep's are.
	location robots.Pattern
	// text is the Statement.Text of the rule, "" for an unset one.
	text        string
	reservation int8
}

// ParseTDMRep parses a tdmrep.json body; the caller bounds its size (see
// [MaxTDMRepRetained] for what a body of a given size may keep). It fails
// on a body that is not UTF-8, not JSON, not an array, or has more than
// MaxTDMRepRules rules, naming what is wrong. A rule that is not an object
// or has no usable location is skipped, and a rule whose tdm-reservation is
// neither 0 nor 1 is kept as unset (it matches, and states nothing, as the
// report says): both are counted by [TDMRep.Problems].
func ParseTDMRep(body []byte) (*TDMRep, error) {
	body = bytes.TrimPrefix(body, []byte("\xEF\xBB\xBF")) // RFC 8259 §8.1 lets a parser ignore a BOM
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("tdmrep.json: not UTF-8 (at byte %d)", invalidUTF8At(body))
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errors.New("tdmrep.json: empty")
	}
	if !json.Valid(body) {
		// Unmarshal says where, and copies nothing from an invalid body.
		err := json.Unmarshal(body, new(json.RawMessage))
		if syntax, ok := errors.AsType[*json.SyntaxError](err); ok {
			return nil, fmt.Errorf("tdmrep.json: invalid JSON at byte %d: %w", syntax.Offset, err)
		}
		return nil, fmt.Errorf("tdmrep.json: invalid JSON: %w", err)
	}
	// Valid JSON: the decoder meets no syntax error, only the shapes.
	dec := json.NewDecoder(bytes.NewReader(body))
	if first, err := dec.Token(); err != nil || first != json.Delim('[') {
		return nil, fmt.Errorf("tdmrep.json: %s, want an array of rules (the brackets are mandatory)", jsonKind(first))
	}
	t := &TDMRep{}
	for n := 1; dec.More(); n++ {
		if n > MaxTDMRepRules {
			return nil, fmt.Errorf("tdmrep.json: more than %d rules", MaxTDMRepRules)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("tdmrep.json: rule %d: %w", n, err)
		}
		rule, problem := parseTDMRule(raw)
		if problem != "" {
			t.note(n, problem)
		}
		if rule.location.Len() > 0 {
			t.rules = append(t.rules, rule)
		}
	}
	if cap(t.rules) > len(t.rules) {
		t.rules = slices.Clone(t.rules) // what append grew past is not kept
	}
	return t, nil
}

// note counts a problem of rule n, keeping the first's description.
func (t *TDMRep) note(n int, problem string) {
	if t.ignored++; t.ignored == 1 {
		t.problem = shorten("rule "+strconv.Itoa(n)+": "+problem, tdmProblemBytes)
	}
}

// parseTDMRule reads one rule. A rule with an empty expr is skipped; a
// problem is said of a rule skipped or unset.
func parseTDMRule(raw json.RawMessage) (tdmRule, string) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return tdmRule{}, jsonKind(raw) + ", not an object"
	}
	var location string
	if v, ok := fields["location"]; !ok {
		return tdmRule{}, "no location"
	} else if kind := jsonKind(v); kind != "a JSON string" || json.Unmarshal(v, &location) != nil {
		return tdmRule{}, "location is " + kind + ", not a string"
	}
	rule, ok := compileLocation(location)
	if !ok {
		return tdmRule{}, "location " + strconv.Quote(shorten(location, 64)) + " does not start with / or *"
	}
	value, problem := reservationOf(fields["tdm-reservation"])
	if rule.reservation = value; value == tdmUnset {
		return rule, problem
	}
	var policy string
	if v := fields["tdm-policy"]; jsonKind(v) == "a JSON string" { // anything else is no URL: nothing to show
		_ = json.Unmarshal(v, &policy) // a JSON string always decodes
	}
	rule.text = tdmText(location, value, policy)
	return rule, ""
}

// reservationOf reads a tdm-reservation: the number 0 or 1, or the string
// "0" or "1"; anything else is unset, with the problem.
func reservationOf(v json.RawMessage) (int8, string) {
	if v == nil {
		return tdmUnset, "no tdm-reservation (unset)"
	}
	var s string
	var f float64
	switch kind := jsonKind(v); {
	case kind == "a JSON string" && json.Unmarshal(v, &s) == nil:
	case kind == "a JSON number" && json.Unmarshal(v, &f) == nil:
		s = strconv.FormatFloat(f, 'g', -1, 64) // 1.0 and 1e0 are 1
	default:
		return tdmUnset, "tdm-reservation is " + kind + ", not 0 or 1 (unset)"
	}
	switch s {
	case "0":
		return tdmNotReserved, ""
	case "1":
		return tdmReserved, ""
	}
	return tdmUnset, "tdm-reservation " + strconv.Quote(shorten(s, 32)) + " is neither 0 nor 1 (unset)"
}

// tdmText is a rule as a Statement shows it, bounded:
// `tdmrep.json: {"location":"/images/*","tdm-reservation":1}`.
func tdmText(location string, value int8, policy string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	b.WriteString(tdmTextPrefix + `{"location":`)
	_ = enc.Encode(location) // a string always encodes
	b.Truncate(b.Len() - 1)  // Encode ends with '\n'
	b.WriteString(`,"tdm-reservation":` + strconv.Itoa(int(value)))
	if policy != "" {
		b.WriteString(`,"tdm-policy":`)
		_ = enc.Encode(policy)
		b.Truncate(b.Len() - 1)
	}
	b.WriteByte('}')
	return shorten(b.String(), tdmTextBytes)
}

// compileLocation compiles a location; ok is false when it can never
// match: matching starts at a path's first octet, always '/', so only a
// location starting with '/' or '*' can.
func compileLocation(location string) (r tdmRule, ok bool) {
	r.location, ok = robots.CompilePattern(location)
	return r, ok
}

// Len is the number of rules kept: those with a usable location.
func (t *TDMRep) Len() int {
	if t == nil {
		return 0
	}
	return len(t.rules)
}

// Problems reports how many rules were skipped (no usable location, not
// an object) or kept unset (a tdm-reservation neither 0 nor 1), and
// describes the first: "rule 2: no location".
func (t *TDMRep) Problems() (count int, first string) {
	if t == nil {
		return 0, ""
	}
	return t.ignored, t.problem
}

// Statements returns what the file states of pathAndQuery: the statement
// of the first rule whose location matches, for the path as sent and for
// every reading of it (see [robots.Step]), each with and without its
// query; one per rule, in file order. A rule whose reservation is unset
// states nothing; nil when none matches. A path too costly to match (see
// tdmMatchWork) is taken to be covered by the file's first reservation,
// which its Text says.
func (t *TDMRep) Statements(pathAndQuery string) []Statement {
	if t == nil || len(t.rules) == 0 {
		return nil
	}
	if pathAndQuery == "" {
		pathAndQuery = "/"
	}
	m := tdmMatcher{t: t}
	readings := []string{pathAndQuery}
	for next := 0; next < len(readings) && !m.exhausted; next++ {
		m.judge(readings[next])
		for s := range robots.StepDropQuery { // every step but dropping the query, which judge does
			m.spend(len(readings[next]))
			form := s.Apply(readings[next])
			if form == readings[next] || slices.Contains(readings, form) {
				continue
			}
			if len(readings) == robots.MaxReadings {
				m.exhausted = true
				break
			}
			readings = append(readings, form)
		}
	}
	return m.statements()
}

// tdmMatcher gathers the rules that apply to the readings of a path.
type tdmMatcher struct {
	t         *TDMRep
	work      int
	exhausted bool  // the work bound was passed: readings left unjudged
	hits      []int // rule indexes, each once
}

// spend adds n bytes of work, and reports whether any is left.
func (m *tdmMatcher) spend(n int) bool {
	if m.work += n; m.work > tdmMatchWork {
		m.exhausted = true
	}
	return !m.exhausted
}

// judge notes the first rule matching reading, and the first matching it
// without its query.
func (m *tdmMatcher) judge(reading string) {
	m.first(robots.NormalizePath(reading))
	if query := robots.StepDropQuery.Apply(reading); query != reading {
		m.first(robots.NormalizePath(query))
	}
}

func (m *tdmMatcher) first(path string) {
	for i := range m.t.rules {
		r := &m.t.rules[i]
		if !m.spend(r.location.Len() + len(path)) {
			return
		}
		if r.location.Match(path) {
			if !slices.Contains(m.hits, i) {
				m.hits = append(m.hits, i)
			}
			return
		}
	}
}

// statements are the hits' statements in file order; with the work bound
// passed, the file's first reservation is added, marked as assumed.
func (m *tdmMatcher) statements() []Statement {
	var out []Statement
	assume := m.exhausted
	for i := range m.t.rules {
		r := &m.t.rules[i]
		switch {
		case slices.Contains(m.hits, i):
			if r.reservation != tdmUnset {
				out = append(out, r.statement(r.text))
			}
		case assume && r.reservation == tdmReserved:
			out = append(out, r.statement(shorten(tdmAssumedPrefix+strings.TrimPrefix(r.text, tdmTextPrefix), tdmTextBytes)))
			assume = false // the first only
		}
	}
	return out
}

func (r *tdmRule) statement(text string) Statement {
	value := strconv.Itoa(int(r.reservation))
	return Statement{Form: FormTDMRep, Text: text, Label: "tdm-reservation", Value: value, Allows: r.reservation == tdmNotReserved}
}

// RetainedBytes estimates the memory t keeps alive, for charging it
// against a cache budget; see MaxTDMRepRetained.
func (t *TDMRep) RetainedBytes() int64 {
	if t == nil {
		return 0
	}
	n := int64(unsafe.Sizeof(*t)) + int64(cap(t.rules))*int64(unsafe.Sizeof(tdmRule{})) + int64(len(t.problem))
	for i := range t.rules {
		n += int64(t.rules[i].location.Len() + len(t.rules[i].text))
	}
	return n
}

// Bounds of RetainedBytes. A rule takes at least 31 bytes of a body and
// keeps its struct (56 bytes), its location normalised (at most three
// bytes per byte of the body: "é" is "%C3%A9") and its text (about 50 bytes
// and its location and policy as JSON, at most two bytes per byte of the
// body: U+2028 is escaped), so at most about five bytes per byte; the
// costliest bodies found keep 4.6 (TestTDMRepRetainedBound).
const (
	tdmRetainedPerByte = 8
	tdmRetainedBase    = 1 << 10
)

// MaxTDMRepRetained is the most [TDMRep.RetainedBytes] of a body of at
// most maxBody bytes: the room a cache must have for it.
func MaxTDMRepRetained(maxBody int) int64 {
	return tdmRetainedBase + tdmRetainedPerByte*int64(max(maxBody, 0))
}

// jsonKind names the kind of a JSON token or value: "a JSON object", ...
func jsonKind(v any) string {
	switch v := v.(type) {
	case json.Delim:
		if v == '{' {
			return "a JSON object"
		}
		return "a JSON array"
	case json.RawMessage:
		if len(v) == 0 {
			return "nothing"
		}
		switch v[0] {
		case '{':
			return "a JSON object"
		case '[':
			return "a JSON array"
		case '"':
			return "a JSON string"
		case 't', 'f':
			return "a JSON boolean"
		case 'n':
			return "JSON null"
		}
		return "a JSON number"
	case string:
		return "a JSON string"
	case bool:
		return "a JSON boolean"
	case nil:
		return "JSON null"
	}
	return "a JSON number"
}

// invalidUTF8At is the offset of the first byte of b that is not UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// shorten cuts s to at most limit bytes at a character's boundary, ending
// it with an ellipsis when it was cut.
func shorten(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const ellipsis = "…"
	cut := limit - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// Everywhere is the statement of the rule that applies to every path of
// the site, for a proxy that cannot see paths (a tunnel it does not
// intercept): the file's first rule when its location matches every path
// ("/", "*"), since the first match wins; nil otherwise, or when that
// rule's reservation is unset.
func (t *TDMRep) Everywhere() []Statement {
	if t == nil || len(t.rules) == 0 {
		return nil
	}
	r := &t.rules[0]
	if !r.location.MatchesEveryPath() || r.reservation == tdmUnset {
		return nil
	}
	return []Statement{r.statement(r.text)}
}
