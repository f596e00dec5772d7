package integration

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines bounds README.md: it holds what a user needs in the first
// hour, and each manual lives beside its code as that package's README.md.
const readmeMaxLines = 300

// TestReadmeFirstHour keeps README.md short and its test command first:
// .ci/run runs the first line that starts with "go test ".
func TestReadmeFirstHour(t *testing.T) {
	readme := readFile(t, "README.md")
	if n := strings.Count(readme, "\n"); n >= readmeMaxLines {
		t.Errorf("README.md has %d lines, want fewer than %d: move the detail to the manual of the package it describes", n, readmeMaxLines)
	}
	for line := range strings.Lines(readme) {
		if strings.HasPrefix(line, "go test ") {
			if got, want := strings.TrimSpace(line), "go test -race ./..."; got != want {
				t.Errorf("README.md's first go test line is %q, want %q (.ci/run runs it)", got, want)
			}
			return
		}
	}
	t.Error(`README.md has no line starting with "go test " (.ci/run runs the first)`)
}

// TestManualLinks checks every relative link of README.md and of every
// package's README.md: its target exists in the repository, and an
// anchor names a heading of the target, as a forge renders it. Every
// manual is linked from README.md, so none is out of a reader's reach.
func TestManualLinks(t *testing.T) {
	manuals := readmes(t)
	headings := make(map[string][]string) // file → its anchors
	for _, m := range manuals {
		headings[m] = anchors(readFile(t, m))
	}
	linked := make(map[string]bool)
	for _, m := range manuals {
		for _, target := range links(readFile(t, m)) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			if file == "" {
				file = m
			} else {
				file = path.Join(path.Dir(m), file)
			}
			if file == ".." || strings.HasPrefix(file, "../") {
				t.Errorf("%s links to %s, outside the repository", m, target)
				continue
			}
			if _, err := os.Stat(filepath.Join("..", filepath.FromSlash(file))); err != nil {
				t.Errorf("%s links to %s, which does not exist: %v", m, target, err)
				continue
			}
			if m == "README.md" {
				linked[file] = true
			}
			if anchor == "" {
				continue
			}
			known, ok := headings[file]
			if !ok {
				known = anchors(readFile(t, file))
			}
			if !slices.Contains(known, anchor) {
				t.Errorf("%s links to %s, but %s has no heading whose anchor is #%s (it has %v)", m, target, file, anchor, known)
			}
		}
	}
	for _, m := range manuals {
		if m != "README.md" && !strings.Contains(m, "/testdata/") && !linked[m] {
			t.Errorf("README.md does not link to the manual %s", m)
		}
	}
}

// TestReadmeSettingsDefaults checks README.md's short table of the
// settings that matter against config/README.md's table of every setting
// (which config's tests check against the code).
func TestReadmeSettingsDefaults(t *testing.T) {
	all := settingDefaults(readFile(t, filepath.Join("config", "README.md")))
	some := settingDefaults(readFile(t, "README.md"))
	if len(some) == 0 {
		t.Fatal("README.md has no table of settings")
	}
	for name, def := range some {
		want, ok := all[name]
		switch {
		case !ok:
			t.Errorf("README.md lists %s, which config/README.md does not", name)
		case def != want:
			t.Errorf("README.md gives %s the default %q; config/README.md says %q", name, def, want)
		}
	}
}

// readmes lists README.md and every README.md below it, slash-separated.
func readmes(t *testing.T) []string {
	t.Helper()
	var found []string
	// The repository's root, one up from this package.
	err := fs.WalkDir(os.DirFS(".."), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != ".":
			return filepath.SkipDir
		case !d.IsDir() && d.Name() == "README.md":
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(found, "README.md") {
		t.Fatal("no README.md at the repository's root")
	}
	return found
}

// readFile reads a file by its slash-separated path from the repository's root.
func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

var (
	// linkTarget finds the target of an inline link or image, "](target"
	// up to a space or ")": the outer link of [![alt](img)](target) too.
	linkTarget = regexp.MustCompile(`\]\(([^)\s]+)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
)

// prose returns the lines of a Markdown text outside fenced code blocks,
// with code spans removed: neither holds links.
func prose(text string) []string {
	var lines []string
	fenced := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			lines = append(lines, line)
		}
	}
	return lines
}

func links(text string) []string {
	var targets []string
	for _, line := range prose(text) {
		for _, m := range linkTarget.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			targets = append(targets, m[1])
		}
	}
	return targets
}

// anchors lists the anchors a forge gives a Markdown text's headings:
// lower case, letters, digits, '-' and '_' kept, spaces made '-', the
// rest dropped; a repeated one gets "-1", "-2", ...
func anchors(text string) []string {
	var found []string
	seen := make(map[string]int)
	for _, line := range prose(text) {
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(title)) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		anchor := b.String()
		if n := seen[anchor]; n > 0 {
			seen[anchor]++
			anchor += "-" + strconv.Itoa(n)
		} else {
			seen[anchor] = 1
		}
		found = append(found, anchor)
	}
	return found
}

// settingDefaults reads a Markdown table whose first column is a
// ROBOTSGATE_ variable and whose second its default.
func settingDefaults(text string) map[string]string {
	defaults := make(map[string]string)
	for line := range strings.Lines(text) {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`ROBOTSGATE_") {
			continue
		}
		defaults[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.Trim(strings.TrimSpace(cells[2]), "`")
	}
	return defaults
}
