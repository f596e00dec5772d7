package check

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"robotsgate/proxy/audit"
	"robotsgate/proxy/pace"
	"robotsgate/robots"
	"robotsgate/robots/fetch"
	"strings"
	"testing"
	"time"
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
		{"a product token is itself", "", []string{"-user-agent", "GPTBot_", "-robots", file, "/", "/private/"}, ExitDisallowed,
			"allowed\tGPTBot_\t/\tno matching rule\n" +
				"disallowed\tGPTBot_\t/private/\tdisallow: /private/ (line 2)\n"},
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
	file := robotsFile(t)
	code, out, _ := run(t, "", nil, "-json", "-user-agent", "ExampleBot", "-robots", file, "https://example.com/private/a")
	if code != ExitDisallowed {
		t.Fatalf("exit %d, want %d", code, ExitDisallowed)
	}
	var got jsonLine
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("output %q is not one JSON decision: %v", out, err)
	}
	want := jsonLine{Decision: robots.Decision{URL: "https://example.com/private/a", UserAgent: "ExampleBot", Token: "ExampleBot",
		Verdict: "disallow", Reason: "disallow: /private/ (line 2)", Rule: "/private/", RuleLine: 2,
		Group: "*", GroupLines: []int{1}, RobotsTxt: file}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if !strings.Contains(out, `"crawl_delay":0`) {
		t.Errorf("no crawl_delay in %s: it is always there, 0 for none", out)
	}
}

// TestCheckDelay: -json gives the delay the proxy would keep, with its
// source and line, after the default and the cap; the text columns do not
// change.
func TestCheckDelay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "robots.txt")
	body := "User-agent: bingbot\nCrawl-delay: 10\n\nUser-agent: yandexbot\nCrawl-delay: 1\nRequest-rate: 1/5\n\n" +
		"User-agent: slowbot\nCrawl-delay: 86400\n\nUser-agent: quickbot\nCrawl-delay: 0.5\nDisallow: /private/\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	policy := pace.Policy{Default: 2 * time.Second, Max: time.Minute}
	for _, c := range []struct {
		ua     string
		delay  float64
		source string
		line   int
	}{
		{"bingbot", 10, "crawl-delay", 2},
		{"Mozilla/5.0 (compatible; YandexBot/3.0)", 5, "request-rate", 6},
		{"slowbot", 60, "cap", 9},
		{"quickbot", 0.5, "crawl-delay", 12},
		{"GPTBot", 2, "default", 0},
	} {
		var out, errOut bytes.Buffer
		env := Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Pace: policy}
		Run(context.Background(), []string{"-json", "-user-agent", c.ua, "-robots", path, "/a"}, env)
		var got jsonLine
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%s: %q: %v", c.ua, out.String(), err)
		}
		if got.CrawlDelay != c.delay || got.CrawlDelaySource != c.source || got.CrawlDelayLine != c.line {
			t.Errorf("%s: delay %v from %q line %d, want %v from %q line %d", c.ua, got.CrawlDelay, got.CrawlDelaySource, got.CrawlDelayLine, c.delay, c.source, c.line)
		}
		out.Reset()
		Run(context.Background(), []string{"-user-agent", c.ua, "-robots", path, "/a"}, env)
		if cols := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\t"); len(cols) != 4 {
			t.Errorf("%s: text output %q has %d columns, want the 4 it always had", c.ua, out.String(), len(cols))
		}
	}

	// ROBOTSGATE_MIN_DELAY is a floor under a shorter delay, not a longer.
	floor := pace.Policy{Max: time.Minute, Min: time.Second}
	for ua, want := range map[string]struct {
		delay  float64
		source string
	}{"quickbot": {1, "min-delay"}, "bingbot": {10, "crawl-delay"}, "GPTBot": {1, "min-delay"}} {
		var out, errOut bytes.Buffer
		Run(context.Background(), []string{"-json", "-user-agent", ua, "-robots", path, "/a"},
			Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Pace: floor})
		var got jsonLine
		if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.CrawlDelay != want.delay || got.CrawlDelaySource != want.source {
			t.Errorf("%s with a floor of 1s: %s (%v), want %v from %q", ua, out.String(), err, want.delay, want.source)
		}
	}

	// A pace line that does not read is reported, and ignored.
	if err := os.WriteFile(path, []byte("User-agent: *\nCrawl-delay: soon\nRequest-rate: often\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	Run(context.Background(), []string{"-json", "-user-agent", "bot", "-robots", path, "/"},
		Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Parser: robots.Parser{KeepIgnored: true}})
	for _, want := range []string{"line 2: crawl-delay is not a number of seconds", "line 3: request-rate is not requests/period"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr %q does not say %q", errOut.String(), want)
		}
	}
	if !strings.Contains(out.String(), `"crawl_delay":0`) || strings.Contains(out.String(), "crawl_delay_source") {
		t.Errorf("ignored lines ask nothing: %s", out.String())
	}
}

