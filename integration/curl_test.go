package integration

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCurl uses the proxy as a user would, with curl -x and --cacert the
// CA robotsgate wrote: an allowed URL arrives whole, over HTTP and HTTPS,
// and a disallowed one is refused with 403.
func TestCurl(t *testing.T) {
	t.Parallel()
	curl := tools.Look(t, "apt-get install curl", "curl")
	file := randomBytes(t, 1<<20)
	pages := map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots), "/file": bytesPage(file)}
	plain := newOrigin(t, false, pages)
	secure := newOrigin(t, true, pages)
	p := startProxy(t, upstreamCA(t, secure))
	caFile := filepath.Join(p.caDir, "ca.pem")

	for _, c := range []struct {
		name   string
		o      *origin
		url    string
		status string
	}{
		{"http allowed", plain, "http://" + plain.addr + "/file", "200"},
		{"http disallowed", plain, "http://" + plain.addr + "/private/file", "403"},
		{"https allowed", secure, "https://" + secure.addr + "/file", "200"},
		{"https disallowed", secure, "https://" + secure.addr + "/private/file", "403"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "body")
			ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
			defer cancel()
			// -q first: no ~/.curlrc.
			cmd := exec.CommandContext(ctx, curl, "-q", "-sS", "-x", p.url.String(), "--cacert", caFile,
				"-A", crawlerUA, "-o", out, "-w", "%{http_code}", c.url)
			cmd.Env = cleanEnv()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			status, err := cmd.Output()
			if err != nil {
				t.Fatalf("curl %s: %v\n%s", c.url, err, stderr.Bytes())
			}
			if string(status) != c.status {
				t.Fatalf("curl %s: status %s, want %s", c.url, status, c.status)
			}
			body, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if c.status == "200" {
				if !bytes.Equal(body, file) {
					t.Errorf("curl %s: %d bytes that differ from the origin's %d", c.url, len(body), len(file))
				}
				return
			}
			if !bytes.Contains(body, []byte("Disallow: /private/ (line 2)")) {
				t.Errorf("curl %s: the 403 does not name the rule:\n%s", c.url, body)
			}
			if n := c.o.count("/private/file"); n != 0 {
				t.Errorf("the origin received the disallowed request %d times", n)
			}
		})
	}
}
