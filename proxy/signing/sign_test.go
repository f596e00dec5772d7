package signing

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
)

// rfcThumbprint is the RFC 7638 thumbprint of RFC 9421 B.1.4's key, the
// keyid of every Web Bot Auth draft vector.
const rfcThumbprint = "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"

func TestRFCKeyThumbprint(t *testing.T) {
	k := rfcKey(t)
	if k.ID() != rfcThumbprint || Thumbprint(k.Public()) != rfcThumbprint {
		t.Errorf("ID %s, Thumbprint %s; want %s", k.ID(), Thumbprint(k.Public()), rfcThumbprint)
	}
}

// TestVectors reproduces, through Base and SignBase, the signature bases,
// Signature-Input values and signatures of RFC 9421 B.2.6 and of the Web
// Bot Auth draft's Ed25519 request vectors (E.2.1 dictionary form, E.2.2
// legacy), byte for byte.
func TestVectors(t *testing.T) {
	tests := []struct {
		name           string
		components     []Component
		params         []Param
		label          string
		base           string
		signatureInput string
		signature      string
	}{
		{
			name: "RFC 9421 B.2.6",
			components: []Component{
				{`"date"`, "Tue, 20 Apr 2021 02:07:55 GMT"},
				{`"@method"`, "POST"},
				{`"@path"`, "/foo"},
				{`"@authority"`, "example.com"},
				{`"content-type"`, "application/json"},
				{`"content-length"`, "18"},
			},
			params: []Param{{"created", "1618884473"}, {"keyid", `"test-key-ed25519"`}},
			label:  "sig-b26",
			base: `"date": Tue, 20 Apr 2021 02:07:55 GMT
"@method": POST
"@path": /foo
"@authority": example.com
"content-type": application/json
"content-length": 18
"@signature-params": ("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519"`,
			signatureInput: `sig-b26=("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519"`,
			signature:      `sig-b26=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==:`,
		},
		{
			name: "Web Bot Auth E.2.1 (dictionary Signature-Agent)",
			components: []Component{
				{`"@authority"`, "example.com"},
				{`"signature-agent";key="agent2"`, `"https://signature-agent.test"`},
			},
			params: []Param{
				{"created", "1735689600"}, {"keyid", `"` + rfcThumbprint + `"`}, {"alg", `"ed25519"`}, {"expires", "4889289600"},
				{"nonce", `"n9p433xm+NJ3ph3upfBIGmsuwHw387YV7Q/F+6BSpGCVjYCqQw6rznNA8PVVLySrAWsv0hQtFioQb6E1YsauiA=="`},
				{"tag", `"web-bot-auth"`},
			},
			label: "sig2",
			base: `"@authority": example.com
"signature-agent";key="agent2": "https://signature-agent.test"
"@signature-params": ("@authority" "signature-agent";key="agent2");created=1735689600;keyid="poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";alg="ed25519";expires=4889289600;nonce="n9p433xm+NJ3ph3upfBIGmsuwHw387YV7Q/F+6BSpGCVjYCqQw6rznNA8PVVLySrAWsv0hQtFioQb6E1YsauiA==";tag="web-bot-auth"`,
			signatureInput: `sig2=("@authority" "signature-agent";key="agent2");created=1735689600;keyid="poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";alg="ed25519";expires=4889289600;nonce="n9p433xm+NJ3ph3upfBIGmsuwHw387YV7Q/F+6BSpGCVjYCqQw6rznNA8PVVLySrAWsv0hQtFioQb6E1YsauiA==";tag="web-bot-auth"`,
			signature:      `sig2=:RdNFx5Bj6au3YgAMQL/RzmUlZE8QZLIaXGRpw985hWnwPfMxT228NMk6ehRS1PSl4e8PhbNZACSanGdhEwYCCg==:`,
		},
		{
			name: "Web Bot Auth E.2.2 (legacy Signature-Agent)",
			components: []Component{
				{`"@authority"`, "example.com"},
				{`"signature-agent"`, `"https://signature-agent.test"`},
			},
			params: []Param{
				{"created", "1735689600"}, {"keyid", `"` + rfcThumbprint + `"`}, {"alg", `"ed25519"`}, {"expires", "1735693200"},
				{"nonce", `"e8N7S2MFd/qrd6T2R3tdfAuuANngKI7LFtKYI/vowzk4lAZYadIX6wW25MwG7DCT9RUKAJ0qVkU0mEeLElW1qg=="`},
				{"tag", `"web-bot-auth"`},
			},
			label: "sig2",
			base: `"@authority": example.com
"signature-agent": "https://signature-agent.test"
"@signature-params": ("@authority" "signature-agent");created=1735689600;keyid="poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";alg="ed25519";expires=1735693200;nonce="e8N7S2MFd/qrd6T2R3tdfAuuANngKI7LFtKYI/vowzk4lAZYadIX6wW25MwG7DCT9RUKAJ0qVkU0mEeLElW1qg==";tag="web-bot-auth"`,
			signatureInput: `sig2=("@authority" "signature-agent");created=1735689600;keyid="poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";alg="ed25519";expires=1735693200;nonce="e8N7S2MFd/qrd6T2R3tdfAuuANngKI7LFtKYI/vowzk4lAZYadIX6wW25MwG7DCT9RUKAJ0qVkU0mEeLElW1qg==";tag="web-bot-auth"`,
			signature:      `sig2=:jdq0SqOwHdyHr9+r5jw3iYZH6aNGKijYp/EstF4RQTQdi5N5YYKrD+mCT1HA1nZDsi6nJKuHxUi/5Syp3rLWBA==:`,
		},
	}
	k := rfcKey(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, params := Base(tt.components, tt.params)
			if string(base) != tt.base {
				t.Errorf("base:\n%s\nwant:\n%s", base, tt.base)
			}
			if got := tt.label + "=" + string(params); got != tt.signatureInput {
				t.Errorf("Signature-Input:\n%s\nwant:\n%s", got, tt.signatureInput)
			}
			if got := tt.label + "=:" + base64.StdEncoding.EncodeToString(SignBase(k, base)) + ":"; got != tt.signature {
				t.Errorf("Signature:\n%s\nwant:\n%s", got, tt.signature)
			}
		})
	}
}

