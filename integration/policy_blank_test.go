package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyCutShortKeepsTheOld: a policy file emptied (a full disk, a
// tool that truncates before it writes) does not lift the sandboxes on the
// next SIGHUP: the policy in force stays, and the log says why. An empty
// list put there on purpose does lift them.
func TestPolicyCutShortKeepsTheOld(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: *\nAllow: /\n")})
	file := filepath.Join(t.TempDir(), "policy.yaml")
	writePolicy := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writePolicy("crawlers:\n  - token: fenced\n    deny_sites: [\"127.0.0.1\"]\n")
	p := startProxy(t, "ROBOTSGATE_POLICY="+file, "ROBOTSGATE_WATCH_INTERVAL=0")
	client := p.client(t)
	status := func() int {
		t.Helper()
		return get(t, client, o.base()+"/a", "fenced/1.0").status
	}
	if s := status(); s != http.StatusForbidden {
		t.Fatalf("fenced got %d before any reload, want 403", s)
	}

	writePolicy("")
	p.hangUp()
	rec, err := p.output.waitForJSON(requestTimeout, p.exited, func(rec map[string]any) bool {
		return rec["msg"] == "policy file not reloaded; keeping the previous one"
	})
	if err != nil {
		t.Fatalf("the emptied file was not refused: %v", err)
	}
	if e, _ := rec["err"].(string); !strings.Contains(e, "the file is empty") {
		t.Errorf("the refusal says %q", e)
	}
	if s := status(); s != http.StatusForbidden {
		t.Errorf("fenced got %d after an emptied file, want 403: the old policy stays", s)
	}

	writePolicy("crawlers: []\n")
	p.hangUp()
	if _, err := p.output.waitForJSON(requestTimeout, p.exited, func(rec map[string]any) bool {
		return rec["msg"] == "policy reloaded"
	}); err != nil {
		t.Fatalf("an empty list was not loaded: %v", err)
	}
	if s := status(); s != http.StatusOK {
		t.Errorf("fenced got %d under an empty policy, want 200", s)
	}
}
