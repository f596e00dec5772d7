package redistest

import (
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
)

// Tools tallies the tests of one test binary that were skipped because a
// program they run is not installed, so that TestMain can say so after
// the run, even without -v: a skip alone shows only with -v, and a
// green run that tested less than it seems is a trap. A package's
// TestMain owns one. It lives here because every package whose tests run
// an outside program needs redis-server, hence this package, too.
type Tools struct {
	pkg string

	mu      sync.Mutex
	skipped map[string]*toolSkips // by the program's name
}

// toolSkips are the tests skipped for want of one program.
type toolSkips struct {
	install string
	tests   int
}

// NewTools returns an empty tally for the tests of package pkg (its
// import path, which begins each line of Report).
func NewTools(pkg string) *Tools {
	return &Tools{pkg: pkg, skipped: make(map[string]*toolSkips)}
}

// Look returns the path of program name, or of the first of also (other
// names, or absolute paths outside PATH) that is installed. When none
// is, it counts t as skipped for want of name and skips t, saying the
// command that installs it.
func (ts *Tools) Look(t testing.TB, install, name string, also ...string) string {
	t.Helper()
	for _, n := range append([]string{name}, also...) {
		if path, err := exec.LookPath(n); err == nil {
			return path
		}
	}
	ts.mu.Lock()
	s := ts.skipped[name]
	if s == nil {
		s = &toolSkips{install: install}
		ts.skipped[name] = s
	}
	s.tests++
	ts.mu.Unlock()
	t.Skipf("%s not found (%s)", name, install)
	return ""
}

// LookRedis is Look for redis-server, which Start runs.
func (ts *Tools) LookRedis(t testing.TB) string {
	t.Helper()
	return ts.Look(t, "apt-get install redis-server", "redis-server")
}

// Report writes one line per missing program, in the order of their
// names, of the form
//
//	robotsgate/integration: skipped 3 tests: redis-server not found (apt-get install redis-server)
//
// and nothing when every program was found.
func (ts *Tools) Report(w io.Writer) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(ts.skipped)) {
		s := ts.skipped[name]
		tests := "tests"
		if s.tests == 1 {
			tests = "test"
		}
		fmt.Fprintf(w, "%s: skipped %d %s: %s not found (%s)\n", ts.pkg, s.tests, tests, name, s.install)
	}
}

// Run runs the tests of m, then reports to standard error, and returns
// m's exit code: TestMain is os.Exit(tools.Run(m)).
func (ts *Tools) Run(m *testing.M) int {
	code := m.Run()
	ts.Report(os.Stderr)
	return code
}
