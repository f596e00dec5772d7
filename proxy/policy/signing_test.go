package policy

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"robotsgate/proxy/signing"
)

// writeKey writes a new key to dir/name with mode 0600: a JWK when the
// name ends in .jwk, else PEM. Bounds need a JWK.
func writeKey(t testing.TB, dir, name string, notBefore, notAfter time.Time) *signing.Key {
	t.Helper()
	k, err := signing.GenerateKey(nil, notBefore, notAfter)
	if err != nil {
		t.Fatal(err)
	}
	data := k.MarshalJWK()
	if !strings.HasSuffix(name, ".jwk") {
		if data, err = k.MarshalPEM(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

// keyIDs lists the ids of keys, in order.
func keyIDs(keys []*signing.Key) []string {
	var ids []string
	for _, k := range keys {
		ids = append(ids, k.ID())
	}
	return ids
}

func TestSigningKeys(t *testing.T) {
	dir := t.TempDir()
	pem := writeKey(t, dir, "acme.pem", time.Time{}, time.Time{})
	now := time.Now()
	old := writeKey(t, dir, "old.jwk", now.Add(-48*time.Hour), now.Add(time.Hour))
	newer := writeKey(t, dir, "new.jwk", now.Add(-time.Hour), time.Time{})
	if err := os.Mkdir(filepath.Join(dir, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	sub := writeKey(t, filepath.Join(dir, "keys"), "sub.pem", time.Time{}, time.Time{})
	abs := filepath.Join(dir, "keys", "sub.pem")

	tests := []struct {
		name, file, agent string // agent: Options.SignatureAgent
		wantAgent         string
		want              []*signing.Key
		current           *signing.Key
	}{
		{"relative to the file's folder", "crawlers:\n  - user: acme\n    signing_keys: [acme.pem]\n    signature_agent: https://bot.example\n",
			"", "https://bot.example", []*signing.Key{pem}, pem},
		{"a sub-folder", "crawlers:\n  - user: acme\n    signing_keys: [keys/sub.pem]\n    signature_agent: https://bot.example\n",
			"", "https://bot.example", []*signing.Key{sub}, sub},
		{"an absolute path", "crawlers:\n  - user: acme\n    signing_keys: [\"" + abs + "\"]\n    signature_agent: https://bot.example\n",
			"", "https://bot.example", []*signing.Key{sub}, sub},
		{"the default agent", "crawlers:\n  - user: acme\n    signing_keys: [acme.pem]\n",
			"https://default.example", "https://default.example", []*signing.Key{pem}, pem},
		{"signature_agent over the default", "crawlers:\n  - user: acme\n    signing_keys: [acme.pem]\n    signature_agent: http://bot.example:8080\n",
			"https://default.example", "http://bot.example:8080", []*signing.Key{pem}, pem},
		{"rotation: the newest valid signs", "crawlers:\n  - user: acme\n    signing_keys:\n      - new.jwk\n      - old.jwk\n",
			"https://default.example", "https://default.example", []*signing.Key{newer, old}, newer},
		{"keys on a second entry of the user", "crawlers:\n  - user: acme\n    min_delay: 1s\n  - user: acme\n    signing_keys: [acme.pem]\n",
			"https://default.example", "https://default.example", []*signing.Key{pem}, pem},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseOptions(filepath.Join(dir, "p.yaml"), []byte(tt.file), Options{SignatureAgent: tt.agent})
			if err != nil {
				t.Fatal(err)
			}
			ids := p.Identities()
			if len(ids) != 1 {
				t.Fatalf("%d identities, want 1", len(ids))
			}
			id := ids[0]
			if id.Name != "user acme" || id.Agent != tt.wantAgent {
				t.Errorf("identity %q agent %q, want \"user acme\" agent %q", id.Name, id.Agent, tt.wantAgent)
			}
			if got, want := keyIDs(id.Keys), keyIDs(tt.want); !slices.Equal(got, want) {
				t.Errorf("keys %v, want %v", got, want)
			}
			if k, err := id.Current(now); err != nil || k.ID() != tt.current.ID() {
				t.Errorf("Current: %v %v, want %s", k, err, tt.current.ID())
			}
			m := p.Match("acme", "AcmeBot", "example.com")
			if m.Signer() != id {
				t.Errorf("Match(acme).Signer() = %v, want the identity", m.Signer())
			}
			if !strings.HasSuffix(p.Summary(), ", 1 signing identity") {
				t.Errorf("Summary %q does not count the identity", p.Summary())
			}
		})
	}
}

func TestSigningKeyErrors(t *testing.T) {
	dir := t.TempDir()
	writeKey(t, dir, "acme.pem", time.Time{}, time.Time{})
	writeKey(t, dir, "bob.pem", time.Time{}, time.Time{})
	if err := os.WriteFile(filepath.Join(dir, "broken.pem"), []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "folder"), 0o700); err != nil {
		t.Fatal(err)
	}
	const agent = "    signature_agent: https://bot.example\n"
	tests := []struct {
		name, file, agent string // agent: Options.SignatureAgent
		line              int
		want              string
	}{
		{"keys on a token entry", "crawlers:\n  - token: GPTBot\n    signing_keys: [acme.pem]\n" + agent, "", 3,
			"signing_keys on a token entry: a token can be claimed by any client's User-Agent, so signing keys are given to credential users (user:); for the crawler ROBOTSGATE_TOKEN pins, use ROBOTSGATE_SIGNING_KEY"},
		{"agent on the every-crawler entry", "crawlers:\n  - token: \"*\"\n    min_delay: 1s\n" + agent, "", 4,
			"signature_agent on a token entry: a token can be claimed by any client's User-Agent"},
		{"agent without keys", "crawlers:\n  - user: acme\n" + agent, "", 3,
			"signature_agent without signing_keys"},
		{"no agent at all", "crawlers:\n  - user: acme\n    purposes: [search]\n    signing_keys: [acme.pem]\n", "", 4,
			"acme's signing keys need a Signature-Agent URL, where sites find the key directory: add signature_agent: URL, or set ROBOTSGATE_SIGNATURE_AGENT"},
		{"a bad default agent", "crawlers:\n  - user: acme\n    signing_keys: [acme.pem]\n", "bot.example", 3,
			`ROBOTSGATE_SIGNATURE_AGENT, acme's Signature-Agent: Signature-Agent "bot.example": an http or https URL is needed`},
		{"agent not http", "crawlers:\n  - user: acme\n    signing_keys: [acme.pem]\n    signature_agent: ftp://bot.example\n", "", 4,
			"an http or https URL is needed"},
		{"agent with a query", "crawlers:\n  - user: acme\n    signing_keys: [acme.pem]\n    signature_agent: \"https://bot.example/?a=b\"\n", "https://default.example", 4,
			"a query or fragment is not allowed"},
		{"agent a list", "crawlers:\n  - user: acme\n    signing_keys: [acme.pem]\n    signature_agent: [https://bot.example]\n", "", 4,
			"signature_agent is a string, not a list"},
		{"keys empty", "crawlers:\n  - user: acme\n    signing_keys: []\n" + agent, "", 3,
			"signing_keys is empty"},
		{"keys a string", "crawlers:\n  - user: acme\n    signing_keys: acme.pem\n" + agent, "", 3,
			"signing_keys is a list"},
		{"an empty file name", "crawlers:\n  - user: acme\n    signing_keys:\n      - acme.pem\n      - \"\"\n" + agent, "", 5,
			"an empty file name"},
		{"a missing file", "crawlers:\n  - user: acme\n    signing_keys:\n      - acme.pem\n      - gone.pem\n" + agent, "", 5,
			"signing key: stat " + filepath.Join(dir, "gone.pem") + ": no such file"},
		{"a broken file", "crawlers:\n  - user: acme\n    signing_keys: [broken.pem]\n" + agent, "", 3,
			"signing key " + filepath.Join(dir, "broken.pem") + ": neither PEM nor a JWK"},
		{"a folder", "crawlers:\n  - user: acme\n    signing_keys: [folder]\n" + agent, "", 3,
			"signing key " + filepath.Join(dir, "folder") + " is not a regular file"},
		{"a file listed twice", "crawlers:\n  - user: acme\n    signing_keys: [acme.pem, ./acme.pem]\n" + agent, "", 3,
			"user acme lists key"},
		{"keys on two entries of a user", "crawlers:\n  - user: acme\n    signing_keys: [acme.pem]\n" + agent + "  - user: bob\n    signing_keys: [bob.pem]\n" + agent +
			"  - user: acme\n    min_delay: 1s\n    signing_keys: [bob.pem]\n", "https://default.example", 10,
			"acme's signing keys are given by the entry on line 2 already: one entry per user has signing_keys"},
	}
	name := filepath.Join(dir, "p.yaml")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseOptions(name, []byte(tt.file), Options{SignatureAgent: tt.agent})
			if err == nil {
				t.Fatalf("accepted %q: %s", tt.file, p.Summary())
			}
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("error %v (%T) is no *Error", err, err)
			}
			if perr.File != name || perr.Line != tt.line {
				t.Errorf("error %q names %s line %d, want line %d", err, perr.File, perr.Line, tt.line)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if prefix := name + ":" + strconv.Itoa(tt.line) + ": "; !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q does not start with %q", err, prefix)
			}
		})
	}
}