// TestSignBaseIsStdlibEd25519: curve25519-voi signs exactly as
// crypto/ed25519 does, for random keys and messages of every size.
func TestSignBaseIsStdlibEd25519(t *testing.T) {
	rng := rand.New(rand.NewChaCha8([32]byte{'r', 'o', 'b', 'o', 't', 's'}))
	for i := range 300 {
		seed := make([]byte, ed25519.SeedSize)
		msg := make([]byte, rng.IntN(2048))
		for _, b := range [][]byte{seed, msg} {
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
		}
		private := ed25519.NewKeyFromSeed(seed)
		k, err := NewKey(private, time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		got, want := SignBase(k, msg), ed25519.Sign(private, msg)
		if string(got) != string(want) {
			t.Fatalf("case %d (seed %x, %d-byte message): SignBase %x, crypto/ed25519 %x", i, seed, len(msg), got, want)
		}
	}
}

// signedFields are the signature fields of a signed request, parsed with
// httpsfv.
type signedFields struct {
	agent      string // Signature-Agent's sig1 member
	components []string
	params     *httpsfv.Params
	signature  []byte
}

// parseSigned parses h's signature fields, failing t unless each is one
// field line of a dictionary with the single member sig1, of the shape
// the profile asks.
func parseSigned(t testing.TB, h http.Header) signedFields {
	t.Helper()
	var f signedFields
	member := func(field string) httpsfv.Member {
		t.Helper()
		if n := len(h.Values(field)); n != 1 {
			t.Fatalf("%s has %d field lines: %q", field, n, h.Values(field))
		}
		d, err := httpsfv.UnmarshalDictionary(h.Values(field))
		if err != nil {
			t.Fatalf("%s %q: %v", field, h.Get(field), err)
		}
		if names := d.Names(); len(names) != 1 || names[0] != Label {
			t.Fatalf("%s %q has members %q, want only %s", field, h.Get(field), names, Label)
		}
		m, _ := d.Get(Label)
		return m
	}
	agent, ok := member(FieldSignatureAgent).(httpsfv.Item)
	if f.agent, _ = agent.Value.(string); !ok || f.agent == "" || len(agent.Params.Names()) != 0 {
		t.Fatalf("Signature-Agent %q: sig1 is not a string without parameters", h.Get(FieldSignatureAgent))
	}
	il, ok := member(FieldSignatureInput).(httpsfv.InnerList)
	if !ok {
		t.Fatalf("Signature-Input %q: sig1 is not an inner list", h.Get(FieldSignatureInput))
	}
	for _, c := range il.Items {
		f.components = append(f.components, serialize(c))
	}
	f.params = il.Params
	sig, ok := member(FieldSignature).(httpsfv.Item)
	if f.signature, _ = sig.Value.([]byte); !ok || len(f.signature) != ed25519.SignatureSize {
		t.Fatalf("Signature %q: sig1 is not a %d-byte sequence", h.Get(FieldSignature), ed25519.SignatureSize)
	}
	return f
}

func TestSign(t *testing.T) {
	k := seededKey(t, 1, time.Time{}, time.Time{})
	clientFields := http.Header{
		FieldSignature:      {`sig1=:AAAA:`, `sig2=:BBBB:`},
		FieldSignatureInput: {`sig1=("@authority");created=1;keyid="x"`},
		FieldSignatureAgent: {`sig1="https://evil.example"`},
	}
	tests := []struct {
		name   string
		target Target
		agent  string
		ttl    time.Duration
		client http.Header
	}{
		{name: "typical GET", target: typicalGT, agent: "https://crawler.example", ttl: time.Minute},
		{name: "client fields replaced", target: typicalGT, agent: "https://crawler.example", ttl: time.Minute, client: clientFields},
		{name: "no query", target: Target{Method: "HEAD", Authority: "example.com", Path: "/"}, agent: "https://crawler.example/", ttl: 5 * time.Minute},
		{name: "port and http agent", target: Target{Method: "POST", Authority: "127.0.0.1:8443", Path: "/api/v1", Query: "a=%22b%22"},
			agent: "http://127.0.0.1:8080", ttl: 30 * time.Second},
		{name: "quotes and backslashes in the target", target: Target{Method: "GET", Authority: "example.com", Path: `/a"b\c`, Query: `q="x\y"`},
			agent: "https://crawler.example", ttl: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := identity(t, tt.agent, k)
			h := http.Header{"Accept": {"*/*"}, "User-Agent": {"TestBot/1.0"}}
			for name, v := range tt.client {
				h[name] = slices.Clone(v)
			}
			s := Signer{TTL: tt.ttl}
			used, err := s.Sign(h, tt.target, id, fixedNow)
			if err != nil || used != k {
				t.Fatalf("Sign = %v, %v; want the key", used, err)
			}
			f := parseSigned(t, h)
			if f.agent != tt.agent {
				t.Errorf("Signature-Agent sig1 = %q, want %q", f.agent, tt.agent)
			}
			wantComponents := []string{`"@authority"`, `"signature-agent";key="sig1"`, `"@method"`, `"@path"`, `"@query"`}
			if !slices.Equal(f.components, wantComponents) {
				t.Errorf("components %q, want %q", f.components, wantComponents)
			}
			if names := f.params.Names(); !slices.Equal(names, []string{"created", "keyid", "alg", "expires", "nonce", "tag"}) {
				t.Errorf("params %q", names)
			}
			for name, want := range map[string]any{
				"created": fixedNow.Unix() - 2, "expires": fixedNow.Add(-clockAllowance + tt.ttl).Unix(), // expires - created = TTL
				"keyid": k.ID(), "alg": "ed25519", "tag": "web-bot-auth",
			} {
				if got, _ := f.params.Get(name); got != want {
					t.Errorf("%s = %v (%T), want %v (%T)", name, got, got, want, want)
				}
			}
			nonce, _ := f.params.Get("nonce")
			if raw, err := base64.RawURLEncoding.DecodeString(nonce.(string)); err != nil || len(raw) != 64 {
				t.Errorf("nonce %q: %d bytes, %v", nonce, len(raw), err)
			}
			for name, v := range tt.client {
				for _, sent := range v {
					if slices.Contains(h.Values(name), sent) {
						t.Errorf("%s still has the client's %q", name, sent)
					}
				}
			}
			if h.Get("Accept") != "*/*" || h.Get("User-Agent") != "TestBot/1.0" {
				t.Errorf("other fields changed: %v", h)
			}
			if err := verifyRequest(t, receivedRequest(tt.target, h), publicJWKs(k), fixedNow); err != nil {
				t.Errorf("the signature does not verify: %v", err)
			}
		})
	}
}

