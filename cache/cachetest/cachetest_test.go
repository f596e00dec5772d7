package cachetest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
)

func TestResidentBytesGrowsWithTouchedMemory(t *testing.T) {
	before, ok := ResidentBytes()
	if !ok {
		if runtime.GOOS == "linux" {
			t.Fatal("no resident set on Linux")
		}
		return
	}
	const size = 64 << 20
	block := make([]byte, size)
	for i := 0; i < size; i += os.Getpagesize() {
		block[i] = 1
	}
	after, _ := ResidentBytes()
	runtime.KeepAlive(block)
	if after-before < size/2 {
		t.Fatalf("resident set grew %d bytes after touching %d", after-before, size)
	}
}

func TestWriteHeapProfile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "profiles")
	path, err := writeHeapProfile(dir, "median", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "heap-median-1000.pprof"); path != want {
		t.Fatalf("path %q, want %q", path, want)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		t.Fatalf("not a gzipped profile: % x", data[:min(len(data), 8)])
	}

	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := writeHeapProfile(blocked, "median", 1); err == nil {
		t.Fatal("no error writing under a file")
	}
}

func TestHostAndIndex(t *testing.T) {
	for _, tc := range []struct {
		i    int
		host string
	}{
		{0, "127.0.0.1"},
		{254, "127.0.0.255"},
		{255, "127.0.1.0"},
		{0x10203 - 1, "127.1.2.3"},
		{MaxOrigins - 1, "127.255.255.254"},
	} {
		if got := Host(tc.i); got != tc.host {
			t.Errorf("Host(%d) = %s, want %s", tc.i, got, tc.host)
		}
		if got := Index(tc.host); got != tc.i {
			t.Errorf("Index(%s) = %d, want %d", tc.host, got, tc.i)
		}
	}
	for _, host := range []string{"127.0.0.1:80", "10.0.0.1", "::1", "example.com", ""} {
		if got := Index(host); got != -1 {
			t.Errorf("Index(%q) = %d, want -1", host, got)
		}
	}
}

func TestCorpusAndMedian(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"a.txt": "User-agent: *\nDisallow: /a\n",
		"b.txt": "User-agent: *\nDisallow: /b\nAllow: /b/c\n  disallow : /d\n",
		"c.txt": "x",
		"d.md":  "not a robots.txt",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := Corpus(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f.Path))
	}
	if fmt.Sprint(names) != "[a.txt b.txt c.txt]" {
		t.Fatalf("files %v", names)
	}
	if files[0].Rules != 1 || files[1].Rules != 3 || files[2].Rules != 0 {
		t.Errorf("rules %d %d %d, want 1 3 0", files[0].Rules, files[1].Rules, files[2].Rules)
	}
	if m := Median(files); filepath.Base(m.Path) != "a.txt" {
		t.Errorf("median %s, want a.txt", m.Path)
	}
	if _, err := Corpus(t.TempDir()); err == nil {
		t.Error("no error for an empty corpus")
	}
}

func TestEach(t *testing.T) {
	const n = 1000
	var seen [n]atomic.Int32
	var workers [4]atomic.Int32
	if err := Each(len(workers), n, func(w, i int) error {
		seen[i].Add(1)
		workers[w].Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if got := seen[i].Load(); got != 1 {
			t.Fatalf("origin %d visited %d times", i, got)
		}
	}
	var total int32
	for w := range workers {
		total += workers[w].Load()
	}
	if total != n {
		t.Fatalf("workers visited %d origins, want %d", total, n)
	}

	var visits atomic.Int32
	err := Each(2, n, func(_, i int) error {
		visits.Add(1)
		if i == 10 {
			return fmt.Errorf("origin %d failed", i)
		}
		return nil
	})
	if err == nil || err.Error() != "origin 10 failed" {
		t.Fatalf("error %v, want origin 10's", err)
	}
	if v := visits.Load(); v >= n {
		t.Errorf("%d visits after the failure: the workers did not stop", v)
	}
}
