package live

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// doc is what the test loader builds: the file's text. A line "broken"
// does not load.
type doc struct{ text string }

// loader is a Load function that counts its calls.
type loader struct{ calls atomic.Int64 }

func (l *loader) load(path string, data []byte) (*doc, error) {
	l.calls.Add(1)
	n := 0
	for line := range strings.Lines(string(data)) {
		n++
		if strings.TrimSpace(line) == "broken" {
			return nil, fmt.Errorf("%s:%d: broken line\n%s:%d: and a second problem", path, n, path, n)
		}
	}
	return &doc{text: string(data)}, nil
}

// syncBuffer collects log output from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// count is how many log lines contain every one of want.
func (b *syncBuffer) count(want ...string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for line := range strings.Lines(b.buf.String()) {
		all := true
		for _, w := range want {
			all = all && strings.Contains(line, w)
		}
		if all {
			n++
		}
	}
	return n
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func write(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// overwrite writes text over the file at path, in place and without
// truncating it first (as os.WriteFile does), so that a reader sees the old
// bytes or the new ones, never an empty file.
func overwrite(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(text), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(len(text))); err != nil {
		t.Fatal(err)
	}
}

// replace puts text at path the way editors and configuration tools do:
// written beside it, then renamed over it.
func replace(t testing.TB, path, text string) {
	t.Helper()
	next := path + ".next"
	write(t, next, text)
	if err := os.Rename(next, path); err != nil {
		t.Fatal(err)
	}
}

func versionOf(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])[:12]
}

type fixture struct {
	path string
	file *File[*doc]
	load *loader
	logs *syncBuffer
}

// newFixture writes text to a policy file and loads it.
func newFixture(t *testing.T, text string, tweak ...func(*Options[*doc])) *fixture {
	t.Helper()
	fx := &fixture{path: filepath.Join(t.TempDir(), "policy.yaml"), load: &loader{}, logs: &syncBuffer{}}
	write(t, fx.path, text)
	opts := Options[*doc]{
		Name:   "policy",
		Path:   fx.path,
		Load:   fx.load.load,
		Attrs:  func(d *doc) []any { return []any{"bytes", len(d.text)} },
		Logger: slog.New(slog.NewJSONHandler(fx.logs, nil)),
	}
	for _, f := range tweak {
		f(&opts)
	}
	f, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	fx.file = f
	return fx
}

// watch runs Watch every 10 ms until the test ends.
func (fx *fixture) watch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		fx.file.Watch(ctx, 10*time.Millisecond)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitFor polls cond every 10 ms for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("after 5s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func reloads(f prometheus.Collector, result string) float64 {
	return testutil.ToFloat64(f.(*File[*doc]).reloads.WithLabelValues(result))
}