func TestSignNoncesDiffer(t *testing.T) {
	id := identity(t, "https://crawler.example", seededKey(t, 1, time.Time{}, time.Time{}))
	s := Signer{TTL: time.Minute}
	var nonces []any
	for range 2 {
		h := http.Header{}
		if _, err := s.Sign(h, typicalGT, id, fixedNow); err != nil {
			t.Fatal(err)
		}
		nonce, _ := parseSigned(t, h).params.Get("nonce")
		nonces = append(nonces, nonce)
	}
	if nonces[0] == nonces[1] {
		t.Errorf("two signatures share the nonce %v", nonces[0])
	}
}

// TestSignEmptyPath: a target with an empty path is signed with @path "/"
// (RFC 9421 §2.2.6), the value every verifier computes for it.
func TestSignEmptyPath(t *testing.T) {
	k := seededKey(t, 1, time.Time{}, time.Time{})
	id := identity(t, "https://crawler.example", k)
	s := Signer{TTL: time.Minute}
	for _, tgt := range []Target{
		{Method: "GET", Authority: "example.com"},
		{Method: "GET", Authority: "example.com", Query: "a=1"},
	} {
		h := http.Header{}
		if _, err := s.Sign(h, tgt, id, fixedNow); err != nil {
			t.Fatal(err)
		}
		r := receivedRequest(tgt, h)
		if err := verifyRequest(t, r, publicJWKs(k), fixedNow); err != nil {
			t.Errorf("%+v: %v", tgt, err)
		}
	}
}

