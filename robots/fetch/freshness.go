package fetch

import (
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Freshness is what an answer asked of caches (RFC 9111), read as a
// shared cache reads it: robotsgate serves one copy to many crawlers.
// "private" is ignored: robotsgate fetches with no credentials, so the
// answer is nobody's private copy, and it is never served to a client.
type Freshness struct {
	// MaxAge is s-maxage, or else max-age; an invalid value counts as 0
	// (stale, RFC 9111 §4.2.1). HasMaxAge says whether there was one.
	MaxAge time.Duration
	// Age is the Age header: how long the answer sat in caches on the way.
	Age time.Duration
	// Expires is the Expires header; zero with HasExpires when it is not
	// a valid date, which means already expired (RFC 9111 §5.3).
	Expires time.Time
	// Date is the answer's Date header, or when it arrived when there is
	// none: Expires counts from it.
	Date      time.Time
	HasMaxAge bool
	// NoStore and NoCache report those Cache-Control directives; a
	// no-cache that names header fields only concerns those fields, which
	// robotsgate does not keep, and is not reported.
	NoStore, NoCache bool
	HasExpires       bool
}

// TTL returns how long the answer may be used from when it arrived, and
// whether the origin said at all: 0 for no-store and no-cache; max-age
// (or s-maxage) less Age; else Expires less Date less Age. false means
// no preference.
func (f Freshness) TTL() (time.Duration, bool) {
	var lifetime time.Duration
	switch {
	case f.NoStore || f.NoCache:
		return 0, true
	case f.HasMaxAge:
		lifetime = f.MaxAge
	case f.HasExpires && f.Expires.IsZero():
		return 0, true
	case f.HasExpires:
		lifetime = f.Expires.Sub(f.Date)
	default:
		return 0, false
	}
	return max(lifetime-f.Age, 0), true
}

// maxDeltaSeconds is where RFC 9111 §1.2.2 caps delta-seconds.
const maxDeltaSeconds = 1 << 31

// freshnessOf reads the caching headers of an answer that arrived at
// received.
func freshnessOf(h http.Header, received time.Time) Freshness {
	f := Freshness{Date: received}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		f.Date = date
	}
	if v := h.Values("Expires"); len(v) > 0 {
		f.HasExpires = true
		if expires, err := http.ParseTime(v[0]); err == nil {
			f.Expires = expires
		}
	}
	if age, ok := deltaSeconds(h.Get("Age")); ok {
		f.Age = age
	}
	var maxAge, sharedMaxAge time.Duration
	var hasMaxAge, hasSharedMaxAge bool
	for _, line := range h.Values("Cache-Control") {
		for name, value := range cacheDirectives(line) {
			switch {
			case strings.EqualFold(name, "no-store"):
				f.NoStore = true
			case strings.EqualFold(name, "no-cache"):
				f.NoCache = f.NoCache || value == ""
			case strings.EqualFold(name, "max-age") && !hasMaxAge:
				// The first occurrence counts (RFC 9111 §4.2.1).
				maxAge, _ = deltaSeconds(value)
				hasMaxAge = true
			case strings.EqualFold(name, "s-maxage") && !hasSharedMaxAge:
				sharedMaxAge, _ = deltaSeconds(value)
				hasSharedMaxAge = true
			}
		}
	}
	switch {
	case hasSharedMaxAge:
		f.MaxAge, f.HasMaxAge = sharedMaxAge, true
	case hasMaxAge:
		f.MaxAge, f.HasMaxAge = maxAge, true
	}
	return f
}

// deltaSeconds parses a non-negative number of seconds (RFC 9111 §1.2.2),
// capped at 2^31 seconds.
func deltaSeconds(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > maxDeltaSeconds {
		n = maxDeltaSeconds // only overflow fails once the digits are checked
	}
	return time.Duration(n) * time.Second, true
}

// cacheDirectives yields the directives of one Cache-Control field value:
// each name with its argument, unquoted, or "" when it has none. Commas
// inside a quoted argument do not split directives.
func cacheDirectives(line string) iter.Seq2[string, string] {
	return func(yield func(name, value string) bool) {
		rest := line
		for rest != "" {
			var item string
			item, rest = nextDirective(rest)
			name, value, _ := strings.Cut(item, "=")
			name, value = strings.TrimSpace(name), strings.TrimSpace(value)
			if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
				value = unquote(value[1 : len(value)-1])
			}
			if name != "" && !yield(name, value) {
				return
			}
		}
	}
}

// nextDirective splits s at the first comma outside a quoted string.
func nextDirective(s string) (item, rest string) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// unquote removes the backslashes of a quoted-string's quoted pairs.
func unquote(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
