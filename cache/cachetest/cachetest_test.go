package cachetest

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
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
	path, err := WriteHeapProfile(dir, "median", 1000)
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
	if _, err := WriteHeapProfile(blocked, "median", 1); err == nil {
		t.Fatal("no error writing under a file")
	}
}