// TestCheckInterrupted: when the context ends while a robots.txt is being
// fetched, nothing false is printed for that URL or any after it, and the
// exit status is 130.
func TestCheckInterrupted(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, robotsTxt)
	}))
	defer ok.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hangs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel() // the operator presses Ctrl-C while this fetch is under way
		<-r.Context().Done()
	}))
	defer hangs.Close()
	fetcher := fetch.New(fetch.Options{Timeout: 5 * time.Second})
	defer fetcher.Close()

	for _, viaStdin := range []bool{false, true} {
		ctx, cancel = context.WithCancel(context.Background())
		urls := []string{ok.URL + "/private/x", hangs.URL + "/", ok.URL + "/public"}
		var out, errOut bytes.Buffer
		env := Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Fetcher: fetcher}
		args := append([]string{"-user-agent", "ExampleBot"}, urls...)
		if viaStdin {
			env.Stdin, args = strings.NewReader(strings.Join(urls, "\n")), args[:2]
		}
		code := Run(ctx, args, env)
		want := "disallowed\tExampleBot\t" + ok.URL + "/private/x\tdisallow: /private/ (line 2)\n"
		if code != ExitInterrupted || out.String() != want || !strings.Contains(errOut.String(), "interrupted after 1 URLs") {
			t.Errorf("stdin %v: exit %d, output %q, stderr %q; want exit 130, only %q", viaStdin, code, out.String(), errOut.String(), want)
		}
		cancel()
	}
}

