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
}

// Verdict is what a site's statements say of a crawler's purposes.
type Verdict struct {
	// Refused says a statement refuses one of the purposes: Purpose is
	// that purpose and By the statement (the first refusing one).
	Refused bool
	Purpose string
	By      Statement
}

// FromRobots reads the usage lines robots.txt applies to a request (see
// [robots.Robots.Usage]): one statement per label a line states. A line
// whose value does not parse states nothing.
func FromRobots(lines []robots.UsageLine) []Statement {
	return nil // TODO(helper usage)
}

// FromResponse reads the preferences a response's header states to the
// crawler judged as token: Content-Usage, tdm-reservation, and
// X-Robots-Tag noai/noimageai (also "token: noai").
func FromResponse(h http.Header, token string) []Statement {
	return nil // TODO(helper usage)
}

// Judge judges purposes by the statements: refused when, for one of the
// purposes, the statements that speak for it refuse it (see the
// vocabulary table; a refusal wins over an allowance).
func Judge(purposes []string, statements []Statement) Verdict {
	return Verdict{} // TODO(helper usage)
}