func TestNew(t *testing.T) {
	t.Parallel()
	before := time.Now()
	fx := newFixture(t, "one\n")
	if got := fx.file.Current().text; got != "one\n" {
		t.Errorf("Current = %q", got)
	}
	s := fx.file.State()
	if s.Name != "policy" || s.Path != fx.path || s.Version != versionOf("one\n") || s.Err != nil || s.Loaded.Before(before) {
		t.Errorf("State = %+v, want version %s loaded since %v", s, versionOf("one\n"), before)
	}

	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.yaml")
	write(t, broken, "ok\nbroken\n")
	big := filepath.Join(dir, "big.yaml")
	write(t, big, strings.Repeat("x", 17))
	for _, c := range []struct {
		name string
		opts Options[*doc]
		want string
	}{
		{"missing", Options[*doc]{Name: "policy", Path: filepath.Join(dir, "none"), Load: (&loader{}).load}, "no such file"},
		{"broken", Options[*doc]{Name: "policy", Path: broken, Load: (&loader{}).load}, broken + ":2: broken line"},
		{"too large", Options[*doc]{Name: "policy", Path: big, Load: (&loader{}).load, MaxBytes: 16}, big + " is larger than 16 bytes"},
		{"a directory", Options[*doc]{Name: "policy", Path: dir, Load: (&loader{}).load}, "not a regular file"},
		{"no loader", Options[*doc]{Name: "policy", Path: broken}, "no Load"},
		{"not a metric name", Options[*doc]{Name: "my policy", Path: broken, Load: (&loader{}).load}, "metric name"},
	} {
		if _, err := New(c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// TestReload: a good file is put in force, a broken or oversize one is
// refused and the previous value stays, and the bytes in force again keep
// the value without loading it.
func TestReload(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "one\n", func(o *Options[*doc]) { o.MaxBytes = 64 })
	first := fx.file.Current()

	write(t, fx.path, "two\n")
	if err := fx.file.Reload(); err != nil {
		t.Fatal(err)
	}
	second := fx.file.Current()
	if second.text != "two\n" || fx.file.State().Version != versionOf("two\n") {
		t.Fatalf("after a reload: %q, %+v", second.text, fx.file.State())
	}
	if first.text != "one\n" {
		t.Error("a reload changed the value read before it")
	}

	for _, c := range []struct{ text, want string }{
		{"ok\nbroken\n", fx.path + ":2: broken line"},
		{strings.Repeat("x", 65), "larger than 64 bytes"},
	} {
		write(t, fx.path, c.text)
		err := fx.file.Reload()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Reload = %v, want an error saying %q", err, c.want)
		}
		if fx.file.Current() != second {
			t.Error("a file that does not load replaced the value in force")
		}
		s := fx.file.State()
		if s.Version != versionOf("two\n") || s.Err == nil || !strings.Contains(s.Err.Error(), c.want) || s.Failed.IsZero() {
			t.Errorf("State after a failed reload = %+v", s)
		}
	}
	if n := fx.logs.count(`"level":"ERROR"`, `"msg":"policy file not reloaded; keeping the previous one"`, `"version":"`+versionOf("two\n")+`"`, ":2: broken line"); n != 1 {
		t.Errorf("%d log lines say the broken file was not reloaded, want 1:\n%s", n, fx.logs)
	}

	calls := fx.load.calls.Load()
	write(t, fx.path, "two\n")
	if err := fx.file.Reload(); err != nil {
		t.Fatal(err)
	}
	if fx.file.Current() != second || fx.load.calls.Load() != calls {
		t.Error("the bytes in force, reloaded, were loaded again")
	}
	if s := fx.file.State(); s.Err != nil || s.Version != versionOf("two\n") {
		t.Errorf("State after an unchanged reload = %+v", s)
	}
	if n := fx.logs.count(`"msg":"policy reloaded"`, `"unchanged":true`, `"bytes":4`); n != 1 {
		t.Errorf("%d log lines say the unchanged file was reloaded, want 1:\n%s", n, fx.logs)
	}
	for result, want := range map[string]float64{"ok": 1, "failed": 2, "unchanged": 1} {
		if got := reloads(fx.file, result); got != want {
			t.Errorf("reloads{result=%q} = %v, want %v", result, got, want)
		}
	}
}

// TestReloadConcurrent: readers never see a value that was not in force,
// and reloads from several goroutines and the watcher at once put each
// file in force once.
func TestReloadConcurrent(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "v0\n")
	fx.watch(t)
	ctx, cancel := context.WithCancel(context.Background())
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for ctx.Err() == nil {
				d, s := fx.file.Current(), fx.file.State()
				if !strings.HasPrefix(d.text, "v") || len(s.Version) != 12 {
					t.Errorf("read %q, %+v", d.text, s)
					return
				}
			}
		})
	}
	const versions = 20
	for i := 1; i <= versions; i++ {
		replace(t, fx.path, fmt.Sprintf("v%d\n", i))
		var reloaders sync.WaitGroup
		for range 3 {
			reloaders.Go(func() {
				if err := fx.file.Reload(); err != nil {
					t.Error(err)
				}
			})
		}
		reloaders.Wait()
		if got, want := fx.file.Current().text, fmt.Sprintf("v%d\n", i); got != want {
			t.Fatalf("in force %q, want %q", got, want)
		}
	}
	cancel()
	readers.Wait()
	if got := reloads(fx.file, "ok"); got != versions {
		t.Errorf("%v reloads put a file in force, want %d: one per file", got, versions)
	}
	if n := fx.logs.count(`"msg":"policy reloaded"`); n != versions+int(reloads(fx.file, "unchanged")) {
		t.Errorf("%d reload log lines, want one per reload:\n%s", n, fx.logs)
	}
	if n := fx.logs.count(`"msg":"policy reloaded"`, `"version":"`+versionOf("v7\n")+`"`, `"bytes":3}`); n != 1 {
		t.Errorf("%d log lines put v7 in force, want 1", n)
	}
}

