package signing

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
)

// directoryHeader is the header a directory answer carries.
func directoryHeader(d Directory) http.Header {
	h := http.Header{}
	h.Set("Content-Digest", d.ContentDigest)
	h.Set(FieldSignatureInput, d.SignatureInput)
	h.Set(FieldSignature, d.Signature)
	return h
}

func TestNewDirectory(t *testing.T) {
	now := fixedNow
	never := time.Time{}
	rfc := rfcKey(t)                                                    // no bounds
	bounded := seededKey(t, 1, now.Add(-time.Hour), now.Add(time.Hour)) // valid now
	expired := seededKey(t, 2, never, now)                              // expires at now: left out
	future := seededKey(t, 3, now.Add(24*time.Hour), never)             // listed before it signs
	keys := []*Key{rfc, bounded, expired, future, rfc}

	d := NewDirectory(keys, "crawler.example", now)

	// The body: a JWK set of the public keys, each listed once.
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(d.Body, &set); err != nil {
		t.Fatalf("body %s: %v", d.Body, err)
	}
	want := []*Key{rfc, bounded, future}
	if len(set.Keys) != len(want) {
		t.Fatalf("body lists %d keys, want %d: %s", len(set.Keys), len(want), d.Body)
	}
	for i, k := range want {
		got := set.Keys[i]
		wantFields := map[string]any{"kty": "OKP", "crv": "Ed25519", "x": base64.RawURLEncoding.EncodeToString(k.Public()), "kid": k.ID()}
		if !k.NotBefore.IsZero() {
			wantFields["nbf"] = float64(k.NotBefore.Unix())
		}
		if !k.NotAfter.IsZero() {
			wantFields["exp"] = float64(k.NotAfter.Unix())
		}
		if len(got) != len(wantFields) {
			t.Errorf("key %d has members %v, want %v", i, got, wantFields)
		}
		for name, v := range wantFields {
			if got[name] != v {
				t.Errorf("key %d: %s = %v, want %v", i, name, got[name], v)
			}
		}
	}
	if set.Keys[0]["kid"] != rfcThumbprint {
		t.Errorf("kid of B.1.4's key %v, want %s", set.Keys[0]["kid"], rfcThumbprint)
	}
	if bytes.Contains(d.Body, []byte(`"d"`)) {
		t.Errorf("the body publishes a private key: %s", d.Body)
	}

	// The signatures: one per key listed, sig1..sig3 in order, each over
	// the authority asked and the body's digest, verified with the keys
	// the body publishes.
	var jwks []JWK
	if err := json.Unmarshal(d.Body, &struct {
		Keys *[]JWK `json:"keys"`
	}{&jwks}); err != nil {
		t.Fatal(err)
	}
	h := directoryHeader(d)
	keyids, err := verifyDirectory(t, h, d.Body, "crawler.example", jwks, now)
	if err != nil {
		t.Fatal(err)
	}
	if wantIDs := []string{rfc.ID(), bounded.ID(), future.ID()}; !slices.Equal(keyids, wantIDs) {
		t.Errorf("signed by %q, want %q", keyids, wantIDs)
	}
	inputs, err := httpsfv.UnmarshalDictionary(h.Values(FieldSignatureInput))
	if err != nil {
		t.Fatal(err)
	}
	if names := inputs.Names(); !slices.Equal(names, []string{"sig1", "sig2", "sig3"}) {
		t.Errorf("labels %q", names)
	}
	for _, label := range inputs.Names() {
		m, _ := inputs.Get(label)
		il := m.(httpsfv.InnerList)
		var ids []string
		for _, c := range il.Items {
			ids = append(ids, serialize(c))
		}
		if !slices.Equal(ids, []string{`"@authority";req`, `"content-digest"`}) {
			t.Errorf("%s covers %q", label, ids)
		}
		for name, want := range map[string]any{"created": now.Unix() - 2, "expires": now.Add(-clockAllowance + DirectoryTTL).Unix(), "tag": TagDirectory} {
			if got, _ := il.Params.Get(name); got != want {
				t.Errorf("%s: %s = %v, want %v", label, name, got, want)
			}
		}
	}
	// Valid until it expires.
	if _, err := verifyDirectory(t, h, d.Body, "crawler.example", jwks, now.Add(-clockAllowance+DirectoryTTL)); err != nil {
		t.Errorf("at expiry: %v", err)
	}

	// What a site must refuse.
	if _, err := verifyDirectory(t, h, d.Body, "crawler.example.org", jwks, now); !errors.Is(err, errBadSignature) {
		t.Errorf("answer served as another host's: %v, want errBadSignature", err)
	}
	if _, err := verifyDirectory(t, h, append(slices.Clone(d.Body), ' '), "crawler.example", jwks, now); err == nil {
		t.Error("a changed body passes")
	}
	if _, err := verifyDirectory(t, h, d.Body, "crawler.example", jwks, now.Add(DirectoryTTL+time.Second)); !errors.Is(err, errExpired) {
		t.Errorf("after DirectoryTTL: %v, want errExpired", err)
	}
	if err := verifyRequest(t, &http.Request{Method: "GET", Host: "crawler.example", RequestURI: DirectoryPath, Header: h}, jwks, now); !errors.Is(err, errWrongTag) {
		t.Errorf("a directory signature taken for a request's: %v, want errWrongTag", err)
	}
}

