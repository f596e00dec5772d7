package robots

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// readTestdata reads a file under testdata/. The data travels with the
// repository, so a missing file is a failure, never a skip.
func readTestdata(tb testing.TB, rel string) []byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", rel))
	if err != nil {
		tb.Fatalf("read test data: %v", err)
	}
	return data
}

// requireREADME fails unless robots/README.md states each of the
// given texts, so a figure the tests measure cannot change without the
// README changing with it. Runs of white space count as one space, since
// the README's prose is wrapped freely.
func requireREADME(t *testing.T, texts ...string) {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(data)), " ")
	for _, text := range texts {
		if !strings.Contains(readme, text) {
			t.Errorf("robots/README.md does not state %q, the figure measured on the test data; update it", text)
		}
	}
}

// thousands formats n as README does: 1,597.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
