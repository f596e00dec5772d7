package signing_test

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"robotsgate/proxy/signing"
)

// RFC 8037 appendix A: an Ed25519 key (A.1, A.2) and its thumbprint (A.3).
const (
	rfc8037D          = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
	rfc8037X          = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
	rfc8037Thumbprint = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
)

// RFC 9421 appendix B.1.4, test-key-ed25519, as PEM and as JWK; its
// thumbprint is the keyid of the Web Bot Auth draft's examples.
const (
	rfc9421PEM = `-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF
-----END PRIVATE KEY-----
`
	rfc9421D          = "n4Ni-HpISpVObnQMW0wOhCKROaIKqKtW_2ZYb2p9KcU"
	rfc9421X          = "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"
	rfc9421Thumbprint = "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"
)

var b64 = base64.RawURLEncoding

func TestThumbprintVectors(t *testing.T) {
	for _, c := range []struct{ x, want string }{
		{rfc8037X, rfc8037Thumbprint},
		{rfc9421X, rfc9421Thumbprint},
	} {
		pub, err := b64.DecodeString(c.x)
		if err != nil {
			t.Fatal(err)
		}
		if got := signing.Thumbprint(pub); got != c.want {
			t.Errorf("Thumbprint(%s) = %s, want %s", c.x, got, c.want)
		}
	}
}

// parseOne parses data, which must hold exactly one key.
func parseOne(t *testing.T, data string) *signing.Key {
	t.Helper()
	keys, err := signing.ParseKeys([]byte(data))
	if err != nil {
		t.Fatalf("ParseKeys: %v\n%s", err, data)
	}
	if len(keys) != 1 {
		t.Fatalf("%d keys, want 1", len(keys))
	}
	return keys[0]
}

func TestParseVectors(t *testing.T) {
	for _, c := range []struct {
		name, data, x, id string
	}{
		{"RFC 8037 A.1 JWK", `{"kty":"OKP","crv":"Ed25519","d":"` + rfc8037D + `","x":"` + rfc8037X + `"}`, rfc8037X, rfc8037Thumbprint},
		{"RFC 8037 A.1 JWK without x", `{"kty":"OKP","crv":"Ed25519","d":"` + rfc8037D + `"}`, rfc8037X, rfc8037Thumbprint},
		{"RFC 9421 B.1.4 PEM", rfc9421PEM, rfc9421X, rfc9421Thumbprint},
		{"RFC 9421 B.1.4 PEM, CRLF and text around", "the test key:\r\n" + strings.ReplaceAll(rfc9421PEM, "\n", "\r\n") + "end\r\n", rfc9421X, rfc9421Thumbprint},
		// Its kid is a name, not the thumbprint: the key id is always the thumbprint.
		{"RFC 9421 B.1.4 JWK", `{"kty":"OKP","crv":"Ed25519","kid":"test-key-ed25519","d":"` + rfc9421D + `","x":"` + rfc9421X + `"}`, rfc9421X, rfc9421Thumbprint},
		{"JWK set of one, indented", "\n  {\"keys\": [\n{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"d\":\"" + rfc9421D + "\",\"use\":\"sig\",\"alg\":\"ed25519\"}]}\n", rfc9421X, rfc9421Thumbprint},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := parseOne(t, c.data)
			if got := b64.EncodeToString(k.Public()); got != c.x {
				t.Errorf("x = %s, want %s", got, c.x)
			}
			if k.ID() != c.id {
				t.Errorf("ID() = %s, want %s", k.ID(), c.id)
			}
			if !k.NotBefore.IsZero() || !k.NotAfter.IsZero() {
				t.Errorf("bounds %v, %v; want none", k.NotBefore, k.NotAfter)
			}
			if want := (signing.JWK{Kty: "OKP", Crv: "Ed25519", X: c.x, Kid: c.id}); k.PublicJWK() != want {
				t.Errorf("PublicJWK() = %+v, want %+v", k.PublicJWK(), want)
			}
		})
	}
}

// signs reports whether k signs what its public key verifies.
func signs(k *signing.Key, private ed25519.PrivateKey) bool {
	msg := []byte("robotsgate")
	return ed25519.Verify(k.Public(), msg, ed25519.Sign(private, msg))
}