// TestWatch: the watcher sees a file written in place (also at the same
// size, in the same clock tick as the read before), replaced by a rename,
// and deleted then created again, and keeps a broken one out.
func TestWatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		change func(t *testing.T, path, text string)
	}{
		{"in place", overwrite},
		{"renamed over", func(t *testing.T, path, text string) { replace(t, path, text) }},
		{"deleted and created", func(t *testing.T, path, text string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			write(t, path, text)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, "first\n")
			fx.watch(t)
			// Each text at least as long as the one before: written in
			// place, no reader sees it truncated.
			for _, text := range []string{"other\n", "third-longer\n", "fourth-longest\n"} {
				c.change(t, fx.path, text)
				waitFor(t, "the watcher puts "+text+" in force", func() bool {
					return fx.file.Current().text == text && fx.file.State().Version == versionOf(text)
				})
			}
			c.change(t, fx.path, "broken\n+padding\n")
			waitFor(t, "the watcher refuses the broken file", func() bool { return fx.file.State().Err != nil })
			if fx.file.Current().text != "fourth-longest\n" {
				t.Error("a broken file was put in force")
			}
			c.change(t, fx.path, "fifth-repaired-file\n")
			waitFor(t, "the watcher puts the repaired file in force", func() bool {
				return fx.file.Current().text == "fifth-repaired-file\n" && fx.file.State().Err == nil
			})
			if n := fx.logs.count(`"msg":"policy file not reloaded; keeping the previous one"`); n != 1 {
				t.Errorf("the broken file was refused %d times, want 1:\n%s", n, fx.logs)
			}
			if got := reloads(fx.file, "ok"); got != 4 {
				t.Errorf("%v files put in force, want 4", got)
			}
		})
	}
}

// TestWatchMissing: a file gone is said once per streak and keeps the
// value in force; its return puts it in force.
func TestWatchMissing(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "first\n")
	before := fx.file.Current()
	if err := os.Remove(fx.path); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		fx.file.check()
	}
	if n := fx.logs.count(`"level":"WARN"`, `"msg":"policy file cannot be read; keeping the one in force"`); n != 1 {
		t.Errorf("%d log lines for a missing file checked 5 times, want 1:\n%s", n, fx.logs)
	}
	if s := fx.file.State(); !errors.Is(s.Err, os.ErrNotExist) || s.Version != versionOf("first\n") {
		t.Errorf("State of a missing file = %+v", s)
	}
	if fx.file.Current() != before || reloads(fx.file, "failed") != 0 {
		t.Error("a missing file changed the value in force or counted a failed reload")
	}
	write(t, fx.path, "first\n")
	fx.watch(t)
	waitFor(t, "the file back as it was is read", func() bool { return reloads(fx.file, "unchanged") == 1 })
	if fx.file.Current() != before || fx.file.State().Err != nil {
		t.Errorf("the same file back: value replaced, or State still says %v", fx.file.State().Err)
	}
	if err := os.Remove(fx.path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a second streak is said", func() bool {
		return fx.logs.count(`"msg":"policy file cannot be read; keeping the one in force"`) == 2
	})
}

