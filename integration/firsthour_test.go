package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readmeAddr is the address README.md's commands reach the proxy at: the
// default ROBOTSGATE_LISTEN. The test puts its proxy's address there.
const readmeAddr = "127.0.0.1:8080"

// newcomerTool is a client README.md tells a newcomer how to point at
// robotsgate, and how to run it for one URL, saving the body to a file.
type newcomerTool struct {
	name    string // as in README's table of how each client trusts the CA
	command string // the executable
	// missing says why the tool cannot run here, "" when it can.
	missing func() string
	// args fetch the URL into body; status reads the answer's status
	// from the tool's output.
	args   func(url, body string) []string
	status func(stdout, stderr []byte, runErr error) (int, error)
	ua     string // start of the tool's own User-Agent
}

var wgetStatus = regexp.MustCompile(`(?m)^\s*HTTP/\d(?:\.\d)? (\d{3})`)

var newcomerTools = []newcomerTool{
	{
		name: "curl", command: "curl",
		missing: lookPathMissing("curl", ".ci/run installs it"),
		args: func(url, body string) []string {
			return []string{"-sS", "-o", body, "-w", "%{http_code}", url}
		},
		status: func(stdout, stderr []byte, err error) (int, error) {
			if err != nil {
				return 0, fmt.Errorf("%w: %s", err, stderr)
			}
			return strconv.Atoi(string(stdout))
		},
		ua: "curl/",
	},
	{
		name: "wget", command: "wget",
		missing: lookPathMissing("wget", ".ci/run installs it"),
		args: func(url, body string) []string {
			return []string{"--no-verbose", "--server-response", "--content-on-error", "-O", body, url}
		},
		status: func(_, stderr []byte, err error) (int, error) {
			// wget exits 8 when the server answers an error status.
			if exit := (*exec.ExitError)(nil); err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 8) {
				return 0, fmt.Errorf("%w: %s", err, stderr)
			}
			m := wgetStatus.FindAllSubmatch(stderr, -1)
			if len(m) == 0 {
				return 0, fmt.Errorf("no status in wget's output: %s", stderr)
			}
			return strconv.Atoi(string(m[len(m)-1][1]))
		},
		ua: "Wget/",
	},
	{
		name: "Python requests", command: "python3",
		missing: func() string {
			if _, err := exec.LookPath("python3"); err != nil {
				return "python3 is not installed (.ci/run installs it)"
			}
			cmd := exec.Command("python3", "-c", "import requests")
			cmd.Env = cleanEnv()
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Sprintf("Python requests is not installed (.ci/run installs python3-requests): %v %s", err, out)
			}
			return ""
		},
		args: func(url, body string) []string {
			return []string{"-c", `import sys, requests
r = requests.get(sys.argv[1], timeout=30)
open(sys.argv[2], "wb").write(r.content)
print(r.status_code)`, url, body}
		},
		status: func(stdout, stderr []byte, err error) (int, error) {
			if err != nil {
				return 0, fmt.Errorf("%w: %s", err, stderr)
			}
			return strconv.Atoi(strings.TrimSpace(string(stdout)))
		},
		ua: "python-requests/",
	},
}

func lookPathMissing(name, install string) func() string {
	return func() string {
		if _, err := exec.LookPath(name); err != nil {
			return fmt.Sprintf("%s is not installed (%s)", name, install)
		}
		return ""
	}
}

