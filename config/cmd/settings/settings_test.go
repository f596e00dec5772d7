package settings

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	envlib "github.com/caarlos0/env/v11"

	"robotsgate/config"
)

// run runs the command and returns its exit status and output.
func run(t *testing.T, environ []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(args, Env{Stdout: &out, Stderr: &errOut, Environ: environ, Version: "v1.2.3"})
	return code, out.String(), errOut.String()
}

// output is what -json prints.
type output struct {
	Settings []config.Setting `json:"settings"`
}

func runJSON(t *testing.T, environ []string) output {
	t.Helper()
	code, stdout, stderr := run(t, environ, "-json")
	if code != ExitValid || stderr != "" {
		t.Fatalf("config -json: exit %d, stderr %q", code, stderr)
	}
	var out output
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("config -json printed %q: %v", stdout, err)
	}
	return out
}

// tableRows splits the text output into its rows' cells, header first.
func tableRows(t *testing.T, text string) [][]string {
	t.Helper()
	var rows [][]string
	for line := range strings.Lines(text) {
		rows = append(rows, strings.Fields(line))
	}
	if len(rows) == 0 || !slices.Equal(rows[0], []string{"NAME", "VALUE", "SOURCE"}) {
		t.Fatalf("the table has no header NAME VALUE SOURCE:\n%s", text)
	}
	return rows
}

// envNames are the variables Config's env tags name, in field order,
// read here independently of the config package's own list.
func envNames() []string {
	var names []string
	for sf := range reflect.TypeFor[config.Config]().Fields() {
		tag, _, _ := strings.Cut(sf.Tag.Get("env"), ",")
		names = append(names, "ROBOTSGATE_"+tag)
	}
	return names
}

// TestEveryVariableListed: every env tag of Config is a row of the table
// and an entry of the JSON, once and in order, and the two agree.
func TestEveryVariableListed(t *testing.T) {
	t.Parallel()
	environ := []string{"ROBOTSGATE_MODE=audit", "ROBOTSGATE_MAX_FETCHES=40", "PATH=/bin"}
	code, stdout, stderr := run(t, environ)
	if code != ExitValid || stderr != "" {
		t.Fatalf("config: exit %d, stderr %q", code, stderr)
	}
	rows := tableRows(t, stdout)[1:]
	js := runJSON(t, environ).Settings
	names := envNames()
	if len(rows) != len(names) || len(js) != len(names) {
		t.Fatalf("%d variables, %d rows, %d JSON entries:\n%s", len(names), len(rows), len(js), stdout)
	}
	for i, name := range names {
		row, s := rows[i], js[i]
		if row[0] != name || s.Name != name {
			t.Errorf("entry %d is %s in the table and %s in JSON, want %s", i, row[0], s.Name, name)
			continue
		}
		// The value is the row's second column up to where its source starts.
		line := strings.Join(row[1:], " ")
		if want := tableValue(s.Value) + " " + s.SourceText(); line != strings.Join(strings.Fields(want), " ") {
			t.Errorf("%s: the table says %q, JSON %+v", name, line, s)
		}
		switch s.Source {
		case config.SourceDerived, config.SourceMachine:
			if s.From == "" {
				t.Errorf("%s: %s, but from what is not said", name, s.Source)
			}
		case config.SourceEnvironment, config.SourceDefault:
			if s.From != "" {
				t.Errorf("%s: %s, yet from %q", name, s.Source, s.From)
			}
		default:
			t.Errorf("%s: unknown source %q", name, s.Source)
		}
	}
	for _, want := range []string{
		`(?m)^ROBOTSGATE_MODE +audit +environment$`,
		`(?m)^ROBOTSGATE_CRAWL_DELAY +audit +derived from ROBOTSGATE_MODE$`,
		`(?m)^ROBOTSGATE_MAX_FETCHES_PER_CLIENT +10 +derived from ROBOTSGATE_MAX_FETCHES$`,
		`(?m)^ROBOTSGATE_TOKEN +"" +default$`,
		`(?m)^ROBOTSGATE_PARSE_LIMIT +500 KiB +default$`,
	} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("the table has no row matching %s:\n%s", want, stdout)
		}
	}
	// Aligned: every row's value starts in the same column as VALUE.
	column := strings.Index(stdout, "VALUE")
	for line := range strings.Lines(stdout) {
		if line[column-1] != ' ' || line[column] == ' ' {
			t.Errorf("row not aligned on column %d: %q", column, line)
		}
	}
}

