// Package cachetest serves the benchmarks that measure what cached
// origins cost (robots/fetch, proxy, integration): the corpus of real
// robots.txt files and its median one, origins named by IP literals that
// need no DNS, the process's resident set, and heap profiles.
package cachetest

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// File is one robots.txt of the corpus.
type File struct {
	Path  string
	Body  []byte
	Rules int // Allow and Disallow lines, counted as text
}

// ruleLine matches an Allow or Disallow line, as most parsers read one.
var ruleLine = regexp.MustCompile(`(?im)^[ \t]*(dis)?allow[ \t]*:`)

// Corpus reads the *.txt files of dir in the order of their names.
func Corpus(dir string) ([]File, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("corpus %s: no *.txt files", dir)
	}
	files := make([]File, 0, len(paths))
	for _, p := range paths {
		body, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("corpus: %w", err)
		}
		files = append(files, File{Path: p, Body: body, Rules: len(ruleLine.FindAll(body, -1))})
	}
	return files, nil
}

// Median is the file of median size: the lower middle one of an even
// count, sizes sorted, ties in the files' order.
func Median(files []File) File {
	bySize := slices.Clone(files)
	slices.SortStableFunc(bySize, func(a, b File) int { return len(a.Body) - len(b.Body) })
	return bySize[(len(bySize)-1)/2]
}

// MaxOrigins is how many origins Host names.
const MaxOrigins = 1<<24 - 2

// Host is the i-th origin's host, "127.A.B.C" counted from 127.0.0.1 (i
// below MaxOrigins): an IP literal, judged without DNS.
func Host(i int) string {
	n := i + 1
	return "127." + strconv.Itoa(n>>16&0xff) + "." + strconv.Itoa(n>>8&0xff) + "." + strconv.Itoa(n&0xff)
}

// Index is Host's inverse: -1 for any other host (one with a port
// included).
func Index(host string) int {
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is4() {
		return -1
	}
	v := a.As4()
	if v[0] != 127 {
		return -1
	}
	return int(v[1])<<16 | int(v[2])<<8 | int(v[3]) - 1
}

// Each visits origins 0 to n-1 from workers goroutines, each taking the
// next origin not yet taken, and returns the first error a visit returned
// (the workers stop taking origins then).
func Each(workers, n int, visit func(worker, origin int) error) error {
	var (
		next   atomic.Int64
		failed atomic.Pointer[error]
		wg     sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && failed.Load() == nil; i = int(next.Add(1) - 1) {
				if err := visit(w, i); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	return nil
}

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
// heap-<name>-<origins>.pprof, and logs its path to tb.
func WriteHeapProfile(tb testing.TB, dir, name string, origins int) {
	tb.Helper()
	path, err := writeHeapProfile(dir, name, origins)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Logf("heap profile of %d origins: %s", origins, path)
}

func writeHeapProfile(dir, name string, origins int) (string, error) {
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
