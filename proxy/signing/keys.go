package signing

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// Key is one Ed25519 key an identity signs with. Its id is its JWK
// thumbprint (RFC 7638), the keyid parameter of every signature it makes.
type Key struct {
	private ed25519.PrivateKey
	public  ed25519.PublicKey
	id      string
	// NotBefore and NotAfter bound when the key signs (JWK "nbf" and
	// "exp"); zero: from the start, and forever.
	NotBefore, NotAfter time.Time
	// File is where the key was read, for messages; "" for a new key.
	File string
}

// NewKey makes a Key of an Ed25519 private key.
func NewKey(private ed25519.PrivateKey, notBefore, notAfter time.Time) (*Key, error) {
	if len(private) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("an Ed25519 private key has %d bytes, not %d", ed25519.PrivateKeySize, len(private))
	}
	// Bounds are whole seconds (JWK "nbf" and "exp"): compared once
	// truncated, or bounds within one second would make a key never valid.
	notBefore, notAfter = notBefore.Truncate(time.Second), notAfter.Truncate(time.Second)
	if !notBefore.IsZero() && !notAfter.IsZero() && !notAfter.After(notBefore) {
		return nil, fmt.Errorf("the key's validity ends (%s) before it starts (%s)", stamp(notAfter), stamp(notBefore))
	}
	public := private.Public().(ed25519.PublicKey)
	return &Key{private: private, public: public, id: Thumbprint(public), NotBefore: notBefore, NotAfter: notAfter}, nil
}

// GenerateKey makes a new key from rand (crypto/rand's Reader when nil).
func GenerateKey(rand io.Reader, notBefore, notAfter time.Time) (*Key, error) {
	_, private, err := ed25519.GenerateKey(rand)
	if err != nil {
		return nil, fmt.Errorf("generate an Ed25519 key: %w", err)
	}
	return NewKey(private, notBefore, notAfter)
}

// ID is the key's JWK thumbprint (RFC 7638), base64url without padding.
func (k *Key) ID() string { return k.id }

// Public is the key's public half.
func (k *Key) Public() ed25519.PublicKey { return k.public }

// ValidAt reports whether the key may sign at t.
func (k *Key) ValidAt(t time.Time) bool {
	return (k.NotBefore.IsZero() || !t.Before(k.NotBefore)) && (k.NotAfter.IsZero() || t.Before(k.NotAfter))
}

// Thumbprint is the JWK thumbprint (RFC 7638 §3) of an Ed25519 public key:
// SHA-256 over its required members in lexical order (RFC 8037 §2),
// base64url without padding.
func Thumbprint(public ed25519.PublicKey) string {
	sum := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + b64(public) + `"}`))
	return b64(sum[:])
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// stamp writes a validity bound as keys and messages show it.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// JWK is an Ed25519 key as a JSON Web Key (RFC 8037): the public key
// alone, or with D, the private one. Nbf and Exp are the key's validity
// in seconds since the epoch, as the key directory lists them.
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	D   string `json:"d,omitempty"`
	Kid string `json:"kid,omitempty"`
	Nbf int64  `json:"nbf,omitempty"`
	Exp int64  `json:"exp,omitempty"`
}

// PublicJWK is the key's public half as the key directory lists it.
func (k *Key) PublicJWK() JWK {
	j := JWK{Kty: "OKP", Crv: "Ed25519", X: b64(k.public), Kid: k.id}
	if !k.NotBefore.IsZero() {
		j.Nbf = k.NotBefore.Unix()
	}
	if !k.NotAfter.IsZero() {
		j.Exp = k.NotAfter.Unix()
	}
	return j
}

// MarshalJWK writes the private key as a JWK document.
func (k *Key) MarshalJWK() []byte {
	j := k.PublicJWK()
	j.D = b64(k.private.Seed())
	out, _ := json.MarshalIndent(j, "", "  ") // a struct of strings and numbers: cannot fail
	return append(out, '\n')
}

