package usage

import (
	"strings"

	"github.com/dunglas/httpsfv"
)

// reader reads values into statements within a budget of labels and
// bytes.
type reader struct {
	left  int // labels that may still be read
	bytes int // bytes that may still be read
	// spent: a value was left unread for want of budget.
	spent bool
	out   []Statement
}

func newReader(out []Statement) reader {
	return reader{left: maxLabels, bytes: maxRead, out: out}
}

// take charges value to the budget and returns it, or "" when it states
// nothing: when it alone is past a bound (longer than maxValue, or more
// labels, one more than its commas, than maxLabels), charged one label;
// when it has more labels or bytes than are left, after which nothing is
// read, and r.spent says so.
func (r *reader) take(value string) string {
	if r.left == 0 {
		r.spent = true
		return ""
	}
	n := 1 + strings.Count(value, ",")
	if len(value) > maxValue || n > maxLabels {
		r.left--
		return ""
	}
	if n > r.left || len(value) > r.bytes {
		r.left, r.spent = 0, true
		return ""
	}
	r.left -= n
	r.bytes -= len(value)
	return value
}

// contentUsage appends the statements of one aipref expression
// (draft-ietf-aipref-vocab-08 §5): value parsed as an RFC 9651
// Dictionary; a value that does not parse states nothing (RFC 9651 §4.2:
// the whole field is ignored). Of each member naming a known label, the
// Token y allows and n refuses; any other value (a Boolean, a String, an
// Inner List, yes/no) states nothing for it; parameters are ignored. A
// key stated twice keeps its last value, as RFC 9651 §4.2.2 does. base
// carries the statement's origin (form, line or header, text).
func (r *reader) contentUsage(base Statement, value string) {
	d, err := httpsfv.UnmarshalDictionary([]string{value})
	if err != nil {
		return
	}
	for _, name := range d.Names() {
		if !known(FormContentUsage, name) {
			continue
		}
		m, _ := d.Get(name)
		item, ok := m.(httpsfv.Item)
		if !ok {
			continue
		}
		tok, ok := item.Value.(httpsfv.Token)
		if !ok || (tok != "y" && tok != "n") {
			continue
		}
		s := base
		s.Label, s.Value, s.Allows = name, string(tok), tok == "y"
		r.out = append(r.out, s)
	}
}

// combine joins a structured field's lines as RFC 9651 §4.2 does (", "),
// leaving out empty ones (which would otherwise make the whole field
// fail). It is "" when there are more lines than maxLabels or the value
// exceeds maxValue: the field then states nothing.
func combine(lines []string) string {
	if len(lines) > maxLabels {
		return ""
	}
	n, parts := 0, 0
	for _, l := range lines {
		if trimOWS(l) == "" {
			continue
		}
		if parts > 0 {
			n += 2
		}
		n += len(l)
		parts++
	}
	switch {
	case n > maxValue || parts == 0:
		return ""
	case parts == 1 && len(lines) == 1:
		return lines[0]
	}
	var b strings.Builder
	b.Grow(n)
	for _, l := range lines {
		if trimOWS(l) == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(l)
	}
	return b.String()
}

// contentSignal appends the statements of one Content-Signal line.
// Cloudflare publishes no grammar (its value happens to be an RFC 9651
// Dictionary), so it is read leniently, entry by entry: comma-separated
// "label=value", spaces around either ignored, label and value compared
// case-insensitively, yes allows and no refuses. A malformed entry or
// another value states nothing for its label and leaves the others
// standing (a missing signal "neither grants nor restricts"). A label
// stated twice gives two statements, so that no wins.
func (r *reader) contentSignal(base Statement, value string) {
	for rest := value; rest != ""; {
		var entry string
		entry, rest, _ = strings.Cut(rest, ",")
		label, val, ok := strings.Cut(entry, "=")
		if !ok {
			continue
		}
		label, val = trimOWS(label), trimOWS(val)
		var allows bool
		switch {
		case strings.EqualFold(val, "yes"):
			allows = true
		case strings.EqualFold(val, "no"):
		default:
			continue
		}
		if !known(FormContentSignal, label) {
			continue
		}
		s := base
		s.Label, s.Value, s.Allows = label, val, allows
		r.out = append(r.out, s)
	}
}

