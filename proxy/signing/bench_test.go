package signing

import (
	"crypto/ed25519"
	"net/http"
	"testing"
	"time"
)

// benchFixture is a typical signed GET: one key, agent
// https://crawler.example.
func benchFixture(b *testing.B) (*Identity, Target) {
	b.Helper()
	k := seededKey(b, 1, time.Time{}, time.Time{})
	return identity(b, "https://crawler.example", k),
		Target{Method: "GET", Authority: "www.example.com", Path: "/articles/2026/11/robots-and-signatures", Query: "page=2"}
}

func BenchmarkSign(b *testing.B) {
	id, tgt := benchFixture(b)
	s := Signer{TTL: time.Minute}
	h := http.Header{"Accept": {"text/html"}, "User-Agent": {"ExampleBot/1.0"}}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Sign(h, tgt, id, now); err != nil {
			b.Fatal(err)
		}
	}
}

// benchBase is the signature base Sign makes for the fixture.
func benchBase(b *testing.B) (*Key, []byte) {
	id, tgt := benchFixture(b)
	base, _ := Base([]Component{
		{`"@authority"`, tgt.Authority}, {`"signature-agent";key="sig1"`, `"` + id.Agent + `"`},
		{`"@method"`, tgt.Method}, {`"@path"`, tgt.Path}, {`"@query"`, "?" + tgt.Query},
	}, []Param{
		{"created", "1800000000"}, {"keyid", `"` + id.Keys[0].ID() + `"`}, {"alg", `"ed25519"`}, {"expires", "1800000060"},
		{"nonce", `"` + string(appendNonce(nil)) + `"`}, {"tag", `"` + TagRequest + `"`},
	})
	return id.Keys[0], base
}

func BenchmarkSignBase(b *testing.B) {
	k, base := benchBase(b)
	b.ReportAllocs()
	for b.Loop() {
		SignBase(k, base)
	}
}

// BenchmarkStdlibSign is crypto/ed25519 signing the same base, for the
// record: what SignBase's curve25519-voi saves.
func BenchmarkStdlibSign(b *testing.B) {
	k, base := benchBase(b)
	private := ed25519.NewKeyFromSeed(k.private.Seed())
	b.ReportAllocs()
	for b.Loop() {
		ed25519.Sign(private, base)
	}
}

// BenchmarkDirectory builds a directory of two keys (one rotating out),
// as a request for it does.
func BenchmarkDirectory(b *testing.B) {
	now := time.Now()
	keys := []*Key{seededKey(b, 1, time.Time{}, now.Add(time.Hour)), seededKey(b, 2, now.Add(-time.Hour), time.Time{})}
	b.ReportAllocs()
	for b.Loop() {
		NewDirectory(keys, "crawler.example", now)
	}
}
