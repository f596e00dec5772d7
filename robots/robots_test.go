package robots

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

type checkCase struct {
	token, path string
	allowed     bool
	reason      string // Verdict.Reason(), when set
}

func runChecks(t *testing.T, r *Robots, cases []checkCase) {
	t.Helper()
	for _, c := range cases {
		v := r.Check(c.token, c.path)
		if v.Allowed != c.allowed {
			t.Errorf("Check(%q, %q) allowed=%v, want %v (%s)", c.token, c.path, v.Allowed, c.allowed, v.Reason())
		}
		if c.reason != "" && v.Reason() != c.reason {
			t.Errorf("Check(%q, %q) reason %q, want %q", c.token, c.path, v.Reason(), c.reason)
		}
	}
}

// RFC 9309 §5.1, with the effect the RFC describes for each group.
func TestRFC9309SimpleExample(t *testing.T) {
	r := Parser{KeepIgnored: true}.Parse([]byte(`User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
`))
	runChecks(t, r, []checkCase{
		// "*": /publications/ allowed, /example/ and every .gif disallowed.
		{"otherbot", "/publications/report.html", true, "allow: /publications/ (line 4)"},
		{"otherbot", "/example/index.html", false, "disallow: /example/ (line 3)"},
		{"otherbot", "/images/logo.gif", false, "disallow: *.gif$ (line 2)"},
		{"otherbot", "/images/logo.gif?size=2", true, "no matching rule"},
		{"otherbot", "/", true, "no matching rule"},
		// foobot: only /example/page.html and /example/allowed.gif.
		{"foobot", "/example/page.html", true, "allow: /example/page.html (line 8)"},
		{"foobot", "/example/allowed.gif", true, "allow: /example/allowed.gif (line 9)"},
		{"foobot", "/example/other.html", false, "disallow: / (line 7)"},
		{"foobot", "/publications/", false, "disallow: / (line 7)"},
		{"FooBot", "/", false, "disallow: / (line 7)"},
		// barbot and bazbot: everything but /example/page.html.
		{"barbot", "/example/page.html", false, "disallow: /example/page.html (line 13)"},
		{"bazbot", "/example/page.html", false, "disallow: /example/page.html (line 13)"},
		{"bazbot", "/example/other.html", true, "no matching rule"},
		{"barbot", "/images/logo.gif", true, "no matching rule"},
		// quxbot: an empty group still overrides "*".
		{"quxbot", "/example/page.html", true, "no matching rule"},
		{"quxbot", "/images/logo.gif", true, "no matching rule"},
	})
	if v := r.Check("bazbot", "/"); v.Group != "bazbot" || !slices.Equal(v.GroupLines, []int{12}) {
		t.Errorf("bazbot group = %q lines %v, want bazbot [12]", v.Group, v.GroupLines)
	}
	if got := r.Ignored(); len(got) != 1 || got[0].Line != 17 || got[0].Reason != IgnoredNotRecord {
		t.Errorf("Ignored() = %v, want only line 17 (EOF)", got)
	}
}

// RFC 9309 §5.2.
func TestRFC9309LongestMatch(t *testing.T) {
	r := Parser{}.Parse([]byte("User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n"))
	runChecks(t, r, []checkCase{
		{"foobot", "/example/page/disallowed.gif", false, "disallow: /example/page/disallowed.gif (line 3)"},
		{"foobot", "/example/page/allowed.gif", true, "allow: /example/page/ (line 2)"},
	})
}

