package robots

import "strings"

// pattern is a rule's path pattern in the form it is matched in.
type pattern struct {
	// expr is the percent-normalised pattern without a final '$', with
	// runs of '*' collapsed to one.
	expr string
	// octets is the pattern's length for "longest match wins": the
	// normalised pattern with every '*' and the '$' counted, as Google
	// counts it.
	octets int32
	// star is the index of the first '*' in expr, when wildcard.
	star int32
	// anchored: the pattern ended with '$', so the path must end where
	// the pattern does.
	anchored bool
	// wildcard: expr contains '*'; single: exactly one, the commonest
	// wildcard pattern ("/*.pdf$", "/*?sort="), matched by one search.
	wildcard, single bool
}

// compilePattern normalises a rule value. ok is false when the pattern can
// never match: RFC 9309 matching starts at the path's first octet, which is
// always '/', so only patterns starting with '/' or '*' can match.
func compilePattern(value string) (p pattern, ok bool) {
	if value == "" || (value[0] != '/' && value[0] != '*') {
		return pattern{}, false
	}
	if strings.HasSuffix(value, "$") {
		p.anchored = true
		value = value[:len(value)-1]
	}
	expr, octets := normalize(value, true)
	p.octets = int32(octets) // a line is at most MaxLineBytes long
	if p.anchored {
		p.octets++
	}
	if star := strings.IndexByte(expr, '*'); star >= 0 {
		p.wildcard, p.star = true, int32(star)
		p.single = strings.LastIndexByte(expr, '*') == star
	}
	p.expr = expr
	return p, true
}

// matchesEveryPath reports whether p matches every path: nothing but '*'
// and at most one '/', and, when anchored, a final '*' ("/", "*", "/*$").
func (p *pattern) matchesEveryPath() bool {
	if rest := strings.Trim(p.expr, "*"); rest != "" && rest != "/" {
		return false
	}
	return !p.anchored || strings.HasSuffix(p.expr, "*")
}

// match reports whether p matches path, which must already be normalised
// with normalizePath. Segments between '*' are placed at their leftmost
// occurrence: with '*' as the only wildcard that placement is never worse
// than any other, so the cost is one linear scan per segment (at most path
// length times pattern length, never exponential).
func (p *pattern) match(path string) bool {
	star := len(p.expr)
	if p.wildcard {
		star = int(p.star)
	}
	return matchExpr(p.expr, star, p.anchored, p.single, path)
}

// matchExpr is pattern.match on its parts: star is the index of the first
// '*' in expr, any index past its end when it has none; single says it has
// only that one.
func matchExpr(expr string, star int, anchored, single bool, path string) bool {
	if star >= len(expr) {
		if anchored {
			return path == expr
		}
		return strings.HasPrefix(path, expr)
	}
	if !strings.HasPrefix(path, expr[:star]) {
		return false
	}
	return matchPastStar(path[star:], expr[star+1:], anchored, single)
}

// matchPastStar is matchExpr past the first '*' of the pattern, which
// matched the path up to it: expr is what follows the '*', path what
// follows the bytes matched.
func matchPastStar(path, expr string, anchored, single bool) bool {
	if single {
		if anchored {
			return strings.HasSuffix(path, expr)
		}
		return strings.Contains(path, expr)
	}
	for {
		star := strings.IndexByte(expr, '*')
		if star < 0 {
			if anchored {
				return strings.HasSuffix(path, expr)
			}
			return strings.Contains(path, expr)
		}
		i := strings.Index(path, expr[:star])
		if i < 0 {
			return false
		}
		path, expr = path[i+star:], expr[star+1:]
	}
}

// normalizePath brings a URL's path and query to the form patterns are
// compared in. It allocates only when the path changes.
func normalizePath(path string) string {
	s, _ := normalizeCounting(path)
	return s
}

// normalizeCounting is normalizePath, and how many bytes it escaped: the
// normalised form is at most twice that longer than path.
func normalizeCounting(path string) (out string, escaped int) {
	if path == "" {
		return "/", 0
	}
	out, _, escaped = normalizeInto(path, false)
	return out, escaped
}

// normalize applies RFC 9309 §2.2.2 to a pattern or a path so both compare
// octet for octet:
//   - octets outside ASCII (and controls and space, which cannot appear
//     raw in a URI) are percent-encoded;
//   - percent-encoded unreserved characters (A-Z a-z 0-9 - . _ ~) are
//     decoded, other escapes are kept with upper-case hex, so %2F stays
//     distinct from '/';
//   - '*' and '$' are special in patterns only (RFC 9309 §2.2.3): in a
//     path they are encoded as %2A and %24 so that a pattern matching them
//     literally, which must percent-encode them, matches. A '$' that does
//     not end a pattern is literal and is encoded the same way.
//
// In patterns runs of '*' collapse to one. octets counts the output with
// every '*' kept, the length used to rank rules.
func normalize(s string, isPattern bool) (out string, octets int) {
	out, octets, _ = normalizeInto(s, isPattern)
	return out, octets
}