// MarshalPEM writes the private key as a PKCS #8 "PRIVATE KEY" block, as
// openssl genpkey -algorithm ed25519 does. PEM carries no validity: a key
// with bounds must be written as a JWK.
func (k *Key) MarshalPEM() ([]byte, error) {
	if !k.NotBefore.IsZero() || !k.NotAfter.IsZero() {
		return nil, errors.New("a PEM key carries no validity; write it as a JWK (a .jwk or .json file) to keep its not-before and not-after")
	}
	der, err := x509.MarshalPKCS8PrivateKey(k.private)
	if err != nil {
		return nil, fmt.Errorf("encode the key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ErrKeyExposed is wrapped by the error for a key file that others than
// its owner may read.
var ErrKeyExposed = errors.New("signing key readable by group or others")

// maxKeyFile bounds a key file: a key set of a few keys is a few KiB.
const maxKeyFile = 1 << 20

// ReadKeyFile reads the Ed25519 private keys of a file: PEM ("PRIVATE
// KEY" blocks, PKCS #8), a JWK or a JWK set ({"keys": [...]}), each with
// its private part. A file others may read is refused, as the CA key is.
func ReadKeyFile(path string) ([]*Key, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		// A pipe or device would block the start, or be read without end.
		return nil, fmt.Errorf("signing key %s is not a regular file (%s)", path, fi.Mode().Type())
	}
	// Modes do not express Windows ACLs.
	if perm := fi.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o; whoever can read it can sign as your crawler; fix it with: chmod 600 %s",
			ErrKeyExposed, path, perm, path)
	}
	if fi.Size() > maxKeyFile {
		return nil, fmt.Errorf("signing key %s: %d bytes; a key file holds at most %d", path, fi.Size(), maxKeyFile)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	defer f.Close()
	// The file opened must be the one checked: not swapped since.
	if opened, err := f.Stat(); err != nil || !os.SameFile(fi, opened) {
		return nil, fmt.Errorf("signing key %s changed while it was read", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("signing key %s: over %d bytes", path, maxKeyFile)
	}
	keys, err := ParseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	for _, k := range keys {
		k.File = path
	}
	return keys, nil
}

// ParseKeys reads the Ed25519 private keys of a PEM or JWK document.
func ParseKeys(data []byte) ([]*Key, error) {
	if trimmed := strings.TrimSpace(string(data)); strings.HasPrefix(trimmed, "{") {
		return parseJWKs([]byte(trimmed))
	}
	var keys []*Key
	var seen []string
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		switch block.Type {
		case "PRIVATE KEY":
		case "ENCRYPTED PRIVATE KEY":
			return nil, errors.New("encrypted keys are not supported; decrypt it first (openssl pkey -in KEY -out PLAIN)")
		default:
			seen = append(seen, block.Type)
			continue
		}
		parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse PRIVATE KEY block %d: %w", len(keys)+1, err)
		}
		private, ok := parsed.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("PRIVATE KEY block %d holds an %s key; Web Bot Auth signs with Ed25519 (make one with: robotsgate keygen FILE)",
				len(keys)+1, keyKind(parsed))
		}
		k, err := NewKey(private, time.Time{}, time.Time{})
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	switch {
	case len(keys) > 0:
		return keys, nil
	case len(seen) > 0:
		return nil, fmt.Errorf("no PRIVATE KEY block found (found %q); an Ed25519 key is PKCS #8, as openssl genpkey -algorithm ed25519 writes it", seen)
	}
	return nil, errors.New("neither PEM nor a JWK: no key found")
}

func keyKind(key any) string {
	name := fmt.Sprintf("%T", key)
	name = strings.TrimPrefix(name, "*")
	name, _, _ = strings.Cut(name, ".")
	return strings.ToUpper(name)
}

// parseJWKs reads a JWK or a JWK set of Ed25519 private keys.
func parseJWKs(data []byte) ([]*Key, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("read the JWK: %w", err)
	}
	docs := set.Keys
	if docs == nil {
		docs = []json.RawMessage{data}
	}
	if len(docs) == 0 {
		return nil, errors.New(`the JWK set has no keys`)
	}
	keys := make([]*Key, 0, len(docs))
	for i, doc := range docs {
		k, err := parseJWK(doc)
		if err != nil {
			if len(docs) > 1 {
				return nil, fmt.Errorf("key %d of the set: %w", i+1, err)
			}
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func parseJWK(doc []byte) (*Key, error) {
	var j JWK
	if err := json.Unmarshal(doc, &j); err != nil {
		return nil, fmt.Errorf("read the JWK: %w", err)
	}
	if j.Kty != "OKP" || j.Crv != "Ed25519" {
		return nil, fmt.Errorf(`the JWK is kty %q crv %q; Web Bot Auth signs with Ed25519 ("kty": "OKP", "crv": "Ed25519")`, j.Kty, j.Crv)
	}
	if j.D == "" {
		return nil, errors.New(`the JWK has no private part ("d"): it is a public key, which cannot sign`)
	}
	seed, err := base64.RawURLEncoding.DecodeString(j.D)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf(`the JWK's "d" is not %d bytes of base64url without padding`, ed25519.SeedSize)
	}
	var notBefore, notAfter time.Time
	if j.Nbf != 0 {
		notBefore = time.Unix(j.Nbf, 0)
	}
	if j.Exp != 0 {
		notAfter = time.Unix(j.Exp, 0)
	}
	k, err := NewKey(ed25519.NewKeyFromSeed(seed), notBefore, notAfter)
	if err != nil {
		return nil, err
	}
	if j.X != "" && j.X != b64(k.public) {
		return nil, errors.New(`the JWK's "x" is not the public key of its "d"`)
	}
	return k, nil
}
