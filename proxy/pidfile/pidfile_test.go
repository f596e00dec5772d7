package pidfile

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	path := filepath.Join(dir, "robotsgate.pid")
	if err := os.WriteFile(path, []byte("999999\n"), 0o644); err != nil { // a stale one
		t.Fatal(err)
	}
	remove, err := Write(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if want := strconv.Itoa(os.Getpid()) + "\n"; err != nil || string(got) != want {
		t.Fatalf("pid file holds %q (%v), want %q", got, err, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("pid file mode %v (%v), want -rw-r--r--", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %d files, want the pid file alone: no temporary file left", len(entries))
	}
	remove(log)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file still there after remove: %v", err)
	}

	// Another process's pid file, written over this one's, stays.
	remove, err = Write(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	remove(log)
	if got, _ := os.ReadFile(path); string(got) != "1\n" {
		t.Errorf("remove took another process's pid file (now %q)", got)
	}

	missing := filepath.Join(dir, "no-such-dir", "robotsgate.pid")
	if _, err := Write(missing); err == nil || !strings.Contains(err.Error(), strconv.Quote(missing)) ||
		strings.Contains(err.Error(), ".robotsgate.pid.") {
		t.Errorf("Write in a missing directory: %v; want an error naming %q, not the temporary file", err, missing)
	}
}