func TestRoundTrips(t *testing.T) {
	plain, err := signing.GenerateKey(rand.Reader, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := plain.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("-----BEGIN PRIVATE KEY-----\n")) {
		t.Errorf("MarshalPEM:\n%s", data)
	}
	if back := parseOne(t, string(data)); back.ID() != plain.ID() || !back.Public().Equal(plain.Public()) {
		t.Errorf("PEM read back as %s, want %s", back.ID(), plain.ID())
	}

	nbf, exp := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	bounded, err := signing.GenerateKey(nil, nbf, exp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bounded.MarshalPEM(); err == nil || !strings.Contains(err.Error(), "a PEM key carries no validity; write it as a JWK") {
		t.Errorf("MarshalPEM of a key with bounds: %v", err)
	}
	jwk := bounded.MarshalJWK()
	back := parseOne(t, string(jwk))
	if back.ID() != bounded.ID() || !back.NotBefore.Equal(nbf) || !back.NotAfter.Equal(exp) {
		t.Errorf("JWK read back as %s valid %v to %v, want %s valid %v to %v\n%s", back.ID(), back.NotBefore, back.NotAfter, bounded.ID(), nbf, exp, jwk)
	}
	if back.PublicJWK() != bounded.PublicJWK() || bounded.PublicJWK().Nbf != nbf.Unix() || bounded.PublicJWK().Exp != exp.Unix() {
		t.Errorf("PublicJWK %+v, read back %+v", bounded.PublicJWK(), back.PublicJWK())
	}
	if !bytes.Contains(jwk, []byte(`"d"`)) || !bytes.Contains(jwk, []byte("\n  \"kty\": \"OKP\"")) {
		t.Errorf("MarshalJWK is no indented private JWK:\n%s", jwk)
	}
}

// A key openssl makes reads as the key openssl says it is; the fixed
// vectors above hold one made by openssl where openssl is missing.
func TestOpenSSLKey(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Log("no openssl on this machine: RFC 9421's PEM vector stands for its keys")
		return
	}
	file := filepath.Join(t.TempDir(), "key.pem")
	if out, err := exec.Command(openssl, "genpkey", "-algorithm", "ed25519", "-out", file).CombinedOutput(); err != nil {
		t.Fatalf("openssl genpkey: %v\n%s", err, out)
	}
	spki, err := exec.Command(openssl, "pkey", "-in", file, "-pubout", "-outform", "DER").Output()
	if err != nil {
		t.Fatalf("openssl pkey: %v", err)
	}
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := signing.ReadKeyFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.ParsePKIXPublicKey(spki)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || !keys[0].Public().Equal(pub) {
		t.Errorf("read %d keys, the first public %x; openssl says %x", len(keys), keys[0].Public(), pub)
	}
}

func TestSeveralKeys(t *testing.T) {
	a := parseOne(t, rfc9421PEM)
	b, err := signing.GenerateKey(nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	bPEM, err := b.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	// A public key block between them is passed over.
	spki, err := x509.MarshalPKIXPublicKey(a.Public())
	if err != nil {
		t.Fatal(err)
	}
	pemFile := rfc9421PEM + string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: spki})) + string(bPEM)

	set := `{"keys": [
		{"kty":"OKP","crv":"Ed25519","d":"` + rfc9421D + `","nbf":1764547200},
		{"kty":"OKP","crv":"Ed25519","d":"` + rfc8037D + `","x":"` + rfc8037X + `","exp":1796083200}
	]}`
	for _, c := range []struct {
		name, data string
		ids        []string
	}{
		{"PEM", pemFile, []string{rfc9421Thumbprint, b.ID()}},
		{"JWK set", set, []string{rfc9421Thumbprint, rfc8037Thumbprint}},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys, err := signing.ParseKeys([]byte(c.data))
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, k := range keys {
				ids = append(ids, k.ID())
			}
			if strings.Join(ids, " ") != strings.Join(c.ids, " ") {
				t.Errorf("keys %q, want %q", ids, c.ids)
			}
		})
	}
	keys, _ := signing.ParseKeys([]byte(set))
	if len(keys) == 2 && (keys[0].NotBefore.Unix() != 1764547200 || !keys[0].NotAfter.IsZero() || !keys[1].NotBefore.IsZero() || keys[1].NotAfter.Unix() != 1796083200) {
		t.Errorf("bounds %v %v, %v %v", keys[0].NotBefore, keys[0].NotAfter, keys[1].NotBefore, keys[1].NotAfter)
	}
}

