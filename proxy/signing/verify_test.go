package signing

// An independent verifier of robotsgate's signatures, written from RFC 9421
// and the Web Bot Auth profile the way a site would write one: the signature
// base is rebuilt from the received request and the parsed Signature-Input
// (re-serialized with httpsfv), never with Base or appendLine, and the
// public keys come from a JWK set, their ids computed here.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
)

// The verifier's failures that tests tell apart.
var (
	errBadSignature = errors.New("the signature does not match the base")
	errNotYetValid  = errors.New("the signature was created after now")
	errExpired      = errors.New("the signature expired")
	errUnknownKey   = errors.New("no key of the JWK set has the signature's keyid")
	errWrongTag     = errors.New("wrong tag")
)

// verifyRequest checks r's Web Bot Auth signature as a site would at now,
// with the keys of jwks: the one signature tagged web-bot-auth, covering
// @authority and the Signature-Agent member keyed by its label, with
// created ≤ now ≤ expires, alg ed25519 and a 64-byte nonce.
func verifyRequest(t testing.TB, r *http.Request, jwks []JWK, now time.Time) error {
	t.Helper()
	inputs, err := httpsfv.UnmarshalDictionary(r.Header.Values(FieldSignatureInput))
	if err != nil {
		return fmt.Errorf("Signature-Input: %w", err)
	}
	var label string
	for _, name := range inputs.Names() {
		m, _ := inputs.Get(name)
		il, ok := m.(httpsfv.InnerList)
		if !ok {
			return fmt.Errorf("Signature-Input %s is not an inner list", name)
		}
		if tag, _ := il.Params.Get("tag"); tag == TagRequest {
			if label != "" {
				return fmt.Errorf("two web-bot-auth signatures: %s and %s", label, name)
			}
			label = name
		}
	}
	if label == "" {
		return fmt.Errorf("%w: no signature tagged %s", errWrongTag, TagRequest)
	}
	resolve := func(c httpsfv.Item) (string, error) {
		name, _ := c.Value.(string)
		params := c.Params.Names()
		switch {
		case name == "@authority" && len(params) == 0:
			return siteAuthority(r), nil
		case name == "@method" && len(params) == 0:
			return r.Method, nil
		case name == "@path" && len(params) == 0:
			path, _ := sitePathQuery(r)
			return path, nil
		case name == "@query" && len(params) == 0:
			_, query := sitePathQuery(r)
			return "?" + query, nil
		case name == "signature-agent" && len(params) == 1 && params[0] == "key":
			key, _ := c.Params.Get("key")
			if key != label {
				return "", fmt.Errorf("the Signature-Agent member covered is %v, not the label %s", key, label)
			}
			return dictionaryMember(r.Header.Values(FieldSignatureAgent), label)
		}
		return "", fmt.Errorf("component %s is not one a request signature may cover here", serialize(c))
	}
	covered, err := verifyLabel(inputs, r.Header.Values(FieldSignature), label, TagRequest, resolve, jwks, now)
	if err != nil {
		return err
	}
	if !covered["@authority"] {
		return errors.New("@authority is not covered")
	}
	if len(r.Header.Values(FieldSignatureAgent)) > 0 && !covered["signature-agent"] {
		return errors.New("a Signature-Agent is sent but not covered")
	}
	return nil
}

