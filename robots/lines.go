package robots

import (
	"iter"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxLineBytes is the longest line the parser reads; the rest of a longer
// line is dropped and the line is flagged [Line.TooLong]. The figure is
// Google's (2083*8 bytes including a terminating NUL), so very long lines
// yield the same rules as Google's parser.
const MaxLineBytes = 2083*8 - 1

// Directive is what a robots.txt line declares.
type Directive uint8

const (
	// DirectiveNone is an empty line, a comment, or text that is not a record.
	DirectiveNone Directive = iota
	// DirectiveUnknown is a "key: value" record with a key nobody defines.
	DirectiveUnknown
	// DirectiveUserAgent starts or extends a group.
	DirectiveUserAgent
	// DirectiveAllow is an allow rule.
	DirectiveAllow
	// DirectiveDisallow is a disallow rule.
	DirectiveDisallow
	// DirectiveSitemap names a sitemap; it belongs to no group.
	DirectiveSitemap
	// DirectiveCrawlDelay is the non-standard per-group crawl delay.
	DirectiveCrawlDelay
	// DirectiveUnsupported is a record other crawlers define (host,
	// clean-param, noindex, ...) that has no effect here.
	DirectiveUnsupported
	// DirectiveRequestRate is Yandex's per-group request rate, "1/5":
	// at most one request every five seconds.
	DirectiveRequestRate
	// DirectiveContentUsage is an IETF AI Preferences usage line
	// (draft-ietf-aipref-attach-05), a rule of its group:
	// "Content-Usage: /articles/ train-ai=n".
	DirectiveContentUsage
	// DirectiveContentSignal is Cloudflare's Content Signals line:
	// "Content-Signal: search=yes, ai-train=no".
	DirectiveContentSignal
)

func (d Directive) String() string {
	switch d {
	case DirectiveNone:
		return "none"
	case DirectiveUnknown:
		return "unknown"
	case DirectiveUserAgent:
		return "user-agent"
	case DirectiveAllow:
		return "allow"
	case DirectiveDisallow:
		return "disallow"
	case DirectiveSitemap:
		return "sitemap"
	case DirectiveCrawlDelay:
		return "crawl-delay"
	case DirectiveUnsupported:
		return "unsupported"
	case DirectiveRequestRate:
		return "request-rate"
	case DirectiveContentUsage:
		return "content-usage"
	case DirectiveContentSignal:
		return "content-signal"
	}
	return "directive(" + strconv.Itoa(int(d)) + ")"
}

// Line is one physical line of a robots.txt file as the parser read it.
type Line struct {
	Number    int // 1-based; CR, LF and CRLF each end one line
	Directive Directive
	Key       string // as written, surrounding whitespace removed
	Value     string // comment and surrounding whitespace removed

	IsEmpty      bool // nothing but whitespace
	IsComment    bool // nothing but a comment
	HasComment   bool // a '#' comment ends the line
	IsTypo       bool // the key is an accepted misspelling ("useragent", "disalow")
	MissingColon bool // "key value" accepted without the colon
	TooLong      bool // longer than MaxLineBytes; the rest was dropped
}

// lines walks text, a body decodeText has read, once and yields every
// physical line, including the empty line after a final line break. NUL
// and other bytes that are not UTF-8 are kept as they are and never end a
// line.
func lines(text string) iter.Seq[Line] {
	return func(yield func(Line) bool) {
		// nl and cr are the positions of the next '\n' and '\r' at or
		// after pos (-1: there is none). Each is searched again only once
		// passed, so the whole walk reads the text once per byte value even
		// in files that end lines with CR alone.
		pos, nl, cr := 0, -2, -2
		for number := 1; ; number++ {
			if nl != -1 && nl < pos {
				nl = indexFrom(text, pos, '\n')
			}
			if cr != -1 && cr < pos {
				cr = indexFrom(text, pos, '\r')
			}
			end := nl
			if cr >= 0 && (end < 0 || cr < end) {
				end = cr
			}
			if end < 0 {
				yield(parseLine(number, text[pos:]))
				return
			}
			if !yield(parseLine(number, text[pos:end])) {
				return
			}
			pos = end + 1
			if text[end] == '\r' && pos < len(text) && text[pos] == '\n' {
				pos++
			}
		}
	}
}

func indexFrom(s string, from int, c byte) int {
	i := strings.IndexByte(s[from:], c)
	if i < 0 {
		return -1
	}
	return from + i
}

// decodeText returns body as a new string without a byte order mark,
// read as UTF-16 when its byte order mark says so.
func decodeText(body []byte) string {
	switch {
	case len(body) >= 2 && body[0] == 0xFF && body[1] == 0xFE:
		return decodeUTF16(body[2:], false)
	case len(body) >= 2 && body[0] == 0xFE && body[1] == 0xFF:
		return decodeUTF16(body[2:], true)
	}
	return stripBOM(string(body))
}

// stripBOM drops a leading UTF-8 byte order mark. Like Google, it drops a
// leading part of one too, so a file cut by a broken editor still parses.
func stripBOM(text string) string {
	const bom = "\xEF\xBB\xBF"
	i := 0
	for i < len(bom) && i < len(text) && text[i] == bom[i] {
		i++
	}
	return text[i:]
}

// decodeUTF16 bridges the one encoding mismatch that is unambiguous (RFC
// 9309 §2.2.2 allows bridging): a UTF-16 file announced by its BOM.
func decodeUTF16(b []byte, bigEndian bool) string {
	units := make([]uint16, len(b)/2)
	for i := range units {
		if bigEndian {
			units[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
		} else {
			units[i] = uint16(b[2*i+1])<<8 | uint16(b[2*i])
		}
	}
	out := make([]byte, 0, len(units))
	for _, r := range utf16.Decode(units) {
		out = utf8.AppendRune(out, r)
	}
	return string(out)
}

func parseLine(number int, raw string) Line {
	line := Line{Number: number}
	if len(raw) > MaxLineBytes {
		raw = raw[:MaxLineBytes]
		line.TooLong = true
	}
	if i := strings.IndexByte(raw, '#'); i >= 0 {
		line.HasComment = true
		raw = raw[:i]
	}
	raw = trimSpace(raw)
	if raw == "" {
		line.IsComment = line.HasComment
		line.IsEmpty = !line.HasComment
		return line
	}
	key, value, ok := strings.Cut(raw, ":")
	if !ok {
		// Google accepts "key value" without the colon when the line is
		// exactly two words; real files contain "Disallow /private".
		i := strings.IndexAny(raw, " \t\v\f")
		if i < 0 {
			return line
		}
		key, value = raw[:i], trimSpace(raw[i+1:])
		if strings.ContainsAny(value, " \t\v\f") {
			return line
		}
		line.MissingColon = true
	}
	line.Key, line.Value = trimSpace(key), trimSpace(value)
	if line.Key == "" {
		line.MissingColon = false
		return line
	}
	line.Directive, line.IsTypo = classifyKey(line.Key)
	return line
}

// classifyKey maps a record key, compared case-insensitively, to its
// directive. The misspellings are those real files contain and Google
// accepts.
func classifyKey(key string) (d Directive, typo bool) {
	var buf [16]byte
	if len(key) > len(buf) {
		return DirectiveUnknown, false
	}
	switch string(appendLowerASCII(buf[:0], key)) {
	case "user-agent":
		return DirectiveUserAgent, false
	case "useragent", "user agent", "user_agent":
		return DirectiveUserAgent, true
	case "allow":
		return DirectiveAllow, false
	case "disallow":
		return DirectiveDisallow, false
	case "dissallow", "dissalow", "disalow", "diasllow", "disallaw":
		return DirectiveDisallow, true
	case "sitemap":
		return DirectiveSitemap, false
	case "site-map", "sitemaps":
		return DirectiveSitemap, true
	case "crawl-delay":
		return DirectiveCrawlDelay, false
	case "crawldelay", "crawl delay", "crawl_delay":
		return DirectiveCrawlDelay, true
	case "request-rate":
		return DirectiveRequestRate, false
	case "requestrate", "request rate", "request_rate":
		return DirectiveRequestRate, true
	case "content-usage":
		return DirectiveContentUsage, false
	case "content-signal":
		return DirectiveContentSignal, false
	case "clean-param", "domain", "host", "noarchive",
		"nofollow", "noindex", "revisit-after", "visit-time":
		return DirectiveUnsupported, false
	}
	return DirectiveUnknown, false
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r' || c == '\n'
}

// trimSpace trims ASCII whitespace only: bytes of other encodings are data.
func trimSpace(s string) string {
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}