// pkcs8PEM is key as a PKCS #8 PRIVATE KEY block.
func pkcs8PEM(t *testing.T, key any) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func TestParseErrors(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	x25519, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	block := func(typ string, b []byte) string { return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b})) }
	jwk := func(members string) string { return `{"kty":"OKP","crv":"Ed25519",` + members + `}` }
	const noKey = "neither PEM nor a JWK: no key found"
	const notEd25519 = `; Web Bot Auth signs with Ed25519 ("kty": "OKP", "crv": "Ed25519")`
	const badD = `the JWK's "d" is not 32 bytes of base64url without padding`
	// The rest of these messages is encoding/json's: only the start is ours.
	const readJWK = "read the JWK: "

	for _, c := range []struct {
		name, data, want string
	}{
		{"RSA", pkcs8PEM(t, rsaKey), "PRIVATE KEY block 1 holds an RSA key; Web Bot Auth signs with Ed25519 (make one with: robotsgate keygen FILE)"},
		{"ECDSA", pkcs8PEM(t, ecKey), "PRIVATE KEY block 1 holds an ECDSA key; Web Bot Auth signs with Ed25519 (make one with: robotsgate keygen FILE)"},
		{"X25519 after an Ed25519 key", rfc9421PEM + pkcs8PEM(t, x25519), "PRIVATE KEY block 2 holds an ECDH key; Web Bot Auth signs with Ed25519 (make one with: robotsgate keygen FILE)"},
		{"SEC 1 EC key", block("EC PRIVATE KEY", sec1), `no PRIVATE KEY block found (found ["EC PRIVATE KEY"]); an Ed25519 key is PKCS #8, as openssl genpkey -algorithm ed25519 writes it`},
		{"PKCS #1 RSA key", block("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)), `no PRIVATE KEY block found (found ["RSA PRIVATE KEY"]); an Ed25519 key is PKCS #8, as openssl genpkey -algorithm ed25519 writes it`},
		{"public key and certificate", block("PUBLIC KEY", []byte{1}) + block("CERTIFICATE", []byte{2}), `no PRIVATE KEY block found (found ["PUBLIC KEY" "CERTIFICATE"]); an Ed25519 key is PKCS #8, as openssl genpkey -algorithm ed25519 writes it`},
		{"encrypted", block("ENCRYPTED PRIVATE KEY", []byte{0x30, 0}), "encrypted keys are not supported; decrypt it first (openssl pkey -in KEY -out PLAIN)"},
		{"encrypted after a good key", rfc9421PEM + block("ENCRYPTED PRIVATE KEY", []byte{0x30, 0}), "encrypted keys are not supported; decrypt it first (openssl pkey -in KEY -out PLAIN)"},
		{"cut PEM", rfc9421PEM[:60], noKey},
		{"garbage", "garbage", noKey},
		{"empty", "", noKey},
		{"blank", " \n\t\n", noKey},
		{"binary", "\x00\xff\x30\x2e", noKey},
		{"cut JSON", `{"kty":"OKP",`, readJWK},
		{"JSON and more", jwk(`"d":"`+rfc9421D+`"`) + " {}", readJWK},
		{"JSON array", `[{"kty":"OKP"}]`, noKey},
		{"public JWK", jwk(`"x":"` + rfc9421X + `"`), `the JWK has no private part ("d"): it is a public key, which cannot sign`},
		{"public JWK set", `{"keys":[` + jwk(`"x":"`+rfc9421X+`"`) + `]}`, `the JWK has no private part ("d"): it is a public key, which cannot sign`},
		{"RSA JWK", `{"kty":"RSA","n":"AQAB","e":"AQAB","d":"AQAB"}`, `the JWK is kty "RSA" crv ""` + notEd25519},
		{"X25519 JWK", `{"kty":"OKP","crv":"X25519","d":"` + rfc9421D + `"}`, `the JWK is kty "OKP" crv "X25519"` + notEd25519},
		{"EC kty with Ed25519", `{"kty":"EC","crv":"Ed25519","d":"` + rfc9421D + `"}`, `the JWK is kty "EC" crv "Ed25519"` + notEd25519},
		{"case matters", `{"kty":"okp","crv":"ed25519","d":"` + rfc9421D + `"}`, `the JWK is kty "okp" crv "ed25519"` + notEd25519},
		{"no kty", `{"d":"` + rfc9421D + `"}`, `the JWK is kty "" crv ""` + notEd25519},
		{"d of 31 bytes", jwk(`"d":"` + b64.EncodeToString(make([]byte, 31)) + `"`), badD},
		{"d of 33 bytes", jwk(`"d":"` + b64.EncodeToString(make([]byte, 33)) + `"`), badD},
		{"d of 64 bytes, a whole private key", jwk(`"d":"` + b64.EncodeToString(make([]byte, 64)) + `"`), badD},
		{"d padded", jwk(`"d":"` + base64.URLEncoding.EncodeToString(make([]byte, 32)) + `"`), badD},
		{"d in standard base64", jwk(`"d":"` + strings.NewReplacer("-", "+", "_", "/").Replace(rfc9421D) + `"`), badD},
		{"d not a string", jwk(`"d":32`), readJWK},
		{"x not d's", jwk(`"d":"` + rfc9421D + `","x":"` + rfc8037X + `"`), `the JWK's "x" is not the public key of its "d"`},
		{"nbf after exp", jwk(`"d":"` + rfc9421D + `","nbf":1796083200,"exp":1764547200`), "the key's validity ends (2025-12-01T00:00:00Z) before it starts (2026-12-01T00:00:00Z)"},
		{"nbf at exp", jwk(`"d":"` + rfc9421D + `","nbf":1796083200,"exp":1796083200`), "the key's validity ends (2026-12-01T00:00:00Z) before it starts (2026-12-01T00:00:00Z)"},
		{"nbf not a number", jwk(`"d":"` + rfc9421D + `","nbf":"2026-12-01"`), readJWK},
		{"empty set", `{"keys": []}`, "the JWK set has no keys"},
		{"set with a bad key", `{"keys":[` + jwk(`"d":"`+rfc9421D+`"`) + `,` + jwk(`"d":"AAAA"`) + `]}`, "key 2 of the set: " + badD},
		{"keys not a list", `{"keys": {}}`, readJWK},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys, err := signing.ParseKeys([]byte(c.data))
			if err == nil {
				t.Fatalf("%d keys, want the error %q", len(keys), c.want)
			}
			if err.Error() != c.want && (c.want != readJWK || !strings.HasPrefix(err.Error(), readJWK)) {
				t.Errorf("error:\n%v\nwant:\n%s", err, c.want)
			}
		})
	}
	// The rest of this message is encoding/asn1's.
	_, err = signing.ParseKeys([]byte(rfc9421PEM + block("PRIVATE KEY", []byte("garbage"))))
	if err == nil || !strings.HasPrefix(err.Error(), "parse PRIVATE KEY block 2: ") {
		t.Errorf("a PRIVATE KEY block of garbage: %v", err)
	}
}

