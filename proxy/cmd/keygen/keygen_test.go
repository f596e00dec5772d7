package keygen

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"robotsgate/proxy/signing"
)

// now is the clock of these runs; half a second past, to show bounds are
// kept in whole seconds.
var now = time.Date(2026, 11, 25, 12, 0, 0, 5e8, time.UTC)

// run runs the command in a new empty folder, its working directory.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Chdir(t.TempDir())
	return runHere(t, args...)
}

// runHere runs the command in the current working directory.
func runHere(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(args, Env{Stdout: &out, Stderr: &errOut, Now: func() time.Time { return now }})
	return code, out.String(), errOut.String()
}

// readKey reads back the one key of file, checking its mode.
func readKey(t *testing.T, file string) *signing.Key {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %04o, want 0600", file, fi.Mode().Perm())
	}
	keys, err := signing.ReadKeyFile(file)
	if err != nil {
		t.Fatalf("the written key does not read back: %v", err)
	}
	if len(keys) != 1 {
		t.Fatalf("%s holds %d keys, want 1", file, len(keys))
	}
	return keys[0]
}

// publicLine is the public JWK line the command must print for k, spelt
// out here rather than by PublicJWK.
func publicLine(k *signing.Key) string {
	line := `{"kty":"OKP","crv":"Ed25519","x":"` + base64.RawURLEncoding.EncodeToString(k.Public()) + `","kid":"` + k.ID() + `"`
	if !k.NotBefore.IsZero() {
		line += `,"nbf":` + strconv.FormatInt(k.NotBefore.Unix(), 10)
	}
	if !k.NotAfter.IsZero() {
		line += `,"exp":` + strconv.FormatInt(k.NotAfter.Unix(), 10)
	}
	return line + "}"
}

func entries(t *testing.T) []string {
	t.Helper()
	list, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name())
	}
	return names
}

func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // stderr, whole
	}{
		{nil, "no FILE: name the file to write the key to (robotsgate keygen -h for help)"},
		{[]string{"a.pem", "b.pem"}, `one FILE expected, got 2 arguments ["a.pem" "b.pem"] (flags go before FILE)`},
		{[]string{"a.jwk", "-not-after", "720h"}, `one FILE expected, got 3 arguments ["a.jwk" "-not-after" "720h"] (flags go before FILE)`},
		{[]string{"-"}, `FILE "-": the key is written to a file only; a private key on standard output ends up in terminals and logs`},
		{[]string{"-format", "der", "a.key"}, `-format "der" is not one of pem, jwk`},
		{[]string{"-not-after", "tomorrow", "a.jwk"}, `-not-after: "tomorrow" is neither an RFC 3339 time (2026-12-01T00:00:00Z) nor a duration from now (720h, 90d)`},
		{[]string{"-not-before", "2026-13-01T00:00:00Z", "a.jwk"}, `-not-before: "2026-13-01T00:00:00Z" is neither an RFC 3339 time (2026-12-01T00:00:00Z) nor a duration from now (720h, 90d)`},
		{[]string{"-not-before", "2026-12-01", "a.jwk"}, `-not-before: "2026-12-01" is neither an RFC 3339 time (2026-12-01T00:00:00Z) nor a duration from now (720h, 90d)`},
		{[]string{"-not-after", "1.5d", "a.jwk"}, `-not-after: "1.5d" is neither an RFC 3339 time (2026-12-01T00:00:00Z) nor a duration from now (720h, 90d)`},
		{[]string{"-not-after", "720h", "a.pem"}, "-not-before and -not-after need a JWK: PEM carries no validity; name the file a.jwk, or give -format jwk"},
		{[]string{"-not-before", "1h", "keys/acme"}, "-not-before and -not-after need a JWK: PEM carries no validity; name the file keys/acme.jwk, or give -format jwk"},
		{[]string{"-format", "pem", "-not-after", "720h", "a.json"}, "-not-before and -not-after need a JWK: PEM carries no validity; name the file a.jwk, or give -format jwk"},
		{[]string{"-not-before", "2h", "-not-after", "1h", "a.jwk"}, "-not-after (2026-11-25T13:00:00Z) is not after -not-before (2026-11-25T14:00:00Z)"},
		{[]string{"-not-before", "2026-12-01T00:00:00Z", "-not-after", "2026-12-01T00:00:00.9Z", "a.jwk"}, "-not-after (2026-12-01T00:00:00Z) is not after -not-before (2026-12-01T00:00:00Z)"},
		{[]string{"-not-after", "-1h", "a.jwk"}, "-not-after (2026-11-25T11:00:00Z) is not in the future: the key could never sign"},
		// 12:00:00.5 + 0.4s is kept as 12:00:00, before now.
		{[]string{"-not-after", "400ms", "a.jwk"}, "-not-after (2026-11-25T12:00:00Z) is not in the future: the key could never sign"},
		{[]string{"-not-before", "-48h", "-not-after", "2026-11-24T00:00:00+02:00", "a.jwk"}, "-not-after (2026-11-23T22:00:00Z) is not in the future: the key could never sign"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(t, c.args...)
			if code != ExitUsage {
				t.Errorf("exit status %d, want %d", code, ExitUsage)
			}
			if want := "robotsgate keygen: " + c.want + "\n"; stderr != want {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr, want)
			}
			if stdout != "" {
				t.Errorf("stdout: %q, want nothing", stdout)
			}
			if names := entries(t); len(names) > 0 {
				t.Errorf("files written: %q", names)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	t.Run("unknown flag", func(t *testing.T) {
		code, stdout, stderr := run(t, "-force", "a.pem")
		if code != ExitUsage || stdout != "" || !strings.HasPrefix(stderr, "flag provided but not defined: -force\nusage: robotsgate keygen ") {
			t.Errorf("exit status %d, stdout %q, stderr:\n%s", code, stdout, stderr)
		}
		if names := entries(t); len(names) > 0 {
			t.Errorf("files written: %q", names)
		}
	})
	t.Run("-h", func(t *testing.T) {
		code, stdout, stderr := run(t, "-h")
		if code != ExitOK || stdout != "" {
			t.Errorf("exit status %d, stdout %q", code, stdout)
		}
		for _, want := range []string{"usage: robotsgate keygen [-format pem|jwk] [-not-before T] [-not-after T] [-json] FILE\n", "720h, 90d", "-not-after string", "Exit status: 0 written, 1 not written"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("usage lacks %q:\n%s", want, stderr)
			}
		}
	})
}