// RFC 9309 §2.2.2 Figure 4: the path as sent and the form it is matched in.
func TestRFC9309PercentEncodingTable(t *testing.T) {
	for _, c := range []struct{ sent, match string }{
		{"/foo/bar?baz=quz", "/foo/bar?baz=quz"},
		{"/foo/bar?baz=https%3A%2F%2Ffoo.bar", "/foo/bar?baz=https%3A%2F%2Ffoo.bar"},
		{"/foo/bar/%E3%83%84", "/foo/bar/%E3%83%84"},
		{"/foo/bar/%62%61%7A", "/foo/bar/baz"},
		// The same rules applied to what clients really send.
		{"/foo/bar/ツ", "/foo/bar/%E3%83%84"},
		{"/foo/bar/%e3%83%84", "/foo/bar/%E3%83%84"},
		{"/a%2Fb", "/a%2Fb"},
		{"/a%2fb", "/a%2Fb"},
		{"/%7Euser/%41%2D%5F%2E", "/~user/A-_."},
		{"/a b", "/a%20b"},
		{"/100%", "/100%"},
		{"/100%zz", "/100%zz"},
		{"/file-with-a-*.html", "/file-with-a-%2A.html"},
		{"/foo-$", "/foo-%24"},
		{"", "/"},
	} {
		if got := normalizePath(c.sent); got != c.match {
			t.Errorf("normalizePath(%q) = %q, want %q", c.sent, got, c.match)
		}
	}
}

func TestPercentEncodingMatches(t *testing.T) {
	r := Parser{}.Parse([]byte(`User-agent: *
Disallow: /foo/bar/ツ
Disallow: /baz/%62%61%7A
Disallow: /slash%2Fencoded
Disallow: /path/file-with-a-%2A.html
Disallow: /path/foo-%24
Disallow: /lower/%c3%a9
Disallow: /cost$5/
`))
	runChecks(t, r, []checkCase{
		{"bot", "/foo/bar/%E3%83%84", false, "disallow: /foo/bar/ツ (line 2)"},
		{"bot", "/foo/bar/ツ", false, "disallow: /foo/bar/ツ (line 2)"},
		{"bot", "/foo/bar/%e3%83%84/x", false, "disallow: /foo/bar/ツ (line 2)"},
		{"bot", "/baz/baz", false, "disallow: /baz/%62%61%7A (line 3)"},
		{"bot", "/baz/%62az", false, "disallow: /baz/%62%61%7A (line 3)"},
		{"bot", "/slash%2Fencoded", false, "disallow: /slash%2Fencoded (line 4)"},
		{"bot", "/slash/encoded", true, "no matching rule"}, // %2F is not '/'
		{"bot", "/path/file-with-a-*.html", false, "disallow: /path/file-with-a-%2A.html (line 5)"},
		{"bot", "/path/file-with-a-%2A.html", false, "disallow: /path/file-with-a-%2A.html (line 5)"},
		{"bot", "/path/file-with-a-x.html", true, "no matching rule"},
		{"bot", "/path/foo-$", false, "disallow: /path/foo-%24 (line 6)"},
		{"bot", "/lower/%C3%A9t%C3%A9", false, "disallow: /lower/%c3%a9 (line 7)"},
		{"bot", "/lower/été", false, "disallow: /lower/%c3%a9 (line 7)"},
		{"bot", "/cost$5/item", false, "disallow: /cost$5/ (line 8)"}, // '$' not at the end is literal
	})
}

func TestSpecialCharacters(t *testing.T) {
	r := Parser{}.Parse([]byte(`User-agent: *
Disallow: /*.php$
Disallow: /private*/
Allow: /private-ok/
Disallow: /end$
Disallow: /**/double
Disallow: *.pdf
Allow: /$
Disallow: /
User-agent: nocase
Disallow: /CaseSensitive
`))
	runChecks(t, r, []checkCase{
		{"bot", "/", true, "allow: /$ (line 8)"},
		{"bot", "/index.php", false, "disallow: /*.php$ (line 2)"},
		{"bot", "/a/b/index.php?x=1", false, "disallow: / (line 9)"},
		{"bot", "/private-ok/x", true, "allow: /private-ok/ (line 4)"},
		{"bot", "/private-no/x", false, "disallow: /private*/ (line 3)"},
		{"bot", "/end", false, "disallow: /end$ (line 5)"},
		{"bot", "/a/double", false, "disallow: /**/double (line 6)"},
		{"bot", "/docs/x.pdf", false, "disallow: *.pdf (line 7)"},
		{"nocase", "/casesensitive", true, "no matching rule"},
		{"nocase", "/CaseSensitive/x", false, "disallow: /CaseSensitive (line 11)"},
	})
}