// writeKey writes data to a file of mode perm in a new folder.
func writeKey(t *testing.T, name, data string, perm os.FileMode) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, perm); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return file
}

func TestReadKeyFile(t *testing.T) {
	t.Run("owner only", func(t *testing.T) {
		for _, perm := range []os.FileMode{0o600, 0o400} {
			file := writeKey(t, "key.pem", rfc9421PEM, perm)
			keys, err := signing.ReadKeyFile(file)
			if err != nil {
				t.Fatalf("mode %04o: %v", perm, err)
			}
			if len(keys) != 1 || keys[0].ID() != rfc9421Thumbprint || keys[0].File != file {
				t.Errorf("mode %04o: %d keys, the first %s from %q", perm, len(keys), keys[0].ID(), keys[0].File)
			}
		}
	})
	t.Run("exposed", func(t *testing.T) {
		if runtime.GOOS == "windows" {
			t.Skip("file modes do not express Windows ACLs: ReadKeyFile checks none there")
		}
		for _, perm := range []os.FileMode{0o644, 0o640, 0o604, 0o620, 0o602, 0o610} {
			file := writeKey(t, "key.pem", rfc9421PEM, perm)
			keys, err := signing.ReadKeyFile(file)
			if !errors.Is(err, signing.ErrKeyExposed) {
				t.Fatalf("mode %04o: %d keys, error %v; want ErrKeyExposed", perm, len(keys), err)
			}
			want := "signing key readable by group or others: " + file + " has mode 0" + octal(perm) +
				"; whoever can read it can sign as your crawler; fix it with: chmod 600 " + file
			if err.Error() != want {
				t.Errorf("error:\n%v\nwant:\n%s", err, want)
			}
		}
	})
	t.Run("missing", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "none.pem")
		_, err := signing.ReadKeyFile(file)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), file) {
			t.Errorf("error %v, want one naming %s that wraps fs.ErrNotExist", err, file)
		}
	})
	t.Run("not a key", func(t *testing.T) {
		file := writeKey(t, "key.jwk", `{"keys": []}`, 0o600)
		_, err := signing.ReadKeyFile(file)
		if want := "signing key " + file + ": the JWK set has no keys"; err == nil || err.Error() != want {
			t.Errorf("error %v, want %s", err, want)
		}
	})
	t.Run("too large", func(t *testing.T) {
		file := writeKey(t, "key.pem", rfc9421PEM+strings.Repeat("\n", 1<<20), 0o600)
		_, err := signing.ReadKeyFile(file)
		if err == nil || !strings.Contains(err.Error(), "a key file holds at most 1048576") {
			t.Errorf("error %v, want one about the size", err)
		}
	})
}

