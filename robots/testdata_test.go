package robots

import (
	"os"
	"path/filepath"
	"testing"
)

// sharedDir is the project's shared test data, beside the repository.
const sharedDir = "../../shared"

// readShared reads a file from ../shared. It skips the test only when the
// whole folder is absent; a missing file inside it is a failure.
func readShared(t testing.TB, rel string) []byte {
	t.Helper()
	if _, err := os.Stat(sharedDir); err != nil {
		t.Skipf("test data folder %s is absent (%v): place shared/ beside the repository to run this test", sharedDir, err)
	}
	data, err := os.ReadFile(filepath.Join(sharedDir, rel))
	if err != nil {
		t.Fatalf("read shared test data: %v", err)
	}
	return data
}
