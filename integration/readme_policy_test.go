package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmePolicyExample loads the policy README.md shows and judges with
// it as its prose says: acme is kept to *.acme.example, GPTBot off
// example.org (line 5, as the prose says), and archiver's exception lets
// it fetch what robots.txt disallows on example.com.
func TestReadmePolicyExample(t *testing.T) {
	t.Parallel()
	example := yamlBlock(t, readFile(t, "README.md"))
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	robots := filepath.Join(t.TempDir(), "robots.txt")
	if err := os.WriteFile(robots, []byte("User-agent: *\nDisallow: /reports/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string // the line check prints, up to the reason's first words
	}{
		{[]string{"-user", "acme", "-user-agent", "acme", "https://www.acme.example/a"},
			"allowed\tacme\thttps://www.acme.example/a\t"},
		{[]string{"-user", "acme", "-user-agent", "acme", "https://example.com/a"},
			"disallowed\tacme\thttps://example.com/a\tthe operator's policy keeps this crawler off this site: policy.yaml line 3: destination: allow_sites: *.acme.example"},
		{[]string{"-user", "archiver", "-user-agent", "archiver", "https://www.example.com/reports/2026.pdf"},
			"allowed\tarchiver\thttps://www.example.com/reports/2026.pdf\tpolicy: policy.yaml line 10: exception: allow: /reports/"},
		{[]string{"-user-agent", "Mozilla/5.0 (compatible; GPTBot/1.2)", "http://www.example.org/"},
			"disallowed\tGPTBot\thttp://www.example.org/\tthe operator's policy keeps this crawler off this site: policy.yaml line 5: destination: deny_sites: domain:example.org"},
		{[]string{"-user-agent", "archiver", "https://www.example.com/reports/2026.pdf"},
			"disallowed\tarchiver\thttps://www.example.com/reports/2026.pdf\tdisallow: /reports/"},
	} {
		args := append([]string{"check", "-policy", file, "-robots", robots}, c.args...)
		_, stdout, stderr := runBinary(t, "", nil, args...)
		if !strings.HasPrefix(stdout, c.want) {
			t.Errorf("robotsgate %s\nprinted %q\nwant it to start %q\nstderr:\n%s", strings.Join(args, " "), stdout, c.want, stderr)
		}
	}
}

// yamlBlock returns the one ```yaml block of a Markdown text.
func yamlBlock(t *testing.T, markdown string) string {
	t.Helper()
	_, rest, found := strings.Cut(markdown, "\n```yaml\n")
	block, _, closed := strings.Cut(rest, "\n```\n")
	if !found || !closed || strings.Contains(rest[len(block):], "\n```yaml\n") {
		t.Fatal("want exactly one ```yaml block")
	}
	return block + "\n"
}

// TestReadmeUsageRecipe follows README.md's recipe for a usage refusal:
// the robots.txt its printf writes, robotsgate started with the
// environment it gives, and the curl it runs gets the 403.
func TestReadmeUsageRecipe(t *testing.T) {
	t.Parallel()
	readme := readFile(t, "README.md")
	robots := regexp.MustCompile("`printf '([^']*)' > robots.txt`").FindStringSubmatch(readme)
	env := regexp.MustCompile("`((?:ROBOTSGATE_[A-Z_]+=[^ `]+ )+)go run \\.`").FindStringSubmatch(readme)
	if robots == nil || env == nil {
		t.Fatal("README.md's usage recipe has no printf > robots.txt, or no ROBOTSGATE_... go run . command")
	}
	body := strings.ReplaceAll(robots[1], `\n`, "\n")
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(body)})
	p := startProxy(t, strings.Fields(env[1])...)
	r := get(t, p.client(t), o.base()+"/", "curl/8.5.0")
	if r.status != http.StatusForbidden || !strings.HasPrefix(r.header.Get("X-Robotsgate-Decision"), "usage-refused;") {
		t.Errorf("the recipe's curl got %d, X-Robotsgate-Decision %q; want 403 usage-refused", r.status, r.header.Get("X-Robotsgate-Decision"))
	}
}