// octal writes a permission as ReadKeyFile's message does, 0644.
func octal(perm os.FileMode) string {
	const digits = "01234567"
	p := uint32(perm.Perm())
	return string([]byte{digits[p>>6&7], digits[p>>3&7], digits[p&7]})
}

func TestValidAt(t *testing.T) {
	nbf, exp := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		nbf, exp time.Time
		at       time.Time
		want     bool
	}{
		{"unbounded, long ago", time.Time{}, time.Time{}, time.Unix(0, 0), true},
		{"unbounded, far ahead", time.Time{}, time.Time{}, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"just before nbf", nbf, exp, nbf.Add(-time.Nanosecond), false},
		{"at nbf: included", nbf, exp, nbf, true},
		{"inside", nbf, exp, nbf.Add(24 * time.Hour), true},
		{"just before exp", nbf, exp, exp.Add(-time.Nanosecond), true},
		{"at exp: excluded", nbf, exp, exp, false},
		{"after exp", nbf, exp, exp.Add(time.Hour), false},
		{"nbf only, before", nbf, time.Time{}, nbf.Add(-time.Second), false},
		{"nbf only, after", nbf, time.Time{}, nbf.AddDate(10, 0, 0), true},
		{"exp only, before", time.Time{}, exp, exp.AddDate(-10, 0, 0), true},
		{"exp only, at", time.Time{}, exp, exp, false},
		{"in another zone", nbf, exp, nbf.In(time.FixedZone("UTC+2", 2*3600)), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, err := signing.GenerateKey(nil, c.nbf, c.exp)
			if err != nil {
				t.Fatal(err)
			}
			if got := k.ValidAt(c.at); got != c.want {
				t.Errorf("ValidAt(%v) = %v, want %v", c.at, got, c.want)
			}
		})
	}
}

