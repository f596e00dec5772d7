package robots

import (
	"strings"
	"testing"
)

func TestASCIIFolding(t *testing.T) {
	for c := range 256 {
		want := byte(c)
		if 'A' <= c && c <= 'Z' {
			want += 'a' - 'A'
		}
		if got := toLowerASCII(byte(c)); got != want {
			t.Errorf("toLowerASCII(%#x) = %#x, want %#x", c, got, want)
		}
	}
	for _, c := range []struct {
		s, t  string
		equal bool
	}{
		{"User-Agent", "user-agent", true},
		{"%2E", "%2e", true},
		{"GOOGLEBOT", "googlebot", true},
		{"@", "`", false}, // 0x40 and 0x60 differ only in the case bit
		{"bot", "bots", false},
		{"\xC9t\xE9", "\xE9t\xE9", false}, // Latin-1 É and é: not ASCII letters
	} {
		if got := equalFoldASCII(c.s, c.t); got != c.equal {
			t.Errorf("equalFoldASCII(%q, %q) = %v, want %v", c.s, c.t, got, c.equal)
		}
	}
	if !containsFoldASCII("360SpiderBot", "spider") || containsFoldASCII("Spide", "spider") || !containsFoldASCII("x", "") {
		t.Error("containsFoldASCII")
	}
	if s := "already lower"; lowerASCII(s) != s || lowerASCII("MJ12bot") != "mj12bot" {
		t.Error("lowerASCII")
	}
	// U+212A KELVIN SIGN folds to "k" in Unicode but is no ASCII letter.
	if got := lowerASCII("\u212Abot"); got != "\u212Abot" {
		t.Errorf("lowerASCII folded the Kelvin sign: %q", got)
	}
}

// A token too long for Check's stack buffer is folded the same way as a
// short one: ASCII letters only.
func TestLongTokenFoldsASCIIOnly(t *testing.T) {
	name := "kbot" + strings.Repeat("x", 70)
	r := Parser{}.Parse([]byte("User-agent: " + name + "\nDisallow: /\n"))
	if r.Check(strings.ToUpper(name), "/a").Allowed {
		t.Error("the upper-case token must select the group")
	}
	if v := r.Check("\u212A"+name[1:], "/a"); !v.Allowed {
		t.Errorf("a token starting with the Kelvin sign selected the group of %q", v.Group)
	}
}