func TestGroupSelection(t *testing.T) {
	r := Parser{}.Parse([]byte(`User-agent: *
Disallow: /global/

User-agent: MJ12bot
User-agent: *PetalBot*
User-agent: meta-webindexer/1.1
User-agent: Linguee Bot
Disallow: /

User-agent: AdsBot-Google
Disallow: /ads/

User-agent: mj12BOT
Allow: /public/

User-agent: Googlebot
Disallow: /nogoogle/

user-agent: EmptyBot
`))
	runChecks(t, r, []checkCase{
		{"MJ12bot", "/x", false, "disallow: / (line 8)"},
		{"mj12bot", "/public/x", true, "allow: /public/ (line 14)"}, // merged with the second MJ12bot group
		{"PetalBot", "/x", false, "disallow: / (line 8)"},
		{"meta-webindexer", "/x", false, "disallow: / (line 8)"},
		{"Linguee", "/x", false, "disallow: / (line 8)"},
		{"Linguee Bot", "/global/x", false, "disallow: /global/ (line 2)"}, // tokens are compared whole
		{"MJ", "/x", true, "no matching rule"},                             // no cutting at digits
		{"EmptyBot", "/global/x", true, "no matching rule"},                // an empty group overrides "*"
		{"AdsBot-Google", "/ads/x", false, "disallow: /ads/ (line 11)"},
		{"AdsBot-Google-Mobile", "/ads/x", true, "no matching rule"}, // exact names: no prefix matching
		{"AdsBot", "/ads/x", true, "no matching rule"},
		{"Googlebot-Image", "/nogoogle/x", true, "no matching rule"}, // RFC 9309: exact match only
		{"", "/global/x", false, "disallow: /global/ (line 2)"},
		{"UnknownBot", "/global/x", false, "disallow: /global/ (line 2)"},
	})
	v := r.Check("mj12bot", "/x")
	if v.Group != "MJ12bot" || !slices.Equal(v.GroupLines, []int{4, 13}) {
		t.Errorf("group %q lines %v, want MJ12bot [4 13]", v.Group, v.GroupLines)
	}
	if v := r.Check("nobody", "/x"); v.Group != "*" || !slices.Equal(v.GroupLines, []int{1}) {
		t.Errorf("fallback group %q lines %v, want * [1]", v.Group, v.GroupLines)
	}
}

func TestNoGroupsMeansNoRules(t *testing.T) {
	for _, body := range []string{"", "Disallow: /\n", "Sitemap: https://e.com/s.xml\n", "<html><body>Not found</body></html>"} {
		r := Parser{}.Parse([]byte(body))
		if v := r.Check("bot", "/private"); !v.Allowed || v.Cause != CauseNoGroup || v.Group != "" {
			t.Errorf("%q: %+v, want allowed with no group", body, v)
		}
	}
	var nilRobots *Robots
	if v := nilRobots.Check("bot", "/x"); !v.Allowed || v.Cause != CauseNoGroup {
		t.Errorf("nil Robots: %+v, want allowed", v)
	}
}

// Check exempts the path /robots.txt alone (RFC 9309 §2.2.2): with a
// query, even an empty one, it is a URL like any other.
func TestRobotsTxtAlwaysAllowed(t *testing.T) {
	r := Parser{}.Parse([]byte("User-agent: *\nDisallow: /\n"))
	runChecks(t, r, []checkCase{
		{"bot", "/robots.txt", true, "robots.txt is always allowed"},
		{"bot", "/robots%2Etxt", true, "robots.txt is always allowed"},
		{"bot", "/robots.txt?x=1", false, "disallow: / (line 2)"},
		{"bot", "/robots.txt?", false, "disallow: / (line 2)"},
		{"bot", "/robots.txt.bak", false, "disallow: / (line 2)"},
		{"bot", "/dir/robots.txt", false, "disallow: / (line 2)"},
	})
}

