package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// binary is the robotsgate executable built by TestMain. It is written once,
// before any test runs, and only read afterwards.
var binary string

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
	return m.Run()
}
