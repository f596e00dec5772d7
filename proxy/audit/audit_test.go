package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"robotsgate/robots"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// lockedBuffer is an io.Writer whose contents a test may read while the
// Writer's flush goroutine writes to it.
type lockedBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// countingCloser counts Close calls.
type countingCloser struct {
	mu     sync.Mutex
	closed int
}

func (c *countingCloser) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed++
	return nil
}

func (c *countingCloser) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// failingWriter fails every write, like a full disk.
type failingWriter struct{}

var errDiskFull = errors.New("no space left on device")

func (*failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

// decodeLines parses every line of s as one JSON object.
func decodeLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d is not a JSON object: %v\n%s", len(out)+1, err, sc.Text())
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func fullRecord() *Record {
	return &Record{
		Time:   time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		Client: "127.0.0.1:5555",
		Method: "GET",
		Decision: robots.Decision{
			URL:           "https://example.com/private/x",
			UserAgent:     "Mozilla/5.0 (compatible; GPTBot/1.0)",
			Token:         "GPTBot",
			Verdict:       "disallow",
			Reason:        "disallow: /private/ (line 7)",
			Rule:          "/private/",
			RuleLine:      7,
			Group:         "gptbot",
			GroupLines:    []int{3, 4},
			Reading:       "/private/x",
			ReadingSteps:  "dot segments removed",
			RobotsTxt:     "https://example.com/robots.txt",
			RobotsOutcome: "ok",
			RobotsStatus:  200,
		},
		Origin:       "https://example.com",
		Tunnel:       "example.com:443",
		PathsChecked: true,
		RobotsCache:  "hit",
		Mode:         "audit",
		Forwarded:    true,
		Status:       200,
		Upstream:     200,
		Bytes:        1234,
		Duration:     1.5,
		Error:        "reading the response body: connection closed early",
	}
}

// TestRecordFieldNames pins the audit log's public format: the JSON names
// of every field, which ones are always present, and their values.
func TestRecordFieldNames(t *testing.T) {
	always := []string{
		"time", "client", "method", "url", "user_agent", "token", "verdict", "reason",
		"paths_checked", "mode", "forwarded", "status", "bytes", "duration_ms",
	}
	optional := []string{
		"origin", "tunnel", "rule", "rule_line", "group", "group_lines", "reading", "reading_steps",
		"robots_txt", "robots_outcome", "robots_status",
		"robots_cache", "upstream_status", "error",
	}

	var buf lockedBuffer
	w := NewWriter(&buf, nil, Options{})
	if err := w.Write(fullRecord()); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&Record{Method: "CONNECT", Decision: robots.Decision{URL: "example.com:443", Verdict: "allow"}, Mode: "enforce"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(buf.String(), "}\n") || strings.Count(buf.String(), "\n") != 2 {
		t.Fatalf("want two newline-terminated JSON lines, got %q", buf.String())
	}
	recs := decodeLines(t, buf.String())

	full := slices.Sorted(maps.Keys(recs[0]))
	want := slices.Sorted(slices.Values(append(slices.Clone(always), optional...)))
	if !slices.Equal(full, want) {
		t.Errorf("full record keys\n got %q\nwant %q", full, want)
	}
	minimal := slices.Sorted(maps.Keys(recs[1]))
	if want := slices.Sorted(slices.Values(always)); !slices.Equal(minimal, want) {
		t.Errorf("minimal record keys\n got %q\nwant %q", minimal, want)
	}

	values := map[string]any{
		"time": "2025-03-01T12:00:00Z", "client": "127.0.0.1:5555", "method": "GET",
		"url": "https://example.com/private/x", "origin": "https://example.com", "tunnel": "example.com:443",
		"user_agent": "Mozilla/5.0 (compatible; GPTBot/1.0)", "token": "GPTBot", "verdict": "disallow",
		"reason": "disallow: /private/ (line 7)", "rule": "/private/", "rule_line": 7.0, "group": "gptbot",
		"reading": "/private/x", "reading_steps": "dot segments removed",
		"paths_checked": true, "robots_txt": "https://example.com/robots.txt", "robots_outcome": "ok", "robots_status": 200.0, "robots_cache": "hit", "mode": "audit",
		"forwarded": true, "status": 200.0, "upstream_status": 200.0, "bytes": 1234.0, "duration_ms": 1.5,
		"error": "reading the response body: connection closed early",
	}
	for k, v := range values {
		if recs[0][k] != v {
			t.Errorf("%s = %#v, want %#v", k, recs[0][k], v)
		}
	}
}

// TestHoldFields pins the fields of a request that met an origin's hold:
// their JSON names, their values (times in RFC 3339 with the sub-second
// digits the record's time has), and that none is written for a request
// that met no hold.
func TestHoldFields(t *testing.T) {
	at := time.Date(2026, 11, 25, 10, 0, 0, 250_000_000, time.UTC)
	for _, c := range []struct {
		name string
		set  func(r *Record)
		want map[string]any
	}{
		{"no hold", func(*Record) {}, map[string]any{}},
		{"held by Retry-After, enforce", func(r *Record) {
			r.Pace, r.Forwarded, r.Status = "held", false, 429
			r.HoldCause, r.HoldStatus, r.HoldAt, r.HoldUntil = "retry-after", 503, at, at.Add(3*time.Second+125*time.Millisecond)
		}, map[string]any{
			"pace": "held", "hold_cause": "retry-after", "hold_status": 503.0,
			"hold_at": "2026-11-25T10:00:00.25Z", "hold_until": "2026-11-25T10:00:03.375Z",
		}},
		{"backoff after refused connections, grouped by address", func(r *Record) {
			r.Pace, r.Forwarded, r.Status = "backoff", false, 429
			r.HoldCause, r.HoldError, r.BackoffStep, r.PaceGroup = "backoff", "connection refused", 3, "address:127.0.0.1"
			r.HoldAt, r.HoldUntil = at.Add(time.Nanosecond), at.Add(4*time.Second)
		}, map[string]any{
			"pace": "backoff", "hold_cause": "backoff", "hold_error": "connection refused", "backoff_step": 3.0,
			"pace_group": "address:127.0.0.1", "hold_at": "2026-11-25T10:00:00.250000001Z", "hold_until": "2026-11-25T10:00:04.25Z",
		}},
		{"held by another host of its domain", func(r *Record) {
			r.Pace, r.Forwarded, r.Status = "held", false, 429
			r.HoldCause, r.HoldStatus, r.HoldOrigin, r.PaceGroup = "retry-after", 503, "https://www.example.com", "domain:example.com"
			r.HoldAt, r.HoldUntil = at, at.Add(time.Second)
		}, map[string]any{
			"pace": "held", "hold_cause": "retry-after", "hold_status": 503.0, "hold_origin": "https://www.example.com",
			"pace_group": "domain:example.com", "hold_at": "2026-11-25T10:00:00.25Z", "hold_until": "2026-11-25T10:00:01.25Z",
		}},
		{"waited out a hold", func(r *Record) {
			r.Pace, r.WaitedMS = "waited", 1500
			r.HoldCause, r.HoldStatus, r.BackoffStep, r.HoldAt, r.HoldUntil = "backoff", 500, 1, at, at.Add(1500*time.Millisecond)
		}, map[string]any{
			"pace": "waited", "waited_ms": 1500.0, "hold_cause": "backoff", "hold_status": 500.0, "backoff_step": 1.0,
			"hold_at": "2026-11-25T10:00:00.25Z", "hold_until": "2026-11-25T10:00:01.75Z",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &Record{Time: at, Method: "GET", Decision: robots.Decision{URL: "http://h/", Verdict: "allow"}, Mode: "enforce", Forwarded: true, Status: 200}
			c.set(rec)
			got := decodeLines(t, string(writeOne(t, rec, Options{})))[0]
			if got["time"] != "2026-11-25T10:00:00.25Z" {
				t.Errorf("time = %v", got["time"])
			}
			for _, k := range []string{"pace", "waited_ms", "hold_cause", "hold_status", "hold_error", "hold_origin", "hold_at", "hold_until", "backoff_step", "pace_group"} {
				if v, ok := got[k]; v != c.want[k] || ok != (c.want[k] != nil) {
					t.Errorf("%s = %#v (present: %v), want %#v", k, v, ok, c.want[k])
				}
			}
		})
	}
}

// TestConcurrentWritersWholeLines checks that records written from many
// goroutines come out as whole lines, none lost or interleaved, even when
// they overflow the buffer several times.
func TestConcurrentWritersWholeLines(t *testing.T) {
	const writers, perWriter = 8, 200
	var buf lockedBuffer
	w := NewWriter(&buf, nil, Options{})
	padding := strings.Repeat("x", 700) // ~1 KiB lines: the 64 KiB buffer flushes mid-run
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range perWriter {
				rec := &Record{Method: "GET", Decision: robots.Decision{URL: fmt.Sprintf("http://h/%d/%d", g, i), Reason: padding, Verdict: "allow"}}
				if err := w.Write(rec); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs := decodeLines(t, buf.String())
	if len(recs) != writers*perWriter {
		t.Fatalf("got %d records, want %d", len(recs), writers*perWriter)
	}
	seen := make(map[string]bool, len(recs))
	for _, r := range recs {
		u, _ := r["url"].(string)
		if seen[u] {
			t.Fatalf("record %s written twice", u)
		}
		seen[u] = true
		if r["reason"] != padding {
			t.Fatalf("record %s has a damaged reason", u)
		}
	}
	if buf.writes < 2 {
		t.Errorf("the buffer was flushed %d times; the test meant to overflow it", buf.writes)
	}
}

// stalledSink is a log whose writes wait until released, like a pipe to a
// reader that has stopped reading.
type stalledSink struct {
	lockedBuffer
	release chan struct{}
}

func (s *stalledSink) Write(p []byte) (int, error) {
	<-s.release
	return s.lockedBuffer.Write(p)
}

// TestSlowSinkDelaysNoWrite: while the sink hangs, Write still returns at
// once, past the point where the buffer asks for a flush; the records
// reach the sink once it moves again.
func TestSlowSinkDelaysNoWrite(t *testing.T) {
	sink := &stalledSink{release: make(chan struct{})}
	w := NewWriter(sink, nil, Options{})
	const records = 400 // ~300 KiB: several times the flush threshold
	padding := strings.Repeat("x", 700)
	wrote := make(chan error, 1)
	go func() {
		for i := range records {
			if err := w.Write(&Record{Decision: robots.Decision{URL: fmt.Sprint(i), Reason: padding}}); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(sink.release)
		t.Fatal("Write waited for the stalled sink")
	}
	close(sink.release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !w.Healthy() {
		t.Error("unhealthy once the sink took every record")
	}
	if got := len(decodeLines(t, sink.String())); got != records {
		t.Errorf("%d records reached the sink, want %d", got, records)
	}
}

// TestStalledSinkIsUnhealthyBeforeDropping: a log that stops taking
// records counts as failing (so the proxy refuses requests) once half its
// bound waits, before a single record is dropped; it recovers when the
// sink moves again.
func TestStalledSinkIsUnhealthyBeforeDropping(t *testing.T) {
	sink := &stalledSink{release: make(chan struct{})}
	w := NewWriter(sink, nil, Options{MaxPending: 256 << 10})
	var heard []error
	var mu sync.Mutex
	w.Watch(func(err error) {
		mu.Lock()
		heard = append(heard, err)
		mu.Unlock()
	})
	padding := strings.Repeat("x", 1000)
	written := 0
	for w.Healthy() {
		if err := w.Write(&Record{Decision: robots.Decision{URL: fmt.Sprint(written), Reason: padding}}); err != nil {
			close(sink.release)
			t.Fatalf("record %d: %v; want the log unhealthy before any record is dropped", written, err)
		}
		if written++; written > 1000 {
			close(sink.release)
			t.Fatal("still healthy after 1000 KiB of records waiting for a stalled sink")
		}
	}
	if w.Dropped() != 0 {
		t.Errorf("%d records dropped before the log was reported unhealthy", w.Dropped())
	}
	close(sink.release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != 2 || !errors.Is(heard[0], ErrStalled) || heard[1] != nil {
		t.Errorf("the watcher heard %v; want ErrStalled, then nil", heard)
	}
	if got := len(decodeLines(t, sink.String())); got != written {
		t.Errorf("%d records reached the sink, want %d", got, written)
	}
}

func TestCloseFlushesAndIsIdempotent(t *testing.T) {
	var buf lockedBuffer
	var closer countingCloser
	w := NewWriter(&buf, &closer, Options{})
	for i := range 3 {
		if err := w.Write(&Record{Decision: robots.Decision{URL: fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if got := len(decodeLines(t, buf.String())); got != 3 {
		t.Errorf("after Close the log holds %d records, want 3", got)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
	if n := closer.count(); n != 1 {
		t.Errorf("the file was closed %d times, want once", n)
	}
	err := w.Write(&Record{Decision: robots.Decision{URL: "late"}})
	if err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Write after Close = %v, want an error saying the log is closed", err)
	}
	if strings.Contains(buf.String(), "late") {
		t.Error("a record written after Close reached the log")
	}
}

// TestFlushIntervalWithoutClose checks that a buffered record reaches the
// file within FlushInterval, with no Close and no more traffic.
func TestFlushIntervalWithoutClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf lockedBuffer
		w := NewWriter(&buf, nil, Options{})
		defer w.Close()
		if err := w.Write(&Record{Decision: robots.Decision{URL: "http://h/first"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(FlushInterval - time.Millisecond)
		synctest.Wait()
		if buf.String() != "" {
			t.Fatalf("flushed before FlushInterval: %q", buf.String())
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if !strings.Contains(buf.String(), "http://h/first") {
			t.Fatalf("record not flushed after FlushInterval; log is %q", buf.String())
		}

		// The loop keeps going: a later record is flushed by a later tick.
		if err := w.Write(&Record{Decision: robots.Decision{URL: "http://h/second"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(FlushInterval)
		synctest.Wait()
		if got := len(decodeLines(t, buf.String())); got != 2 {
			t.Fatalf("after two intervals the log holds %d records, want 2", got)
		}
	})
}

// flakyWriter fails its first failures writes, like a disk that fills up
// and is then cleared, and writes to buf afterwards; short makes the first
// failing write a partial one.
type flakyWriter struct {
	mu       sync.Mutex
	failures int
	short    bool
	calls    int
	buf      bytes.Buffer
}

func (f *flakyWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.failures > 0 {
		f.failures--
		if f.short && len(p) > 10 {
			f.short = false
			f.buf.Write(p[:10])
			return 10, errDiskFull
		}
		return 0, errDiskFull
	}
	return f.buf.Write(p)
}

func (f *flakyWriter) state() (calls int, written string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.buf.String()
}

// TestFailingLogRecovers checks that a log that cannot be written is
// reported unhealthy, tried again once per FlushInterval (not per record),
// keeps every record, partial writes included, and is healthy again with
// every record in order once it can be written.
func TestFailingLogRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fw := &flakyWriter{failures: 3, short: true}
		var failures, recoveries atomic.Int32
		w := NewWriter(fw, nil, Options{})
		w.Watch(func(err error) {
			if err != nil {
				failures.Add(1)
			} else {
				recoveries.Add(1)
			}
		})
		defer w.Close()
		if err := w.Write(&Record{Decision: robots.Decision{URL: "r0"}}); err != nil {
			t.Fatal(err)
		}
		if !w.Healthy() {
			t.Fatal("unhealthy before any write failed")
		}
		time.Sleep(FlushInterval)
		synctest.Wait()
		if w.Healthy() {
			t.Fatal("healthy after a failed write")
		}
		for i := 1; i <= 5; i++ {
			if err := w.Write(&Record{Decision: robots.Decision{URL: fmt.Sprintf("r%d", i)}}); err != nil {
				t.Fatalf("Write while the log fails = %v, want the record kept", err)
			}
		}
		if calls, _ := fw.state(); calls != 1 {
			t.Errorf("sink written %d times within one interval, want 1", calls)
		}
		time.Sleep(2 * FlushInterval) // two more failures
		synctest.Wait()
		if w.Healthy() {
			t.Fatal("healthy while the sink still fails")
		}
		time.Sleep(FlushInterval)
		synctest.Wait()
		if !w.Healthy() {
			t.Fatal("still unhealthy once the sink works again")
		}
		calls, written := fw.state()
		if calls != 4 {
			t.Errorf("sink written %d times over four intervals, want 4", calls)
		}
		var urls []string
		for _, rec := range decodeLines(t, written) {
			urls = append(urls, rec["url"].(string))
		}
		if want := []string{"r0", "r1", "r2", "r3", "r4", "r5"}; !slices.Equal(urls, want) {
			t.Errorf("records written %q, want %q", urls, want)
		}
		if failures.Load() != 1 || recoveries.Load() != 1 {
			t.Errorf("the watcher heard of %d failures and %d recoveries; want one each", failures.Load(), recoveries.Load())
		}
	})
}

// TestFailingLogIsBounded checks that a log that never works keeps at most
// MaxPending bytes, drops and counts the rest, and that Close reports both.
func TestFailingLogIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fw failingWriter
		var closer countingCloser
		w := NewWriter(&fw, &closer, Options{MaxPending: 4 << 10})
		pad := strings.Repeat("p", 900)
		var dropped int
		for range 20 {
			if err := w.Write(&Record{Decision: robots.Decision{Reason: pad}}); errors.Is(err, ErrDropped) {
				dropped++
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if dropped == 0 || dropped == 20 || uint64(dropped) != w.Dropped() {
			t.Errorf("%d records dropped, Dropped() = %d; want some kept and the rest counted", dropped, w.Dropped())
		}
		time.Sleep(3 * FlushInterval)
		synctest.Wait()
		if w.Healthy() {
			t.Error("healthy although every write fails")
		}
		err := w.Close()
		if !errors.Is(err, errDiskFull) || !strings.Contains(err.Error(), "dropped") {
			t.Errorf("Close = %v, want the write error and the dropped count", err)
		}
		if closer.count() != 1 {
			t.Errorf("file closed %d times, want once even after a write error", closer.count())
		}
	})
}

// umask returns the process's file mode creation mask.
func umask() fs.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return fs.FileMode(m)
}

func TestOpenFileAppendsWithMode0640(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")

	w, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&Record{Decision: robots.Decision{URL: "one"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := 0o640 &^ umask(); fi.Mode().Perm() != want {
		t.Errorf("new audit log has mode %v, want %v", fi.Mode().Perm(), want)
	}

	// A second Open (a restart) appends instead of truncating.
	w, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&Record{Decision: robots.Decision{URL: "two"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs := decodeLines(t, string(data))
	if len(recs) != 2 || recs[0]["url"] != "one" || recs[1]["url"] != "two" {
		t.Errorf("log after two runs = %q, want record one then record two", data)
	}

	// An existing file keeps its mode.
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("Open changed an existing log's mode to %v", fi.Mode().Perm())
	}
}

func TestOpenFailsWithContext(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "missing-dir", "audit.jsonl"), Options{})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "open audit log") {
		t.Fatalf("Open in a missing directory = %v, want a wrapped ErrNotExist saying what was opened", err)
	}
}

// TestOpenStdout checks that "-" (and "") write to standard output and that
// Close leaves standard output open. It swaps os.Stdout, so it does not run
// in parallel.
func TestOpenStdout(t *testing.T) {
	for _, path := range []string{"-", ""} {
		t.Run(fmt.Sprintf("%q", path), func(t *testing.T) {
			out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			saved := os.Stdout
			os.Stdout = out
			w, err := Open(path, Options{})
			os.Stdout = saved
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(&Record{Decision: robots.Decision{URL: "to-stdout"}}); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(out, "still open\n"); err != nil {
				t.Fatalf("Close closed standard output: %v", err)
			}
			data, err := os.ReadFile(out.Name())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(data), `{"time"`) || !strings.Contains(string(data), `"url":"to-stdout"`) ||
				!strings.HasSuffix(string(data), "}\nstill open\n") {
				t.Errorf("standard output got %q", data)
			}
		})
	}
}

// TestPolicyFields pins the fields the operator's policy sets: their JSON
// names and values, that a record reads back as it was written, and that
// none is written when the policy changed nothing and none is loaded.
func TestPolicyFields(t *testing.T) {
	base := func() *Record {
		return &Record{
			Time: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC), Client: "127.0.0.1:5555", Method: "GET",
			Decision: robots.Decision{URL: "https://shop.example/checkout/", Token: "acme", Verdict: "disallow", Reason: "policy"},
			Origin:   "https://shop.example", Mode: "enforce", Status: 403,
		}
	}
	for _, c := range []struct {
		name string
		set  func(r *Record)
		want map[string]any // the policy fields as written; absent ones absent
	}{
		{"no policy loaded", func(*Record) {}, map[string]any{}},
		{"loaded, changed nothing", func(r *Record) { r.PolicyVersion = "0123456789ab" },
			map[string]any{"policy_version": "0123456789ab"}},
		{"a rule refused", func(r *Record) {
			r.Policy = PolicyFinding{File: "/etc/robotsgate/policy.yaml", Line: 12, Kind: PolicyRule, Rule: "Disallow: /checkout/", Reason: "asked by mail, 2026-10-01"}
			r.PolicyVersion, r.Purposes = "0123456789ab", []string{"search", "ai-train"}
		}, map[string]any{
			"policy":         map[string]any{"file": "/etc/robotsgate/policy.yaml", "line": 12.0, "kind": "rule", "rule": "Disallow: /checkout/", "reason": "asked by mail, 2026-10-01"},
			"policy_version": "0123456789ab", "purposes": []any{"search", "ai-train"},
		}},
		{"a destination, no reason", func(r *Record) {
			r.Policy = PolicyFinding{File: "policy.yaml", Line: 5, Kind: PolicyDestination, Rule: "deny_sites: admin.acme.example"}
			r.PolicyVersion = "ffffffffffff"
		}, map[string]any{
			"policy":         map[string]any{"file": "policy.yaml", "line": 5.0, "kind": "destination", "rule": "deny_sites: admin.acme.example"},
			"policy_version": "ffffffffffff",
		}},
		{"an exception allowed, <&> as they are", func(r *Record) {
			r.Verdict, r.Status, r.Forwarded = "allow", 200, true
			r.Policy = PolicyFinding{File: "policy.yaml", Line: 30, Kind: PolicyException, Rule: "/reports/", Reason: "permission from <ops@example.org> & legal"}
			r.PolicyVersion, r.Purposes = "0123456789ab", []string{"archive"}
		}, map[string]any{
			"policy":         map[string]any{"file": "policy.yaml", "line": 30.0, "kind": "exception", "rule": "/reports/", "reason": "permission from <ops@example.org> & legal"},
			"policy_version": "0123456789ab", "purposes": []any{"archive"},
		}},
		{"the crawler's pace bound, purposes empty", func(r *Record) {
			r.Verdict, r.Status, r.Pace = "allow", 429, "busy"
			r.Policy = PolicyFinding{File: "policy.yaml", Line: 9, Kind: PolicyMaxConcurrency, Rule: "max_concurrency: 2"}
			r.PolicyVersion, r.Purposes = "0123456789ab", []string{}
		}, map[string]any{
			"policy":         map[string]any{"file": "policy.yaml", "line": 9.0, "kind": "max-concurrency", "rule": "max_concurrency: 2"},
			"policy_version": "0123456789ab",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := base()
			c.set(rec)
			line := writeOne(t, rec, Options{})
			got := decodeLines(t, string(line))[0]
			for _, k := range []string{"policy", "policy_version", "purposes"} {
				if v, ok := got[k]; !reflect.DeepEqual(v, c.want[k]) || ok != (c.want[k] != nil) {
					t.Errorf("%s = %#v (present: %v), want %#v", k, v, ok, c.want[k])
				}
			}
			if bytes.Contains(line, []byte(`\u003c`)) {
				t.Errorf("< escaped: %s", line)
			}
			var back Record
			if err := json.Unmarshal(line, &back); err != nil {
				t.Fatal(err)
			}
			if len(rec.Purposes) == 0 {
				rec.Purposes = nil // an empty list is not written
			}
			if !reflect.DeepEqual(&back, rec) {
				t.Errorf("read back\n%+v\nwant\n%+v", back, *rec)
			}
		})
	}
}