// TestSigningKeyExposed: a key file others may read refuses the whole
// policy, on a reload too, naming the policy's line and the key file.
func TestSigningKeyExposed(t *testing.T) {
	dir := t.TempDir()
	writeKey(t, dir, "acme.pem", time.Time{}, time.Time{})
	path := filepath.Join(dir, "policy.yaml")
	file := "crawlers:\n  - user: acme\n    signing_keys:\n      - acme.pem\n    signature_agent: https://bot.example\n"
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "acme.pem")
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	if err == nil {
		t.Fatalf("a key file of mode 0644 was read: %s", p.Summary())
	}
	want := path + ":4: signing key readable by group or others: " + key + " has mode 0644"
	if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "chmod 600 "+key) {
		t.Errorf("error %q, want %q and how to fix it", err, want)
	}
}

const signers = `
crawlers:
  - user: acme
    allow_sites: [acme.example]
  - user: acme
    signing_keys: [acme.pem]
  - token: acme
    purposes: [search]
  - user: bob
    purposes: [search]
  - user: carol
    signing_keys: [carol.jwk]
    signature_agent: https://carol.example
  - token: "*"
    min_delay: 1s
`

func TestMatchSigner(t *testing.T) {
	dir := t.TempDir()
	writeKey(t, dir, "acme.pem", time.Time{}, time.Time{})
	writeKey(t, dir, "carol.jwk", time.Time{}, time.Time{})
	p, err := ParseOptions(filepath.Join(dir, "p.yaml"), []byte(signers), Options{SignatureAgent: "https://crawler.example"})
	if err != nil {
		t.Fatal(err)
	}
	ids := p.Identities()
	if len(ids) != 2 || ids[0].Name != "user acme" || ids[1].Name != "user carol" || ids[1].Agent != "https://carol.example" {
		t.Fatalf("identities %v, want acme's and carol's, in file order", ids)
	}
	if !strings.HasSuffix(p.Summary(), ", 2 signing identities") {
		t.Errorf("Summary %q", p.Summary())
	}
	tests := []struct {
		user, token, host string
		want              *signing.Identity
	}{
		{"acme", "AcmeBot", "acme.example", ids[0]},
		{"acme", "acme", "elsewhere.example", ids[0]}, // a site its sandbox refuses: still acme
		{"", "acme", "acme.example", nil},             // anonymous, naming itself acme
		{"", "user acme", "acme.example", nil},
		{"bob", "acme", "acme.example", nil}, // another user, without keys, with acme's token
		{"carol", "acme", "acme.example", ids[1]},
		{"dave", "carol", "acme.example", nil}, // a user no entry names
	}
	for _, tt := range tests {
		m := p.Match(tt.user, tt.token, tt.host)
		if got := m.Signer(); got != tt.want {
			t.Errorf("Match(%q, %q, %q).Signer() = %v, want %v", tt.user, tt.token, tt.host, got, tt.want)
		}
	}
	var nilPolicy *Policy
	m := nilPolicy.Match("acme", "acme", "acme.example")
	if nilPolicy.Identities() != nil || m.Signer() != nil {
		t.Error("a nil policy has a signer")
	}
	if p := mustParse(t, addsUp); p.Identities() != nil || strings.Contains(p.Summary(), "signing") {
		t.Errorf("a policy without keys: %v, %q", p.Identities(), p.Summary())
	}
}

