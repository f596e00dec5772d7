package identity

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// hashOf is a real bcrypt hash of password at the lowest cost, as
// htpasswd -B -C 4 makes it (with the $2y$ prefix htpasswd writes).
func hashOf(t testing.TB, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return "$2y$" + strings.TrimPrefix(string(h), "$2a$")
}

func TestParseCredentials(t *testing.T) {
	t.Parallel()
	h := hashOf(t, "secret")
	creds, err := ParseCredentials([]byte("\xEF\xBB\xBF# crawlers we host\r\n" +
		"acme-crawler-7:" + h + ":GPTBot\r\n" +
		"\n" +
		"GPTBot:" + h + "\n" +
		"mailru:" + h + ":Mail.RU_Bot")) // no final newline
	if err != nil {
		t.Fatal(err)
	}
	for name, token := range map[string]string{"acme-crawler-7": "GPTBot", "GPTBot": "GPTBot", "mailru": "Mail.RU_Bot"} {
		c := creds.Lookup(name)
		if c == nil {
			t.Errorf("%s not loaded", name)
			continue
		}
		if c.Token != token {
			t.Errorf("%s speaks for %q, want %q", name, c.Token, token)
		}
		if bcrypt.CompareHashAndPassword(c.hash, []byte("secret")) != nil {
			t.Errorf("%s's hash does not verify its password", name)
		}
	}
	if creds.Len() != 3 {
		t.Errorf("%d credentials, want 3", creds.Len())
	}
	if creds.Lookup("gptbot") != nil {
		t.Error("names are case-sensitive, as htpasswd's are")
	}
}

func TestParseCredentialsRejects(t *testing.T) {
	t.Parallel()
	h := hashOf(t, "secret")
	tests := []struct {
		name, file string
		want       []string // fragments of the error
	}{
		{"apr1", "ok:" + h + "\nacme:$apr1$9Q3rTj1c$1Cyt8Dk7u2nG2M3fH5C9t/\n", []string{"line 2:", `"acme"`, "Apache MD5", "htpasswd -B"}},
		{"sha1", "acme:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n", []string{"line 1:", "SHA-1", "htpasswd -s"}},
		{"sha256 crypt", "acme:$5$OP0QLWvqlzlJJZ5L$wjlZ1iyCrbsg46nJpcoPoA2/nS.WtE7LCYCr0imdAz4\n", []string{"line 1:", "SHA-256-crypt"}},
		{"sha512 crypt", "acme:$6$9ext7T98B80PBht6$QmFbVGFG4Ntq71mr3XOLmUXRtZc1EpGqAS\n", []string{"SHA-512-crypt"}},
		{"md5 crypt", "acme:$1$abc$def\n", []string{"MD5-crypt"}},
		{"des crypt", "acme:FG9oQzfDsngxE\n", []string{"DES-crypt"}},
		{"plain", "acme:password\n", []string{"plain-text"}},
		{"malformed bcrypt", "acme:$2y$05$tooshort\n", []string{"line 1:", "malformed bcrypt hash"}},
		{"cost beyond htpasswd's", "acme:$2y$31$abcdefghijklmnopqrstuuM3FT5yAaZpQ8hQ2z5l5Z3Yc1u5Yy0n6\n", []string{"cost of 31"}},
		{"no hash", "acme\n", []string{"line 1:", `not "name:hash"`}},
		{"too many fields", "acme:" + h + ":GPTBot:extra\n", []string{"more than three"}},
		{"empty name", ":" + h + "\n", []string{"the name is empty"}},
		{"spaced name", " acme:" + h + "\n", []string{"white space"}},
		{"bad token", "acme:" + h + ":GPT Bot\n", []string{`"GPT Bot" is not a product token`}},
		{"star token", "acme:" + h + ":*\n", []string{`"*" is not a product token`}},
		{"name not a token", "acme@example.com:" + h + "\n", []string{"the name", "add a third field"}},
		{"duplicate", "acme:" + h + "\n# x\nacme:" + h + "\n", []string{"line 3:", "already defined on line 1"}},
		{"empty", "# nobody yet\n\n", []string{"holds no credential"}},
		{"every problem at once", "a:$apr1$x$y\nb:plain\n", []string{"line 1:", "line 2:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCredentials([]byte(tc.file))
			if err == nil {
				t.Fatalf("accepted %q", tc.file)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "$2y$") || strings.Contains(err.Error(), "W6ph5M") {
				t.Errorf("error %q repeats a hash", err)
			}
		})
	}
}

func TestCredentialsFileErrorsNameTheFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(path, []byte("acme:{SHA}x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(Options{CredentialsFile: path})
	if err == nil || !strings.Contains(err.Error(), path+": line 1:") {
		t.Errorf("New = %v, want the path and the line", err)
	}
	if _, err := New(Options{CredentialsFile: path + ".missing"}); err == nil || !strings.Contains(err.Error(), path+".missing") {
		t.Errorf("a missing file: %v", err)
	}
}

func FuzzParseCredentials(f *testing.F) {
	f.Add([]byte("acme:$2y$04$abcdefghijklmnopqrstuuM3FT5yAaZpQ8hQ2z5l5Z3Yc1u5Yy0n6:GPTBot\n"))
	f.Add([]byte("a:$apr1$x$y\n:\n::\n#\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		creds, err := ParseCredentials(data)
		if err != nil {
			return
		}
		for name, c := range creds.byName {
			if name == "" || c.Token == "" || !isToken(c.Token) {
				t.Fatalf("loaded %q speaking for %q", name, c.Token)
			}
		}
	})
}
