// Package cachetest measures what cached origins cost a process, for the
// benchmarks of the packages that fill the cache (robots/fetch, proxy):
// the resident set, and heap profiles written where a flag says.
package cachetest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
)

// ResidentBytes is the process's resident set, read from
// /proc/self/statm; false where there is none (not Linux).
func ResidentBytes() (int64, bool) {
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	fields := bytes.Fields(statm)
	if len(fields) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(string(fields[1]), 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}

// WriteHeapProfile writes the process's heap profile, for
// `go tool pprof -sample_index=inuse_space`, to dir (made if missing) as
// heap-<name>-<origins>.pprof, and returns its path.
func WriteHeapProfile(dir, name string, origins int) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("heap profile: %w", err)
	}
	var buf bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&buf, 0); err != nil {
		return "", fmt.Errorf("heap profile: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("heap-%s-%d.pprof", name, origins))
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("heap profile: %w", err)
	}
	return path, nil
}
