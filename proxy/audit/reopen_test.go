package audit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"robotsgate/robots"
)

// readLog reads a log file and returns its whole lines and what follows
// the last line break (a record cut short).
func readLog(t *testing.T, path string) (whole []map[string]any, tail string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	cut := strings.LastIndexByte(s, '\n') + 1
	return decodeLines(t, s[:cut]), s[cut:]
}

// urlsOf lists the url of each record.
func urlsOf(recs []map[string]any) []string {
	var urls []string
	for _, r := range recs {
		u, _ := r["url"].(string)
		urls = append(urls, u)
	}
	return urls
}

func writeURL(t *testing.T, w *Writer, url string) {
	t.Helper()
	if err := w.Write(&Record{Decision: robots.Decision{URL: url}}); err != nil {
		t.Fatalf("write %s: %v", url, err)
	}
}

// TestReopenDuringConcurrentWrites rotates the log five times, as
// logrotate does (rename, then Reopen), while eight goroutines write:
// every record is in exactly one file, every line is a whole JSON object,
// and a record written after a Reopen returned is in the new file, one
// written before the next Reopen began in that same file.
func TestReopenDuringConcurrentWrites(t *testing.T) {
	const writers, perWriter, rotations = 8, 300, 5
	const perRound = perWriter / (rotations + 1) // writer 0's records between two rotations
	path := filepath.Join(t.TempDir(), "audit.log")
	w, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	padding := strings.Repeat("x", 300) // the 64 KiB buffer fills, and flushes, mid-run

	// Writer 0 paces the rotations: it asks for one every perRound
	// records and waits until it is done, so its records say which file
	// they belong in. The other writers never wait.
	rotate, rotated := make(chan struct{}), make(chan error)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range perWriter {
				if g == 0 && i > 0 && i%perRound == 0 && i/perRound <= rotations {
					rotate <- struct{}{}
					if err := <-rotated; err != nil {
						t.Error(err)
						return
					}
				}
				rec := &Record{Decision: robots.Decision{URL: fmt.Sprintf("w%d/%d", g, i), UserAgent: padding}}
				if err := w.Write(rec); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var files []string // oldest first
	for n := 1; n <= rotations; n++ {
		<-rotate
		file := fmt.Sprintf("%s.%d", path, n)
		err := os.Rename(path, file)
		if err == nil {
			err = w.Reopen()
		}
		files = append(files, file)
		rotated <- err
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files = append(files, path)

	seen := make(map[string]int)
	for n, file := range files {
		recs, tail := readLog(t, file)
		if tail != "" {
			t.Errorf("%s ends in a partial line %q", file, tail)
		}
		for _, u := range urlsOf(recs) {
			if seen[u]++; seen[u] > 1 {
				t.Errorf("record %s written twice", u)
			}
			var g, i int
			if _, err := fmt.Sscanf(u, "w%d/%d", &g, &i); err != nil {
				t.Fatalf("%s holds a record %q this test did not write", file, u)
			}
			if g == 0 && i/perRound != n {
				t.Errorf("record %s is in %s, file %d of the rotation; want file %d", u, file, n, i/perRound)
			}
		}
	}
	if len(seen) != writers*perWriter {
		t.Errorf("%d records across the files, want %d", len(seen), writers*perWriter)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := 0o640 &^ umask(); fi.Mode().Perm() != want {
		t.Errorf("reopened audit log has mode %v, want %v", fi.Mode().Perm(), want)
	}
}

// cutFile is an audit log file whose first write takes only the first
// cut bytes of what it is given, failing with err, like a disk that fills
// up mid-record; it then fails every write until healed.
type cutFile struct {
	f   *os.File
	cut int
	err error // nil: a short write with no error

	mu     sync.Mutex
	cutYet bool
	healed bool
}

func (c *cutFile) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.healed:
		return c.f.Write(p)
	case !c.cutYet:
		c.cutYet = true
		n, err := c.f.Write(p[:min(c.cut, len(p))])
		if err != nil {
			return n, err
		}
		return n, c.err
	}
	return 0, errDiskFull
}

func (c *cutFile) heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.healed = true
}

func (c *cutFile) Close() error { return c.f.Close() }

