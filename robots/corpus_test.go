package robots

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// corpusDir holds a slice of real robots.txt bodies; SOURCES.md beside
// them says where each comes from and why it was kept.
const corpusDir = "testdata/corpus"

// corpusFiles returns every robots.txt body of the corpus by name.
func corpusFiles(tb testing.TB) map[string][]byte {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join(corpusDir, "*.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(paths) == 0 {
		tb.Fatalf("no corpus files in %s", corpusDir)
	}
	files := make(map[string][]byte, len(paths))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		files[filepath.Base(p)] = data
	}
	return files
}

// TestCorpusSources checks that SOURCES.md accounts for exactly the files
// there are, byte for byte, so no file travels without its attribution, and
// that README.md states how many there are.
func TestCorpusSources(t *testing.T) {
	files := corpusFiles(t)
	listed := make(map[string]bool)
	for line := range strings.Lines(string(readTestdata(t, "corpus/SOURCES.md"))) {
		// | `file` | source | path | bytes | features | why | `sha256 prefix` |
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 9 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		size, sha := strings.TrimSpace(cells[4]), strings.Trim(strings.TrimSpace(cells[7]), "`")
		listed[name] = true
		body, ok := files[name]
		if !ok {
			t.Errorf("SOURCES.md lists %s, which is not in %s", name, corpusDir)
			continue
		}
		sum := sha256.Sum256(body)
		if size != strconv.Itoa(len(body)) || len(sha) < 16 || !strings.HasPrefix(hex.EncodeToString(sum[:]), sha) {
			t.Errorf("%s: SOURCES.md says %s bytes, sha256 %s; the file has %d bytes, sha256 %x", name, size, sha, len(body), sum)
		}
	}
	for name := range files {
		if !listed[name] {
			t.Errorf("%s/%s is not listed in SOURCES.md", corpusDir, name)
		}
	}
	requireREADME(t, fmt.Sprintf("%d real robots.txt files (`robots/%s/`)", len(files), corpusDir))
}

func TestCorpusParses(t *testing.T) {
	paths := []string{"/", "/robots.txt", "/wiki/Main_Page", "/search?q=x", "/a/b/c.html", "/%E3%83%84", "/ü?x=%2F"}
	tokens := []string{"Googlebot", "bingbot", "GPTBot", "MJ12bot", "", "*"}
	var truncated []string
	for name, body := range corpusFiles(t) {
		r := Parser{}.Parse(body)
		if r.Truncated() {
			truncated = append(truncated, name)
		}
		if r.ParsedBytes() > DefaultMaxBytes || r.RetainedBytes() <= 0 {
			t.Errorf("%s: parsed %d bytes, retains %d", name, r.ParsedBytes(), r.RetainedBytes())
		}
		for _, token := range tokens {
			for _, path := range paths {
				v := r.Check(token, path)
				if v.Cause == CauseRule && v.Rule.IsZero() {
					t.Errorf("%s: %q %q: rule verdict without a rule", name, token, path)
				}
			}
		}
	}
	sort.Strings(truncated)
	// The one body over 500 KiB (SOURCES.md) is a real rule file.
	if want := []string{"docs.oracle.com.txt"}; !slices.Equal(truncated, want) {
		t.Errorf("truncated files %v, want %v", truncated, want)
	}
}