func TestSignNoValidKey(t *testing.T) {
	hour := time.Hour
	tests := []struct {
		name string
		keys []*Key
	}{
		{"all expired", []*Key{
			seededKey(t, 1, time.Time{}, fixedNow.Add(-hour)),
			seededKey(t, 2, fixedNow.Add(-2*hour), fixedNow),
		}},
		{"none valid yet", []*Key{
			seededKey(t, 1, fixedNow.Add(time.Second), time.Time{}),
			seededKey(t, 2, fixedNow.Add(hour), fixedNow.Add(2*hour)),
		}},
		{"one expired, one not yet valid", []*Key{
			seededKey(t, 1, time.Time{}, fixedNow),
			seededKey(t, 2, fixedNow.Add(time.Second), time.Time{}),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := identity(t, "https://crawler.example", tt.keys...)
			h := http.Header{
				"Accept":            {"*/*"},
				FieldSignature:      {`sig1=:AAAA:`},
				FieldSignatureInput: {`sig1=("@authority")`},
				FieldSignatureAgent: {`sig1="https://evil.example"`},
			}
			s := Signer{TTL: time.Minute}
			k, err := s.Sign(h, typicalGT, id, fixedNow)
			if k != nil || !errors.Is(err, ErrNoValidKey) {
				t.Fatalf("Sign = %v, %v; want ErrNoValidKey", k, err)
			}
			if !strings.Contains(err.Error(), id.Name) {
				t.Errorf("%q does not name the identity", err)
			}
			assertNoSignatureFields(t, h)
			if h.Get("Accept") != "*/*" {
				t.Errorf("Accept changed: %v", h)
			}
		})
	}
}

func assertNoSignatureFields(t testing.TB, h http.Header) {
	t.Helper()
	for name := range h {
		if strings.EqualFold(name, FieldSignature) || strings.EqualFold(name, FieldSignatureInput) || strings.EqualFold(name, FieldSignatureAgent) {
			t.Errorf("%s left: %q", name, h[name])
		}
	}
}