// TestCheckInterruptedWaitingForInput: an interrupt while standard input
// sends nothing ends the command at once.
func TestCheckInterruptedWaitingForInput(t *testing.T) {
	stdin, writer := io.Pipe()
	defer writer.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out, errOut bytes.Buffer
	go func() {
		done <- Run(ctx, []string{"-user-agent", "x", "-robots", robotsFile(t)}, Env{Stdin: stdin, Stdout: &out, Stderr: &errOut})
	}()
	io.WriteString(writer, "/private/x\n")
	cancel()
	select {
	case code := <-done:
		if code != ExitInterrupted {
			t.Errorf("exit %d, want %d; stderr %q", code, ExitInterrupted, errOut.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("check kept waiting for standard input after the interrupt")
	}
}

// TestCheckListsIgnoredLines: the lines that do not count are listed on
// standard error, for a file and for a fetched robots.txt alike.
func TestCheckListsIgnoredLines(t *testing.T) {
	const body = "User-agent: *\nNonsense: /typo\nDisallow: private\nCrawl-delay: soon\n"
	want := []string{`line 2: unknown key "Nonsense"`, "line 3:", "line 4:"}
	path := filepath.Join(t.TempDir(), "robots.txt")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
	defer origin.Close()
	fetcher := fetch.New(fetch.Options{Timeout: 5 * time.Second, KeepIgnored: true})
	defer fetcher.Close()

	for name, args := range map[string][]string{
		"file":    {"-user-agent", "x", "-robots", path, "/a", "/b"},
		"fetched": {"-user-agent", "x", origin.URL + "/a", origin.URL + "/b"},
	} {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), args, Env{Stdout: &out, Stderr: &errOut, Fetcher: fetcher,
			Parser: robots.Parser{KeepIgnored: true}})
		if code != ExitAllowed {
			t.Errorf("%s: exit %d; stderr %s", name, code, errOut.String())
		}
		lines := strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")
		if len(lines) != len(want) {
			t.Fatalf("%s: stderr %q; want %d lines, once per file", name, errOut.String(), len(want))
		}
		for i, frag := range want {
			if !strings.Contains(lines[i], frag) {
				t.Errorf("%s: stderr line %q lacks %q", name, lines[i], frag)
			}
		}
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
			fetcher := fetch.New(fetch.Options{Timeout: time.Second})
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

	fetcher := fetch.New(fetch.Options{Timeout: 5 * time.Second})
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

// checkPolicy is the operator's policy the -policy tests judge by. Line
// numbers matter: the reasons cite them.
const checkPolicy = `crawlers:
  - token: scoped
    allow_sites: ["example.com"]
  - user: archiver
    purposes: [archive]
    deny_sites: ["intranet.example"]
    min_delay: 5s
sites:
  - hosts: ["example.com"]
    rules: ["Disallow: /shop/"]
    reason: "asked by mail"
    exceptions:
      - allow: /private/reports/
        reason: "written permission"
`

// writeFile writes body to name in a new directory and returns its path.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runEnv runs the command with ROBOTSGATE_POLICY's file policyFile.
func runEnv(t *testing.T, policyFile string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(context.Background(), args, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, PolicyFile: policyFile})
	return code, out.String(), errOut.String()
}

// TestCheckPolicy: with -policy, each URL is judged as the proxy judges
// it: a site outside the crawler's sites is refused before robots.txt, an
// exception allows what a robots.txt rule refuses, a policy rule refuses
// what robots.txt allows (robots.txt's own refusal staying its own), and
// -user picks the user entries.
func TestCheckPolicy(t *testing.T) {
	robots, pol := robotsFile(t), writeFile(t, "pol.yaml", checkPolicy)
	for _, c := range []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"destination", []string{"-user-agent", "scoped/1.0", "https://other.example/x", "https://example.com/x"}, ExitDisallowed,
			"disallowed\tscoped\thttps://other.example/x\tthe operator's policy keeps this crawler off this site: " +
				"pol.yaml line 3: destination: allow_sites: example.com (scoped may visit only the sites allow_sites names)\n" +
				"allowed\tscoped\thttps://example.com/x\tno matching rule\n"},
		{"exception", []string{"-user-agent", "ExampleBot", "https://example.com/private/reports/q", "https://example.com/private/x"}, ExitDisallowed,
			"allowed\tExampleBot\thttps://example.com/private/reports/q\tpolicy: pol.yaml line 13: exception: allow: /private/reports/ (written permission)\n" +
				"disallowed\tExampleBot\thttps://example.com/private/x\tdisallow: /private/ (line 2)\n"},
		{"rule", []string{"-user-agent", "ExampleBot", "https://example.com/shop/cart", "https://www.example.com/shop/cart"}, ExitDisallowed,
			"disallowed\tExampleBot\thttps://example.com/shop/cart\tpolicy: pol.yaml line 10: rule: Disallow: /shop/ (asked by mail)\n" +
				"allowed\tExampleBot\thttps://www.example.com/shop/cart\tno matching rule\n"},
		{"robots.txt refuses too", []string{"-user-agent", "GPTBot", "https://example.com/shop/cart"}, ExitDisallowed,
			"disallowed\tGPTBot\thttps://example.com/shop/cart\tdisallow: / (line 5)\n"},
		{"-user matches its entry", []string{"-user", "archiver", "-user-agent", "ExampleBot", "https://intranet.example/"}, ExitDisallowed,
			"disallowed\tExampleBot\thttps://intranet.example/\tthe operator's policy keeps this crawler off this site: " +
				"pol.yaml line 6: destination: deny_sites: intranet.example (the policy keeps archiver away from intranet.example)\n"},
		{"without -user no user entry", []string{"-user-agent", "archiver", "https://intranet.example/"}, ExitAllowed,
			"allowed\tarchiver\thttps://intranet.example/\tno matching rule\n"},
		{"an IPv6 address is a site too", []string{"-user-agent", "scoped/1.0", "http://[::1]:8080/x"}, ExitDisallowed,
			"disallowed\tscoped\thttp://[::1]:8080/x\tthe operator's policy keeps this crawler off this site: " +
				"pol.yaml line 3: destination: allow_sites: example.com (scoped may visit only the sites allow_sites names)\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"-robots", robots, "-policy", pol}, c.args...)
			code, out, errOut := run(t, "", nil, args...)
			if code != c.code || out != c.out {
				t.Errorf("exit %d, output:\n%s\nwant exit %d, output:\n%s\nstderr: %s", code, out, c.code, c.out, errOut)
			}
		})
	}
}

