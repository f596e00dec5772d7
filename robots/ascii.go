package robots

// Byte classes and case folding for the protocol's ASCII text. robots.txt
// keys, product names and the words of User-Agent headers are compared
// ASCII-case-insensitively on purpose: strings.EqualFold and
// strings.ToLower fold Unicode too, so the Kelvin sign (U+212A) would
// match "k" and a token no group names would select one.

func isUpper(c byte) bool  { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool  { return 'a' <= c && c <= 'z' }
func isLetter(c byte) bool { return isLower(c) || isUpper(c) }
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isAlnum(c byte) bool  { return isLetter(c) || isDigit(c) }

// toLowerASCII lower-cases an ASCII letter; other bytes are returned as
// they are.
func toLowerASCII(c byte) byte {
	if isUpper(c) {
		return c + 'a' - 'A'
	}
	return c
}

// appendLowerASCII appends s to dst with ASCII letters lower-cased. With a
// stack buffer as dst, comparing or looking up string(result) does not
// allocate.
func appendLowerASCII(dst []byte, s string) []byte {
	for i := range len(s) {
		dst = append(dst, toLowerASCII(s[i]))
	}
	return dst
}

// lowerASCII lower-cases the ASCII letters of s, without copying s when it
// has none.
func lowerASCII(s string) string {
	for i := range len(s) {
		if isUpper(s[i]) {
			return string(appendLowerASCII(make([]byte, 0, len(s)), s))
		}
	}
	return s
}

// equalFoldASCII reports whether s and t are equal with ASCII letters
// compared case-insensitively.
func equalFoldASCII(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := range len(s) {
		if toLowerASCII(s[i]) != toLowerASCII(t[i]) {
			return false
		}
	}
	return true
}

// containsFoldASCII reports whether substr is within s, with ASCII letters
// compared case-insensitively.
func containsFoldASCII(s, substr string) bool {
	for i := 0; i+len(substr) <= len(s); i++ {
		if equalFoldASCII(s[i:i+len(substr)], substr) {
			return true
		}
	}
	return false
}