// TestFirstHourFromReadme follows README.md's "Pointing a crawler at it"
// as a newcomer would: it runs README's own lines (the CA download and
// the proxy variables, in both spellings) in a shell, trusts the CA as
// README's table says for each client, and has curl, wget and Python
// requests fetch an allowed page (200, forwarded) and a disallowed one
// (403 naming the rule, never reaching the origin, with an audit record)
// over HTTP and HTTPS. The shell gets no proxy setting but README's: had
// README shown only the upper-case variables, curl and wget would fetch
// plain HTTP straight from the origin and this test would fail.
func TestFirstHourFromReadme(t *testing.T) {
	t.Parallel()
	tools.Look(t, "apt-get install curl", "curl") // README's first step uses it
	steps, trust := readmeFirstSteps(t)

	pages := map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)}
	plain := newOrigin(t, false, pages)
	secure := newOrigin(t, true, pages)
	p := startProxy(t, upstreamCA(t, secure))

	dir := t.TempDir()
	// No ~/.curlrc or ~/.wgetrc: the test's user's settings are not README's.
	wgetrc := filepath.Join(dir, "wgetrc")
	if err := os.WriteFile(wgetrc, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range cleanEnv("CURL_HOME="+dir, "WGETRC="+wgetrc) {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR":
		default:
			env = append(env, kv)
		}
	}
	steps = strings.ReplaceAll(steps, readmeAddr, p.addr)
	exports := readmeExports(t, steps)

	// README's block, as pasted into a shell: the CA lands in the current
	// directory, and the four proxy variables name the proxy.
	out := runShell(t, dir, env, steps+"\nenv | grep -i '^https\\{0,1\\}_proxy=' || true\n")
	if ca, err := os.ReadFile(filepath.Join(dir, "robotsgate-ca.pem")); err != nil || !bytes.Equal(ca, p.caPEM()) {
		t.Fatalf("README's CA download did not write robotsgate-ca.pem with the proxy's CA (%v)", err)
	}
	for _, name := range []string{"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"} {
		if !strings.Contains("\n"+string(out), "\n"+name+"=http://"+p.addr+"\n") {
			t.Errorf("README's commands do not set %s to http://%s; they set:\n%s", name, p.addr, out)
		}
	}

	type fetched struct {
		tool, url string
		status    int
	}
	var want []fetched
	for _, tool := range newcomerTools {
		t.Run(tool.name, func(t *testing.T) {
			if why := tool.missing(); why != "" {
				t.Skip(why)
			}
			how, ok := trust[tool.name]
			if !ok {
				t.Fatalf("README's table of how to trust the CA has no row for %s", tool.name)
			}
			trustLine, trustArgs := trustStep(t, tool, how)
			slug := strings.ToLower(strings.Fields(tool.name)[0])
			for _, o := range []*origin{plain, secure} {
				for _, c := range []struct {
					path   string
					status int
				}{{"/" + slug, http.StatusOK}, {"/private/" + slug, http.StatusForbidden}} {
					url := o.base() + c.path
					body := filepath.Join(t.TempDir(), "body")
					script := exports + "\n" + trustLine + "\nexec \"$@\"\n"
					args := append(append([]string{tool.command}, trustArgs...), tool.args(url, body)...)
					stdout, stderr, err := shell(dir, env, script, args...)
					status, err := tool.status(stdout, stderr, err)
					if err != nil {
						t.Fatalf("%s %s: %v", tool.name, url, err)
					}
					if status != c.status {
						t.Fatalf("%s %s: status %d, want %d; stderr:\n%s", tool.name, url, status, c.status, stderr)
					}
					got, _ := os.ReadFile(body)
					if c.status == http.StatusOK && string(got) != o.page(c.path) {
						t.Errorf("%s %s: body %q, want the origin's page", tool.name, url, got)
					}
					if c.status == http.StatusForbidden && !bytes.Contains(got, []byte("Disallow: /private/ (line 2)")) {
						t.Errorf("%s %s: the 403 does not name the rule:\n%s", tool.name, url, got)
					}
					want = append(want, fetched{tool.ua, url, c.status})
				}
				if n := o.count("/private/" + slug); n != 0 {
					t.Errorf("%s: the origin %s received the disallowed request %d times", tool.name, o.base(), n)
				}
			}
		})
	}

	if code := p.stop(); code != 0 {
		t.Fatalf("robotsgate exited with %d", code)
	}
	recs := p.audit()
	for _, w := range want {
		r := auditFor(t, recs, w.url)
		allowed := w.status == http.StatusOK
		if r.Status != w.status || r.Forwarded != allowed || (r.Verdict == "allow") != allowed || !strings.HasPrefix(r.UserAgent, w.tool) {
			t.Errorf("audit record of %s: status %d, forwarded %v, verdict %q, user_agent %q; want status %d from %s...",
				w.url, r.Status, r.Forwarded, r.Verdict, r.UserAgent, w.status, w.tool)
		}
		if !allowed && (r.Rule != "/private/" || r.RuleLine != 2) {
			t.Errorf("audit record of %s: rule %q line %d, want /private/ line 2", w.url, r.Rule, r.RuleLine)
		}
	}
}

// readmeFirstSteps returns the first shell block of README.md's "Pointing
// a crawler at it" and its table of how each client trusts the CA (client
// → the first command in its row).
func readmeFirstSteps(t *testing.T) (string, map[string]string) {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Pointing a crawler at it\n")
	if !ok {
		t.Fatal(`README.md has no section "Pointing a crawler at it"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sh\n")
	block, _, ok2 := strings.Cut(block, "\n```")
	if !ok || !ok2 || !strings.Contains(block, readmeAddr) {
		t.Fatalf("README.md's %q section has no sh block using %s", "Pointing a crawler at it", readmeAddr)
	}
	trust := make(map[string]string)
	code := regexp.MustCompile("`([^`]+)`")
	for line := range strings.Lines(section) {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		if m := code.FindStringSubmatch(cells[2]); m != nil {
			trust[strings.TrimSpace(cells[1])] = m[1]
		}
	}
	return block, trust
}

// readmeExports is the export lines of README's block, which set the
// proxy variables.
func readmeExports(t *testing.T, block string) string {
	t.Helper()
	var lines []string
	for line := range strings.Lines(block) {
		if strings.HasPrefix(line, "export ") {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	if len(lines) == 0 {
		t.Fatal("README's block exports no proxy variable")
	}
	return strings.Join(lines, "\n")
}

// trustStep turns README's way for tool to trust the CA into a shell line
// ("export NAME=...") or the tool's arguments ("curl --cacert FILE ...").
func trustStep(t *testing.T, tool newcomerTool, how string) (string, []string) {
	t.Helper()
	if strings.HasPrefix(how, "export ") {
		return how, nil
	}
	f := strings.Fields(how)
	if len(f) < 3 || f[0] != tool.command || f[len(f)-1] != "..." {
		t.Fatalf("README's way to trust the CA with %s is %q: neither an export nor %q", tool.name, how, tool.command+" ARGS ...")
	}
	return "", f[1 : len(f)-1]
}

// shell runs script with sh in dir, args as its "$@".
func shell(dir string, env []string, script string, args ...string) (stdout, stderr []byte, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-ec", script, "sh"}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.Bytes(), errOut.Bytes(), err
}

func runShell(t *testing.T, dir string, env []string, script string) []byte {
	t.Helper()
	out, errOut, err := shell(dir, env, script)
	if err != nil {
		t.Fatalf("README's commands failed: %v\n%s", err, errOut)
	}
	return out
}