// TestCheckPolicyJSON: -json names the policy's finding in the audit
// record's words, and a min_delay shows as the crawler's delay.
func TestCheckPolicyJSON(t *testing.T) {
	robots, pol := robotsFile(t), writeFile(t, "pol.yaml", checkPolicy)
	for _, c := range []struct {
		name, url string
		user      string
		verdict   string
		reason    string // how the reason starts
		policy    string // the policy object, "" for none
		delay     float64
		source    string
	}{
		{"exception", "https://example.com/private/reports/q", "", "allow", "policy: pol.yaml line 13: ",
			`{"file":"` + pol + `","line":13,"kind":"exception","rule":"allow: /private/reports/","reason":"written permission"}`, 0, ""},
		{"rule", "https://example.com/shop/x", "", "disallow", "policy: pol.yaml line 10: ",
			`{"file":"` + pol + `","line":10,"kind":"rule","rule":"Disallow: /shop/","reason":"asked by mail"}`, 0, ""},
		{"destination", "https://intranet.example/", "archiver", "disallow", "the operator's policy keeps this crawler off this site: pol.yaml line 6: ",
			`{"file":"` + pol + `","line":6,"kind":"destination","rule":"deny_sites: intranet.example","reason":"the policy keeps archiver away from intranet.example"}`, 0, ""},
		{"min_delay", "https://example.com/a", "archiver", "allow", "no matching rule", "", 5, "policy"},
		{"robots.txt decides", "https://example.com/private/x", "", "disallow", "disallow: /private/ (line 2)", "", 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"-json", "-robots", robots, "-policy", pol, "-user-agent", "ExampleBot"}
			if c.user != "" {
				args = append(args, "-user", c.user)
			}
			_, out, errOut := run(t, "", nil, append(args, c.url)...)
			var got struct {
				Verdict          string          `json:"verdict"`
				Reason           string          `json:"reason"`
				CrawlDelay       float64         `json:"crawl_delay"`
				CrawlDelaySource string          `json:"crawl_delay_source"`
				Policy           json.RawMessage `json:"policy"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("output %q: %v; stderr %s", out, err, errOut)
			}
			if got.Verdict != c.verdict || !strings.HasPrefix(got.Reason, c.reason) || string(got.Policy) != c.policy ||
				got.CrawlDelay != c.delay || got.CrawlDelaySource != c.source {
				t.Errorf("got %s\nwant verdict %s, reason %q…, policy %s, crawl_delay %v from %q", out, c.verdict, c.reason, c.policy, c.delay, c.source)
			}
		})
	}
}

// TestCheckPolicyErrors: a policy that does not load, -user without a
// policy and bare paths with one are usage or input errors; -policy ""
// turns ROBOTSGATE_POLICY's file off.
func TestCheckPolicyErrors(t *testing.T) {
	robots, pol := robotsFile(t), writeFile(t, "pol.yaml", checkPolicy)
	broken := writeFile(t, "broken.yaml", "crawlers:\n  - token: x\n    min_dely: 2s\n")
	for _, c := range []struct {
		name    string
		env     string // ROBOTSGATE_POLICY's file
		args    []string
		message string
	}{
		{"broken policy", "", []string{"-policy", broken, "https://example.com/"}, broken + ":3: "},
		{"broken ROBOTSGATE_POLICY", broken, []string{"https://example.com/"}, broken + ":3: "},
		{"missing policy", "", []string{"-policy", filepath.Join(t.TempDir(), "none.yaml"), "https://example.com/"}, "none.yaml"},
		{"-user without a policy", "", []string{"-user", "archiver", "https://example.com/"}, "-user names a policy's crawler"},
		{"bare path with a policy", "", []string{"-policy", pol, "/shop/x"}, `"/shop/x": no host (a policy judges by site: give whole URLs)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runEnv(t, c.env, append([]string{"-user-agent", "ExampleBot", "-robots", robots}, c.args...)...)
			if code != ExitUsage || !strings.Contains(errOut, c.message) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and a message containing %q", code, out, errOut, ExitUsage, c.message)
			}
		})
	}

	url := "https://example.com/shop/x"
	if code, out, _ := runEnv(t, pol, "-user-agent", "ExampleBot", "-robots", robots, url); code != ExitDisallowed || !strings.Contains(out, "\tpolicy: ") {
		t.Errorf("ROBOTSGATE_POLICY's file is -policy's default: exit %d, %q", code, out)
	}
	want := "allowed\tExampleBot\t" + url + "\tno matching rule\n"
	if code, out, errOut := runEnv(t, pol, "-user-agent", "ExampleBot", "-robots", robots, "-policy", "", url); code != ExitAllowed || out != want {
		t.Errorf(`-policy "": exit %d, %q (stderr %q); want robots.txt alone: %q`, code, out, errOut, want)
	}
}

// TestCheckPolicyRobotsTxt: /robots.txt is let through, as the proxy lets a
// GET of it through, whatever the policy's rules say; its own sites still
// bound a crawler.
func TestCheckPolicyRobotsTxt(t *testing.T) {
	robots := robotsFile(t)
	pol := writeFile(t, "pol.yaml", "crawlers:\n  - token: walled\n    rules: [\"Disallow: /\"]\n    allow_sites: [example.com]\n")
	code, out, errOut := run(t, "", nil, "-robots", robots, "-policy", pol, "-user-agent", "walled",
		"https://example.com/robots.txt", "https://example.com/a", "https://other.example/robots.txt")
	want := "allowed\twalled\thttps://example.com/robots.txt\trobots.txt is always allowed\n" +
		"disallowed\twalled\thttps://example.com/a\tpolicy: pol.yaml line 3: rule: Disallow: /\n" +
		"disallowed\twalled\thttps://other.example/robots.txt\tthe operator's policy keeps this crawler off this site: " +
		"pol.yaml line 4: destination: allow_sites: example.com (walled may visit only the sites allow_sites names)\n"
	if code != ExitDisallowed || out != want {
		t.Errorf("exit %d, output:\n%s\nwant:\n%s\nstderr: %s", code, out, want, errOut)
	}
}