// verifyDirectory checks a key directory answer to a request for it at
// authority: its Content-Digest is the body's, and every signature (tag
// http-message-signatures-directory) covers exactly "@authority";req and
// "content-digest" and verifies with its key of jwks. It returns the
// keyids whose signatures verified, in order.
func verifyDirectory(t testing.TB, h http.Header, body []byte, authority string, jwks []JWK, now time.Time) ([]string, error) {
	t.Helper()
	sum := sha256.Sum256(body)
	if want := "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"; h.Get("Content-Digest") != want {
		return nil, fmt.Errorf("Content-Digest is %q, the body's is %q", h.Get("Content-Digest"), want)
	}
	inputs, err := httpsfv.UnmarshalDictionary(h.Values(FieldSignatureInput))
	if err != nil {
		return nil, fmt.Errorf("Signature-Input: %w", err)
	}
	resolve := func(c httpsfv.Item) (string, error) {
		switch serialize(c) {
		case `"@authority";req`:
			return authority, nil
		case `"content-digest"`:
			return strings.Join(h.Values("Content-Digest"), ", "), nil
		}
		return "", fmt.Errorf("component %s is not one a directory signature covers", serialize(c))
	}
	var keyids []string
	for _, label := range inputs.Names() {
		covered, err := verifyLabel(inputs, h.Values(FieldSignature), label, TagDirectory, resolve, jwks, now)
		if err != nil {
			return nil, fmt.Errorf("signature %s: %w", label, err)
		}
		if len(covered) != 2 {
			return nil, fmt.Errorf("signature %s covers %v", label, covered)
		}
		m, _ := inputs.Get(label)
		id, _ := m.(httpsfv.InnerList).Params.Get("keyid")
		keyids = append(keyids, id.(string))
	}
	return keyids, nil
}

// verifyLabel verifies the signature label of a message: it rebuilds the
// base from the covered components (resolve gives their values), checks the
// parameters and the Ed25519 signature. It returns the names covered.
func verifyLabel(inputs *httpsfv.Dictionary, signatures []string, label, tag string,
	resolve func(httpsfv.Item) (string, error), jwks []JWK, now time.Time) (map[string]bool, error) {
	m, _ := inputs.Get(label)
	il, ok := m.(httpsfv.InnerList)
	if !ok {
		return nil, fmt.Errorf("Signature-Input has no inner list %s", label)
	}
	var base strings.Builder
	covered := map[string]bool{}
	seen := map[string]bool{}
	for _, c := range il.Items {
		name, ok := c.Value.(string)
		if !ok {
			return nil, fmt.Errorf("component %v is not a string", c.Value)
		}
		id := serialize(c)
		if seen[id] {
			return nil, fmt.Errorf("component %s covered twice", id)
		}
		seen[id] = true
		covered[name] = true
		value, err := resolve(c)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&base, "%s: %s\n", id, value)
	}
	fmt.Fprintf(&base, "\"@signature-params\": %s", serialize(il))
	for i := 0; i < base.Len(); i++ {
		if c := base.String()[i]; c < 0x20 && c != '\n' || c > 0x7e {
			return nil, fmt.Errorf("the signature base has byte %#x", c)
		}
	}

	p := il.Params
	if v, _ := p.Get("tag"); v != tag {
		return nil, fmt.Errorf("%w: %v, not %s", errWrongTag, v, tag)
	}
	created, ok1 := getInt(p, "created")
	expires, ok2 := getInt(p, "expires")
	if !ok1 || !ok2 {
		return nil, errors.New("created and expires are needed, as integers")
	}
	switch {
	case now.Unix() < created:
		return nil, fmt.Errorf("%w: created %d, now %d", errNotYetValid, created, now.Unix())
	case now.Unix() > expires:
		return nil, fmt.Errorf("%w: expires %d, now %d", errExpired, expires, now.Unix())
	}
	if v, ok := p.Get("alg"); ok && v != "ed25519" {
		return nil, fmt.Errorf("alg %v", v)
	} else if !ok && tag == TagRequest {
		return nil, errors.New("no alg (Cloudflare's verifier requires it)")
	}
	if v, ok := p.Get("nonce"); ok {
		s, _ := v.(string)
		if raw, err := base64.RawURLEncoding.DecodeString(s); err != nil || len(raw) != 64 {
			return nil, fmt.Errorf("nonce %q is not 64 bytes of base64url without padding", s)
		}
	} else if tag == TagRequest {
		return nil, errors.New("no nonce")
	}
	keyid, _ := p.Get("keyid")
	public, err := findKey(jwks, keyid)
	if err != nil {
		return nil, err
	}

	sigs, err := httpsfv.UnmarshalDictionary(signatures)
	if err != nil {
		return nil, fmt.Errorf("Signature: %w", err)
	}
	sm, ok := sigs.Get(label)
	if !ok {
		return nil, fmt.Errorf("Signature has no member %s", label)
	}
	item, _ := sm.(httpsfv.Item)
	sig, ok := item.Value.([]byte)
	if !ok || len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("Signature %s is not a %d-byte sequence", label, ed25519.SignatureSize)
	}
	if !ed25519.Verify(public, []byte(base.String()), sig) {
		return nil, errBadSignature
	}
	return covered, nil
}

