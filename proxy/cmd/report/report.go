// Package report is the "robotsgate report" command: it reads audit logs
// and tells an auditor which crawlers came, what they tried that
// robots.txt forbids, on which origins and rules, and when robots.txt
// failed, as text, JSON or a self-contained HTML page.
package report

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"robotsgate/proxy/audit/report"
)

// Exit statuses.
const (
	ExitOK = 0
	// ExitIncomplete: a log could not be read to its end; the report was
	// written from what was read, and says which.
	ExitIncomplete = 1
	// ExitUsage: a usage error, a log that cannot be opened, or no log
	// at all to read (every pattern matched nothing); nothing was written.
	ExitUsage = 2
	// ExitInterrupted: the context ended (Ctrl-C); nothing was written.
	ExitInterrupted = 130
)

// Env is what the command reads and writes.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Now            func() time.Time // the clock -since 24h counts back from
}

const usage = `usage: robotsgate report [-format text|json|html] [-o FILE] [-since T] [-until T]
                         [-token T] [-origin O] [-top N] [AUDIT.jsonl[.gz] ...]

Reads robotsgate audit logs (standard input when no file is given; gzip is
read transparently; several files are one log, as after rotation) and
reports per crawler (its credential, else its product token), per origin,
the top refused rules and URLs, incidents (robots.txt failing, origins
holding requests back) and the timeline; when the operator's policy
(ROBOTSGATE_POLICY) shows in the log, its refusals apart from robots.txt's,
every exception used and the policy versions in force; when sites' usage
preferences show in it, what they refused, withheld or would have, per
crawler and per preference, and the preferences each origin states.

T is a time: 2026-11-25T10:00:00Z (RFC 3339), 2026-11-25 10:00, or
2026-11-25 (local time without a zone), or a duration back from now: 90m,
24h, 7d. -since is inclusive, -until exclusive. -token and -origin may be
repeated or hold several values separated by commas; an origin is a whole
origin (https://example.com) or a host (example.com, example.com:8443).

A name that is no file but holds *, ? or [ is a pattern: the report reads
the files it matches (as a shell would) and skips it, with a note, when it
matches none, so "audit.log*.gz audit.log" works before the first rotation.

Malformed lines are counted and listed (the first few), never fatal; a cut
last line (a log being written) is ignored.
Exit status: 0 done, 1 a log could not be read to its end (the report
covers what was read), 2 usage error, a log that cannot be opened or no
log at all to read (nothing written), 130 interrupted.

Flags:
`

// Formats the command writes.
var formats = map[string]func(io.Writer, *report.Report) error{
	"text": report.WriteText,
	"json": report.WriteJSON,
	"html": report.WriteHTML,
}

// Run runs the command with args (after "report") and returns the exit
// status.
func Run(ctx context.Context, args []string, env Env) int {
	flags := flag.NewFlagSet("robotsgate report", flag.ContinueOnError)
	flags.SetOutput(env.Stderr)
	format := flags.String("format", "", "text, json or html (default: from -o's extension, else text)")
	out := flags.String("o", "", "write the report to FILE instead of standard output")
	since := flags.String("since", "", "count records from this time on (inclusive)")
	until := flags.String("until", "", "count records before this time")
	var tokens, origins listFlag
	flags.Var(&tokens, "token", "count only this crawler: a product token or a credential name")
	flags.Var(&origins, "origin", "count only this origin or host")
	top := flags.Int("top", report.DefaultTop, "how many rules, URLs and usage refusals the top lists show")
	flags.Usage = func() {
		fmt.Fprint(env.Stderr, usage)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(env.Stderr, "robotsgate report: "+format+"\n", args...)
		return ExitUsage
	}
	if *format == "" {
		*format = formatOf(*out)
	}
	write, ok := formats[strings.ToLower(*format)]
	if !ok {
		return fail("-format %q is not one of text, json, html", *format)
	}
	if *top < 1 {
		return fail("-top %d: want at least 1", *top)
	}
	now := time.Now
	if env.Now != nil {
		now = env.Now
	}
	opts := report.Options{Top: *top, Now: now(), Filter: report.Filter{Tokens: tokens, Origins: origins}}
	var err error
	if opts.Filter.Since, err = parseTime(*since, opts.Now); err != nil {
		return fail("-since: %v", err)
	}
	if opts.Filter.Until, err = parseTime(*until, opts.Now); err != nil {
		return fail("-until: %v", err)
	}
	if !opts.Filter.Since.IsZero() && !opts.Filter.Until.IsZero() && !opts.Filter.Until.After(opts.Filter.Since) {
		return fail("-until (%s) is not after -since (%s)", opts.Filter.Until.Format(time.RFC3339), opts.Filter.Since.Format(time.RFC3339))
	}

	// Every log is opened before any is read: a typo fails at once.
	names := flags.Args()
	if len(names) == 0 {
		names = []string{"-"}
	} else {
		var err error
		if names, err = expand(names, env.Stderr); err != nil {
			return fail("%v", err)
		}
		if len(names) == 0 {
			return fail("no log to read: no pattern matched a file; no report written")
		}
	}
	sources := make([]io.ReadCloser, len(names))
	for i, name := range names {
		if name == "-" {
			sources[i] = io.NopCloser(env.Stdin)
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			closeAll(sources)
			return fail("%v", err)
		}
		sources[i] = f
	}
	defer closeAll(sources)

	status := ExitOK
	rd := report.NewReader(opts)
	for i, name := range names {
		if err := rd.Read(ctx, name, sources[i]); err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(env.Stderr, "robotsgate report: interrupted; no report written")
				return ExitInterrupted
			}
			fmt.Fprintf(env.Stderr, "robotsgate report: %v; the report covers what was read before\n", err)
			status = ExitIncomplete
		}
	}
	rep := rd.Report()
	if rep.Malformed > 0 {
		fmt.Fprintf(env.Stderr, "robotsgate report: %s skipped (listed in the report)\n", report.Plural(rep.Malformed, "malformed line", "malformed lines"))
	}
	if err := writeReport(*out, env.Stdout, rep, write); err != nil {
		fmt.Fprintf(env.Stderr, "robotsgate report: %v\n", err)
		return ExitIncomplete
	}
	return status
}