// TestCheckBarePathsWithoutTheDefaultPolicy: ROBOTSGATE_POLICY alone does
// not turn bare paths into input errors: they are judged by robots.txt,
// and standard error says once that the policy was not applied; -policy
// given on purpose wants whole URLs.
func TestCheckBarePathsWithoutTheDefaultPolicy(t *testing.T) {
	robots, pol := robotsFile(t), writeFile(t, "pol.yaml", checkPolicy)
	code, out, errOut := runEnv(t, pol, "-robots", robots, "-user-agent", "ExampleBot", "/private/a", "/shop/cart")
	want := "disallowed\tExampleBot\t/private/a\tdisallow: /private/ (line 2)\nallowed\tExampleBot\t/shop/cart\tno matching rule\n"
	if code != ExitDisallowed || out != want || strings.Count(errOut, "bare paths are judged without the policy") != 1 {
		t.Errorf("exit %d, output:\n%s\nstderr:\n%s\nwant exit 1, output:\n%s\nand one word on stderr", code, out, errOut, want)
	}
	if strings.Contains(errOut, "note:") {
		t.Errorf("the notes of a policy not being tried were printed:\n%s", errOut)
	}
	if code, _, errOut := runEnv(t, pol, "-robots", robots, "-policy", pol, "-user-agent", "ExampleBot", "/private/a"); code != ExitUsage || !strings.Contains(errOut, "give whole URLs") {
		t.Errorf("-policy given with a bare path: exit %d, stderr %s", code, errOut)
	}
}

// usageRobotsTxt states usage preferences. Line numbers matter: the
// reasons and the fifth column cite them.
const usageRobotsTxt = `User-agent: *
Content-Usage: train-ai=n
Content-Usage: /open/ train-ai=y
Disallow: /private/

User-agent: SignalBot
Content-Signal: search=yes, ai-train=no
Allow: /

User-agent: PlainBot
Disallow: /x
`

// runWith runs the command with env, its standard streams filled in.
func runWith(t *testing.T, env Env, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env.Stdin, env.Stdout, env.Stderr = strings.NewReader(""), &out, &errOut
	code = Run(context.Background(), args, env)
	return code, out.String(), errOut.String()
}

