package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// runBinary runs robotsgate with args, stdin and env added to the clean
// environment, and returns its exit code and output.
func runBinary(t *testing.T, stdin string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := command(ctx, t, args...)
	cmd.Env = cleanEnv(env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("robotsgate %q still running after %v\nstderr:\n%s", args, commandTimeout, errOut.String())
	}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("run robotsgate %q: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

// refusedStart runs robotsgate serve with env, on a free port and with
// files of its own, and checks that it refused to start: exit status 2,
// nothing on standard output, standard error matching each of want
// (regular expressions). It returns standard error.
func refusedStart(t *testing.T, env []string, want ...string) string {
	t.Helper()
	dir := t.TempDir()
	env = append([]string{
		"ROBOTSGATE_LISTEN=127.0.0.1:0",
		"ROBOTSGATE_CA_DIR=" + filepath.Join(dir, "ca"),
		"ROBOTSGATE_AUDIT_LOG=" + filepath.Join(dir, "audit.log"),
		"ROBOTSGATE_SHUTDOWN_GRACE=0s",
	}, env...)
	code, stdout, stderr := runBinary(t, "", env, "serve")
	if code != 2 {
		t.Errorf("exit %d, want 2\nstderr:\n%s", code, stderr)
	}
	for _, w := range want {
		if !regexp.MustCompile(w).MatchString(stderr) {
			t.Errorf("stderr does not match %q:\n%s", w, stderr)
		}
	}
	if strings.Contains(stderr, "robotsgate listening") || stdout != "" {
		t.Errorf("robotsgate started or wrote to stdout (%q):\n%s", stdout, stderr)
	}
	return stderr
}

// TestInvalidConfiguration: a bad setting, a misspelt variable or a stray
// argument stops robotsgate before it listens, with exit status 2 and a
// message naming the problem.
func TestInvalidConfiguration(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"unknown mode", []string{"ROBOTSGATE_MODE=bogus"}, nil,
			[]string{"invalid configuration", "ROBOTSGATE_MODE", `"bogus" is not valid`, "enforce", "audit"}},
		{"duration without a unit", []string{"ROBOTSGATE_FETCH_TIMEOUT=5"}, nil,
			[]string{"invalid configuration", "ROBOTSGATE_FETCH_TIMEOUT", `"5" is not a duration`}},
		{"misspelt variable", []string{"ROBOTSGATE_LISTN=127.0.0.1:0"}, nil,
			[]string{"invalid configuration", "ROBOTSGATE_LISTN", "unknown variable", "did you mean ROBOTSGATE_LISTEN?"}},
		// Pacing (issue 10); the default ROBOTSGATE_CLIENT_IDLE_TIMEOUT is 2m.
		{"unknown mode", []string{"ROBOTSGATE_CRAWL_DELAY=sometimes"}, nil,
			[]string{"ROBOTSGATE_CRAWL_DELAY", `"sometimes"`}},
		{"default without a unit", []string{"ROBOTSGATE_DEFAULT_CRAWL_DELAY=5"}, nil,
			[]string{"ROBOTSGATE_DEFAULT_CRAWL_DELAY", `"5"`}},
		{"cap not a duration", []string{"ROBOTSGATE_MAX_CRAWL_DELAY=soon"}, nil,
			[]string{"ROBOTSGATE_MAX_CRAWL_DELAY", `"soon"`}},
		{"max wait not a duration", []string{"ROBOTSGATE_MAX_WAIT=forever"}, nil,
			[]string{"ROBOTSGATE_MAX_WAIT", `"forever"`}},
		{"max wait as long as the idle timeout", []string{"ROBOTSGATE_MAX_WAIT=2m"}, nil,
			[]string{"ROBOTSGATE_MAX_WAIT"}},
		{"max wait beyond a set idle timeout", []string{"ROBOTSGATE_CLIENT_IDLE_TIMEOUT=30s", "ROBOTSGATE_MAX_WAIT=45s"}, nil,
			[]string{"ROBOTSGATE_MAX_WAIT"}},
		{"connections not a number", []string{"ROBOTSGATE_MAX_CONNS_PER_ORIGIN=many"}, nil,
			[]string{"ROBOTSGATE_MAX_CONNS_PER_ORIGIN", `"many"`}},
		{"cap past a day", []string{"ROBOTSGATE_MAX_CRAWL_DELAY=25h"}, nil,
			[]string{"ROBOTSGATE_MAX_CRAWL_DELAY", `"25h"`}},
		{"default beyond the cap", []string{"ROBOTSGATE_DEFAULT_CRAWL_DELAY=2m"}, nil,
			[]string{"ROBOTSGATE_DEFAULT_CRAWL_DELAY", `"2m"`}},
		{"off with a default delay", []string{"ROBOTSGATE_CRAWL_DELAY=off", "ROBOTSGATE_DEFAULT_CRAWL_DELAY=1s"}, nil,
			[]string{"ROBOTSGATE_DEFAULT_CRAWL_DELAY"}},
		{"off with a connection limit", []string{"ROBOTSGATE_CRAWL_DELAY=off", "ROBOTSGATE_MAX_CONNS_PER_ORIGIN=2"}, nil,
			[]string{"ROBOTSGATE_MAX_CONNS_PER_ORIGIN"}},
		{"serve with an argument", nil, []string{"serve", "extra-arg"},
			[]string{"robotsgate serve takes no arguments", "extra-arg", "ROBOTSGATE_"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			// Valid settings for everything else, so that a check that
			// stopped working shows as a proxy starting on a free port.
			env := append([]string{
				"ROBOTSGATE_LISTEN=127.0.0.1:0",
				"ROBOTSGATE_CA_DIR=" + filepath.Join(dir, "ca"),
				"ROBOTSGATE_AUDIT_LOG=" + filepath.Join(dir, "audit.log"),
				"ROBOTSGATE_SHUTDOWN_GRACE=0s",
			}, c.env...)
			code, stdout, stderr := runBinary(t, "", env, c.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2\nstderr:\n%s", code, stderr)
			}
			for _, want := range c.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if strings.Contains(stderr, "robotsgate listening") || stdout != "" {
				t.Errorf("robotsgate started or wrote to stdout (%q):\n%s", stdout, stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, "ca")); err == nil {
				t.Errorf("robotsgate created its CA despite the bad configuration")
			}
		})
	}
}

