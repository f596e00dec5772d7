package redistest

import (
	"fmt"
	"strings"
	"testing"
)

// TestToolsReport: a program found skips nothing and is not reported; a
// missing one skips each test that looks for it and is reported once,
// with the count and the command that installs it, whether or not -v.
func TestToolsReport(t *testing.T) {
	ts := NewTools("robotsgate/example")
	t.Run("found", func(t *testing.T) {
		if path := ts.Look(t, "apt-get install sh", "robotsgate-no-such-program", "/bin/sh"); path != "/bin/sh" {
			t.Errorf("Look = %q, want /bin/sh, the second name", path)
		}
	})
	// A missing program skips the test that looks for it: recorded here,
	// so that this test itself skips nothing.
	for _, name := range []string{"robotsgate-missing-b", "robotsgate-missing-a", "robotsgate-missing-b"} {
		tb := &skipRecorder{TB: t}
		if path := ts.Look(tb, "apt-get install "+name, name); path != "" || !strings.Contains(tb.skipped, name+" not found") {
			t.Errorf("Look(%s) = %q, skip %q; want no path and a skip naming it", name, path, tb.skipped)
		}
	}
	var out strings.Builder
	ts.Report(&out)
	want := "robotsgate/example: skipped 1 test: robotsgate-missing-a not found (apt-get install robotsgate-missing-a)\n" +
		"robotsgate/example: skipped 2 tests: robotsgate-missing-b not found (apt-get install robotsgate-missing-b)\n"
	if out.String() != want {
		t.Errorf("Report:\n%s\nwant:\n%s", out.String(), want)
	}
}

// skipRecorder is a test that records its skip instead of ending.
type skipRecorder struct {
	testing.TB
	skipped string
}

func (r *skipRecorder) Skipf(format string, args ...any) { r.skipped = fmt.Sprintf(format, args...) }
