package report

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	_ "time/tzdata" // the zone of TestParseTimeElsewhere, wherever the tests run

	"robotsgate/proxy/audit/report"
)

// now is the clock of these runs.
var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// logOf is n audit records, one a minute from 10:00, alternately of
// GPTBot and bingbot, one in four refused.
func logOf(n int) []byte {
	var b strings.Builder
	for i := range n {
		token, verdict, forwarded := "GPTBot", "allow", true
		if i%2 == 1 {
			token = "bingbot"
		}
		if i%4 == 3 {
			verdict, forwarded = "disallow", false
		}
		fmt.Fprintf(&b, `{"time":%q,"url":"https://example.com/%d","user_agent":"%s/1.0","token":%q,"verdict":%q,"origin":"https://example.com","robots_outcome":"ok","mode":"enforce","forwarded":%v,"status":200,"bytes":10,"duration_ms":1}`+"\n",
			now.Add(-2*time.Hour+time.Duration(i)*time.Minute).Format(time.RFC3339), i, token, token, verdict, forwarded)
	}
	return []byte(b.String())
}

func run(t *testing.T, ctx context.Context, stdin []byte, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(ctx, args, Env{Stdin: bytes.NewReader(stdin), Stdout: &out, Stderr: &errOut, Now: func() time.Time { return now }})
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func decode(t *testing.T, data []byte) *report.Report {
	t.Helper()
	var rep report.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("not a JSON report: %v\n%s", err, data)
	}
	return &rep
}