// TestReopenAfterShortWrite: a record the old file took only part of is
// written whole to the reopened file, never continued mid-line in it; the
// old file keeps the cut-off start. When the old file works again before
// the rotation, the rest of the record goes to it and nothing to the new
// file twice.
func TestReopenAfterShortWrite(t *testing.T) {
	const cut = 10
	for _, c := range []struct {
		name      string
		err       error // what the cut-short write returns
		healFirst bool  // the old file works again before it is rotated
		wantOld   []string
		wantTail  bool // the old file ends in the cut-off start of r1
		wantNew   []string
	}{
		{name: "disk full mid-record", err: errDiskFull, wantTail: true, wantNew: []string{"r1", "r2", "r3"}},
		{name: "short write without an error", err: nil, wantTail: true, wantNew: []string{"r1", "r2", "r3"}},
		{name: "old file recovers first", err: errDiskFull, healFirst: true, wantOld: []string{"r1", "r2"}, wantNew: []string{"r3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "audit.log")
				var first *cutFile
				open := func(p string) (io.WriteCloser, error) {
					f, err := openFile(p)
					if err != nil || first != nil {
						return f, err
					}
					first = &cutFile{f: f.(*os.File), cut: cut, err: c.err}
					return first, nil
				}
				w, err := openWith(path, open, Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				writeURL(t, w, "r1")
				writeURL(t, w, "r2")
				time.Sleep(FlushInterval)
				synctest.Wait()
				if w.Healthy() {
					t.Fatal("healthy after a short write")
				}
				if c.healFirst {
					first.heal()
					time.Sleep(FlushInterval)
					synctest.Wait()
					if !w.Healthy() {
						t.Fatal("unhealthy once the old file works again")
					}
				}

				if err := os.Rename(path, path+".1"); err != nil {
					t.Fatal(err)
				}
				if err := w.Reopen(); err != nil {
					t.Fatalf("Reopen: %v", err)
				}
				writeURL(t, w, "r3")
				time.Sleep(FlushInterval)
				synctest.Wait()
				if !w.Healthy() {
					t.Error("unhealthy although the reopened file takes every record")
				}
				if err := w.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}

				old, tail := readLog(t, path+".1")
				if got := urlsOf(old); !slices.Equal(got, c.wantOld) {
					t.Errorf("old file holds %q, want %q", got, c.wantOld)
				}
				r1, _ := os.ReadFile(path) // r1's line, as the new file has it
				if wantTail := string(r1[:cut]); c.wantTail && tail != wantTail {
					t.Errorf("old file ends in %q, want the %d bytes of r1 it took, %q", tail, cut, wantTail)
				} else if !c.wantTail && tail != "" {
					t.Errorf("old file ends in a partial line %q", tail)
				}
				recs, tail := readLog(t, path)
				if got := urlsOf(recs); !slices.Equal(got, c.wantNew) || tail != "" {
					t.Errorf("new file holds %q and then %q, want whole lines %q", got, tail, c.wantNew)
				}
			})
		})
	}
}

// TestReopenFailureKeepsOldFile: when the path cannot be opened again
// (its directory gone, or turned into a regular file), Reopen says why,
// naming the path, and the log carries on in the old file without losing
// a record; once the path can be opened, a later Reopen moves on to it.
func TestReopenFailureKeepsOldFile(t *testing.T) {
	for _, c := range []struct {
		name  string
		block func(dir string) error // makes dir unusable; dir was renamed away
		want  error
	}{
		{"directory gone", func(string) error { return nil }, fs.ErrNotExist},
		{"parent is a regular file", func(dir string) error { return os.WriteFile(dir, nil, 0o600) }, syscall.ENOTDIR},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "logs")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "audit.log")
			w, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			writeURL(t, w, "before")

			// The open file moves along with its directory.
			if err := os.Rename(dir, dir+".old"); err != nil {
				t.Fatal(err)
			}
			if err := c.block(dir); err != nil {
				t.Fatal(err)
			}
			err = w.Reopen()
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Reopen = %v, want %v naming %s", err, c.want, path)
			}
			writeURL(t, w, "failed")

			if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := w.Reopen(); err != nil {
				t.Fatalf("Reopen once the path works: %v", err)
			}
			writeURL(t, w, "after")
			if err := w.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if !w.Healthy() {
				t.Error("unhealthy although every record was written")
			}

			old, tail := readLog(t, filepath.Join(dir+".old", "audit.log"))
			if got, want := urlsOf(old), []string{"before", "failed"}; !slices.Equal(got, want) || tail != "" {
				t.Errorf("old file holds %q and then %q, want %q", got, tail, want)
			}
			recs, tail := readLog(t, path)
			if got, want := urlsOf(recs), []string{"after"}; !slices.Equal(got, want) || tail != "" {
				t.Errorf("new file holds %q and then %q, want %q", got, tail, want)
			}
		})
	}
}

// TestReopenWithoutFileIsNoop: a Writer on standard output, or from
// NewWriter, has no path; Reopen does nothing, returns nil and closes
// nothing, and records before and after it reach the same output. It
// swaps os.Stdout, so it does not run in parallel.
func TestReopenWithoutFileIsNoop(t *testing.T) {
	for _, name := range []string{"-", "", "NewWriter"} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			out, err := os.Create(filepath.Join(t.TempDir(), "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			var closer countingCloser
			var w *Writer
			if name == "NewWriter" {
				w = NewWriter(out, &closer, Options{})
			} else {
				saved := os.Stdout
				os.Stdout = out
				w, err = Open(name, Options{})
				os.Stdout = saved
				if err != nil {
					t.Fatal(err)
				}
			}
			if w.Path() != "" {
				t.Errorf("Path() = %q, want none", w.Path())
			}
			writeURL(t, w, "before")
			if err := w.Reopen(); err != nil {
				t.Fatalf("Reopen = %v, want nil", err)
			}
			writeURL(t, w, "after")
			if closer.count() != 0 {
				t.Error("Reopen closed the Writer's closer")
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			recs, tail := readLog(t, out.Name())
			if got, want := urlsOf(recs), []string{"before", "after"}; !slices.Equal(got, want) || tail != "" {
				t.Errorf("output holds %q and then %q, want %q", got, tail, want)
			}
		})
	}
}

// TestReopenClosed: a closed Writer's Reopen fails and creates no file.
func TestReopenClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	w, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Path() != path {
		t.Errorf("Path() = %q, want %q", w.Path(), path)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := w.Reopen(); !errors.Is(err, ErrClosed) {
		t.Errorf("Reopen after Close = %v, want ErrClosed", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Reopen after Close created %s (stat: %v)", path, err)
	}
}