func TestNewDirectoryEmpty(t *testing.T) {
	expired := seededKey(t, 1, time.Time{}, fixedNow)
	d := NewDirectory([]*Key{expired}, "crawler.example", fixedNow)
	if string(d.Body) != `{"keys":[]}` || d.SignatureInput != "" || d.Signature != "" {
		t.Errorf("directory of expired keys: %+v", d)
	}
	if _, err := verifyDirectory(t, directoryHeader(d), d.Body, "crawler.example", nil, fixedNow); err != nil {
		t.Error(err)
	}
}

// TestDirectoryVector reproduces the signed-directory vector of
// draft-ietf-webbotauth-httpsig-protocol (editor's copy, App. E.2.3)
// through Base and SignBase.
func TestDirectoryVector(t *testing.T) {
	const (
		body          = `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U","x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs","use":"sig"}]}`
		contentDigest = `sha-256=:CADMT2aBdV/rqQr/NIru64ERQkCobVvllA4V0fLFDu0=:`
		wantBase      = `"@authority";req: signature-agent.test
"content-digest": sha-256=:CADMT2aBdV/rqQr/NIru64ERQkCobVvllA4V0fLFDu0=:
"@signature-params": ("@authority";req "content-digest");created=1735689600;expires=4889289600;keyid="poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";tag="http-message-signatures-directory"`
		wantInput     = `binding=("@authority";req "content-digest");created=1735689600;expires=4889289600;keyid="poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";tag="http-message-signatures-directory"`
		wantSignature = `binding=:l6P8R67tm3kujAxbHWio7ll01qrEZ0dKD/WWlGhNYEmTnFZM8Wt0VQ9zqGfvo7T/UMkBxsigzChM1Gpz7gOVBg==:`
	)
	sum := sha256.Sum256([]byte(body))
	if got := "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"; got != contentDigest {
		t.Fatalf("Content-Digest %s, want %s", got, contentDigest)
	}
	base, params := Base(
		[]Component{{directoryIDs[0], "signature-agent.test"}, {directoryIDs[1], contentDigest}},
		[]Param{{"created", "1735689600"}, {"expires", "4889289600"}, {"keyid", `"` + rfcThumbprint + `"`}, {"tag", `"` + TagDirectory + `"`}},
	)
	if string(base) != wantBase {
		t.Errorf("base:\n%s\nwant:\n%s", base, wantBase)
	}
	if got := "binding=" + string(params); got != wantInput {
		t.Errorf("Signature-Input:\n%s\nwant:\n%s", got, wantInput)
	}
	sig := SignBase(rfcKey(t), base)
	if got := "binding=:" + base64.StdEncoding.EncodeToString(sig) + ":"; got != wantSignature {
		t.Errorf("Signature:\n%s\nwant:\n%s", got, wantSignature)
	}

	// The independent verifier accepts the vector as sent.
	h := http.Header{"Content-Digest": {contentDigest}, FieldSignatureInput: {wantInput}, FieldSignature: {wantSignature}}
	if _, err := verifyDirectory(t, h, []byte(body), "signature-agent.test", []JWK{rfcKey(t).PublicJWK()}, time.Unix(1735689600, 0)); err != nil {
		t.Errorf("the verifier refuses the draft's vector: %v", err)
	}
}