func TestNewKey(t *testing.T) {
	seed, err := b64.DecodeString(rfc8037D)
	if err != nil {
		t.Fatal(err)
	}
	private := ed25519.NewKeyFromSeed(seed)
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

	k, err := signing.NewKey(private, at.Add(300*time.Millisecond), at.Add(time.Hour+999*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if !k.NotBefore.Equal(at) || !k.NotAfter.Equal(at.Add(time.Hour)) || k.ID() != rfc8037Thumbprint || !signs(k, private) || k.File != "" {
		t.Errorf("bounds %v to %v, id %s; want whole seconds %v to %v, id %s", k.NotBefore, k.NotAfter, k.ID(), at, at.Add(time.Hour), rfc8037Thumbprint)
	}

	for _, c := range []struct {
		name     string
		private  ed25519.PrivateKey
		nbf, exp time.Time
		want     string
	}{
		{"a seed, not a private key", ed25519.PrivateKey(seed), time.Time{}, time.Time{}, "an Ed25519 private key has 64 bytes, not 32"},
		{"ends before it starts", private, at, at.Add(-time.Second), "the key's validity ends (2026-11-30T23:59:59Z) before it starts (2026-12-01T00:00:00Z)"},
		// Kept in whole seconds, the bounds would meet: a key never valid.
		{"within one second", private, at.Add(100 * time.Millisecond), at.Add(900 * time.Millisecond), "the key's validity ends (2026-12-01T00:00:00Z) before it starts (2026-12-01T00:00:00Z)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := signing.NewKey(c.private, c.nbf, c.exp)
			if err == nil || err.Error() != c.want {
				t.Errorf("error %v, want %s", err, c.want)
			}
		})
	}
}

// keysAt are n new keys, the i-th valid from nbf[i] until exp[i] (zero:
// unbounded).
func keysAt(t *testing.T, bounds ...[2]time.Time) []*signing.Key {
	t.Helper()
	keys := make([]*signing.Key, len(bounds))
	for i, b := range bounds {
		k, err := signing.GenerateKey(nil, b[0], b[1])
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	return keys
}

const agent = "https://crawler.example"

func TestNewIdentity(t *testing.T) {
	keys := keysAt(t, [2]time.Time{}, [2]time.Time{})
	id, err := signing.NewIdentity("user acme", agent, keys)
	if err != nil {
		t.Fatal(err)
	}
	if id.Name != "user acme" || id.Agent != agent || len(id.Keys) != 2 || id.Keys[0] != keys[0] || id.Keys[1] != keys[1] {
		t.Errorf("NewIdentity made %+v", id)
	}

	pemFile := writeKey(t, "a.pem", rfc9421PEM, 0o600)
	jwkFile := writeKey(t, "b.jwk", `{"kty":"OKP","crv":"Ed25519","d":"`+rfc9421D+`"}`, 0o600)
	fromA, err := signing.ReadKeyFile(pemFile)
	if err != nil {
		t.Fatal(err)
	}
	fromB, err := signing.ReadKeyFile(jwkFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		keys []*signing.Key
		want string
	}{
		{"no keys", nil, "user acme has no signing key"},
		{"a key twice", []*signing.Key{keys[0], keys[1], keys[0]}, "user acme lists key " + keys[0].ID() + " twice (a key given and a key given)"},
		{"a key in two files", append(fromA, fromB...), "user acme lists key " + rfc9421Thumbprint + " twice (" + pemFile + " and " + jwkFile + ")"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := signing.NewIdentity("user acme", agent, c.keys)
			if err == nil || err.Error() != c.want {
				t.Errorf("error %v, want %s", err, c.want)
			}
		})
	}
}

func TestCheckAgent(t *testing.T) {
	for _, good := range []string{
		"https://crawler.example",
		"https://crawler.example/",
		"http://127.0.0.1:8080",
		"https://[::1]:8443",
		"https://Crawler.Example",
	} {
		if err := signing.CheckAgent(good); err != nil {
			t.Errorf("CheckAgent(%q): %v", good, err)
		}
		if _, err := signing.NewIdentity("token GPTBot", good, keysAt(t, [2]time.Time{})); err != nil {
			t.Errorf("NewIdentity with %q: %v", good, err)
		}
	}
	const ascii = `: only printable ASCII without spaces, quotes or backslashes (percent-encode the rest)`
	for _, c := range []struct{ agent, want string }{
		{"", "no Signature-Agent URL: sites need one to find the key directory (https://your-crawler.example, say)"},
		{"ftp://crawler.example", `Signature-Agent "ftp://crawler.example": an http or https URL is needed (https://your-crawler.example, say)`},
		{"crawler.example", `Signature-Agent "crawler.example": an http or https URL is needed (https://your-crawler.example, say)`},
		{"//crawler.example", `Signature-Agent "//crawler.example": an http or https URL is needed (https://your-crawler.example, say)`},
		{"https://", `Signature-Agent "https://" names no host`},
		{"https:///keys", `Signature-Agent "https:///keys" names no host`},
		{"https:crawler.example", `Signature-Agent "https:crawler.example" names no host`},
		{"https://bot:secret@crawler.example", `Signature-Agent "https://bot:secret@crawler.example" carries user information; sites would see it`},
		{"https://bot@crawler.example", `Signature-Agent "https://bot@crawler.example" carries user information; sites would see it`},
		{"https://crawler.example/?k=v", `Signature-Agent "https://crawler.example/?k=v": a query or fragment is not allowed`},
		{"https://crawler.example?", `Signature-Agent "https://crawler.example?": a query or fragment is not allowed`},
		{"https://crawler.example/#keys", `Signature-Agent "https://crawler.example/#keys": a query or fragment is not allowed`},
		{"https://crawler.example#", `Signature-Agent "https://crawler.example#": a query or fragment is not allowed`},
		{"https://crawler.example/a b", `Signature-Agent "https://crawler.example/a b"` + ascii},
		{`https://crawler.example/"x"`, `Signature-Agent "https://crawler.example/\"x\""` + ascii},
		{`https://crawler.example/a\b`, `Signature-Agent "https://crawler.example/a\\b"` + ascii},
		{"https://crawler.example/clé", `Signature-Agent "https://crawler.example/clé"` + ascii},
		{"HTTPS://crawler.example", `Signature-Agent "HTTPS://crawler.example": write the scheme in lower case (https://...)`},
		{"https://:443", `Signature-Agent "https://:443" names no host`},
		{"https://crawler.example/bots/acme", `Signature-Agent "https://crawler.example/bots/acme": an origin is needed, without a path (https://your-crawler.example): sites fetch the key directory at /.well-known/http-message-signatures-directory on it`},
	} {
		t.Run(c.agent, func(t *testing.T) {
			err := signing.CheckAgent(c.agent)
			if err == nil || err.Error() != c.want {
				t.Errorf("error %v, want %s", err, c.want)
			}
			if _, err := signing.NewIdentity("token GPTBot", c.agent, keysAt(t, [2]time.Time{})); err == nil || err.Error() != c.want {
				t.Errorf("NewIdentity: error %v, want %s", err, c.want)
			}
		})
	}
	// What url.Parse refuses is refused, naming the agent.
	for _, bad := range []string{"https://crawler example", "https://crawler.example/\n", "https://crawler.example/\x7f", "https://crawler.example:port"} {
		if err := signing.CheckAgent(bad); err == nil || !strings.Contains(err.Error(), "Signature-Agent ") {
			t.Errorf("CheckAgent(%q): %v", bad, err)
		}
	}
}

func TestCurrent(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	past, older, future := now.Add(-24*time.Hour), now.Add(-48*time.Hour), now.Add(24*time.Hour)
	var none time.Time
	for _, c := range []struct {
		name   string
		bounds [][2]time.Time
		want   int // the index of the key that signs
	}{
		{"one unbounded key", [][2]time.Time{{none, none}}, 0},
		{"the latest not-before", [][2]time.Time{{older, none}, {past, none}, {none, none}}, 1},
		{"the latest not-before, listed first", [][2]time.Time{{past, none}, {older, none}}, 0},
		{"unbounded keys: the later listed", [][2]time.Time{{none, none}, {none, none}, {none, none}}, 2},
		{"a tie: the later listed", [][2]time.Time{{past, none}, {past, future}, {older, none}}, 1},
		{"not the one not yet valid", [][2]time.Time{{older, none}, {future, none}}, 0},
		{"not the one expired", [][2]time.Time{{older, none}, {past, now}}, 0},
		{"valid from now on", [][2]time.Time{{older, none}, {now, none}}, 1},
		{"expiring later", [][2]time.Time{{past, now.Add(time.Second)}, {older, none}}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys := keysAt(t, c.bounds...)
			id, err := signing.NewIdentity("user acme", agent, keys)
			if err != nil {
				t.Fatal(err)
			}
			k, err := id.Current(now)
			if err != nil {
				t.Fatal(err)
			}
			if k != keys[c.want] {
				t.Errorf("Current picked %s, want key %d, %s", k.ID(), c.want, keys[c.want].ID())
			}
		})
	}

	t.Run("none valid", func(t *testing.T) {
		keys := keysAt(t, [2]time.Time{older, past}, [2]time.Time{future, none}, [2]time.Time{none, now})
		id, err := signing.NewIdentity("token GPTBot", agent, keys)
		if err != nil {
			t.Fatal(err)
		}
		k, err := id.Current(now)
		if !errors.Is(err, signing.ErrNoValidKey) {
			t.Fatalf("Current = %v, %v; want ErrNoValidKey", k, err)
		}
		want := "no valid signing key for token GPTBot: " +
			keys[0].ID() + " expired at 2026-11-30T12:00:00Z; " +
			keys[1].ID() + " is valid from 2026-12-02T12:00:00Z; " +
			keys[2].ID() + " expired at 2026-12-01T12:00:00Z"
		if err.Error() != want {
			t.Errorf("error:\n%v\nwant:\n%s", err, want)
		}
	})
}

