// Package usage reads what sites say their content may be used for (AI
// usage preferences) and judges a crawler's purposes by it: IETF AI
// Preferences (Content-Usage in robots.txt and as a response header),
// Cloudflare's Content Signals (Content-Signal in robots.txt), TDMRep
// (the tdm-reservation header and /.well-known/tdmrep.json) and the
// X-Robots-Tag noai/noimageai convention. One table (vocabulary.go) maps
// each form's labels onto robotsgate's purposes.
package usage

import (
	"net/http"

	"robotsgate/robots"
)

// The purposes robotsgate knows; an operator may declare others, which no
// site's preference speaks for.
const (
	PurposeSearch  = "search"
	PurposeAITrain = "ai-train"
	PurposeAIInput = "ai-input"
)

// Form is the way a site states a preference.
type Form uint8

const (
	// FormContentUsage: IETF AI Preferences, a robots.txt line or a
	// response header.
	FormContentUsage Form = iota + 1
	// FormContentSignal: Cloudflare's Content Signals robots.txt line.
	FormContentSignal
	// FormTDMRep: W3C TDMRep, the tdm-reservation header or tdmrep.json.
	FormTDMRep
	// FormNoAI: X-Robots-Tag: noai / noimageai.
	FormNoAI
)

// String names the form as records and pages do: "content-usage",
// "content-signal", "tdmrep", "x-robots-tag".
func (f Form) String() string {
	switch f {
	case FormContentUsage:
		return "content-usage"
	case FormContentSignal:
		return "content-signal"
	case FormTDMRep:
		return "tdmrep"
	case FormNoAI:
		return "x-robots-tag"
	}
	return "form"
}

// Statement is one preference a site states about one label.
type Statement struct {
	Form Form
	// Line is the robots.txt line; 0 for a statement of a response header
	// or of tdmrep.json.
	Line int
	// Header is the response header that states it ("Content-Usage",
	// "Tdm-Reservation", "X-Robots-Tag"), "" otherwise.
	Header string
	// Text is the line, header or tdmrep.json entry as written, bounded:
	// "Content-Usage: train-ai=n".
	Text string
	// Label is the label as written ("train-ai", "ai-train", "noai",
	// "tdm-reservation") and Value its value ("n", "no", "1").
	Label, Value string
	// Allows is what the value says: use allowed (true) or refused.
	Allows bool
	// Unread marks a robots.txt line past what one request reads (see
	// FromRobots), Label and Value empty: taken as refusing every purpose
	// the vocabulary knows, so that no bound hides a refusal.
	Unread bool
}

// Verdict is what a site's statements say of a crawler's purposes.
type Verdict struct {
	// Refused says a statement refuses one of the purposes: Purpose is
	// that purpose and By the statement (the first refusing one).
	Refused bool
	Purpose string
	By      Statement
}

// Bounds on what one call reads, so that a 60 KB header or a file of
// thousands of usage lines costs a bounded amount (tens of microseconds
// at most), whatever an origin writes.
const (
	// maxValue: a value (a robots.txt line's, a header's field lines
	// combined, one X-Robots-Tag line) longer than this states nothing.
	maxValue = 4 << 10
	// maxLabels: labels read per FromRobots call, or per header in
	// FromResponse, counted before reading as one more than a value's
	// commas (at least one a line). A value that would go past it states
	// nothing, and no value after it is read. RFC 9651 asks parsers to
	// accept 1024 Dictionary members: no real preference comes near, and
	// each member parsed costs every request to that origin.
	maxLabels = 64
	// maxRead: bytes of values read per call (per header), likewise.
	maxRead = 2 * maxValue
	// maxText: bytes of Statement.Text.
	maxText = 200
)

// FromRobots reads the usage lines robots.txt applies to a request (see
// [robots.Robots.Usage]): one statement per label a line states, for the
// labels the vocabulary knows, in line order. A Content-Usage line whose
// value does not parse as an RFC 9651 Dictionary states nothing; of a
// Content-Signal line, each "label=yes|no" entry counts on its own. At
// most 64 labels are read (see maxLabels): the first line past them is
// stated as Unread, and refuses, since a path with many readings can make
// every line of a group apply (see [robots.Judgement.Usage]).
func FromRobots(lines []robots.UsageLine) []Statement {
	if len(lines) == 0 {
		return nil
	}
	// Most lines state two or three labels.
	r := newReader(make([]Statement, 0, min(3*len(lines), maxLabels)))
	for i := range lines {
		l := &lines[i]
		form, name := FormContentUsage, "Content-Usage: "
		switch l.Directive {
		case robots.DirectiveContentUsage:
		case robots.DirectiveContentSignal:
			form, name = FormContentSignal, "Content-Signal: "
		default:
			continue
		}
		raw := trimOWS(l.Value) // robots.txt whitespace is no part of the value
		text := name + raw
		if l.Path != "" {
			text = name + l.Path + " " + raw
		}
		value := r.take(raw)
		if r.spent {
			r.out = append(r.out, Statement{Form: form, Line: l.Line, Text: bound(text), Unread: true})
			break
		}
		if value == "" {
			continue
		}
		base := Statement{Form: form, Line: l.Line, Text: bound(text)}
		if form == FormContentUsage {
			r.contentUsage(base, value)
		} else {
			r.contentSignal(base, value)
		}
	}
	if len(r.out) == 0 {
		return nil
	}
	return r.out
}

// FromResponse reads the preferences a response's header states to the
// crawler judged as token: Content-Usage (its field lines combined into
// one RFC 9651 Dictionary; one that does not parse states nothing),
// tdm-reservation ("1" refuses, "0" allows, anything else nothing), and
// X-Robots-Tag noai/noimageai, unprefixed or prefixed by a bot name equal
// to token ("gptbot: noai"); noimageai only on an image/* response. At
// most 64 labels of each header are read (see maxLabels).
func FromResponse(h http.Header, token string) []Statement {
	var out []Statement
	if v := h["Content-Usage"]; len(v) > 0 {
		r := newReader(out)
		if joined := r.take(combine(v)); joined != "" {
			r.contentUsage(Statement{Form: FormContentUsage, Header: "Content-Usage", Text: bound("Content-Usage: " + joined)}, joined)
		}
		out = r.out
	}
	if v := h["Tdm-Reservation"]; len(v) > 0 {
		out = appendTDMReservation(out, v)
	}
	if v := h["X-Robots-Tag"]; len(v) > 0 {
		r := newReader(out)
		r.noAI(v, token, isImage(h.Get("Content-Type")))
		out = r.out
	}
	return out
}