// TestCheckPurpose: with -purpose, a preference of robots.txt refusing a
// purpose disallows a URL robots.txt allows, its reason naming the line
// and label as the proxy's record does; a fifth column lists the
// preferences that apply. A preference never overrides a Disallow, a
// training opt-out does not touch a search crawler, and without -purpose
// the four columns stay as they were.
func TestCheckPurpose(t *testing.T) {
	file := writeFile(t, "robots.txt", usageRobotsTxt)
	for _, c := range []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"content-usage refuses ai-train", []string{"-user-agent", "ExampleBot", "-purpose", "ai-train", "https://example.com/a"}, ExitDisallowed,
			"disallowed\tExampleBot\thttps://example.com/a\tusage: Content-Usage: train-ai=n (robots.txt line 2) refuses ai-train\tcontent-usage train-ai=n (line 2)\n"},
		{"a path-scoped line allows", []string{"-user-agent", "ExampleBot", "-purpose", "ai-train", "https://example.com/open/x"}, ExitAllowed,
			"allowed\tExampleBot\thttps://example.com/open/x\tno matching rule\tcontent-usage train-ai=y (line 3)\n"},
		{"search is not refused by a training opt-out", []string{"-user-agent", "ExampleBot", "-purpose", "search", "https://example.com/a"}, ExitAllowed,
			"allowed\tExampleBot\thttps://example.com/a\tno matching rule\tcontent-usage train-ai=n (line 2)\n"},
		{"content-signal refuses ai-train", []string{"-user-agent", "SignalBot", "-purpose", "search,ai-train", "https://example.com/a"}, ExitDisallowed,
			"disallowed\tSignalBot\thttps://example.com/a\tusage: Content-Signal: search=yes, ai-train=no (robots.txt line 7) refuses ai-train\t" +
				"content-signal search=yes (line 7), content-signal ai-train=no (line 7)\n"},
		{"content-signal allows search", []string{"-user-agent", "SignalBot", "-purpose", "search", "https://example.com/a"}, ExitAllowed,
			"allowed\tSignalBot\thttps://example.com/a\tallow: / (line 8)\tcontent-signal search=yes (line 7), content-signal ai-train=no (line 7)\n"},
		{"purposes given twice add up", []string{"-user-agent", "SignalBot", "-purpose", "search", "-purpose", "ai-train", "https://example.com/a"}, ExitDisallowed,
			"disallowed\tSignalBot\thttps://example.com/a\tusage: Content-Signal: search=yes, ai-train=no (robots.txt line 7) refuses ai-train\t" +
				"content-signal search=yes (line 7), content-signal ai-train=no (line 7)\n"},
		{"robots.txt disallows first", []string{"-user-agent", "ExampleBot", "-purpose", "ai-train", "https://example.com/private/x"}, ExitDisallowed,
			"disallowed\tExampleBot\thttps://example.com/private/x\tdisallow: /private/ (line 4)\tcontent-usage train-ai=n (line 2)\n"},
		{"the site states nothing", []string{"-user-agent", "PlainBot", "-purpose", "ai-train", "https://example.com/a"}, ExitAllowed,
			"allowed\tPlainBot\thttps://example.com/a\tno matching rule\t-\n"},
		{"robots.txt itself is not judged", []string{"-user-agent", "ExampleBot", "-purpose", "ai-train", "/robots.txt"}, ExitAllowed,
			"allowed\tExampleBot\t/robots.txt\trobots.txt is always allowed\t-\n"},
		{"an empty -purpose declares none", []string{"-user-agent", "ExampleBot", "-purpose", "", "https://example.com/a"}, ExitAllowed,
			"allowed\tExampleBot\thttps://example.com/a\tno matching rule\tcontent-usage train-ai=n (line 2)\n"},
		{"no -purpose: four columns", []string{"-user-agent", "ExampleBot", "https://example.com/a", "https://example.com/private/x"}, ExitDisallowed,
			"allowed\tExampleBot\thttps://example.com/a\tno matching rule\n" +
				"disallowed\tExampleBot\thttps://example.com/private/x\tdisallow: /private/ (line 4)\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := run(t, "", nil, append([]string{"-robots", file}, c.args...)...)
			if code != c.code || out != c.out {
				t.Errorf("exit %d, output:\n%q\nwant exit %d, output:\n%q\nstderr: %s", code, out, c.code, c.out, errOut)
			}
		})
	}
}

// TestCheckPurposeErrors: a purpose that is not a lower-case word is a
// usage error, as it is in ROBOTSGATE_PURPOSES: misspelt, it would match
// no preference and pass every URL.
func TestCheckPurposeErrors(t *testing.T) {
	file := writeFile(t, "robots.txt", usageRobotsTxt)
	for _, purpose := range []string{"AI-Train", "ai_train", "search, ai train"} {
		code, out, errOut := run(t, "", nil, "-robots", file, "-user-agent", "ExampleBot", "-purpose", purpose, "/a")
		if code != ExitUsage || out != "" || !strings.Contains(errOut, "is not a purpose") {
			t.Errorf("-purpose %q: exit %d, stdout %q, stderr %q; want exit %d naming the purpose", purpose, code, out, errOut, ExitUsage)
		}
	}
}

