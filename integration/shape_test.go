package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOneVerdictShape: the same refusal reads the same in the audit log,
// in the JSON 403 and in check -json: the same field names and values.
func TestOneVerdictShape(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, false, map[string]http.HandlerFunc{
		"/robots.txt": robotsTxt("User-agent: ExampleBot\nAllow: /private/open\nDisallow: /private/\n"),
	})
	p := startProxy(t)
	const userAgent = "ExampleBot/2.1 (+https://example.com/bot)"
	target := o.base() + "/private/x"

	req, err := http.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "application/json")
	resp, err := p.client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var page map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("JSON 403: status %d, %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	p.stop()
	audit := auditFor(t, p.audit(), target).raw

	code, stdout, stderr := runBinary(t, "", nil, "check", "-json", "-user-agent", userAgent, target)
	if code != 1 {
		t.Fatalf("check: exit %d, want 1\n%s", code, stderr)
	}
	var check map[string]any
	if err := json.Unmarshal([]byte(stdout), &check); err != nil {
		t.Fatalf("check -json: %v\n%s", err, stdout)
	}

	want := map[string]any{
		"url": target, "user_agent": userAgent, "token": "ExampleBot", "verdict": "disallow",
		"reason": "disallow: /private/ (line 3)", "rule": "/private/", "rule_line": 3.0,
		"group": "ExampleBot", "group_lines": []any{1.0}, "robots_txt": o.base() + "/robots.txt",
		"robots_outcome": "ok", "robots_status": 200.0,
	}
	for name, got := range map[string]map[string]any{"audit record": audit, "JSON 403": page, "check -json": check} {
		for field, value := range want {
			if !reflect.DeepEqual(got[field], value) {
				t.Errorf("%s: %s = %#v, want %#v", name, field, got[field], value)
			}
		}
	}
}

// TestCheckInterrupt: Ctrl-C while check waits for an origin stops it at
// once with exit status 130, having printed nothing for the URL it was
// judging.
func TestCheckInterrupt(t *testing.T) {
	t.Parallel()
	fetching := make(chan struct{}, 1)
	hangs := newOrigin(t, false, map[string]http.HandlerFunc{
		"/robots.txt": func(w http.ResponseWriter, r *http.Request) {
			fetching <- struct{}{}
			<-r.Context().Done()
		},
	})
	ctx := t.Context()
	cmd := command(ctx, t, "check", "-user-agent", "ExampleBot", hangs.base()+"/a", hangs.base()+"/b")
	// A fetch that could only end by its timeout: anything that ends it
	// sooner is the interrupt.
	cmd.Env = cleanEnv("ROBOTSGATE_FETCH_TIMEOUT=5m")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fetching:
	case <-time.After(commandTimeout):
		t.Fatal("check never fetched robots.txt")
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(commandTimeout):
		cmd.Process.Kill()
		t.Fatal("check did not stop at Ctrl-C")
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 || out.String() != "" || !strings.Contains(errOut.String(), "interrupted") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 130, nothing printed, and a word that it was interrupted", code, out.String(), errOut.String())
	}
}

// TestNoSystemRoots: with no root certificates to load, robotsgate does
// not start quietly unable to verify any origin: it says what to do.
func TestNoSystemRoots(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A certificate "file" that is a directory, and no directory: loading
	// the system roots fails.
	code, _, stderr := runBinary(t, "", []string{"SSL_CERT_FILE=" + dir, "SSL_CERT_DIR=" + dir + "/none",
		"ROBOTSGATE_LISTEN=127.0.0.1:0", "ROBOTSGATE_MITM=false"}, "serve")
	if code != 2 || !strings.Contains(stderr, "root certificates") || !strings.Contains(stderr, "ROBOTSGATE_UPSTREAM_CA_FILE") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and a message naming ROBOTSGATE_UPSTREAM_CA_FILE", code, stderr)
	}

	// check needs no roots to judge against a file, and says why it
	// cannot fetch when asked to.
	noRoots := []string{"SSL_CERT_FILE=" + dir, "SSL_CERT_DIR=" + dir + "/none"}
	file := filepath.Join(dir, "robots.txt")
	if err := os.WriteFile(file, []byte("User-agent: *\nDisallow: /private/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runBinary(t, "", noRoots, "check", "-user-agent", "x", "-robots", file, "/private/a")
	if code != 1 || !strings.HasPrefix(stdout, "disallowed\t") {
		t.Errorf("check -robots without system roots: exit %d, stdout %q, stderr %q; want the verdict", code, stdout, stderr)
	}
	code, _, stderr = runBinary(t, "", noRoots, "check", "-user-agent", "x", "https://example.com/")
	if code != 2 || !strings.Contains(stderr, "cannot be fetched") || !strings.Contains(stderr, "ROBOTSGATE_UPSTREAM_CA_FILE") {
		t.Errorf("check of a live URL without system roots: exit %d, stderr %q; want exit 2 and why", code, stderr)
	}
}

// TestCheckListsIgnoredLines: check shows the lines of a robots.txt that
// do not count, for a file and for a fetched one, on standard error.
func TestCheckListsIgnoredLines(t *testing.T) {
	t.Parallel()
	const body = "User-agent: *\nDisallow: /private/\nNoindex-Please: /x\n"
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(body)})
	file := filepath.Join(t.TempDir(), "robots.txt")
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"file":    {"check", "-user-agent", "x", "-robots", file, "/a"},
		"fetched": {"check", "-user-agent", "x", o.base() + "/a"},
	} {
		code, _, stderr := runBinary(t, "", nil, args...)
		if code != 0 || !strings.Contains(stderr, `line 3: unknown key "Noindex-Please"`) {
			t.Errorf("%s: exit %d, stderr %q; want the unknown key listed", name, code, stderr)
		}
	}
}
