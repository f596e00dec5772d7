package robots

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"
)

const corpusDir = "data/robots-corpus"

// corpusFiles returns every robots.txt body of the shared corpus by name.
func corpusFiles(tb testing.TB) map[string][]byte {
	tb.Helper()
	readShared(tb, "data/README.md") // skips when shared/ is absent
	paths, err := filepath.Glob(filepath.Join(sharedDir, corpusDir, "*.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	files := make(map[string][]byte)
	for _, p := range paths {
		if filepath.Base(p) == "SOURCES.md" {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		files[filepath.Base(p)] = data
	}
	if len(files) < 200 {
		tb.Fatalf("found only %d corpus files in %s", len(files), corpusDir)
	}
	return files
}

func TestCorpusParses(t *testing.T) {
	paths := []string{"/", "/robots.txt", "/wiki/Main_Page", "/search?q=x", "/a/b/c.html", "/%E3%83%84", "/ü?x=%2F"}
	tokens := []string{"Googlebot", "bingbot", "GPTBot", "MJ12bot", "", "*"}
	var truncated []string
	for name, body := range corpusFiles(t) {
		r := Parse(body)
		if r.Truncated() {
			truncated = append(truncated, name)
		}
		if r.ParsedBytes() > DefaultMaxBytes || r.RetainedBytes() <= 0 {
			t.Errorf("%s: parsed %d bytes, retains %d", name, r.ParsedBytes(), r.RetainedBytes())
		}
		for _, token := range tokens {
			for _, path := range paths {
				v := r.Check(token, path)
				if v.Cause == CauseRule && v.Rule == nil {
					t.Errorf("%s: %q %q: rule verdict without a rule", name, token, path)
				}
			}
		}
	}
	sort.Strings(truncated)
	// The corpus has three bodies over 500 KiB (SOURCES.md): one real rule
	// file and two HTML pages.
	if want := []string{"docs.oracle.com.txt", "go.com.txt", "www.hermes.com.txt"}; !slices.Equal(truncated, want) {
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
		v := Parse(body).Check(c.token, c.path)
		if v.Allowed != c.allowed || v.Reason() != c.reason {
			t.Errorf("%s: Check(%q, %q) = %v %q, want %v %q", c.file, c.token, c.path, v.Allowed, v.Reason(), c.allowed, c.reason)
		}
	}
	if d, ok := Parse(files["github.com_2024.txt"]).CrawlDelay("baidu"); !ok || d != time.Second {
		t.Errorf("github baidu crawl-delay = %v %v, want 1s", d, ok)
	}
}