func TestGroupsAndRecords(t *testing.T) {
	body := "\xEF\xBB\xBF# comment\r\n" +
		"Allow: /before-any-group\n" +
		"Crawl-delay: 3\n" +
		"USER-AGENT : alpha\n" +
		"Sitemap: https://example.com/sitemap.xml\n" +
		"Crawl-Delay: 2.5\n" +
		"Unicorns: yes\n" +
		"Host: example.com\n" +
		"useragent: beta\r" +
		"Disalow : /typo/\n" +
		"Disallow /no-colon/\n" +
		"Disallow: no-slash\n" +
		"this line means nothing\n" +
		"User-agent: /\n" +
		"Crawl-delay: soon\n" +
		"sitemap: https://example.com/sitemap.xml\n" +
		"\n" +
		"User-agent: gamma\x00\n" +
		"Disallow: /nul\x00/\n" +
		"Disallow: /latin-\xe9t\xe9\n"
	r := Parser{KeepIgnored: true}.Parse([]byte(body))
	runChecks(t, r, []checkCase{
		{"alpha", "/typo/x", false, "disallow: /typo/ (line 10)"},
		{"beta", "/no-colon/x", false, "disallow: /no-colon/ (line 11)"},
		{"beta", "/before-any-group", true, "no matching rule"},
		{"gamma", "/nul%00/x", false, "disallow: /nul\x00/ (line 19)"},
		{"gamma", "/latin-%E9t%E9", false, "disallow: /latin-\xe9t\xe9 (line 20)"},
	})
	if p, ok := r.Pace("alpha"); !ok || p.Interval != 2500*time.Millisecond {
		t.Errorf("Pace(alpha) = %+v %v, want 2.5s", p, ok)
	}
	if _, ok := r.Pace("gamma"); ok {
		t.Error("gamma has no crawl-delay")
	}
	if got, want := r.Sitemaps(), []string{"https://example.com/sitemap.xml"}; !slices.Equal(got, want) {
		t.Errorf("Sitemaps() = %q, want %q", got, want)
	}
	got := ignoredLines(r)
	want := []string{
		"line 2: record before any user-agent line",
		"line 3: record before any user-agent line",
		`line 7: unknown key "Unicorns"`,
		`line 8: unsupported key "Host"`,
		"line 12: pattern starts with neither / nor *: never matches",
		`line 13: not a "key: value" record`,
		"line 14: user-agent value names no product token",
		"line 15: crawl-delay is not a number of seconds, such as 10 or 0.5",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Ignored():\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLineEndingsAndEncodings(t *testing.T) {
	const rules = "User-agent: bot\nDisallow: /a\nAllow: /a/b\n"
	utf16le := func(s string, bigEndian bool) []byte {
		out := []byte{0xFF, 0xFE}
		if bigEndian {
			out = []byte{0xFE, 0xFF}
		}
		for _, r := range s {
			if bigEndian {
				out = append(out, byte(r>>8), byte(r))
			} else {
				out = append(out, byte(r), byte(r>>8))
			}
		}
		return out
	}
	for name, body := range map[string][]byte{
		"LF":         []byte(rules),
		"CRLF":       []byte(strings.ReplaceAll(rules, "\n", "\r\n")),
		"CR":         []byte(strings.ReplaceAll(rules, "\n", "\r")),
		"mixed":      []byte("User-agent: bot\r\nDisallow: /a\rAllow: /a/b"),
		"BOM":        append([]byte("\xEF\xBB\xBF"), rules...),
		"UTF-16LE":   utf16le(rules, false),
		"UTF-16BE":   utf16le(rules, true),
		"tabs":       []byte("User-agent:\tbot\n\tDisallow :\t/a\t\n  Allow:/a/b  # comment\n"),
		"NUL before": []byte("\x00\x00garbage\x00\nUser-agent: bot\nDisallow: /a\nAllow: /a/b\n"),
	} {
		r := Parser{}.Parse(body)
		if r.Check("bot", "/a/x").Allowed || !r.Check("bot", "/a/b").Allowed || !r.Check("bot", "/b").Allowed {
			t.Errorf("%s: rules not read: /a/x %v, /a/b %v, /b %v", name,
				r.Check("bot", "/a/x").Reason(), r.Check("bot", "/a/b").Reason(), r.Check("bot", "/b").Reason())
		}
	}
}

func TestParseLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("User-agent: *\nDisallow: /first\n")
	for b.Len() < 600<<10 {
		b.WriteString("# padding padding padding padding padding padding padding\n")
	}
	b.WriteString("Disallow: /after-limit\n")
	body := []byte(b.String())

	r := Parser{KeepIgnored: true}.Parse(body)
	if !r.Truncated() || r.ParsedBytes() != DefaultMaxBytes {
		t.Fatalf("Truncated=%v ParsedBytes=%d, want true %d", r.Truncated(), r.ParsedBytes(), DefaultMaxBytes)
	}
	runChecks(t, r, []checkCase{
		{"bot", "/first", false, "disallow: /first (line 2)"},
		{"bot", "/after-limit", true, "no matching rule"},
	})
	last := r.Ignored()[len(r.Ignored())-1]
	if last.Reason != IgnoredPastLimit || last.Line != r.Lines() {
		t.Errorf("last ignored line %v, want the line cut by the limit (line %d)", last, r.Lines())
	}

	r = Parser{MaxBytes: len(body)}.Parse(body)
	if r.Truncated() || r.Check("bot", "/after-limit").Allowed {
		t.Errorf("a limit of the whole body must read it all: truncated=%v", r.Truncated())
	}

	// A cut rule would be a different rule: the cut line is dropped.
	r = Parser{MaxBytes: len("User-agent: *\nDisallow: /abc")}.Parse([]byte("User-agent: *\nDisallow: /abcdef\n"))
	if !r.Check("bot", "/abcxyz").Allowed {
		t.Error("a rule cut by the parse limit must not apply")
	}
}

func TestLongLines(t *testing.T) {
	long := "/x/" + strings.Repeat("a", MaxLineBytes) + "/qux"
	r := Parser{KeepIgnored: true}.Parse([]byte("User-agent: *\nDisallow: " + long + "\nDisallow: /short\n"))
	if ignored := r.Ignored(); len(ignored) != 1 || ignored[0].Reason != IgnoredTooLong || ignored[0].Line != 2 {
		t.Errorf("Ignored() = %v, want line 2 too long", ignored)
	}
	if r.Check("bot", "/short").Allowed {
		t.Error("the line after a long line must still be read")
	}
}

func TestIndexHTMLImpliesDirectory(t *testing.T) {
	r := Parser{}.Parse([]byte("User-agent: *\nAllow: /docs/index.html\nDisallow: /\n"))
	runChecks(t, r, []checkCase{
		{"bot", "/docs/", true, "allow: /docs/$ (line 2, implied by /docs/index.html)"},
		{"bot", "/docs/index.html", true, "allow: /docs/index.html (line 2)"},
		{"bot", "/docs/other", false, "disallow: / (line 3)"},
	})
}

func TestPathAndQuery(t *testing.T) {
	for in, want := range map[string]string{
		"https://example.com/a/b?c=d#frag": "/a/b?c=d",
		"https://example.com":              "/",
		"https://example.com?x":            "/?x",
		"http://example.com/#/a":           "/",
		"/already/a/path?q":                "/already/a/path?q",
	} {
		if got := PathAndQuery(in); got != want {
			t.Errorf("PathAndQuery(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPathologicalPatternIsLinear(t *testing.T) {
	r := Parser{}.Parse([]byte("User-agent: *\nDisallow: /*a*a*a*a*a*a*a*a*a*a*b$\n"))
	path := "/" + strings.Repeat("a", 10000)
	if !r.Check("bot", path).Allowed {
		t.Error("no 'b' at the end: must not match")
	}
	if r.Check("bot", path+"b").Allowed {
		t.Error("ends with 'b' after ten 'a's: must match")
	}
	if !r.Check("bot", "/aaaab").Allowed {
		t.Error("only four 'a's before 'b': must not match")
	}
}

func TestWildcardMatching(t *testing.T) {
	for _, c := range []struct {
		pattern, path string
		match         bool
	}{
		{"/", "/", true},
		{"/*", "/", true},
		{"*", "/anything", true},
		{"/$", "/", true},
		{"/$", "/a", false},
		{"/a*b*c", "/abc", true},
		{"/a*b*c", "/axxbxxcxx", true},
		{"/a*b*c$", "/axxbxxcxx", false},
		{"/a*b*c$", "/axxbxxcxxc", true},
		{"/a*bc$", "/abcbc", true},
		{"/*/*/pulse", "/owner/repo/pulse", true},
		{"/*/*/pulse", "/owner/pulse", false},
		{"/*.git$", "/repo.git", true},
		{"/*.git$", "/repo.github", false},
		{"/fish*", "/fish", true},
		{"/fish*.php", "/fishheads/catfish.php?parameters", true},
		{"/*ab*ab$", "/abab", true},
		{"/*ab*ab$", "/aba", false},
		{"/**", "/x", true},
	} {
		p, ok := compilePattern(c.pattern)
		if !ok {
			t.Fatalf("compilePattern(%q) refused", c.pattern)
		}
		if got := p.match(normalizePath(c.path)); got != c.match {
			t.Errorf("%q matches %q = %v, want %v", c.pattern, c.path, got, c.match)
		}
	}
	for _, bad := range []string{"", "private/", "$", "http://example.com/x", "?q=1"} {
		if _, ok := compilePattern(bad); ok {
			t.Errorf("compilePattern(%q) accepted a pattern that can never match", bad)
		}
	}
}

func TestProductName(t *testing.T) {
	for _, c := range []struct {
		value, name string
		global      bool
	}{
		{"*", "", true},
		{"* ", "", true},
		{"*\xa0", "", true},
		{"Googlebot", "Googlebot", false},
		{"MJ12bot", "MJ12bot", false},
		{"Mail.RU_Bot", "Mail.RU_Bot", false},
		{"meta-webindexer/1.1", "meta-webindexer", false},
		{"FOO BAR", "FOO", false},
		{"*MJ12bot*", "MJ12bot", false},
		{"Googlebot*", "Googlebot", false},
		{"/", "", false},
		{"", "", false},
	} {
		name, global := ProductName(c.value)
		if name != c.name || global != c.global {
			t.Errorf("ProductName(%q) = %q, %v; want %q, %v", c.value, name, global, c.name, c.global)
		}
	}
}

func TestCheckDoesNotAllocate(t *testing.T) {
	r := Parser{}.Parse([]byte("User-agent: FooBot\nDisallow: /*/private/\nAllow: /a/private/ok\nUser-agent: *\nDisallow: /\n"))
	allocs := testing.AllocsPerRun(100, func() {
		if r.Check("FooBot", "/a/private/x?y=1").Allowed {
			t.Fatal("must be disallowed")
		}
	})
	if allocs != 0 {
		t.Errorf("Check allocates %v times per call on a normal path, want 0", allocs)
	}
}

func TestDisallowsAll(t *testing.T) {
	r := Parser{}.Parse([]byte(`User-agent: GPTBot
Disallow: /

User-agent: CCBot
Disallow: /*
Disallow: /private/

User-agent: Googlebot
Disallow: /
Allow: /$

User-agent: bingbot
Disallow: /private/

User-agent: *
Disallow: *

User-agent: robotsonly
Disallow: /
Allow: /robots.txt

User-agent: anchored
Disallow: /*$

User-agent: rootonly
Disallow: /$

User-agent: someopen
Disallow: /
Allow: /public/

User-agent: shadowed
Disallow: /
Allow: /open
Disallow: /open

User-agent: wildopen
Disallow: /
Allow: /*.html$
`))
	for _, c := range []struct {
		token string
		all   bool
		rule  string
	}{
		{"GPTBot", true, "disallow: / (line 2)"},
		{"ccbot", true, "disallow: /* (line 5)"},
		{"Googlebot", false, ""}, // the home page is allowed
		{"bingbot", false, ""},
		{"OtherBot", true, "disallow: * (line 16)"},
		{"robotsonly", true, "disallow: / (line 19)"},
		{"anchored", true, "disallow: /*$ (line 23)"},
		{"rootonly", false, ""},
		{"someopen", false, ""},
		{"shadowed", false, ""}, // allow wins the tie
		{"wildopen", false, ""},
	} {
		v, all := r.DisallowsAll(c.token)
		if all != c.all || (all && v.Reason() != c.rule) {
			t.Errorf("DisallowsAll(%q) = %v %q, want %v %q", c.token, all, v.Reason(), c.all, c.rule)
		}
		if all && r.Check(c.token, "/anything").Allowed {
			t.Errorf("%s: DisallowsAll but /anything is allowed", c.token)
		}
	}
	if _, all := (Parser{}).Parse([]byte("User-agent: a\nDisallow: /\n")).DisallowsAll("b"); all {
		t.Error("no group applies to b: nothing is disallowed")
	}
	for path, want := range map[string]bool{"/robots.txt": true, "/robots%2etxt": true, "/robots.txt?x": false, "/robots.txt?": false, "/robots.txt/x": false, "/": false} {
		if isRobotsTxt(path) != want {
			t.Errorf("isRobotsTxt(%q) = %v, want %v", path, !want, want)
		}
	}
}

// junkBody is about 500 KiB of lines that are no rules, half of them
// records with a key nobody defines: what a site serving something else
// at /robots.txt can send.
func junkBody() []byte {
	var b strings.Builder
	for b.Len() < DefaultMaxBytes-16 {
		b.WriteString("x\nk: v\n")
	}
	return []byte(b.String())
}

// A cache holds parsed files it never lists the ignored lines of: by
// default none are kept, whatever their number.
func TestIgnoredLinesKeptOnlyWhenAsked(t *testing.T) {
	body := junkBody()
	lines := strings.Count(string(body), "\n") // the empty line after the last is no junk

	measured, estimate := retainedHeap(Parser{}, body)
	t.Logf("%d bytes, %d junk lines retain %d bytes (estimate %d)", len(body), lines, measured, estimate)
	// The Robots alone: 112 bytes on amd64.
	if measured > 256 || estimate > 256 {
		t.Errorf("default Parser retains %d bytes (estimate %d) of a file without rules, want at most 256", measured, estimate)
	}
	r := Parser{}.Parse(body)
	if r.Ignored() != nil || r.IgnoredCount() != lines {
		t.Errorf("default Parser: %d ignored lines kept, IgnoredCount %d; want none and %d", len(r.Ignored()), r.IgnoredCount(), lines)
	}

	// The list costs what it costs, and RetainedBytes charges it.
	measured, estimate = retainedHeap(Parser{KeepIgnored: true}, body)
	t.Logf("with KeepIgnored they retain %d bytes (estimate %d)", measured, estimate)
	if floor := int64(lines) * int64(unsafe.Sizeof(IgnoredLine{})); measured < floor || estimate < floor {
		t.Errorf("KeepIgnored retains %d bytes (estimate %d), want at least %d, a list entry per line", measured, estimate, floor)
	}
	kept := Parser{KeepIgnored: true}.Parse(body)
	ignored := kept.Ignored()
	if len(ignored) != lines || kept.IgnoredCount() != lines {
		t.Fatalf("KeepIgnored: %d lines kept, IgnoredCount %d, want %d", len(ignored), kept.IgnoredCount(), lines)
	}
	for i, l := range ignored {
		want := IgnoredLine{Line: i + 1, Reason: IgnoredNotRecord}
		if i%2 == 1 {
			want = IgnoredLine{Line: i + 1, Reason: IgnoredUnknownKey, Key: "k"}
		}
		if l != want {
			t.Fatalf("ignored line %d = %v, want %v", i, l, want)
		}
	}
}

// ignoredLines is r's ignored lines as check prints them.
func ignoredLines(r *Robots) []string {
	var lines []string
	for _, l := range r.Ignored() {
		lines = append(lines, l.String())
	}
	return lines
}