func TestWrites(t *testing.T) {
	for _, c := range []struct {
		name    string
		args    []string
		file    string
		jwk     bool
		nbf     time.Time
		exp     time.Time
		validTo string // what the first line says of the bounds
	}{
		{name: "PEM by default", file: "acme.pem"},
		{name: "PEM without extension", file: "acme"},
		{name: "JWK by extension", file: "acme.jwk", jwk: true},
		{name: "JWK by extension, any case", file: "acme.JSON", jwk: true},
		{name: "JWK by flag", args: []string{"-format", "jwk"}, file: "acme.key", jwk: true},
		{name: "the flag wins", args: []string{"-format", "PEM"}, file: "acme.jwk"},
		{
			name: "bounds as times", args: []string{"-not-before", "2026-12-01T00:00:00Z", "-not-after", "2027-03-01T01:00:00+01:00"},
			file: "next.jwk", jwk: true,
			nbf: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), exp: time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC),
			validTo: ", valid from 2026-12-01T00:00:00Z until 2027-03-01T00:00:00Z",
		},
		{
			name: "bounds as durations", args: []string{"-not-before", "-1h", "-not-after", "90d"},
			file: "now.json", jwk: true,
			nbf: time.Date(2026, 11, 25, 11, 0, 0, 0, time.UTC), exp: time.Date(2027, 2, 23, 12, 0, 0, 0, time.UTC),
			validTo: ", valid from 2026-11-25T11:00:00Z until 2027-02-23T12:00:00Z",
		},
		{
			name: "not-before alone, in the future", args: []string{"-not-before", "720h"}, file: "later.jwk", jwk: true,
			nbf: time.Date(2026, 12, 25, 12, 0, 0, 0, time.UTC), validTo: ", valid from 2026-12-25T12:00:00Z",
		},
		{
			name: "not-after alone", args: []string{"-not-after", "1s"}, file: "brief.jwk", jwk: true,
			exp: time.Date(2026, 11, 25, 12, 0, 1, 0, time.UTC), validTo: ", valid until 2026-11-25T12:00:01Z",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := run(t, append(c.args, c.file)...)
			if code != ExitOK || stderr != "" {
				t.Fatalf("exit status %d, stderr:\n%s", code, stderr)
			}
			k := readKey(t, c.file)
			data, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			if gotJWK := bytes.HasPrefix(data, []byte("{")); gotJWK != c.jwk {
				t.Errorf("JWK %v, want %v:\n%s", gotJWK, c.jwk, data)
			}
			if !c.jwk && !bytes.HasPrefix(data, []byte("-----BEGIN PRIVATE KEY-----\n")) {
				t.Errorf("not a PKCS #8 PEM:\n%s", data)
			}
			if !k.NotBefore.Equal(c.nbf) || !k.NotAfter.Equal(c.exp) {
				t.Errorf("read back valid from %v until %v, want %v until %v", k.NotBefore, k.NotAfter, c.nbf, c.exp)
			}
			want := c.file + ": new Ed25519 key, keyid " + k.ID() + c.validTo + "\n" +
				publicLine(k) + "\n" +
				"sign as the pinned token: ROBOTSGATE_TOKEN=YourBot ROBOTSGATE_SIGNING_KEY=" + c.file + " ROBOTSGATE_SIGNATURE_AGENT=https://your-crawler.example\n" +
				"or as a credential user: in the policy, under its user entry, signing_keys: [" + c.file + "]\n"
			if stdout != want {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, want)
			}
		})
	}
}