// Decisions on real files, checked by hand against the file text.
func TestCorpusDecisions(t *testing.T) {
	files := corpusFiles(t)
	for _, c := range []struct {
		file, token, path string
		allowed           bool
		reason            string
	}{
		// Wikipedia: a named bad bot, a typical "*" rule, an allow that is
		// longer than the disallow around it, percent-encoding both ways,
		// raw UTF-8 in a rule (line 170 says the same as 169 unencoded, so the
		// duplicate is dropped and line 169 decides both forms).
		{"en.wikipedia.org_2024.txt", "MJ12bot", "/wiki/Main_Page", false, "disallow: / (line 12)"},
		{"en.wikipedia.org_2024.txt", "wget", "/wiki/Main_Page", false, "disallow: / (line 106)"},
		{"en.wikipedia.org_2024.txt", "Googlebot", "/wiki/Main_Page", true, "no matching rule"},
		{"en.wikipedia.org_2024.txt", "Googlebot", "/wiki/Special:Random", false, "disallow: /wiki/Special: (line 155)"},
		{"en.wikipedia.org_2024.txt", "Googlebot", "/wiki/Special%3aRandom", false, "disallow: /wiki/Special%3A (line 158)"},
		{"en.wikipedia.org_2024.txt", "Googlebot", "/w/load.php?modules=site", true, "allow: /w/load.php? (line 150)"},
		{"en.wikipedia.org_2024.txt", "Googlebot", "/w/index.php?title=X", false, "disallow: /w/ (line 152)"},
		{"en.wikipedia.org_2024.txt", "Googlebot", "/wiki/Wikipedia:L%C3%B6schkandidaten/2024", false, "disallow: /wiki/Wikipedia:L%C3%B6schkandidaten/ (line 169)"},
		{"en.wikipedia.org_2024.txt", "Googlebot", "/wiki/Wikipedia:Löschkandidaten/2024", false, "disallow: /wiki/Wikipedia:L%C3%B6schkandidaten/ (line 169)"},
		// GitHub: wildcards, '$', and a crawl-delay line that does not end
		// the baidu group, so baidu shares the "*" rules (RFC 9309 §2.2.4).
		{"github.com_2024.txt", "Googlebot", "/golang/go/pulse", false, "disallow: /*/*/pulse (line 9)"},
		{"github.com_2024.txt", "Googlebot", "/golang/go", true, "no matching rule"},
		{"github.com_2024.txt", "Googlebot", "/golang/go.git", false, "disallow: /*.git$ (line 37)"},
		{"github.com_2024.txt", "Googlebot", "/golang/go.github.io", true, "no matching rule"},
		{"github.com_2024.txt", "baidu", "/golang/go/pulse", false, "disallow: /*/*/pulse (line 9)"},
		// CNN: one group for a list of AI crawlers; everyone else gets "*".
		{"www.cnn.com_2024.txt", "GPTBot", "/2024/05/01/politics/story/index.html", false, "disallow: / (line 41)"},
		{"www.cnn.com_2024.txt", "gptbot", "/", false, "disallow: / (line 41)"},
		{"www.cnn.com_2024.txt", "Googlebot", "/2024/05/01/politics/story/index.html", true, "no matching rule"},
		{"www.cnn.com_2024.txt", "Googlebot", "/app/main.jsx", false, "disallow: /*.jsx$ (line 44)"},
		// ai.robots.txt's block list, with multi-word names.
		{"ai.robots.txt-generated.txt", "ClaudeBot", "/", false, "disallow: / (line 167)"},
		{"ai.robots.txt-generated.txt", "Linguee", "/", false, "disallow: / (line 167)"},
		{"ai.robots.txt-generated.txt", "Googlebot", "/", true, "no group applies"},
	} {
		body, ok := files[c.file]
		if !ok {
			t.Fatalf("corpus file %s is missing", c.file)
		}
		v := Parser{}.Parse(body).Check(c.token, c.path)
		if v.Allowed != c.allowed || v.Reason() != c.reason {
			t.Errorf("%s: Check(%q, %q) = %v %q, want %v %q", c.file, c.token, c.path, v.Allowed, v.Reason(), c.allowed, c.reason)
		}
	}
	if p, ok := (Parser{}).Parse(files["github.com_2024.txt"]).Pace("baidu"); !ok || p.Interval != time.Second || p.Rule() != "Crawl-delay: 1" {
		t.Errorf("github baidu pace = %+v %v, want Crawl-delay: 1", p, ok)
	}
}