// appendTDMReservation appends the tdm-reservation header's statement
// (W3C TDMRep §3.2): "1" reserves (refuses), "0" does not; any other value
// is a protocol error and states nothing. Each value counts once.
func appendTDMReservation(out []Statement, lines []string) []Statement {
	var seen [2]bool
	for i, l := range lines {
		if i == maxLabels {
			break
		}
		var text string
		switch trimOWS(l) {
		case "0":
			text = "tdm-reservation: 0"
		case "1":
			text = "tdm-reservation: 1"
		default:
			continue
		}
		v := text[len(text)-1:]
		if seen[v[0]-'0'] {
			continue
		}
		seen[v[0]-'0'] = true
		out = append(out, Statement{Form: FormTDMRep, Header: "Tdm-Reservation", Text: text,
			Label: "tdm-reservation", Value: v, Allows: v == "0"})
	}
	return out
}

// noAI appends the noai/noimageai statements of X-Robots-Tag's field
// lines that apply to token. Each line is a comma-separated list of rules,
// case-insensitive; "bot: rule" scopes that rule and the ones after it on
// the same line to bot (Google's syntax), and a scope that is not token
// (case-insensitively) does not apply. A name before a colon is a bot only
// when it is a product token and not one of the rules that take an
// argument (max-snippet: 0), so that a date's colon does not scope
// anything. noimageai counts only when image (an image/* response): it is
// about a page's images, not the page. Each label counts once.
func (r *reader) noAI(lines []string, token string, image bool) {
	var seen [2]bool // noai, noimageai
	for _, l := range lines {
		if r.take(l) == "" {
			if r.left == 0 {
				return
			}
			continue
		}
		scope := ""
		for rest := l; rest != ""; {
			var rule string
			rule, rest, _ = strings.Cut(rest, ",")
			rule = trimOWS(rule)
			if name, after, ok := strings.Cut(rule, ":"); ok {
				if name = trimOWS(name); isBotName(name) && !takesArgument(name) {
					scope, rule = name, trimOWS(after)
				}
			}
			if scope != "" && !strings.EqualFold(scope, token) {
				continue
			}
			k := 0
			switch {
			case strings.EqualFold(rule, "noai"):
			case strings.EqualFold(rule, "noimageai") && image:
				k = 1
			default:
				continue
			}
			if seen[k] {
				continue
			}
			seen[k] = true
			r.out = append(r.out, Statement{Form: FormNoAI, Header: "X-Robots-Tag", Text: bound("X-Robots-Tag: " + l), Label: rule})
		}
	}
}

// isBotName reports whether s can name a crawler: a product token
// (RFC 9309 §2.2.1, letters, '_' and '-'), digits and dots allowed as
// real names have them.
func isBotName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// takesArgument reports whether name is a robots rule written
// "name: value" (Google's list), not a bot name.
func takesArgument(name string) bool {
	for _, r := range [...]string{"max-snippet", "max-image-preview", "max-video-preview", "unavailable_after"} {
		if strings.EqualFold(name, r) {
			return true
		}
	}
	return false
}

// isImage reports whether a Content-Type names an image.
func isImage(contentType string) bool {
	ct := strings.TrimLeft(contentType, " \t")
	return len(ct) >= len("image/") && strings.EqualFold(ct[:len("image/")], "image/")
}

func trimOWS(s string) string { return strings.Trim(s, " \t") }

// bound cuts text to maxText bytes at a character boundary (see shorten).
func bound(text string) string { return shorten(text, maxText) }