// normalizeInto is normalize, and the number of bytes it escaped. Runs of
// bytes that stay as they are are copied whole.
func normalizeInto(s string, isPattern bool) (out string, octets, escaped int) {
	first := firstChange(s, isPattern)
	if first < 0 {
		return s, len(s), 0
	}
	b := make([]byte, 0, len(s)+8)
	b = append(b, s[:first]...)
	octets = first
	for i := first; i < len(s); {
		run := i
		for run < len(s) && isPlain(s[run]) {
			run++
		}
		b = append(b, s[i:run]...)
		octets += run - i
		if i = run; i == len(s) {
			break
		}
		switch c := s[i]; {
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			v := unhex(s[i+1])<<4 | unhex(s[i+2])
			i += 3
			if isUnreserved(v) {
				b = append(b, v)
				octets++
				continue
			}
			b = appendEscape(b, v)
			octets += 3
		case c == '%':
			b = append(b, c)
			octets++
			i++
		case c == '*' && isPattern:
			octets++
			if i == 0 || s[i-1] != '*' {
				b = append(b, '*')
			}
			i++
		default: // controls, space, non-ASCII, and '*' and '$' in a path
			b = appendEscape(b, c)
			octets += 3
			escaped++
			i++
		}
	}
	return string(b), octets, escaped
}

// isPlain reports whether normalize keeps c as it is, wherever it is.
func isPlain(c byte) bool {
	return ' ' < c && c < 0x7F && c != '%' && c != '*' && c != '$'
}

// maybeChanged has a bit set for each byte below 64 that normalize may
// rewrite: controls, space, '$', '%' and '*'.
const maybeChanged = 1<<('!') - 1 | 1<<'$' | 1<<'%' | 1<<'*'

// firstChange returns the index of the first byte normalize rewrites, or
// -1: most paths and patterns are already normal and need no copy.
func firstChange(s string, isPattern bool) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 64 && maybeChanged>>c&1 == 0 || c >= 64 && c < 0x7F {
			continue
		}
		switch {
		case c == '%':
			if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				if isUnreserved(unhex(s[i+1])<<4|unhex(s[i+2])) || isLowerHex(s[i+1]) || isLowerHex(s[i+2]) {
					return i
				}
				i += 2
			}
		case c == '*' && isPattern:
			if i > 0 && s[i-1] == '*' {
				return i
			}
		default:
			return i
		}
	}
	return -1
}

func isUnreserved(c byte) bool {
	return isAlnum(c) || c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool {
	return isDigit(c) || isLowerHex(toLowerASCII(c))
}

func isLowerHex(c byte) bool { return 'a' <= c && c <= 'f' }

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

func appendEscape(b []byte, c byte) []byte {
	const hex = "0123456789ABCDEF"
	return append(b, '%', hex[c>>4], hex[c&0xF])
}

// Pattern is an RFC 9309 path pattern ('*' for any run of octets, a final
// '$' anchoring it), compiled: the matcher of Allow and Disallow, for
// files that borrow robots.txt's patterns (TDMRep's tdmrep.json).
type Pattern struct{ p pattern }

// CompilePattern compiles value; false when it can never match, starting
// with neither '/' nor '*'.
func CompilePattern(value string) (Pattern, bool) {
	p, ok := compilePattern(value)
	return Pattern{p}, ok
}

// Match reports whether p matches a path and query normalised with
// [NormalizePath], at a cost linear in the path's length for each of the
// pattern's '*'.
func (p *Pattern) Match(normalized string) bool { return p.p.match(normalized) }

// MatchesEveryPath reports whether p matches every path: "/", "*", "/*$".
func (p *Pattern) MatchesEveryPath() bool { return p.p.matchesEveryPath() }

// Len is the length of the pattern once normalised: with the path's, what
// matching it costs.
func (p *Pattern) Len() int { return len(p.p.expr) }

// NormalizePath brings a path and query to the form patterns are compared
// in (RFC 9309 §2.2.2): unreserved characters' escapes decoded, other
// escapes upper-cased, other octets, '*' and '$' percent-encoded.
func NormalizePath(pathAndQuery string) string { return normalizePath(pathAndQuery) }