// findKey is the public key of jwks whose thumbprint (RFC 7638, computed
// here) is keyid; a kid, when given, must be that thumbprint.
func findKey(jwks []JWK, keyid any) (ed25519.PublicKey, error) {
	for _, j := range jwks {
		if j.Kty != "OKP" || j.Crv != "Ed25519" || j.D != "" {
			continue
		}
		x, err := base64.RawURLEncoding.DecodeString(j.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			continue
		}
		sum := sha256.Sum256(fmt.Appendf(nil, `{"crv":"Ed25519","kty":"OKP","x":"%s"}`, j.X))
		thumb := base64.RawURLEncoding.EncodeToString(sum[:])
		if j.Kid != "" && j.Kid != thumb {
			return nil, fmt.Errorf("JWK kid %s is not its thumbprint %s", j.Kid, thumb)
		}
		if thumb == keyid {
			return x, nil
		}
	}
	return nil, fmt.Errorf("%w: %v", errUnknownKey, keyid)
}

func getInt(p *httpsfv.Params, name string) (int64, bool) {
	v, ok := p.Get(name)
	i, isInt := v.(int64)
	return i, ok && isInt
}

// siteAuthority is @authority of a received request: its Host lower-cased,
// without the scheme's default port.
func siteAuthority(r *http.Request) string {
	var scheme string
	if r.URL != nil {
		scheme = r.URL.Scheme
	}
	if scheme == "" {
		scheme = "http"
		if r.TLS != nil {
			scheme = "https"
		}
	}
	return normalizeAuthority(r.Host, scheme)
}

func normalizeAuthority(host, scheme string) string {
	host = strings.ToLower(host)
	if port := map[string]string{"http": ":80", "https": ":443"}[scheme]; strings.HasSuffix(host, port) {
		host = strings.TrimSuffix(host, port)
	}
	return host
}

// sitePathQuery are the path (percent-encoded, "/" when empty) and the
// query (without '?') of a received request: from the request line as
// received (origin-form, or absolute-form), else from its URL.
func sitePathQuery(r *http.Request) (path, query string) {
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil && u.IsAbs() {
		path, query = u.EscapedPath(), u.RawQuery
	} else if r.RequestURI != "" {
		path, query, _ = strings.Cut(r.RequestURI, "?")
	} else if r.URL != nil {
		path, query = r.URL.EscapedPath(), r.URL.RawQuery
	}
	if path == "" {
		path = "/"
	}
	return path, query
}

// dictionaryMember is member key of a dictionary field, re-serialized
// strictly (RFC 9421 §2.1.2).
func dictionaryMember(values []string, key string) (string, error) {
	d, err := httpsfv.UnmarshalDictionary(values)
	if err != nil {
		return "", fmt.Errorf("Signature-Agent is no dictionary: %w", err)
	}
	m, ok := d.Get(key)
	if !ok {
		return "", fmt.Errorf("Signature-Agent has no member %s", key)
	}
	var s string
	switch m := m.(type) {
	case httpsfv.Item:
		s, err = httpsfv.Marshal(m)
	case httpsfv.InnerList:
		s, err = httpsfv.Marshal(m)
	}
	return s, err
}

func serialize(v httpsfv.StructuredFieldValue) string {
	s, err := httpsfv.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<unserializable: %v>", err)
	}
	return s
}

// Test fixtures shared by the package's tests.

// rfcKeyPEM is RFC 9421 B.1.4's test-key-ed25519.
const rfcKeyPEM = `-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAJrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs=
-----END PUBLIC KEY-----

-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF
-----END PRIVATE KEY-----
`

func rfcKey(t testing.TB) *Key {
	t.Helper()
	keys, err := ParseKeys([]byte(rfcKeyPEM))
	if err != nil || len(keys) != 1 {
		t.Fatalf("ParseKeys(B.1.4) = %v, %v", keys, err)
	}
	return keys[0]
}

