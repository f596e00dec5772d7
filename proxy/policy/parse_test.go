package policy

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, file string
		line       int    // the line the error names; 0: none
		want       string // a fragment of the message
	}{
		{"syntax", "crawlers:\n  - user: a\n    purposes: [x,\n", 3, "did not find expected"},
		// The YAML parser names the line where the block it was in began.
		{"syntax in a block", "crawlers:\n  - user: a\n   bad: [\n", 1, "did not find expected '-' indicator"},
		{"tab indentation", "crawlers:\n\t- user: a\n", 2, "YAML indents with spaces, not tabs"},
		{"unquoted star in a flow list", "crawlers:\n  - user: a\n    allow_sites: [*.acme.example]\n", 3, `quote it, "*.example.com", "*"`},
		{"unquoted star token", "crawlers:\n  - token: *\n", 2, "starting with * as an alias"},
		{"not UTF-8", "crawlers:\n  - user: \xff\n", 2, "not UTF-8"},
		{"control character", "crawlers:\n  - user: a\x00\n", 2, "control character"},
		{"second document", "crawlers: []\n---\nsites: []\n", 2, "second YAML document"},
		{"top not a mapping", "- user: a\n", 1, "is a mapping of keys"},
		{"unknown top key", "crawler:\n  - user: a\n", 1, `unknown key "crawler"`},
		{"crawlers not a list", "crawlers:\n  user: a\n", 2, "crawlers is a list"},
		{"unknown crawler key", "crawlers:\n  - user: a\n    allow_site: [example.com]\n", 3, `unknown key "allow_site" in a crawler entry`},
		{"duplicate key", "crawlers:\n  - user: a\n    purposes: [x]\n    purposes: [y]\n", 4, "given twice"},
		{"user and token", "crawlers:\n  - user: a\n    token: b\n", 3, "not both"},
		{"neither user nor token", "crawlers:\n  - purposes: [x]\n", 2, "names a user"},
		{"user a list", "crawlers:\n  - user: [a]\n", 2, "user is a string, not a list"},
		{"user with colon", "crawlers:\n  - user: \"a:b\"\n", 2, "not a credential's name"},
		{"token not a token", "crawlers:\n  - token: \"GPT Bot\"\n", 2, "not a product token"},
		{"token starred", "crawlers:\n  - token: \"*bot\"\n", 2, "not a product token"},
		{"purpose upper case", "crawlers:\n  - user: a\n    purposes:\n      - search\n      - AI-Train\n", 5, "not a lower-case word"},
		{"purpose with space", "crawlers:\n  - user: a\n    purposes: [\"ai train\"]\n", 3, "not a lower-case word"},
		{"purposes a string", "crawlers:\n  - user: a\n    purposes: search\n", 3, "purposes is a list"},
		{"allow_sites null", "crawlers:\n  - user: a\n    allow_sites:\n", 3, "allow_sites is a list"},
		{"min_delay no unit", "crawlers:\n  - user: a\n    min_delay: 2\n", 3, "not a duration"},
		{"min_delay negative", "crawlers:\n  - user: a\n    min_delay: -1s\n", 3, "not between 0s and 24h"},
		{"min_delay over a day", "crawlers:\n  - user: a\n    min_delay: 25h\n", 3, "not between 0s and 24h"},
		{"min_delay garbage", "crawlers:\n  - user: a\n    min_delay: soon\n", 3, "not a duration"},
		{"max_concurrency zero", "crawlers:\n  - user: a\n    max_concurrency: 0\n", 3, "whole number from 1"},
		{"max_concurrency negative", "crawlers:\n  - user: a\n    max_concurrency: -2\n", 3, "whole number from 1"},
		{"max_concurrency string", "crawlers:\n  - user: a\n    max_concurrency: two\n", 3, "whole number from 1"},
		{"max_concurrency float", "crawlers:\n  - user: a\n    max_concurrency: 1.5\n", 3, "whole number from 1"},
		{"max_concurrency huge", "crawlers:\n  - user: a\n    max_concurrency: 99999999999999999999\n", 3, "whole number from 1"},
		{"rule not allow/disallow", "crawlers:\n  - user: a\n    rules:\n      - \"Disallow: /a/\"\n      - \"Crawl-delay: 5\"\n", 5, "only Allow: and Disallow:"},
		{"rule typo", "crawlers:\n  - user: a\n    rules: [\"Disalow: /a/\"]\n", 3, "only Allow: and Disallow:"},
		{"rule without colon", "crawlers:\n  - user: a\n    rules: [\"Disallow /a/\"]\n", 3, "is not a rule"},
		{"rule unquoted", "crawlers:\n  - user: a\n    rules:\n      - Disallow: /a/\n", 4, "quote the rule"},
		{"rule pattern relative", "crawlers:\n  - user: a\n    rules: [\"Disallow: a/\"]\n", 3, "starts with neither"},
		{"rule pattern empty", "crawlers:\n  - user: a\n    rules: [\"Disallow:\"]\n", 3, "empty path pattern"},
		{"rule pattern space", "crawlers:\n  - user: a\n    rules: [\"Disallow: /a b\"]\n", 3, "white space"},
		{"site without hosts", "sites:\n  - rules: [\"Disallow: /a/\"]\n", 2, "needs hosts"},
		{"site empty hosts", "sites:\n  - hosts: []\n    rules: [\"Disallow: /a/\"]\n", 2, "hosts is empty"},
		{"site unknown key", "sites:\n  - hosts: [example.com]\n    exception: []\n", 3, `unknown key "exception"`},
		{"exception without reason", "sites:\n  - hosts: [example.com]\n    exceptions:\n      - allow: /a/\n", 4, "needs a reason"},
		{"exception empty reason", "sites:\n  - hosts: [example.com]\n    exceptions:\n      - allow: /a/\n        reason: \" \"\n", 5, "reason is empty"},
		{"exception without allow", "sites:\n  - hosts: [example.com]\n    exceptions:\n      - reason: ok\n", 4, "needs allow"},
		{"exception bad pattern", "sites:\n  - hosts: [example.com]\n    exceptions:\n      - allow: reports/\n        reason: ok\n", 4, "starts with neither"},
		{"exception unknown key", "sites:\n  - hosts: [example.com]\n    exceptions:\n      - allow: /a/\n        reason: ok\n        until: 2027\n", 6, `unknown key "until"`},
		{"domain below registrable", "sites:\n  - hosts:\n      - example.com\n      - domain:www.example.com\n    rules: [\"Disallow: /a/\"]\n", 4, "its registrable domain is example.com"},
		{"domain public suffix", "sites:\n  - hosts: [\"domain:co.uk\"]\n    rules: [\"Disallow: /a/\"]\n", 2, "co.uk is a public suffix"},
		{"wildcard public suffix", "crawlers:\n  - user: a\n    allow_sites: [\"*.com\"]\n", 3, "com is a public suffix"},
		{"wildcard private suffix", "crawlers:\n  - user: a\n    deny_sites: [\"*.github.io\"]\n", 3, "github.io is a public suffix"},
		{"star alone", "crawlers:\n  - user: a\n    allow_sites: [\"*\"]\n", 3, `"*" alone is not a site pattern`},
		{"star inside", "crawlers:\n  - user: a\n    allow_sites: [\"www.*.example.com\"]\n", 3, "'*' may only start"},
		{"URL", "crawlers:\n  - user: a\n    allow_sites: [\"https://example.com/\"]\n", 3, "is a URL, not a host: write the host alone (example.com)"},
		{"port", "crawlers:\n  - user: a\n    allow_sites: [\"example.com:8080\"]\n", 3, "a port"},
		{"IPv6 port", "crawlers:\n  - user: a\n    allow_sites: [\"[::1]:8080\"]\n", 3, "a port"},
		{"wildcard IP", "crawlers:\n  - user: a\n    allow_sites: [\"*.10.0.0.1\"]\n", 3, "IP address has no hosts under it"},
		{"bad host", "crawlers:\n  - user: a\n    deny_sites: [\"exa%mple.com\"]\n", 3, "cannot be in a host name"},
		{"bad IPv4", "crawlers:\n  - user: a\n    deny_sites: [\"1.2.3.999\"]\n", 3, "IPv4"},
		{"anchor", "crawlers:\n  - &a\n    user: a\n  - user: b\n", 2, "anchors and aliases"},
		{"alias", "sites:\n  - hosts: &h [example.com]\n    rules: [\"Disallow: /a/\"]\n  - hosts: *h\n", 2, "anchors and aliases"},
		{"merge key", "crawlers:\n  - user: a\n    <<: {purposes: [x]}\n", 3, `unknown key "<<"`},
		{"unknown anchor", "crawlers:\n  - *nothing\n", 0, "unknown anchor"},
		{"reason not a string", "sites:\n  - hosts: [example.com]\n    rules: [\"Disallow: /a/\"]\n    reason: [a]\n", 4, "reason is a string"},
		{"users with bad name", "sites:\n  - hosts: [example.com]\n    users: [\" a\"]\n    rules: [\"Disallow: /a/\"]\n", 3, "not a credential's name"},
		{"tokens with bad token", "sites:\n  - hosts: [example.com]\n    tokens: [\"a/b\"]\n    rules: [\"Disallow: /a/\"]\n", 3, "not a product token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("p.yaml", []byte(tt.file))
			if err == nil {
				t.Fatalf("Parse accepted %q: %s", tt.file, p.Summary())
			}
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("error %v (%T) is no *Error", err, err)
			}
			if perr.File != "p.yaml" || perr.Line != tt.line {
				t.Errorf("error %q names %s line %d, want p.yaml line %d", err, perr.File, perr.Line, tt.line)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			prefix := "p.yaml: "
			if tt.line > 0 {
				prefix = "p.yaml:" + strconv.Itoa(tt.line) + ": "
			}
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q does not start with %q", err, prefix)
			}
		})
	}
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name, file      string
		crawlers, sites int
		exceptions      int
	}{
		{"empty", "", 0, 0, 0},
		{"comments only", "# nothing yet\n\n   # really\n", 0, 0, 0},
		{"document marker only", "---\n", 0, 0, 0},
		{"empty sections", "crawlers:\nsites: []\n", 0, 0, 0},
		{"duplicate users add up", "crawlers:\n  - user: a\n    purposes: [x]\n  - user: a\n    purposes: [y]\n", 2, 0, 0},
		{"number as a name", "crawlers:\n  - user: 2026\n", 1, 0, 0},
		{"zero min_delay", "crawlers:\n  - token: bot\n    min_delay: 0s\n", 1, 0, 0},
		{"exceptions", "sites:\n  - hosts: [\"B\u00fccher.example\", \"[2001:DB8::1]\", \"127.1\", example.com.]\n    exceptions:\n      - {allow: /a/, reason: ok}\n      - {allow: \"*.pdf$\", reason: ok}\n", 0, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("p.yaml", []byte(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(p.crawlers) != tt.crawlers || len(p.sites) != tt.sites || p.exceptions != tt.exceptions {
				t.Errorf("%s, want %d crawler entries, %d site entries, %d exceptions", p.Summary(), tt.crawlers, tt.sites, tt.exceptions)
			}
			if len(p.Version()) != 12 {
				t.Errorf("version %q is not 12 hexadecimal digits", p.Version())
			}
		})
	}
}