// TestDerivedValuesAreServes: the values shown are those of the parts
// "robotsgate serve" builds from the same environment.
func TestDerivedValuesAreServes(t *testing.T) {
	t.Parallel()
	credentials := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(credentials, []byte("bot:$2y$05$abcdefghijklmnopqrstuu5Yo7eOyNBD0XrDWVmp.W6YGbyaXv7y\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, environ := range [][]string{
		nil,
		{"ROBOTSGATE_MODE=audit", "ROBOTSGATE_CLIENT_IDLE_TIMEOUT=30s", "ROBOTSGATE_CREDENTIALS_FILE=" + credentials},
		{"ROBOTSGATE_FETCH_TIMEOUT=2s", "ROBOTSGATE_CACHE_MAX_AGE=30s", "ROBOTSGATE_MAX_FETCHES=10", "ROBOTSGATE_MAX_CONNECTIONS=3"},
	} {
		cfg, err := config.LoadFrom(envlib.ToMap(environ))
		if err != nil {
			t.Fatal(err)
		}
		shown := make(map[string]config.Setting)
		for _, s := range runJSON(t, environ).Settings {
			shown[s.Name] = s
		}
		fetchOpts := cfg.FetchOptions("v1.2.3", nil, cfg.Destinations(), nil)
		duration := func(name string) time.Duration {
			d, err := time.ParseDuration(shown[name].Value)
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			return d
		}
		for _, c := range []struct {
			name      string
			got, want any
		}{
			{"ROBOTSGATE_CRAWL_DELAY", shown["ROBOTSGATE_CRAWL_DELAY"].Value, string(cfg.PaceOptions().Mode)},
			{"ROBOTSGATE_MAX_WAIT", duration("ROBOTSGATE_MAX_WAIT"), cfg.PaceOptions().MaxWait},
			{"ROBOTSGATE_AUTH", shown["ROBOTSGATE_AUTH"].Value, string(cfg.IdentityOptions(nil).Mode)},
			{"ROBOTSGATE_FETCH_CONNECT_TIMEOUT", duration("ROBOTSGATE_FETCH_CONNECT_TIMEOUT"), fetchOpts.ConnectTimeout},
			{"ROBOTSGATE_MAX_FETCHES_PER_CLIENT", shown["ROBOTSGATE_MAX_FETCHES_PER_CLIENT"].Value, strconv.Itoa(fetchOpts.MaxPerClient)},
			{"ROBOTSGATE_FETCH_USER_AGENT", shown["ROBOTSGATE_FETCH_USER_AGENT"].Value, fetchOpts.UserAgent},
			{"ROBOTSGATE_CACHE_MIN_AGE", duration("ROBOTSGATE_CACHE_MIN_AGE"), cfg.CacheOptions(nil).MinAge},
			{"ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT", shown["ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT"].Value, strconv.Itoa(cfg.ClientLimits().MaxConnectionsPerClient)},
		} {
			if c.got != c.want {
				t.Errorf("%v: %s shown as %v, serve uses %v", environ, c.name, c.got, c.want)
			}
		}
	}
}

// TestSecretsNeverShown: passwords appear in neither output, nor in the
// message about an invalid configuration.
func TestSecretsNeverShown(t *testing.T) {
	t.Parallel()
	const password = "Hunter2secret"
	valid := []string{
		"ROBOTSGATE_REDIS_URL=redis://default:" + password + "@127.0.0.1:6379/0",
		"ROBOTSGATE_UPSTREAM_PROXY=http://crawler:" + password + "@127.0.0.1:3128",
	}
	code, text, stderr := run(t, valid)
	if code != ExitValid {
		t.Fatalf("config: exit %d, stderr %q", code, stderr)
	}
	_, js, _ := run(t, valid, "-json")
	for _, out := range []string{text, js, stderr} {
		if strings.Contains(out, password) {
			t.Errorf("the output shows the password:\n%s", out)
		}
	}
	for _, want := range []string{"redis://default:****@127.0.0.1:6379/0", "http://crawler:****@127.0.0.1:3128"} {
		if !strings.Contains(text, want) || !strings.Contains(js, want) {
			t.Errorf("the outputs lack %q:\n%s\n%s", want, text, js)
		}
	}
	invalid := append(slices.Clone(valid), "ROBOTSGATE_REDIS_URL=redis://default:"+password+"@127.0.0.1:99999")
	code, stdout, stderr := run(t, invalid)
	if code != ExitInvalid || stdout != "" || !strings.Contains(stderr, "ROBOTSGATE_REDIS_URL") || strings.Contains(stderr, password) {
		t.Errorf("invalid Redis URL: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestInvalidConfiguration: exit 2, nothing on standard output, and
// serve's message, which names each variable at fault.
func TestInvalidConfiguration(t *testing.T) {
	t.Parallel()
	environ := []string{"ROBOTSGATE_MODE=enforcing", "ROBOTSGATE_LISTN=0.0.0.0:8080"}
	_, loadErr := config.LoadFrom(envlib.ToMap(environ))
	if loadErr == nil {
		t.Fatal("the environment is valid")
	}
	want := "robotsgate: invalid configuration:\n" + loadErr.Error() + "\n"
	for _, args := range [][]string{nil, {"-json"}} {
		code, stdout, stderr := run(t, environ, args...)
		if code != ExitInvalid || stdout != "" || stderr != want {
			t.Errorf("config %q: exit %d, stdout %q, stderr\n%s\nwant exit 2 and\n%s", args, code, stdout, stderr, want)
		}
	}
	for _, name := range []string{"ROBOTSGATE_MODE", "ROBOTSGATE_LISTN"} {
		if !strings.Contains(want, name) {
			t.Errorf("the message does not name %s:\n%s", name, want)
		}
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"-h"}, ExitValid, "usage: robotsgate config [-json]"},
		{[]string{"-yaml"}, ExitInvalid, "flag provided but not defined: -yaml"},
		{[]string{"extra"}, ExitInvalid, `robotsgate config takes no arguments (got ["extra"])`},
	} {
		code, stdout, stderr := run(t, nil, c.args...)
		if code != c.code || stdout != "" || !strings.Contains(stderr, c.stderr) {
			t.Errorf("config %q: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, stdout, stderr, c.code, c.stderr)
		}
	}
}

func TestTableValue(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":               `""`,
		"500 KiB":        "500 KiB",
		" lead":          `" lead"`,
		"/a\nb":          `"/a\nb"`,
		"tab\there":      `"tab\there"`,
		"robotsgate:":    "robotsgate:",
		"/srv/ca dir/ok": "/srv/ca dir/ok",
	} {
		if got := tableValue(in); got != want {
			t.Errorf("tableValue(%q) = %s, want %s", in, got, want)
		}
	}
}

// failingWriter refuses every write, as a full disk does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestOutputError: a valid configuration whose table cannot be written is
// no invalid configuration; a script must be able to tell them apart.
func TestOutputError(t *testing.T) {
	for _, args := range [][]string{nil, {"-json"}} {
		var errOut bytes.Buffer
		code := Run(args, Env{Stdout: failingWriter{}, Stderr: &errOut, Environ: nil, Version: "v1.2.3"})
		if code != ExitOutput || !strings.Contains(errOut.String(), "no space left on device") {
			t.Errorf("config %v to a full disk: exit %d, stderr %q; want %d naming the error", args, code, errOut.String(), ExitOutput)
		}
	}
}

// TestPolicyShown: with ROBOTSGATE_POLICY set, the table ends with the
// policy's file, version (the first 12 hex digits of the SHA-256 of its
// bytes) and entries, and -json has them as "policy".
func TestPolicyShown(t *testing.T) {
	t.Parallel()
	body := "crawlers:\n  - token: GPTBot\n    purposes: [ai-train]\n  - token: \"*\"\n    deny_sites: [\"intranet.example\"]\n" +
		"sites:\n  - hosts: [\"example.com\"]\n    exceptions:\n      - allow: /reports/\n        reason: \"written permission\"\n"
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(body))
	version := hex.EncodeToString(sum[:])[:12]
	environ := []string{"ROBOTSGATE_POLICY=" + path}

	code, stdout, stderr := run(t, environ)
	if code != ExitValid {
		t.Fatalf("config: exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	want := "policy: " + path + " version " + version + " (2 crawler entries, 1 site entry, 1 exception)"
	if last := lines[len(lines)-1]; last != want || lines[len(lines)-2] != "" {
		t.Errorf("the table ends with %q, want a blank line then %q", lines[len(lines)-2:], want)
	}
	if !regexp.MustCompile(`(?m)^ROBOTSGATE_POLICY +` + regexp.QuoteMeta(path) + ` +environment$`).MatchString(stdout) {
		t.Errorf("no ROBOTSGATE_POLICY row naming the file:\n%s", stdout)
	}

	code, stdout, stderr = run(t, environ, "-json")
	if code != ExitValid {
		t.Fatalf("config -json: exit %d, stderr %q", code, stderr)
	}
	var out struct {
		Settings []config.Setting  `json:"settings"`
		Policy   map[string]string `json:"policy"`
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("config -json printed %q: %v", stdout, err)
	}
	wantJSON := map[string]string{"file": path, "version": version, "entries": "2 crawler entries, 1 site entry, 1 exception"}
	if !reflect.DeepEqual(out.Policy, wantJSON) {
		t.Errorf("policy %v, want %v", out.Policy, wantJSON)
	}
	// Without the variable there is neither.
	if _, stdout, _ := run(t, nil, "-json"); strings.Contains(stdout, `"policy"`) {
		t.Errorf("config -json without a policy shows one:\n%s", stdout)
	}
	if _, stdout, _ := run(t, nil); strings.Contains(stdout, "\npolicy: ") {
		t.Errorf("config without a policy shows one:\n%s", stdout)
	}
}

// TestPolicyInvalid: a policy file that does not load makes the
// configuration invalid, the message naming ROBOTSGATE_POLICY, the file
// and the line.
func TestPolicyInvalid(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte("crawlers:\n  - token: GPTBot\n    purpose: [ai-train]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, environ := range [][]string{
		{"ROBOTSGATE_POLICY=" + path},
		{"ROBOTSGATE_POLICY=" + filepath.Join(t.TempDir(), "missing.yaml")},
	} {
		for _, args := range [][]string{nil, {"-json"}} {
			code, stdout, stderr := run(t, environ, args...)
			file := strings.TrimPrefix(environ[0], "ROBOTSGATE_POLICY=")
			wantLine := file
			if file == path {
				wantLine = path + ":3: "
			}
			if code != ExitInvalid || stdout != "" || !strings.HasPrefix(stderr, "robotsgate: invalid configuration:\nROBOTSGATE_POLICY: ") || !strings.Contains(stderr, wantLine) {
				t.Errorf("config %q with %s: exit %d, stdout %q, stderr %q; want exit 2 naming ROBOTSGATE_POLICY and %q", args, file, code, stdout, stderr, wantLine)
			}
		}
	}
}