func TestLoadIdentity(t *testing.T) {
	later, err := signing.GenerateKey(nil, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	a := writeKey(t, "a.pem", rfc9421PEM, 0o600)
	b := writeKey(t, "b.jwk", string(later.MarshalJWK()), 0o600)
	id, err := signing.LoadIdentity("user acme", agent, []string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if len(id.Keys) != 2 || id.Keys[0].ID() != rfc9421Thumbprint || id.Keys[1].ID() != later.ID() || id.Keys[1].File != b {
		t.Fatalf("keys %+v", id.Keys)
	}
	if k, err := id.Current(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)); err != nil || k.ID() != later.ID() {
		t.Errorf("Current = %v, %v; want the key of %s", k, err, b)
	}
	if k, err := id.Current(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)); err != nil || k.ID() != rfc9421Thumbprint {
		t.Errorf("Current before the new key = %v, %v; want the key of %s", k, err, a)
	}
	if _, err := signing.LoadIdentity("user acme", agent, []string{a, filepath.Join(t.TempDir(), "gone.pem")}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := signing.LoadIdentity("user acme", agent, nil); err == nil || err.Error() != "user acme has no signing key" {
		t.Errorf("no files: %v", err)
	}
}

// Whatever an operator's file holds, ParseKeys answers keys or an error,
// never a panic, and each key it answers is whole: its id is its public
// key's thumbprint and it signs what that key verifies.
func FuzzParseKeys(f *testing.F) {
	f.Add([]byte(rfc9421PEM))
	f.Add([]byte(`{"kty":"OKP","crv":"Ed25519","d":"` + rfc8037D + `","x":"` + rfc8037X + `","nbf":1,"exp":2}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","d":"` + rfc9421D + `"},{}]}`))
	f.Add([]byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nMAA=\n-----END ENCRYPTED PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := signing.ParseKeys(data)
		if err != nil {
			if len(keys) != 0 {
				t.Errorf("%d keys with the error %v", len(keys), err)
			}
			return
		}
		if len(keys) == 0 {
			t.Fatal("no keys and no error")
		}
		for _, k := range keys {
			if k.ID() != signing.Thumbprint(k.Public()) {
				t.Errorf("key %s: its thumbprint is %s", k.ID(), signing.Thumbprint(k.Public()))
			}
			if !k.NotBefore.IsZero() && !k.NotAfter.IsZero() && !k.NotAfter.After(k.NotBefore) {
				t.Errorf("key %s valid from %v until %v", k.ID(), k.NotBefore, k.NotAfter)
			}
			back := k.MarshalJWK()
			again, err := signing.ParseKeys(back)
			if err != nil || len(again) != 1 || again[0].ID() != k.ID() || again[0].PublicJWK() != k.PublicJWK() {
				t.Errorf("key %s does not read back from its JWK (%v):\n%s", k.ID(), err, back)
			}
		}
	})
}