// expand replaces each argument that names no file but holds a glob
// pattern (*, ? or [) by the files it matches, and drops it, with a note,
// when it matches none: "audit.log*.gz audit.log" must work before the
// first rotation, when a shell passes the pattern on unmatched, and where
// no shell expands patterns at all. A plain name that does not exist is
// left for os.Open to report.
func expand(args []string, notes io.Writer) ([]string, error) {
	var names []string
	seen := make(map[string]bool)
	add := func(name string) {
		// A log named twice (a pattern and its plain name) would count twice.
		if key := filepath.Clean(name); name == "-" || !seen[key] {
			seen[key] = true
			names = append(names, name)
		} else {
			fmt.Fprintf(notes, "robotsgate report: %s named again; read once\n", name)
		}
	}
	for _, arg := range args {
		if arg == "-" || !strings.ContainsAny(arg, "*?[") {
			add(arg)
			continue
		}
		if _, err := os.Lstat(arg); !errors.Is(err, fs.ErrNotExist) {
			add(arg) // a file of that very name, or one os.Open will explain
			continue
		}
		matches, err := filepath.Glob(arg)
		if err != nil {
			return nil, fmt.Errorf("%s: no such file, nor a valid pattern: %w", arg, err)
		}
		found := 0
		for _, m := range matches {
			// As a shell would: no hidden files (editor swap files, the
			// temporary files of -o) unless the pattern asks for them, and
			// no directories, which hold no log.
			if strings.HasPrefix(filepath.Base(m), ".") && !strings.HasPrefix(filepath.Base(arg), ".") {
				continue
			}
			if fi, err := os.Stat(m); err == nil && fi.IsDir() {
				continue
			}
			found++
			add(m)
		}
		if found == 0 {
			fmt.Fprintf(notes, "robotsgate report: no file matches %s; skipped\n", arg)
		}
	}
	return names, nil
}

func closeAll(sources []io.ReadCloser) {
	for _, s := range sources {
		if s != nil {
			s.Close()
		}
	}
}

// formatOf guesses the format from the output file's extension.
func formatOf(out string) string {
	switch strings.ToLower(filepath.Ext(out)) {
	case ".html", ".htm":
		return "html"
	case ".json":
		return "json"
	}
	return "text"
}

// writeReport writes to standard output, or to a file replaced whole:
// the report is written beside it and renamed over it, so a reader of the
// file never sees half a report.
func writeReport(out string, stdout io.Writer, rep *report.Report, write func(io.Writer, *report.Report) error) error {
	if out == "" || out == "-" {
		return write(stdout, rep)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
	if err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if err := write(tmp, rep); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("-o: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	return nil
}

// listFlag gathers a repeatable flag's values, commas separating several.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, part)
		}
	}
	return nil
}

// timeLayouts are the ways a time may be given, the first with its zone.
var timeLayouts = []string{"2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02"}

// parseTime reads a -since or -until value; "" is no bound.
func parseTime(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	for _, layout := range timeLayouts {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t, nil
		}
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		if n, err := strconv.ParseUint(days, 10, 16); err == nil {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time (2026-11-25T10:00:00Z, 2026-11-25 10:00, 2026-11-25) nor a duration back from now (90m, 24h, 7d)", v)
}
