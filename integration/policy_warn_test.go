package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyWarnsOfSettingsThatVoidIt: a policy whose pace bounds nothing
// paces, or whose user entries a bot may step out of, is loaded with a
// warning saying which setting voids what.
func TestPolicyWarnsOfSettingsThatVoidIt(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte("crawlers:\n  - user: acme\n    max_concurrency: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	creds := credentialsFile(t, newCredential("acme", ""))
	for _, c := range []struct {
		name string
		env  []string
		want []string // the warnings' first words
	}{
		{"nothing paced, no credentials", []string{"ROBOTSGATE_CRAWL_DELAY=off"},
			[]string{"policy: ROBOTSGATE_CRAWL_DELAY=off paces nothing", "policy: ROBOTSGATE_AUTH=off"}},
		{"credentials optional", []string{"ROBOTSGATE_CREDENTIALS_FILE=" + creds, "ROBOTSGATE_AUTH=optional"},
			[]string{"policy: ROBOTSGATE_AUTH=optional"}},
		{"credentials required", []string{"ROBOTSGATE_CREDENTIALS_FILE=" + creds}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := startProxy(t, append(c.env, "ROBOTSGATE_POLICY="+file)...)
			p.stop()
			var warned []string
			for line := range strings.Lines(p.output.String()) {
				if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, `"msg":"policy: `) {
					warned = append(warned, line)
				}
			}
			if len(warned) != len(c.want) {
				t.Fatalf("%d policy warnings, want %d:\n%s", len(warned), len(c.want), strings.Join(warned, ""))
			}
			for i, want := range c.want {
				if !strings.Contains(warned[i], `"msg":"`+want) {
					t.Errorf("warning %d: %s\nwant %q", i, warned[i], want)
				}
			}
		})
	}
}