// checkRobots has a "*" group disallowing /private/ on line 2 and a
// bingbot group disallowing everything on line 5.
const checkRobots = "User-agent: *\nDisallow: /private/\n\nUser-agent: bingbot\nDisallow: /\n"

// TestCheckCommand runs "robotsgate check" against a robots.txt file, as a
// site owner would, and checks its output, format and exit status.
func TestCheckCommand(t *testing.T) {
	t.Parallel()
	robotsFile := filepath.Join(t.TempDir(), "robots.txt")
	if err := os.WriteFile(robotsFile, []byte(checkRobots), 0o644); err != nil {
		t.Fatal(err)
	}
	const bingbot = "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)"
	for _, c := range []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stdout string
	}{
		{"all allowed", "", []string{"-user-agent", "ExampleBot", "-robots", robotsFile, "http://localhost/", "/public"}, 0,
			"allowed\tExampleBot\thttp://localhost/\tno matching rule\n" +
				"allowed\tExampleBot\t/public\tno matching rule\n"},
		{"one disallowed", "", []string{"-user-agent", "ExampleBot", "-robots", robotsFile, "http://localhost/private/a?b=c", "/x"}, 1,
			"disallowed\tExampleBot\thttp://localhost/private/a?b=c\tdisallow: /private/ (line 2)\n" +
				"allowed\tExampleBot\t/x\tno matching rule\n"},
		{"URLs on stdin", "# a comment\nhttp://localhost/private/\n\n/open\n", []string{"-user-agent", "ExampleBot", "-robots", robotsFile}, 1,
			"disallowed\tExampleBot\thttp://localhost/private/\tdisallow: /private/ (line 2)\n" +
				"allowed\tExampleBot\t/open\tno matching rule\n"},
		{"token from a full User-Agent", "", []string{"-user-agent", bingbot, "-robots", robotsFile, "/anything"}, 1,
			"disallowed\tbingbot\t/anything\tdisallow: / (line 5)\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runBinary(t, c.stdin, nil, append([]string{"check"}, c.args...)...)
			if code != c.code || stdout != c.stdout {
				t.Errorf("exit %d, stdout:\n%s\nwant exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, c.code, c.stdout, stderr)
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		t.Parallel()
		code, stdout, stderr := runBinary(t, "", nil, "check", "-json", "-user-agent", "ExampleBot", "-robots", robotsFile,
			"/private/x", "/ok")
		if code != 1 {
			t.Errorf("exit %d, want 1; stderr:\n%s", code, stderr)
		}
		// The words of the audit log and the JSON 403 (see TestOneVerdictShape).
		want := []map[string]any{
			{"url": "/private/x", "user_agent": "ExampleBot", "token": "ExampleBot", "verdict": "disallow",
				"reason": "disallow: /private/ (line 2)", "rule": "/private/", "rule_line": 2.0,
				"group": "*", "group_lines": []any{1.0}, "robots_txt": robotsFile, "crawl_delay": 0.0},
			{"url": "/ok", "user_agent": "ExampleBot", "token": "ExampleBot", "verdict": "allow",
				"reason": "no matching rule", "group": "*", "group_lines": []any{1.0}, "robots_txt": robotsFile, "crawl_delay": 0.0},
		}
		lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		if len(lines) != len(want) {
			t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), stdout)
		}
		for i, line := range lines {
			var got map[string]any
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, line)
			}
			if !reflect.DeepEqual(got, want[i]) {
				t.Errorf("line %d: %v\nwant %v", i+1, got, want[i])
			}
		}
	})

	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"no -user-agent", []string{"-robots", robotsFile, "/x"}, []string{"-user-agent is required"}},
		{"unreadable -robots file", []string{"-user-agent", "ExampleBot", "-robots", filepath.Join(t.TempDir(), "missing.txt"), "/x"},
			[]string{"-robots", "missing.txt", "no such file"}},
		{"not a URL without -robots", []string{"-user-agent", "ExampleBot", "not-a-url"},
			[]string{`"not-a-url"`, "http or https"}},
		{"no URL at all", []string{"-user-agent", "ExampleBot", "-robots", robotsFile}, []string{"no URL given"}},
	} {
		t.Run("usage/"+c.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runBinary(t, "", nil, append([]string{"check"}, c.args...)...)
			if code != 2 || stdout != "" {
				t.Errorf("exit %d, stdout %q; want exit 2 and nothing on stdout", code, stdout)
			}
			for _, want := range c.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
}

// TestCheckCommandLive lets "robotsgate check" fetch each origin's
// robots.txt: a 503 disallows everything, a 404 nothing, and each origin
// is asked once.
func TestCheckCommandLive(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status int
		code   int
		line   string // the expected output line, with URL standing for the URL
	}{
		{http.StatusServiceUnavailable, 1, "disallowed\tExampleBot\tURL\trobots.txt 503: complete disallow\n"},
		{http.StatusNotFound, 0, "allowed\tExampleBot\tURL\trobots.txt 404: no restrictions\n"},
	} {
		t.Run(http.StatusText(c.status), func(t *testing.T) {
			t.Parallel()
			o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": statusPage(c.status)})
			urls := []string{"http://" + o.addr + "/page", "http://" + o.addr + "/private/other"}
			code, stdout, stderr := runBinary(t, "", nil, append([]string{"check", "-user-agent", "ExampleBot/2.0"}, urls...)...)
			want := ""
			for _, u := range urls {
				want += strings.Replace(c.line, "URL", u, 1)
			}
			if code != c.code || stdout != want {
				t.Errorf("exit %d, stdout:\n%s\nwant exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, c.code, want, stderr)
			}
			if n := o.count("/robots.txt"); n != 1 {
				t.Errorf("robots.txt fetched %d times, want 1", n)
			}
		})
	}
}

// TestVersion: "robotsgate version" prints its name and a version.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runBinary(t, "", nil, "version")
	if code != 0 || !regexp.MustCompile(`^robotsgate \S+\n$`).MatchString(stdout) {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 0 and \"robotsgate VERSION\"", code, stdout, stderr)
	}
}