func TestSignNotASCII(t *testing.T) {
	id := identity(t, "https://crawler.example", seededKey(t, 1, time.Time{}, time.Time{}))
	with := func(change func(*Target)) Target {
		tgt := typicalGT
		change(&tgt)
		return tgt
	}
	tests := []struct {
		name   string
		target Target
	}{
		{"path UTF-8", with(func(t *Target) { t.Path = "/caf\u00e9" })},
		{"path 0x80", with(func(t *Target) { t.Path = "/a\x80" })},
		{"path DEL", with(func(t *Target) { t.Path = "/a\x7f" })},
		{"path 0x1f", with(func(t *Target) { t.Path = "/a\x1f" })},
		{"path LF", with(func(t *Target) { t.Path = "/a\nb" })},
		{"path NUL", with(func(t *Target) { t.Path = "/\x00" })},
		{"query 0xff", with(func(t *Target) { t.Query = "q=\xff" })},
		{"query CR", with(func(t *Target) { t.Query = "q=\r" })},
		{"query tab", with(func(t *Target) { t.Query = "q=\t" })},
		{"authority UTF-8", with(func(t *Target) { t.Authority = "b\u00fccher.example" })},
		{"authority 0x00", with(func(t *Target) { t.Authority = "example.com\x00" })},
		{"authority DEL", with(func(t *Target) { t.Authority = "\x7fexample.com" })},
		{"method tab", with(func(t *Target) { t.Method = "GET\t" })},
	}
	s := Signer{TTL: time.Minute}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{FieldSignature: {`sig1=:AAAA:`}, FieldSignatureAgent: {`sig1="https://evil.example"`}}
			k, err := s.Sign(h, tt.target, id, fixedNow)
			if k != nil || !errors.Is(err, ErrNotASCII) {
				t.Fatalf("Sign = %v, %v; want ErrNotASCII", k, err)
			}
			assertNoSignatureFields(t, h)
		})
	}
	// The bounds of printable ASCII are signed.
	k := id.Keys[0]
	for _, tgt := range []Target{
		with(func(t *Target) { t.Path = "/ ~" }),
		with(func(t *Target) { t.Query = " ~" }),
	} {
		h := http.Header{}
		if _, err := s.Sign(h, tgt, id, fixedNow); err != nil {
			t.Errorf("%+v: %v", tgt, err)
		} else if err := verifyRequest(t, receivedRequest(tgt, h), publicJWKs(k), fixedNow); err != nil {
			t.Errorf("%+v: %v", tgt, err)
		}
	}
}

// TestSignRotation: with an old key expiring at T+1h and a new one valid
// from T, the old signs before T, the new from T on, and every instant
// around both switches has a key.
func TestSignRotation(t *testing.T) {
	T := fixedNow
	old := seededKey(t, 1, T.Add(-30*24*time.Hour), T.Add(time.Hour))
	next := seededKey(t, 2, T, T.Add(90*24*time.Hour))
	s := Signer{TTL: time.Minute}
	for _, order := range [][]*Key{{old, next}, {next, old}} {
		id := identity(t, "https://crawler.example", order...)
		for _, tc := range []struct {
			at   time.Time
			want *Key
		}{
			{T.Add(-time.Hour), old},
			{T.Add(-time.Second), old},
			{T.Add(-time.Nanosecond), old},
			{T, next},
			{T.Add(time.Second), next},
			{T.Add(time.Hour - time.Second), next},
			{T.Add(time.Hour), next},
			{T.Add(89 * 24 * time.Hour), next},
		} {
			h := http.Header{}
			k, err := s.Sign(h, typicalGT, id, tc.at)
			if err != nil || k != tc.want {
				t.Errorf("at T%+v: Sign = %v, %v; want key %s", tc.at.Sub(T), k, err, tc.want.ID())
				continue
			}
			if keyid, _ := parseSigned(t, h).params.Get("keyid"); keyid != tc.want.ID() {
				t.Errorf("at T%+v: keyid %v, want %s", tc.at.Sub(T), keyid, tc.want.ID())
			}
			if err := verifyRequest(t, receivedRequest(typicalGT, h), publicJWKs(old, next), tc.at); err != nil {
				t.Errorf("at T%+v: %v", tc.at.Sub(T), err)
			}
		}
		for _, around := range []time.Time{T, T.Add(time.Hour)} {
			for at := around.Add(-3 * time.Second); at.Before(around.Add(3 * time.Second)); at = at.Add(250 * time.Millisecond) {
				if _, err := s.Sign(http.Header{}, typicalGT, id, at); err != nil {
					t.Errorf("at T%+v: no key: %v", at.Sub(T), err)
				}
			}
		}
	}

	// Two keys valid from the same instant: the later listed signs.
	a := seededKey(t, 3, T, time.Time{})
	b := seededKey(t, 4, T, time.Time{})
	for _, order := range [][]*Key{{a, b}, {b, a}} {
		id := identity(t, "https://crawler.example", order...)
		if k, err := s.Sign(http.Header{}, typicalGT, id, T); err != nil || k != order[1] {
			t.Errorf("tie: Sign = %v, %v; want the later listed %s", k, err, order[1].ID())
		}
	}
}
