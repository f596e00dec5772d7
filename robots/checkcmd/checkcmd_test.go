package checkcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"robotsgate/robots"
)

const robotsTxt = `User-agent: *
Disallow: /private/

User-agent: GPTBot
Disallow: /
`

func run(t *testing.T, stdin string, fetcher Fetcher, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(context.Background(), args, Env{
		Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut, Fetcher: fetcher,
	})
	return code, out.String(), errOut.String()
}

func robotsFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "robots.txt")
	if err := os.WriteFile(path, []byte(robotsTxt), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckFile(t *testing.T) {
	file := robotsFile(t)
	for _, c := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		out   string
	}{
		{"allowed", "", []string{"-user-agent", "ExampleBot", "-robots", file, "https://example.com/", "/public"}, ExitAllowed,
			"allowed\tExampleBot\thttps://example.com/\tno matching rule\n" +
				"allowed\tExampleBot\t/public\tno matching rule\n"},
		{"one disallowed", "", []string{"-user-agent", "ExampleBot", "-robots", file, "https://example.com/private/a?b=c", "https://example.com/x"}, ExitDisallowed,
			"disallowed\tExampleBot\thttps://example.com/private/a?b=c\tdisallow: /private/ (line 2)\n" +
				"allowed\tExampleBot\thttps://example.com/x\tno matching rule\n"},
		{"full user agent", "", []string{"-user-agent", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.0; +https://openai.com/gptbot)", "-robots", file, "/"}, ExitDisallowed,
			"disallowed\tGPTBot\t/\tdisallow: / (line 5)\n"},
		{"browser has no token", "", []string{"-user-agent", "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0", "-robots", file, "/private/"}, ExitDisallowed,
			"disallowed\t*\t/private/\tdisallow: /private/ (line 2)\n"},
		{"urls on stdin", "https://example.com/\n\n# a comment\n  https://example.com/private/x  \n", []string{"-user-agent", "bingbot", "-robots", file}, ExitDisallowed,
			"allowed\tbingbot\thttps://example.com/\tno matching rule\n" +
				"disallowed\tbingbot\thttps://example.com/private/x\tdisallow: /private/ (line 2)\n"},
		{"robots.txt itself", "", []string{"-user-agent", "GPTBot", "-robots", file, "/robots.txt"}, ExitAllowed,
			"allowed\tGPTBot\t/robots.txt\trobots.txt is always allowed\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := run(t, c.stdin, nil, c.args...)
			if code != c.code || out != c.out {
				t.Errorf("exit %d, output:\n%s\nwant exit %d, output:\n%s\nstderr: %s", code, out, c.code, c.out, errOut)
			}
		})
	}
}

func TestCheckJSON(t *testing.T) {
	code, out, _ := run(t, "", nil, "-json", "-user-agent", "ExampleBot", "-robots", robotsFile(t), "https://example.com/private/a")
	if code != ExitDisallowed {
		t.Fatalf("exit %d, want %d", code, ExitDisallowed)
	}
	var got verdictJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output %q is not one JSON object: %v", out, err)
	}
	want := verdictJSON{URL: "https://example.com/private/a", Token: "ExampleBot", Allowed: false, Verdict: "disallowed",
		Reason: "disallow: /private/ (line 2)", Rule: &ruleJSON{Directive: "disallow", Pattern: "/private/", Line: 2},
		Group: "*", GroupLines: []int{1}}
	got.Robots = "" // the temporary file's name
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("got %s\nwant %s", gotJSON, wantJSON)
	}
}

func TestCheckUsageErrors(t *testing.T) {
	file := robotsFile(t)
	for _, c := range []struct {
		name    string
		args    []string
		message string
	}{
		{"no user agent", []string{"-robots", file, "/"}, "-user-agent is required"},
		{"unknown flag", []string{"-user-agnet", "x", "/"}, "flag provided but not defined: -user-agnet"},
		{"unreadable file", []string{"-user-agent", "x", "-robots", filepath.Join(t.TempDir(), "missing.txt"), "/"}, "missing.txt"},
		{"no URL", []string{"-user-agent", "x", "-robots", file}, "no URL given"},
		{"not a URL to fetch", []string{"-user-agent", "x", "/just/a/path"}, `"/just/a/path"`},
		{"ftp URL", []string{"-user-agent", "x", "ftp://example.com/"}, `"ftp://example.com/"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			fetcher := robots.NewFetcher(robots.FetcherOptions{Timeout: time.Second})
			defer fetcher.Close()
			code, _, errOut := run(t, "", fetcher, c.args...)
			if code != ExitUsage || !strings.Contains(errOut, c.message) {
				t.Errorf("exit %d, stderr %q; want exit %d and a message containing %q", code, errOut, ExitUsage, c.message)
			}
		})
	}
}

func TestCheckLive(t *testing.T) {
	var robotsFetches int
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		robotsFetches++
		w.Write([]byte(robotsTxt))
	})
	ok := httptest.NewServer(mux)
	defer ok.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()

	fetcher := robots.NewFetcher(robots.FetcherOptions{Timeout: 5 * time.Second})
	defer fetcher.Close()
	code, out, errOut := run(t, "", fetcher, "-user-agent", "ExampleBot",
		ok.URL+"/", ok.URL+"/private/x", down.URL+"/", missing.URL+"/private/x")
	want := "allowed\tExampleBot\t" + ok.URL + "/\tno matching rule\n" +
		"disallowed\tExampleBot\t" + ok.URL + "/private/x\tdisallow: /private/ (line 2)\n" +
		"disallowed\tExampleBot\t" + down.URL + "/\trobots.txt 503: complete disallow\n" +
		"allowed\tExampleBot\t" + missing.URL + "/private/x\trobots.txt 404: no restrictions\n"
	if code != ExitDisallowed || out != want {
		t.Errorf("exit %d, output:\n%s\nwant exit 1, output:\n%s\nstderr: %s", code, out, want, errOut)
	}
	if robotsFetches != 1 {
		t.Errorf("the origin's robots.txt was fetched %d times for two URLs, want once", robotsFetches)
	}
}