// TestWatchLeavesAnUnchangedFileAlone: a file nobody touches is read at
// start and, once it is older than the racy window, never again.
func TestWatchLeavesAnUnchangedFileAlone(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "one\n")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(fx.path, old, old); err != nil {
		t.Fatal(err)
	}
	if err := fx.file.Reload(); err != nil { // takes the new times in
		t.Fatal(err)
	}
	calls := fx.load.calls.Load()
	for range 20 {
		fx.file.check()
	}
	if fx.load.calls.Load() != calls || reloads(fx.file, "unchanged") != 1 {
		t.Error("an untouched file was reloaded")
	}
	if fx.file.racy {
		t.Error("a file an hour old is taken as racy")
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "one\n")
	write(t, fx.path, "broken\n")
	fx.file.Reload()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(fx.file); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`
# HELP robotsgate_policy_info The policy file in force: its version (the first 12 hex digits of the SHA-256 of its bytes) and path.
# TYPE robotsgate_policy_info gauge
robotsgate_policy_info{file=%q,version=%q} 1
# HELP robotsgate_policy_reloads_total Reloads of the policy file (SIGHUP or a change seen), by result: ok; unchanged, the bytes in force again; failed, the previous one stays in force.
# TYPE robotsgate_policy_reloads_total counter
robotsgate_policy_reloads_total{result="failed"} 1
robotsgate_policy_reloads_total{result="ok"} 0
robotsgate_policy_reloads_total{result="unchanged"} 0
`, fx.path, versionOf("one\n"))
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "robotsgate_policy_info", "robotsgate_policy_reloads_total"); err != nil {
		t.Error(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var loaded float64
	for _, mf := range families {
		if mf.GetName() == "robotsgate_policy_loaded_timestamp_seconds" {
			loaded = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if s := fx.file.State(); loaded != float64(s.Loaded.UnixNano())/1e9 {
		t.Errorf("robotsgate_policy_loaded_timestamp_seconds = %v, want %v", loaded, s.Loaded)
	}

	auth := newFixture(t, "one\n", func(o *Options[*doc]) { o.Name, o.MetricsPrefix = "credentials", "robotsgate_auth" })
	if n := testutil.CollectAndCount(auth.file, "robotsgate_auth_reloads_total", "robotsgate_auth_info", "robotsgate_auth_loaded_timestamp_seconds"); n != 5 {
		t.Errorf("with prefix robotsgate_auth: %d metrics, want 5: 3 reload results, info, timestamp", n)
	}
}

func TestStateString(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 26, 13, 0, 0, 0, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		state State
		want  string
	}{
		{State{Name: "credentials"}, "credentials: none"},
		{State{Name: "policy", Path: "policy.yaml", Version: "3f2a9c1b04de", Loaded: at},
			"policy: policy.yaml version 3f2a9c1b04de loaded 2026-11-26T12:00:00Z"},
		{State{Name: "policy", Path: "policy.yaml", Version: "3f2a9c1b04de", Loaded: at,
			Err: errors.New("policy.yaml:12: unknown key \"alow\"\npolicy.yaml:14: bad"), Failed: at.Add(5 * time.Minute)},
			`policy: policy.yaml version 3f2a9c1b04de loaded 2026-11-26T12:00:00Z; not reloaded at 2026-11-26T12:05:00Z: policy.yaml:12: unknown key "alow"; policy.yaml:14: bad`},
	} {
		if got := c.state.String(); got != c.want {
			t.Errorf("String() =\n%s\nwant\n%s", got, c.want)
		}
	}
}

// TestWatchRacyFile: a file read in the same clock tick as its last write
// may be written again without its stat changing (file systems stamp times
// coarsely); while it is that fresh the watcher reads it again anyway.
func TestWatchRacyFile(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "one\n")
	if !fx.file.racy {
		t.Fatal("a file written just now is not taken as racy")
	}
	write(t, fx.path, "two\n")
	fi, err := os.Stat(fx.path)
	if err != nil {
		t.Fatal(err)
	}
	fx.file.seen = stampOf(fi) // as if the write had left the stat as it was
	fx.file.check()
	if got := fx.file.Current().text; got != "two\n" {
		t.Errorf("a write to a racy file that left its stat alone was missed: %q in force", got)
	}
}

// TestWatchWaitsForTheFileToHoldStill: a change is read at the tick after
// the one that saw it, if the file did not change again in between.
func TestWatchWaitsForTheFileToHoldStill(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "one\n")
	for i, text := range []string{"", "two\n"} { // truncated, then written
		write(t, fx.path, text)
		fx.file.check()
		if got := fx.file.Current().text; got != "one\n" {
			t.Fatalf("step %d: the tick that saw a change read it: %q in force", i, got)
		}
	}
	fx.file.check()
	if got := fx.file.Current().text; got != "two\n" {
		t.Errorf("the tick after the file held still: %q in force, want two", got)
	}
	if got := reloads(fx.file, "ok"); got != 1 {
		t.Errorf("%v files put in force, want 1", got)
	}
}

// TestReplaces: a value Replaces refuses is not put in force, as one that
// does not load; it is asked on reloads only, with the value in force.
func TestReplaces(t *testing.T) {
	t.Parallel()
	var asked []string
	fx := newFixture(t, "", func(o *Options[*doc]) {
		o.Replaces = func(next, cur *doc) error {
			asked = append(asked, cur.text+">"+next.text)
			if next.text == "" && cur.text != "" {
				return errors.New("empty file: kept the one in force")
			}
			return nil
		}
	})
	for _, step := range []struct {
		text, inForce string
		refused       bool
	}{
		{"one\n", "one\n", false},
		{"", "one\n", true},
		{"two\n", "two\n", false},
	} {
		write(t, fx.path, step.text)
		err := fx.file.Reload()
		if (err != nil) != step.refused || fx.file.Current().text != step.inForce {
			t.Errorf("reload of %q: err %v, in force %q; want refused %v, %q", step.text, err, fx.file.Current().text, step.refused, step.inForce)
		}
	}
	if want := []string{">one\n", "one\n>", "one\n>two\n"}; !slices.Equal(asked, want) {
		t.Errorf("Replaces asked %q, want %q (not at the first load)", asked, want)
	}
	if got := reloads(fx.file, "failed"); got != 1 {
		t.Errorf("%v failed reloads counted, want 1", got)
	}
}