// seededKey is a key made from a fixed seed, valid between nbf and exp.
func seededKey(t testing.TB, seed byte, nbf, exp time.Time) *Key {
	t.Helper()
	k, err := NewKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)), nbf, exp)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func identity(t testing.TB, agent string, keys ...*Key) *Identity {
	t.Helper()
	id, err := NewIdentity("user test", agent, keys)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func publicJWKs(keys ...*Key) []JWK {
	var jwks []JWK
	for _, k := range keys {
		jwks = append(jwks, k.PublicJWK())
	}
	return jwks
}

// receivedRequest is the request an origin receives for tgt with header h,
// as its server parses it: the request line's target in RequestURI.
func receivedRequest(tgt Target, h http.Header) *http.Request {
	uri := tgt.Path
	if tgt.Query != "" {
		uri += "?" + tgt.Query
	}
	return &http.Request{Method: tgt.Method, Host: tgt.Authority, RequestURI: uri, URL: &url.URL{}, Header: h}
}

var (
	fixedNow  = time.Unix(1_800_000_000, 0)
	typicalGT = Target{Method: "GET", Authority: "example.com", Path: "/articles/a%20b", Query: "page=2&lang=en"}
)

func TestVerifierAcceptsSignedRequest(t *testing.T) {
	k := seededKey(t, 1, time.Time{}, time.Time{})
	id := identity(t, "https://crawler.example", k)
	s := Signer{TTL: time.Minute}
	h := http.Header{"Accept": {"text/html"}}
	if _, err := s.Sign(h, typicalGT, id, fixedNow); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{fixedNow.Add(-clockAllowance), fixedNow, fixedNow.Add(-clockAllowance + time.Minute)} {
		if err := verifyRequest(t, receivedRequest(typicalGT, h), publicJWKs(k), at); err != nil {
			t.Errorf("at %s: %v", at, err)
		}
	}
}

// TestVerifierRefusesChanges: a signed request changed in any covered part
// (or verified at the wrong time, or with the wrong keys) is refused.
func TestVerifierRefusesChanges(t *testing.T) {
	k := seededKey(t, 1, time.Time{}, time.Time{})
	other := seededKey(t, 2, time.Time{}, time.Time{})
	id := identity(t, "https://crawler.example", k)
	s := Signer{TTL: time.Minute}
	h := http.Header{}
	if _, err := s.Sign(h, typicalGT, id, fixedNow); err != nil {
		t.Fatal(err)
	}
	input := h.Get(FieldSignatureInput)
	replaceParam := func(r *http.Request, old, new string) {
		if !strings.Contains(input, old) {
			t.Fatalf("Signature-Input %s has no %s", input, old)
		}
		r.Header.Set(FieldSignatureInput, strings.Replace(input, old, new, 1))
	}
	created := fmt.Sprint(fixedNow.Add(-clockAllowance).Unix())
	expires := fmt.Sprint(fixedNow.Add(-clockAllowance + time.Minute).Unix())
	nonce := input[strings.Index(input, `nonce="`)+len(`nonce="`):][:86]
	otherNonce := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{7}, 64))

	tests := []struct {
		name   string
		change func(r *http.Request)
		now    time.Time
		jwks   []JWK
		want   error // nil: any error
	}{
		{name: "host", change: func(r *http.Request) { r.Host = "example.org" }, want: errBadSignature},
		{name: "host port", change: func(r *http.Request) { r.Host = "example.com:8080" }, want: errBadSignature},
		{name: "method", change: func(r *http.Request) { r.Method = "POST" }, want: errBadSignature},
		{name: "path", change: func(r *http.Request) { r.RequestURI = "/articles/a%20c?page=2&lang=en" }, want: errBadSignature},
		{name: "path decoded", change: func(r *http.Request) { r.RequestURI = "/articles/a b?page=2&lang=en" }, want: errBadSignature},
		{name: "query", change: func(r *http.Request) { r.RequestURI = "/articles/a%20b?page=3&lang=en" }, want: errBadSignature},
		{name: "query dropped", change: func(r *http.Request) { r.RequestURI = "/articles/a%20b" }, want: errBadSignature},
		{name: "agent", change: func(r *http.Request) { r.Header.Set(FieldSignatureAgent, `sig1="https://crawler.example.org"`) }, want: errBadSignature},
		{name: "agent gone", change: func(r *http.Request) { r.Header.Del(FieldSignatureAgent) }},
		{name: "created", change: func(r *http.Request) { replaceParam(r, "created="+created, "created="+fmt.Sprint(fixedNow.Unix()-10)) }, want: errBadSignature},
		{name: "expires", change: func(r *http.Request) {
			replaceParam(r, "expires="+expires, "expires="+fmt.Sprint(fixedNow.Unix()+3600))
		}, want: errBadSignature},
		{name: "nonce", change: func(r *http.Request) { replaceParam(r, nonce, otherNonce) }, want: errBadSignature},
		{name: "keyid", change: func(r *http.Request) { replaceParam(r, k.ID(), other.ID()) }, jwks: publicJWKs(k, other), want: errBadSignature},
		{name: "alg", change: func(r *http.Request) { replaceParam(r, `alg="ed25519"`, `alg="rsa-pss-sha512"`) }},
		{name: "tag", change: func(r *http.Request) { replaceParam(r, `tag="web-bot-auth"`, `tag="web-bot-auth2"`) }, want: errWrongTag},
		{name: "param added", change: func(r *http.Request) { replaceParam(r, `;tag=`, `;x=1;tag=`) }, want: errBadSignature},
		{name: "component dropped", change: func(r *http.Request) { replaceParam(r, ` "@query"`, ``) }, want: errBadSignature},
		{name: "signature", change: func(r *http.Request) {
			field := h.Get(FieldSignature)
			sig, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(strings.TrimPrefix(field, Label+"=:"), ":"))
			if err != nil {
				t.Fatalf("Signature %s: %v", field, err)
			}
			sig[10] ^= 1
			r.Header.Set(FieldSignature, Label+"=:"+base64.StdEncoding.EncodeToString(sig)+":")
		}, want: errBadSignature},
		{name: "too early", now: fixedNow.Add(-clockAllowance - time.Second), want: errNotYetValid},
		{name: "too late", now: fixedNow.Add(-clockAllowance + time.Minute + time.Second), want: errExpired},
		{name: "other key", jwks: publicJWKs(other), want: errUnknownKey},
		{name: "kid lies", jwks: []JWK{{Kty: "OKP", Crv: "Ed25519", X: other.PublicJWK().X, Kid: k.ID()}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := receivedRequest(typicalGT, h.Clone())
			if tt.change != nil {
				tt.change(r)
			}
			now, jwks := tt.now, tt.jwks
			if now.IsZero() {
				now = fixedNow
			}
			if jwks == nil {
				jwks = publicJWKs(k)
			}
			err := verifyRequest(t, r, jwks, now)
			if err == nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("verifyRequest = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestVerifierOverTheWire: a request signed and sent to a real server
// verifies there, from what the server's net/http parsed.
func TestVerifierOverTheWire(t *testing.T) {
	k := seededKey(t, 1, time.Time{}, time.Time{})
	id := identity(t, "https://crawler.example", k)
	s := Signer{TTL: time.Minute}
	verdict := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verdict <- verifyRequest(t, r, publicJWKs(k), time.Now())
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().(*net.TCPAddr)

	for _, tgt := range []Target{
		{Method: "GET", Authority: addr.String(), Path: "/a%2Fb/c", Query: "x=1&y=%C3%A9"},
		{Method: "DELETE", Authority: addr.String(), Path: "/", Query: ""},
		{Method: "GET", Authority: "localhost:" + fmt.Sprint(addr.Port), Path: "/%7Euser/|pipe", Query: "q=a|b"},
	} {
		h := http.Header{}
		if _, err := s.Sign(h, tgt, id, time.Now()); err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(tgt.Method, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Opaque: the request line carries the path exactly as signed.
		req.URL.Opaque, req.URL.RawQuery, req.Host, req.Header = tgt.Path, tgt.Query, tgt.Authority, h
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err := <-verdict; err != nil {
			t.Errorf("%+v: the server refused: %v", tgt, err)
		}
	}
}