func TestMatchSignerAllocatesNothing(t *testing.T) {
	dir := t.TempDir()
	writeKey(t, dir, "acme.pem", time.Time{}, time.Time{})
	writeKey(t, dir, "carol.jwk", time.Time{}, time.Time{})
	withKeys, err := ParseOptions(filepath.Join(dir, "p.yaml"), []byte(signers), Options{SignatureAgent: "https://crawler.example"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		p     *Policy
		user  string
		token string
	}{
		{"a signing user", withKeys, "acme", "AcmeBot"},
		{"anonymous", withKeys, "", "acme"},
		{"no keys in the policy", mustParse(t, addsUp), "acme", "AcmeBot"},
	} {
		allocs := testing.AllocsPerRun(100, func() {
			m := tt.p.Match(tt.user, tt.token, "acme.example")
			m.Destination()
			m.Signer()
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations", tt.name, allocs)
		}
	}
}

// TestSigningNotes: an identity without a key valid now is pointed out at
// load, at its signing_keys line; it still loads, since a key may be
// valid from later on.
func TestSigningNotes(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	expired := writeKey(t, dir, "expired.jwk", now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	writeKey(t, dir, "later.jwk", now.Add(24*time.Hour), time.Time{})
	writeKey(t, dir, "valid.pem", time.Time{}, time.Time{})
	name := filepath.Join(dir, "p.yaml")
	file := "crawlers:\n  - user: acme\n    signing_keys: [expired.jwk]\n  - user: bob\n    signing_keys: [later.jwk, valid.pem]\n"
	p, err := ParseOptions(name, []byte(file), Options{SignatureAgent: "https://crawler.example"})
	if err != nil {
		t.Fatal(err)
	}
	notes := p.Notes()
	want := name + " line 3: no valid signing key for user acme: " + expired.ID() + " expired at "
	if len(notes) != 1 || !strings.HasPrefix(notes[0], want) || !strings.HasSuffix(notes[0], "; acme's requests are refused until a key is valid") {
		t.Errorf("notes %q, want one starting %q", notes, want)
	}
}