func TestJSONOutput(t *testing.T) {
	code, stdout, stderr := run(t, "-json", "-not-after", "2027-01-01T00:00:00Z", "acme.jwk")
	if code != ExitOK || stderr != "" {
		t.Fatalf("exit status %d, stderr:\n%s", code, stderr)
	}
	k := readKey(t, "acme.jwk")
	want := `{"file":"acme.jwk","keyid":"` + k.ID() + `","jwk":` + publicLine(k) + "}\n"
	if stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout, want)
	}
	if k.NotAfter.Unix() != 1798761600 {
		t.Errorf("exp %d, want 1798761600", k.NotAfter.Unix())
	}
}

// A name a shell or YAML would split is quoted in the next steps, and
// the quoted form names the file.
func TestQuotedNames(t *testing.T) {
	for _, c := range []struct{ file, shell, yaml string }{
		{"my key.pem", `'my key.pem'`, `"my key.pem"`},
		{"it's.pem", `'it'\''s.pem'`, `"it's.pem"`},
		{"-dash.pem", `'-dash.pem'`, `"-dash.pem"`},
		{"a,b.pem", `'a,b.pem'`, `"a,b.pem"`},
		{"clé.pem", `'clé.pem'`, `"clé.pem"`},
	} {
		t.Run(c.file, func(t *testing.T) {
			code, stdout, stderr := run(t, "--", c.file)
			if code != ExitOK {
				t.Fatalf("exit status %d, stderr:\n%s", code, stderr)
			}
			k := readKey(t, c.file)
			lines := strings.Split(stdout, "\n")
			if want := c.file + ": new Ed25519 key, keyid " + k.ID(); lines[0] != want {
				t.Errorf("first line %q, want %q", lines[0], want)
			}
			if want := "sign as the pinned token: ROBOTSGATE_TOKEN=YourBot ROBOTSGATE_SIGNING_KEY=" + c.shell + " ROBOTSGATE_SIGNATURE_AGENT=https://your-crawler.example"; lines[2] != want {
				t.Errorf("%q, want %q", lines[2], want)
			}
			if want := "or as a credential user: in the policy, under its user entry, signing_keys: [" + c.yaml + "]"; lines[3] != want {
				t.Errorf("%q, want %q", lines[3], want)
			}
			if sh, err := exec.LookPath("sh"); err == nil {
				out, err := exec.Command(sh, "-c", `printf %s `+c.shell).Output()
				if err != nil || string(out) != c.file {
					t.Errorf("the shell reads %s as %q (%v), want %q", c.shell, out, err, c.file)
				}
			}
		})
	}
}