func TestParseReportsEveryError(t *testing.T) {
	file := "crawlers:\n  - user: a\n    min_delay: x\n  - token: \"a b\"\nsites:\n  - hosts: [\"*\"]\n    rules: [\"Disallow: /\"]\n"
	_, err := Parse("p.yaml", []byte(file))
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{"p.yaml:3: ", "p.yaml:4: ", "p.yaml:6: "}
	if len(lines) != len(want) {
		t.Fatalf("%d errors, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d %q does not start with %q", i, lines[i], w)
		}
	}
}

func TestParseBounds(t *testing.T) {
	t.Run("too large", func(t *testing.T) {
		big := []byte("# " + strings.Repeat("x", MaxFileBytes) + "\n")
		_, err := Parse("p.yaml", big)
		if err == nil || !strings.Contains(err.Error(), "over the limit of 8 MiB") {
			t.Fatalf("error %v, want the size limit", err)
		}
		path := t.TempDir() + "/big.yaml"
		if err := os.WriteFile(path, big, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "over the limit") {
			t.Fatalf("Load: error %v, want the size limit", err)
		}
	})
	t.Run("billion laughs", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
		for i := 1; i < 10; i++ {
			b.WriteString("a" + strconv.Itoa(i) + ": &a" + strconv.Itoa(i) + " [")
			for j := 0; j < 9; j++ {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString("*a" + strconv.Itoa(i-1))
			}
			b.WriteString("]\n")
		}
		// Refused at its first anchor, before anything is expanded (an
		// expansion would not end within the test's time).
		_, err := Parse("p.yaml", []byte(b.String()))
		if err == nil || !strings.Contains(err.Error(), "p.yaml:1: ") {
			t.Fatalf("error %v, want one at line 1", err)
		}
	})
	t.Run("errors in the order of the file", func(t *testing.T) {
		file := "crawlers:\n  - token: a\n    purposes: [Search]\n    min_delay: soon\n    max_concurrency: 0\n" +
			"    allow_sites: [\"*.com\"]\nsites:\n  - hosts: []\n    exceptions:\n      - allow: /x\n"
		_, err := Parse("p.yaml", []byte(file))
		if err == nil {
			t.Fatal("accepted")
		}
		last := 0
		msgs := strings.Split(err.Error(), "\n")
		for _, msg := range msgs {
			_, rest, _ := strings.Cut(msg, "p.yaml:")
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ':')])
			if n < last {
				t.Errorf("line %d listed after line %d:\n%v", n, last, err)
			}
			last = n
		}
		if len(msgs) < 5 {
			t.Errorf("%d errors listed, want one per bad value:\n%v", len(msgs), err)
		}
	})
	t.Run("many errors", func(t *testing.T) {
		file := "crawlers:\n" + strings.Repeat("  - user: \"a:b\"\n", 50)
		_, err := Parse("p.yaml", []byte(file))
		if err == nil {
			t.Fatal("accepted")
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != maxErrors+1 || lines[maxErrors] != "p.yaml: and 30 more errors" {
			t.Errorf("%d lines, the last %q", len(lines), lines[len(lines)-1])
		}
	})
	t.Run("missing file", func(t *testing.T) {
		if _, err := Load(t.TempDir() + "/none.yaml"); err == nil || !strings.Contains(err.Error(), "none.yaml") {
			t.Errorf("error %v does not name the file", err)
		}
	})
}
