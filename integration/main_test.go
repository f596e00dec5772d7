package integration

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// binary is the robotsgate executable built by TestMain. It is written once,
// before any test runs, and only read afterwards.
var binary string

// sourcesNoted makes the first test that runs the binary note its sources.
var sourcesNoted sync.Once

// command runs the binary; see noteSources for why it opens the sources.
func command(ctx context.Context, t testing.TB, args ...string) *exec.Cmd {
	sourcesNoted.Do(func() {
		if err := noteSources(".."); err != nil {
			t.Fatalf("reading the sources: %v", err)
		}
	})
	return exec.CommandContext(ctx, binary, args...)
}

// buildTimeout bounds the one build of the binary; a cold build with the
// race detector on a 2-core machine takes well under this.
const buildTimeout = 5 * time.Minute

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "robotsgate-integration-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: temporary directory: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "robotsgate")

	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	// go test puts its own GOROOT/bin first in PATH, so this is the same
	// toolchain that built the tests.
	build := exec.CommandContext(ctx, "go", append(args, ".")...)
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: building robotsgate failed (go %v in ..): %v\n%s\n", args, err, out)
		return 1
	}
	return tools.Run(m)
}

// noteSources opens every Go source and module file of the binary, so
// that go test's result cache, which tracks the files tests open, knows a
// cached result is stale once the proxy's code changes: the build runs in
// another process, whose reads it does not see (and before the tests,
// when nothing is tracked yet).
func noteSources(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata"):
			return filepath.SkipDir
		case d.IsDir() || !(strings.HasSuffix(path, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum"):
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		return f.Close()
	})
}