// An existing file is never touched: not its content, not its mode, not
// what a symbolic link points to.
func TestNeverOverwrites(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"PEM", nil},
		{"JWK", []string{"-format", "jwk", "-not-after", "720h"}},
		{"JSON output", []string{"-json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			const old = "the operator's key\n"
			if err := os.WriteFile("acme.key", []byte(old), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod("acme.key", 0o644); err != nil { // whatever the umask
				t.Fatal(err)
			}
			before, err := os.Stat("acme.key")
			if err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runHere(t, append(c.args, "acme.key")...)
			if code != ExitFailed || stdout != "" {
				t.Errorf("exit status %d, stdout %q", code, stdout)
			}
			if want := "robotsgate keygen: acme.key exists; keys are never overwritten: choose another name, or remove it first\n"; stderr != want {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr, want)
			}
			after, err := os.Stat("acme.key")
			if err != nil {
				t.Fatal(err)
			}
			if data, _ := os.ReadFile("acme.key"); string(data) != old {
				t.Errorf("content now %q", data)
			}
			if after.Mode() != before.Mode() || !after.ModTime().Equal(before.ModTime()) {
				t.Errorf("mode %v, modified %v; was %v, %v", after.Mode(), after.ModTime(), before.Mode(), before.ModTime())
			}
		})
	}
	t.Run("symbolic link", func(t *testing.T) {
		t.Chdir(t.TempDir())
		if err := os.Symlink("target.pem", "link.pem"); err != nil {
			t.Fatalf("symbolic link: %v", err)
		}
		code, _, stderr := runHere(t, "link.pem")
		if want := "robotsgate keygen: link.pem exists; keys are never overwritten: choose another name, or remove it first\n"; code != ExitFailed || stderr != want {
			t.Errorf("exit status %d, stderr:\n%s\nwant:\n%s", code, stderr, want)
		}
		if _, err := os.Lstat("target.pem"); !os.IsNotExist(err) {
			t.Errorf("the link's target was written: %v", err)
		}
	})
}

func TestFolder(t *testing.T) {
	for _, c := range []struct {
		file, want string
	}{
		{"keys/acme.pem", "folder keys does not exist; create it first, or choose another"},
		{"notes.txt/acme.pem", "notes.txt is not a folder"},
	} {
		t.Run(c.file, func(t *testing.T) {
			t.Chdir(t.TempDir())
			if err := os.WriteFile("notes.txt", nil, 0o600); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runHere(t, c.file)
			if code != ExitFailed || stdout != "" {
				t.Errorf("exit status %d, stdout %q", code, stdout)
			}
			if want := "robotsgate keygen: " + c.want + "\n"; stderr != want {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr, want)
			}
			if names := entries(t); len(names) != 1 {
				t.Errorf("files now: %q", names)
			}
		})
	}
	t.Run("a folder elsewhere", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "sub", "acme.jwk")
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := run(t, "-json", file)
		if code != ExitOK {
			t.Fatalf("exit status %d, stderr:\n%s", code, stderr)
		}
		var out struct {
			File, KeyID string
			JWK         signing.JWK
		}
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("%v: %s", err, stdout)
		}
		if k := readKey(t, file); out.File != file || out.KeyID != k.ID() || out.JWK != k.PublicJWK() {
			t.Errorf("printed %+v, wrote %s", out, k.ID())
		}
	})
}

// Each run makes a new key, and the PEM is one openssl reads.
func TestNewKeys(t *testing.T) {
	t.Chdir(t.TempDir())
	seen := map[string]bool{}
	for _, name := range []string{"a.pem", "b.pem", "c.jwk"} {
		if code, _, stderr := runHere(t, name); code != ExitOK {
			t.Fatalf("%s: exit status %d, stderr:\n%s", name, code, stderr)
		}
		id := readKey(t, name).ID()
		if seen[id] {
			t.Errorf("key %s made twice", id)
		}
		seen[id] = true
	}
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Log("no openssl: the PEM is checked by Go's parser alone")
		return
	}
	out, err := exec.Command(openssl, "pkey", "-in", "a.pem", "-pubout", "-outform", "DER").Output()
	if err != nil {
		t.Fatalf("openssl cannot read the key: %v", err)
	}
	// An Ed25519 SubjectPublicKeyInfo ends with the 32 bytes of the key.
	if pub := readKey(t, "a.pem").Public(); !bytes.HasSuffix(out, pub) {
		t.Errorf("openssl's public key %x does not end with %x", out, pub)
	}
}