func TestParseTime(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Time
	}{
		{"", time.Time{}},
		{"2026-11-25T10:00:00Z", time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)},
		{"2026-11-25T10:00:00.5+02:00", time.Date(2026, 11, 25, 8, 0, 0, 5e8, time.UTC)},
		{"2026-11-25", time.Date(2026, 11, 25, 0, 0, 0, 0, time.Local)},
		{"2026-11-25 10:00", time.Date(2026, 11, 25, 10, 0, 0, 0, time.Local)},
		{"2026-11-25T10:00", time.Date(2026, 11, 25, 10, 0, 0, 0, time.Local)},
		{"2026-11-25 10:00:30", time.Date(2026, 11, 25, 10, 0, 30, 0, time.Local)},
		{"90m", now.Add(-90 * time.Minute)},
		{"24h", now.Add(-24 * time.Hour)},
		{"1h30m", now.Add(-90 * time.Minute)},
		{"7d", now.Add(-7 * 24 * time.Hour)},
		{"0d", now},
	} {
		got, err := parseTime(c.in, now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	// In the child of TestParseTimeElsewhere, local time is not UTC:
	// a time without a zone must be read as local.
	if os.Getenv("TZ") == elsewhere {
		if _, offset := time.Date(2026, 11, 25, 0, 0, 0, 0, time.Local).Zone(); offset != 5*3600+45*60 {
			t.Fatalf("TZ=%s gives a local offset of %ds", elsewhere, offset)
		}
		if got, _ := parseTime("2026-11-25", now); !got.Equal(time.Date(2026, 11, 24, 18, 15, 0, 0, time.UTC)) {
			t.Errorf("2026-11-25 in %s is %v", elsewhere, got.UTC())
		}
	}
	for _, junk := range []string{"yesterday", "-5m", "0s", "d", "7 d", "1.5d", "2026-13-01", "2026-11-25 25:00", "10:00", "99999999d"} {
		_, err := parseTime(junk, now)
		if err == nil {
			t.Errorf("parseTime(%q) succeeded", junk)
			continue
		}
		for _, form := range []string{junk, "2026-11-25T10:00:00Z", "2026-11-25 10:00", "2026-11-25", "90m", "24h", "7d"} {
			if !strings.Contains(err.Error(), form) {
				t.Errorf("parseTime(%q): %q does not say %q", junk, err, form)
			}
		}
	}
}

// elsewhere is a zone far from UTC, by a fraction of an hour.
const elsewhere = "Asia/Kathmandu"

// TestParseTimeElsewhere runs TestParseTime where local time is not UTC,
// in a child process: the zone is read once, from TZ, at start.
func TestParseTimeElsewhere(t *testing.T) {
	if os.Getenv("TZ") == elsewhere {
		t.Skip("the child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestParseTime$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TZ="+elsewhere)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestParseTime") {
		t.Errorf("TestParseTime with TZ=%s: %v\n%s", elsewhere, err, out)
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	log := writeFile(t, dir, "audit.jsonl", logOf(10))
	missing := filepath.Join(dir, "nosuch.jsonl")
	for _, c := range []struct {
		name string
		args []string
		say  string // in the error
	}{
		{"since not before until", []string{"-since", "2026-11-25T10:00:00Z", "-until", "2026-11-25T09:00:00Z", log}, "-until"},
		{"since equals until", []string{"-since", "2026-11-25T10:00:00Z", "-until", "2026-11-25T10:00:00Z", log}, "is not after -since"},
		{"since, a duration, after until", []string{"-since", "1h", "-until", "2h", log}, "is not after -since"},
		{"bad since", []string{"-since", "soon", log}, `-since: "soon" is not a time`},
		{"bad until", []string{"-until", "later", log}, `-until: "later" is not a time`},
		{"unknown format", []string{"-format", "xml", log}, `-format "xml"`},
		{"top 0", []string{"-top", "0", log}, "-top 0"},
		{"top negative", []string{"-top", "-3", log}, "-top -3"},
		{"unknown flag", []string{"-follow", log}, "-follow"},
		{"missing file", []string{log, missing}, missing},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := run(t, context.Background(), nil, c.args...)
			if code != ExitUsage || out != "" || !strings.Contains(errOut, c.say) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d saying %q", code, out, errOut, ExitUsage, c.say)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		code, out, errOut := run(t, context.Background(), nil, arg)
		if code != ExitOK || out != "" || !strings.Contains(errOut, "usage: robotsgate report") || !strings.Contains(errOut, "-since") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", arg, code, out, errOut)
		}
	}
}

func TestStdin(t *testing.T) {
	code, out, errOut := run(t, context.Background(), logOf(8), "-format", "JSON")
	if code != ExitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	rep := decode(t, []byte(out))
	if rep.Records != 8 || len(rep.Sources) != 1 || rep.Sources[0].Name != "-" || !rep.Generated.Equal(now) {
		t.Errorf("%d records, sources %+v, generated %v", rep.Records, rep.Sources, rep.Generated)
	}
	// "-" among files is standard input too.
	dir := t.TempDir()
	code, out, _ = run(t, context.Background(), logOf(8), "-format", "json", writeFile(t, dir, "a.jsonl", logOf(2)), "-")
	if rep := decode(t, []byte(out)); code != ExitOK || rep.Records != 10 || rep.Sources[1].Name != "-" {
		t.Errorf("exit %d, %d records, sources %+v", code, rep.Records, rep.Sources)
	}
}

func TestFilterFlags(t *testing.T) {
	code, out, errOut := run(t, context.Background(), logOf(120),
		"-format", "json", "-token", "a,b", "-token", " c ,, GPTBOT", "-origin", "example.com", "-since", "90m", "-until", "2026-11-25T11:00:00Z")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	rep := decode(t, []byte(out))
	want := report.Filter{Tokens: []string{"a", "b", "c", "GPTBOT"}, Origins: []string{"example.com"},
		Since: now.Add(-90 * time.Minute), Until: time.Date(2026, 11, 25, 11, 0, 0, 0, time.UTC)}
	if !reflect.DeepEqual(rep.Filter.Tokens, want.Tokens) || !reflect.DeepEqual(rep.Filter.Origins, want.Origins) ||
		!rep.Filter.Since.Equal(want.Since) || !rep.Filter.Until.Equal(want.Until) {
		t.Errorf("filter %+v, want %+v", rep.Filter, want)
	}
	// GPTBot's records from 10:30 to 10:59, one in two minutes.
	if rep.Records != 15 || rep.FilteredOut != 105 {
		t.Errorf("%d records, %d filtered out; want 15, 105", rep.Records, rep.FilteredOut)
	}
}

func TestTop(t *testing.T) {
	code, out, _ := run(t, context.Background(), logOf(40), "-format", "json", "-top", "3")
	if rep := decode(t, []byte(out)); code != ExitOK || len(rep.TopPaths) != 3 {
		t.Errorf("exit %d, %d top paths, want 3", code, len(rep.TopPaths))
	}
}

func TestOutputFile(t *testing.T) {
	dir := t.TempDir()
	log := writeFile(t, dir, "audit.jsonl", logOf(10))
	out := filepath.Join(dir, "out", "report.json")
	if err := os.Mkdir(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	// An earlier report, which the new one replaces whole: one reading
	// it meanwhile reads the old one to its end.
	old := bytes.Repeat([]byte("old report\n"), 10_000)
	if err := os.WriteFile(out, old, 0o600); err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	code, stdout, errOut := run(t, context.Background(), nil, "-o", out, log)
	if code != ExitOK || stdout != "" || errOut != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, errOut)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if rep := decode(t, data); rep.Records != 10 { // JSON, from the name
		t.Errorf("%d records", rep.Records)
	}
	if was, err := io.ReadAll(reader); err != nil || !bytes.Equal(was, old) {
		t.Errorf("the report being read was changed in place: %.40q, %v", was, err)
	}
	entries, err := os.ReadDir(filepath.Dir(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "report.json" {
		t.Errorf("the directory holds %v, want only report.json", entries)
	}
	info, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", info.Mode().Perm())
	}

	for name, want := range map[string]string{"r.html": "<!DOCTYPE html>", "r.HTM": "<!DOCTYPE html>", "r.txt": "robotsgate compliance report", "r": "robotsgate compliance report"} {
		path := filepath.Join(dir, name)
		if code, _, errOut := run(t, context.Background(), nil, "-o", path, log); code != ExitOK {
			t.Fatalf("-o %s: exit %d, %s", name, code, errOut)
		}
		if data, _ := os.ReadFile(path); !strings.HasPrefix(string(data), want) {
			t.Errorf("-o %s starts %.40q, want %q", name, data, want)
		}
	}
	// -format wins over the name.
	path := filepath.Join(dir, "r.json")
	if code, _, _ := run(t, context.Background(), nil, "-format", "text", "-o", path, log); code != ExitOK {
		t.Fatal(code)
	}
	if data, _ := os.ReadFile(path); !strings.HasPrefix(string(data), "robotsgate compliance report") {
		t.Errorf("-format text -o r.json wrote %.40q", data)
	}
}

func TestOutputFileFails(t *testing.T) {
	dir := t.TempDir()
	log := writeFile(t, dir, "audit.jsonl", logOf(10))
	out := filepath.Join(dir, "nosuch", "report.json")
	code, stdout, errOut := run(t, context.Background(), nil, "-o", out, log)
	if code != ExitIncomplete || stdout != "" || !strings.Contains(errOut, "-o") || !strings.Contains(errOut, filepath.Join(dir, "nosuch")) {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and why", code, stdout, errOut, ExitIncomplete)
	}
}

func TestCutGzip(t *testing.T) {
	dir := t.TempDir()
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(logOf(2000))
	zw.Close()
	cut := writeFile(t, dir, "audit.jsonl.1.gz", z.Bytes()[:z.Len()/2])
	whole := writeFile(t, dir, "audit.jsonl", logOf(10))
	out := filepath.Join(dir, "report.json")
	code, _, errOut := run(t, context.Background(), nil, "-o", out, cut, whole)
	if code != ExitIncomplete || !strings.Contains(errOut, cut) || !strings.Contains(errOut, "the report covers what was read") {
		t.Errorf("exit %d, stderr %q; want exit %d", code, errOut, ExitIncomplete)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no report written: %v", err)
	}
	rep := decode(t, data)
	if len(rep.Sources) != 2 || rep.Sources[0].Error == "" || !rep.Sources[0].Gzip || rep.Sources[1].Error != "" {
		t.Errorf("sources %+v", rep.Sources)
	}
	if rep.Records <= 10 || rep.Records >= 2010 {
		t.Errorf("%d records, want those before the cut and the 10 after", rep.Records)
	}
}

func TestMalformedLinesAreNoFailure(t *testing.T) {
	for junk, say := range map[string]string{
		"junk\n":            "robotsgate report: 1 malformed line skipped (listed in the report)\n",
		"junk\n{\n":         "robotsgate report: 2 malformed lines skipped (listed in the report)\n",
		"junk\n{\n[]\n42\n": "robotsgate report: 4 malformed lines skipped (listed in the report)\n",
	} {
		code, out, errOut := run(t, context.Background(), append(logOf(3), junk...))
		if code != ExitOK || errOut != say || !strings.Contains(out, "-:4: ") {
			t.Errorf("exit %d, stderr %q, want %q; stdout:\n%s", code, errOut, say, out)
		}
	}
}

// endless is a log that never ends.
type endless struct {
	line []byte
	at   int
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], e.line[e.at:])
		e.at = (e.at + k) % len(e.line)
		n += k
	}
	return n, nil
}

func TestInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	out := filepath.Join(dir, "report.json")
	var stdout, stderr bytes.Buffer
	code := Run(ctx, []string{"-o", out}, Env{Stdin: &endless{line: logOf(1)}, Stdout: &stdout, Stderr: &stderr})
	if code != ExitInterrupted || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a report was written: %v", err)
	}
}

// Without Env.Now, durations count back from the clock: synctest's,
// which stands still, so the test knows the instant.
func TestSinceFromTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out, errOut bytes.Buffer
		code := Run(t.Context(), []string{"-format", "json", "-since", "90m"}, Env{Stdin: bytes.NewReader(logOf(1)), Stdout: &out, Stderr: &errOut})
		if code != ExitOK {
			t.Fatalf("exit %d, %s", code, errOut.String())
		}
		rep := decode(t, out.Bytes())
		if want := time.Now().Add(-90 * time.Minute); !rep.Filter.Since.Equal(want) || !rep.Generated.Equal(time.Now()) {
			t.Errorf("since %v, generated %v; want %v and %v", rep.Filter.Since, rep.Generated, want, time.Now())
		}
	})
}

// TestPatterns: a name that is no file but a pattern is expanded here, as
// a shell would, and skipped with a note when it matches nothing, so that
// the logrotate example's "audit.log*.gz audit.log" works before the
// first rotation; a plain name that is no file stays an error.
func TestPatterns(t *testing.T) {
	dir := t.TempDir()
	current := writeFile(t, dir, "audit.log", logOf(4))
	literal := writeFile(t, dir, "odd*name[1].log", logOf(1)) // a file whose name is a pattern
	rotatedDir := t.TempDir()
	rotated := []string{
		writeFile(t, rotatedDir, "audit.log.1.gz", gzipOf(t, logOf(2))),
		writeFile(t, rotatedDir, "audit.log.2.gz", gzipOf(t, logOf(3))),
	}
	hiddenDir := t.TempDir()
	visible := writeFile(t, hiddenDir, "audit.log", logOf(1))
	writeFile(t, hiddenDir, ".audit.log.swp", logOf(5))
	if err := os.Mkdir(filepath.Join(hiddenDir, "audit.log.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		args    []string
		code    int
		sources []string // read, in order
		stderr  []string // each in it, in order
	}{
		{
			name: "unmatched pattern before a log", args: []string{filepath.Join(dir, "audit.log*.gz"), current},
			sources: []string{current}, stderr: []string{"no file matches " + filepath.Join(dir, "audit.log*.gz") + "; skipped\n"},
		},
		{
			name: "pattern no shell expanded", args: []string{filepath.Join(rotatedDir, "audit.log.?.gz"), current},
			sources: append(slices.Clone(rotated), current),
		},
		{name: "a file named like a pattern", args: []string{literal}, sources: []string{literal}},
		{
			name: "a log named by a pattern and by its name", args: []string{filepath.Join(dir, "audit.l[o]g"), current, dir + "/./audit.log"},
			sources: []string{current}, stderr: []string{current + " named again; read once\n", dir + "/./audit.log named again; read once\n"},
		},
		{
			name: "no hidden files, no directories", args: []string{filepath.Join(hiddenDir, "*")},
			sources: []string{visible},
		},
		{
			name: "nothing left to read", args: []string{filepath.Join(dir, "*.gz"), filepath.Join(dir, "old-[0-9]")}, code: ExitUsage,
			stderr: []string{"no file matches " + filepath.Join(dir, "*.gz"), "no file matches " + filepath.Join(dir, "old-[0-9]"), "no log to read"},
		},
		{
			name: "no such file", args: []string{filepath.Join(dir, "audit.log.1"), current}, code: ExitUsage,
			stderr: []string{filepath.Join(dir, "audit.log.1") + ": no such file"},
		},
		{
			name: "no such file, and a bad pattern", args: []string{filepath.Join(dir, "audit[.log"), current}, code: ExitUsage,
			stderr: []string{filepath.Join(dir, "audit[.log") + ": no such file, nor a valid pattern"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "report.json")
			code, stdout, stderr := run(t, context.Background(), nil, append([]string{"-o", out}, c.args...)...)
			if code != c.code || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d", code, stdout, stderr, c.code)
			}
			rest := stderr
			for _, want := range c.stderr {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Fatalf("stderr %q does not say %q (in order)", stderr, want)
				}
				rest = rest[i+len(want):]
			}
			if c.code != ExitOK {
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Errorf("a report was written (%v)", err)
				}
				return
			}
			if strings.Count(stderr, "\n") != len(c.stderr) {
				t.Errorf("stderr %q, want %d lines", stderr, len(c.stderr))
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range decode(t, data).Sources {
				got = append(got, s.Name)
			}
			if !slices.Equal(got, c.sources) {
				t.Errorf("read %q, want %q", got, c.sources)
			}
		})
	}
}

func gzipOf(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