// TestCheckPurposeJSON: -json gives the purposes, the refusing preference
// in the audit record's words (usage) and the preferences that apply
// (usage_stated); a robots.txt refusal has no usage object.
func TestCheckPurposeJSON(t *testing.T) {
	file := writeFile(t, "robots.txt", usageRobotsTxt)
	for _, c := range []struct {
		name, ua, purposes, path string
		verdict, reason          string
		usage                    string // the usage object, "" for none
		stated                   []string
	}{
		{"refused", "ExampleBot", "search,ai-train", "/a", "disallow", "usage: Content-Usage: train-ai=n (robots.txt line 2) refuses ai-train",
			`{"form":"content-usage","line":2,"label":"train-ai","value":"n","purpose":"ai-train","verdict":"refused"}`,
			[]string{"content-usage train-ai=n (line 2)"}},
		{"content-signal", "SignalBot", "ai-train", "/a", "disallow", "usage: Content-Signal: search=yes, ai-train=no (robots.txt line 7) refuses ai-train",
			`{"form":"content-signal","line":7,"label":"ai-train","value":"no","purpose":"ai-train","verdict":"refused"}`,
			[]string{"content-signal search=yes (line 7)", "content-signal ai-train=no (line 7)"}},
		{"allowed", "ExampleBot", "search", "/a", "allow", "no matching rule", "", []string{"content-usage train-ai=n (line 2)"}},
		{"robots.txt decides", "ExampleBot", "ai-train", "/private/x", "disallow", "disallow: /private/ (line 4)", "", []string{"content-usage train-ai=n (line 2)"}},
		{"nothing stated", "PlainBot", "ai-train", "/a", "allow", "no matching rule", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, out, errOut := run(t, "", nil, "-json", "-robots", file, "-user-agent", c.ua, "-purpose", c.purposes, c.path)
			var got struct {
				Verdict     string          `json:"verdict"`
				Reason      string          `json:"reason"`
				Purposes    []string        `json:"purposes"`
				Usage       json.RawMessage `json:"usage"`
				UsageStated []string        `json:"usage_stated"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("output %q: %v; stderr %s", out, err, errOut)
			}
			if want := strings.Split(c.purposes, ","); got.Verdict != c.verdict || got.Reason != c.reason || string(got.Usage) != c.usage ||
				!reflect.DeepEqual(got.Purposes, want) || !reflect.DeepEqual(got.UsageStated, c.stated) {
				t.Errorf("got %s\nwant verdict %s, reason %q, purposes %q, usage %s, usage_stated %q", out, c.verdict, c.reason, want, c.usage, c.stated)
			}
		})
	}
}

// usagePolicy declares the purposes of two crawlers.
const usagePolicy = `crawlers:
  - token: trainer
    purposes: [ai-train]
  - token: finder
    purposes: [search]
  - token: walled
    purposes: [ai-train]
    allow_sites: ["example.org"]
`

// TestCheckPurposeDefaults: without -purpose, the crawler's purposes are
// the policy's for it, else ROBOTSGATE_PURPOSES' when -user-agent's token
// is ROBOTSGATE_TOKEN's (in any case), else none; -purpose overrides
// both. The text keeps its four columns unless -purpose is given.
func TestCheckPurposeDefaults(t *testing.T) {
	file := writeFile(t, "robots.txt", usageRobotsTxt)
	pol := writeFile(t, "pol.yaml", usagePolicy)
	const url = "https://example.com/a"
	refused := "\t" + url + "\tusage: Content-Usage: train-ai=n (robots.txt line 2) refuses ai-train"
	pinned := Env{Purposes: []string{"ai-train"}, Token: "MyBot"}
	for _, c := range []struct {
		name string
		env  Env
		args []string
		code int
		out  string
	}{
		{"the policy's purposes", Env{}, []string{"-policy", pol, "-user-agent", "trainer/2.0", url}, ExitDisallowed,
			"disallowed\ttrainer" + refused + "\n"},
		{"the policy's purposes for another crawler", Env{}, []string{"-policy", pol, "-user-agent", "finder", url}, ExitAllowed,
			"allowed\tfinder\t" + url + "\tno matching rule\n"},
		{"the policy before ROBOTSGATE_PURPOSES", Env{Purposes: []string{"search"}, Token: "trainer"}, []string{"-policy", pol, "-user-agent", "trainer", url}, ExitDisallowed,
			"disallowed\ttrainer" + refused + "\n"},
		{"-purpose before the policy", Env{}, []string{"-policy", pol, "-purpose", "search", "-user-agent", "trainer", url}, ExitAllowed,
			"allowed\ttrainer\t" + url + "\tno matching rule\tcontent-usage train-ai=n (line 2)\n"},
		{"ROBOTSGATE_PURPOSES for the pinned token", pinned, []string{"-user-agent", "Mozilla/5.0 (compatible; mybot/1.0)", url}, ExitDisallowed,
			"disallowed\tmybot" + refused + "\n"},
		{"ROBOTSGATE_PURPOSES for no other token", pinned, []string{"-user-agent", "OtherBot", url}, ExitAllowed,
			"allowed\tOtherBot\t" + url + "\tno matching rule\n"},
		{"ROBOTSGATE_PURPOSES where the policy declares none", pinned, []string{"-policy", pol, "-user-agent", "MyBot", url}, ExitDisallowed,
			"disallowed\tMyBot" + refused + "\n"},
		{"-purpose before ROBOTSGATE_PURPOSES", pinned, []string{"-purpose", "search", "-user-agent", "MyBot", url}, ExitAllowed,
			"allowed\tMyBot\t" + url + "\tno matching rule\tcontent-usage train-ai=n (line 2)\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runWith(t, c.env, append([]string{"-robots", file}, c.args...)...)
			if code != c.code || out != c.out {
				t.Errorf("exit %d, output:\n%q\nwant exit %d, output:\n%q\nstderr: %s", code, out, c.code, c.out, errOut)
			}
		})
	}

	// A site the policy keeps the crawler off is refused before any
	// preference is read; -json still names the crawler's purposes, as
	// the audit record does.
	_, out, errOut := runWith(t, Env{}, "-json", "-robots", file, "-policy", pol, "-user-agent", "walled", url)
	var got struct {
		Reason      string             `json:"reason"`
		Purposes    []string           `json:"purposes"`
		Usage       audit.UsageFinding `json:"usage"`
		UsageStated []string           `json:"usage_stated"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output %q: %v; stderr %s", out, err, errOut)
	}
	if !strings.HasPrefix(got.Reason, "the operator's policy keeps this crawler off this site") || !reflect.DeepEqual(got.Purposes, []string{"ai-train"}) ||
		got.Usage != (audit.UsageFinding{}) || got.UsageStated != nil {
		t.Errorf("destination refused: %s; want the policy's reason, purposes [ai-train] and no preference", out)
	}
}

// TestCheckPurposeLive: against a real origin through a real fetcher
// that fetches tdmrep.json, a reservation there refuses ai-train, named
// as the proxy's record names it, and robots.txt's lines and tdmrep.json's
// rules both show in the fifth column; each file is fetched once.
func TestCheckPurposeLive(t *testing.T) {
	var robotsFetches, tdmFetches int
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		robotsFetches++
		io.WriteString(w, "User-agent: *\nContent-Usage: /news/ search=y\nDisallow: /private/\n")
	})
	mux.HandleFunc("/.well-known/tdmrep.json", func(w http.ResponseWriter, r *http.Request) {
		tdmFetches++
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `[{"location":"/news/*","tdm-reservation":1},{"location":"/*","tdm-reservation":0}]`)
	})
	origin := httptest.NewServer(mux)
	defer origin.Close()
	fetcher := fetch.New(fetch.Options{Timeout: 5 * time.Second, TDMRep: true})
	defer fetcher.Close()

	code, out, errOut := run(t, "", fetcher, "-user-agent", "ExampleBot", "-purpose", "ai-train",
		origin.URL+"/news/today", origin.URL+"/about", origin.URL+"/private/x")
	want := "disallowed\tExampleBot\t" + origin.URL + `/news/today	usage: tdmrep.json: {"location":"/news/*","tdm-reservation":1} (tdmrep.json) refuses ai-train` +
		"\tcontent-usage search=y (line 2), tdmrep tdm-reservation=1 (tdmrep.json)\n" +
		"allowed\tExampleBot\t" + origin.URL + "/about\tno matching rule\ttdmrep tdm-reservation=0 (tdmrep.json)\n" +
		"disallowed\tExampleBot\t" + origin.URL + "/private/x\tdisallow: /private/ (line 3)\ttdmrep tdm-reservation=0 (tdmrep.json)\n"
	if code != ExitDisallowed || out != want {
		t.Errorf("exit %d, output:\n%s\nwant exit 1, output:\n%s\nstderr: %s", code, out, want, errOut)
	}
	if robotsFetches != 1 || tdmFetches != 1 {
		t.Errorf("robots.txt fetched %d times, tdmrep.json %d times for three URLs; want once each", robotsFetches, tdmFetches)
	}

	// -json names the file where the record names a header.
	_, out, errOut = run(t, "", fetcher, "-json", "-user-agent", "ExampleBot", "-purpose", "ai-input", origin.URL+"/news/today")
	var got struct {
		Verdict string          `json:"verdict"`
		Usage   json.RawMessage `json:"usage"`
	}
	wantUsage := `{"form":"tdmrep","header":"tdmrep.json","label":"tdm-reservation","value":"1","purpose":"ai-input","verdict":"refused"}`
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Verdict != "disallow" || string(got.Usage) != wantUsage {
		t.Errorf("-json: %s (%v; stderr %s); want verdict disallow and usage %s", out, err, errOut, wantUsage)
	}

	// Without TDMRep fetched, tdmrep.json states nothing.
	plain := fetch.New(fetch.Options{Timeout: 5 * time.Second})
	defer plain.Close()
	code, out, errOut = run(t, "", plain, "-user-agent", "ExampleBot", "-purpose", "ai-train", origin.URL+"/news/today")
	if want := "allowed\tExampleBot\t" + origin.URL + "/news/today\tno matching rule\tcontent-usage search=y (line 2)\n"; code != ExitAllowed || out != want {
		t.Errorf("without TDMRep: exit %d, %q (stderr %s); want %q", code, out, errOut, want)
	}
}
