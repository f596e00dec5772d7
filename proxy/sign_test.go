package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"robotsgate/proxy/policy"
	"robotsgate/proxy/signing"
)

// writeKey writes a new signing key to dir/name (mode 0600) and returns
// it as read back.
func writeKey(t *testing.T, dir, name string) *signing.Key {
	t.Helper()
	k, err := signing.GenerateKey(nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	pem, err := k.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

// signingFixture is a gate with a pinned token's identity (MyBot) and a
// policy giving user acme its own and user beta none.
func signingFixture(t *testing.T) (*Server, *signing.Identity, *policy.Policy) {
	t.Helper()
	dir := t.TempDir()
	pinnedKey := writeKey(t, dir, "pinned.pem")
	acmeKey := writeKey(t, dir, "acme.pem")
	pinned, err := signing.NewIdentity("token MyBot", "https://mybot.example", []*signing.Key{pinnedKey})
	if err != nil {
		t.Fatal(err)
	}
	yaml := "crawlers:\n  - user: acme\n    signing_keys: [acme.pem]\n    signature_agent: https://acme.example\n  - user: beta\n    purposes: [search]\n"
	p, err := policy.Parse(filepath.Join(dir, "policy.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if ids := p.Identities(); len(ids) != 1 || ids[0].Keys[0].ID() != acmeKey.ID() {
		t.Fatalf("policy identities = %v", ids)
	}
	s := &Server{opts: Options{Signing: SigningOptions{Pinned: pinned, Token: "MyBot"}, Policy: fixedPolicy{p}}}
	return s, pinned, p
}

// TestSigningIdentity: a credential user with keys signs as itself, and
// no one else does; the pinned token's key signs the requests judged as
// that token only.
func TestSigningIdentity(t *testing.T) {
	s, pinned, p := signingFixture(t)
	acme := p.Identities()[0]
	for _, tc := range []struct {
		name, user, token string
		want              *signing.Identity
	}{
		{"user with keys", "acme", "AcmeBot", acme},
		{"user with keys, judged as the pinned token", "acme", "MyBot", acme},
		{"user without keys, judged as the pinned token", "beta", "MyBot", pinned},
		{"user without keys", "beta", "BetaBot", nil},
		{"anonymous, the pinned token", "", "MyBot", pinned},
		{"anonymous claiming the user's name as token", "", "acme", nil},
		{"anonymous, another token", "", "OtherBot", nil},
		{"the pinned token in another case", "", "mybot", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &decision{s: s, who: who{token: tc.token, credential: tc.user}}
			d.policy = &policyState{policy: p, match: p.Match(tc.user, tc.token, "example.com")}
			if got := d.signingIdentity(); got != tc.want {
				t.Errorf("signing identity = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestKeyDirectoryEndpoint: the directory for a Host lists the keys of
// the identities whose Signature-Agent names it, signed, and a Host no
// agent names gets 404 saying which do.
func TestKeyDirectoryEndpoint(t *testing.T) {
	s, pinned, p := signingFixture(t)
	acme := p.Identities()[0]
	for _, tc := range []struct {
		host   string
		status int
		want   *signing.Identity
		says   string
	}{
		{"mybot.example", http.StatusOK, pinned, ""},
		{"MyBot.Example:443", http.StatusOK, pinned, ""},
		{"acme.example", http.StatusOK, acme, ""},
		{"other.example", http.StatusNotFound, nil, "The Signature-Agent URLs are: https://mybot.example, https://acme.example"},
	} {
		t.Run(tc.host, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, signing.DirectoryPath, nil)
			r.Host = tc.host
			w := httptest.NewRecorder()
			s.serveKeyDirectory(w, r)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if tc.want == nil {
				if !strings.Contains(w.Body.String(), tc.says) {
					t.Errorf("body %q lacks %q", w.Body, tc.says)
				}
				return
			}
			if ct := w.Header().Get("Content-Type"); ct != signing.DirectoryMediaType {
				t.Errorf("Content-Type %q", ct)
			}
			var set struct{ Keys []signing.JWK }
			if err := json.Unmarshal(w.Body.Bytes(), &set); err != nil {
				t.Fatal(err)
			}
			if len(set.Keys) != 1 || set.Keys[0].Kid != tc.want.Keys[0].ID() || set.Keys[0].D != "" {
				t.Errorf("directory keys %+v, want only %s's public key", set.Keys, tc.want.Name)
			}
			if in := w.Header().Get(signing.FieldSignatureInput); !strings.Contains(in, `keyid="`+tc.want.Keys[0].ID()+`"`) ||
				!strings.Contains(in, `tag="http-message-signatures-directory"`) || w.Header().Get(signing.FieldSignature) == "" {
				t.Errorf("directory not signed by its key: Signature-Input %q", in)
			}
		})
	}
	none := &Server{}
	w := httptest.NewRecorder()
	none.serveKeyDirectory(w, httptest.NewRequest(http.MethodGet, signing.DirectoryPath, nil))
	if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "no signing keys are configured") {
		t.Errorf("without keys: %d %q", w.Code, w.Body)
	}
}

// TestKeyDirectoryCached: the signed directory is made once a minute per
// host, anew at once when the keys change or one of them expires.
func TestKeyDirectoryCached(t *testing.T) {
	_, pinned, p := signingFixture(t)
	var c directoryCache
	now := time.Now()
	first := c.get("mybot.example", pinned.Keys, now)
	if again := c.get("mybot.example", pinned.Keys, now.Add(directoryLife-time.Second)); again.Signature != first.Signature {
		t.Error("made anew within its life")
	}
	if later := c.get("mybot.example", pinned.Keys, now.Add(directoryLife)); later.Signature == first.Signature {
		t.Error("served past its life")
	}
	other := p.Identities()[0].Keys
	if changed := c.get("mybot.example", other, now.Add(time.Second)); !strings.Contains(changed.SignatureInput, other[0].ID()) {
		t.Errorf("keys changed, directory not: %s", changed.SignatureInput)
	}
	if len(c.byHost) != 1 {
		t.Errorf("%d hosts kept, want 1", len(c.byHost))
	}
	expiring, err := signing.GenerateKey(nil, time.Time{}, now.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	keys := []*signing.Key{expiring, other[0]}
	if d := c.get("acme.example", keys, now); !strings.Contains(string(d.Body), expiring.ID()) {
		t.Fatalf("the key valid for 10 s is not listed: %s", d.Body)
	}
	if d := c.get("acme.example", keys, now.Add(10*time.Second)); strings.Contains(string(d.Body), expiring.ID()) {
		t.Errorf("an expired key still listed: %s", d.Body)
	}
}
