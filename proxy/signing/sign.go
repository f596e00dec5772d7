package signing

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// The fields of a signed request (RFC 9421 §4, the Web Bot Auth profile).
const (
	FieldSignature      = "Signature"
	FieldSignatureInput = "Signature-Input"
	FieldSignatureAgent = "Signature-Agent"
)

// Label names robotsgate's signature in Signature, Signature-Input and
// the Signature-Agent dictionary.
const Label = "sig1"

// Tags of the two kinds of signature robotsgate makes: a forwarded
// request's, and its key directory's answer. A verifier of one refuses
// the other, so a directory signature cannot pass for a request's.
const (
	TagRequest   = "web-bot-auth"
	TagDirectory = "http-message-signatures-directory"
)

// nonceBytes is the size of a request's random nonce.
const nonceBytes = 32

// Component is one covered component of a signature: its identifier as
// Signature-Input lists it (`"@authority"`, `"signature-agent";key="sig1"`)
// and its value in the signature base.
type Component struct {
	ID, Value string
}

// Params are a signature's parameters, written in this order, those empty
// left out (RFC 9421 §2.3).
type Params struct {
	Created, Expires int64
	KeyID, Alg       string
	Nonce, Tag       string
}

// appendParams writes the signature parameters (RFC 9421 §2.3): the inner
// list of component identifiers, then the parameters.
func appendParams(dst []byte, ids []string, p Params) []byte {
	dst = append(dst, '(')
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, id...)
	}
	dst = append(dst, ')')
	if p.Created != 0 {
		dst = strconv.AppendInt(append(dst, ";created="...), p.Created, 10)
	}
	if p.Expires != 0 {
		dst = strconv.AppendInt(append(dst, ";expires="...), p.Expires, 10)
	}
	dst = appendStringParam(dst, "keyid", p.KeyID)
	dst = appendStringParam(dst, "alg", p.Alg)
	dst = appendStringParam(dst, "nonce", p.Nonce)
	return appendStringParam(dst, "tag", p.Tag)
}

// appendStringParam writes ;name="value"; values robotsgate makes are
// printable ASCII without '"' or '\' (key ids, nonces, tags), so no escape.
func appendStringParam(dst []byte, name, value string) []byte {
	if value == "" {
		return dst
	}
	dst = append(append(append(dst, ';'), name...), `="`...)
	return append(append(dst, value...), '"')
}

// Base is the signature base of components and params (RFC 9421 §2.5):
// one line per component, `"@signature-params"` last, no final newline.
// It returns the base and the signature parameters as Signature-Input
// gives them.
func Base(components []Component, p Params) (base, params []byte) {
	ids := make([]string, len(components))
	for i, c := range components {
		ids[i] = c.ID
	}
	return appendBase(nil, components, ids, p)
}

func appendBase(dst []byte, components []Component, ids []string, p Params) (base, params []byte) {
	for _, c := range components {
		dst = append(append(append(append(dst, c.ID...), ": "...), c.Value...), '\n')
	}
	dst = append(dst, `"@signature-params": `...)
	start := len(dst)
	dst = appendParams(dst, ids, p)
	return dst, dst[start:]
}

// SignBase signs a signature base with k (Ed25519, RFC 9421 §3.3.6).
//
// curve25519-voi rather than crypto/ed25519: the same deterministic
// signature (RFC 8032, checked by the tests against the standard
// library), in half the time (12.5 µs against 26 µs on this project's
// benchmark machine), which keeps a signed request within its budget.
func SignBase(k *Key, base []byte) []byte {
	return voi.Sign(voi.PrivateKey(k.private), base)
}

// Signer signs forwarded requests as the Web Bot Auth profile asks.
type Signer struct {
	// TTL is how long a signature is valid: its expires minus created.
	TTL time.Duration
}

// RemoveSignatureFields removes the signature fields from a request's
// header: no client's signature is passed on as the gate's.
func RemoveSignatureFields(h http.Header) {
	delete(h, FieldSignature)
	delete(h, FieldSignatureInput)
	delete(h, FieldSignatureAgent)
}

// requestIDs are the components a request's signature covers: the target
// host, and the Signature-Agent that says where to find the key.
var requestIDs = []string{`"@authority"`, `"signature-agent";key="` + Label + `"`}

// Sign signs a request to authority (the Host the origin receives,
// lower-case, without the scheme's default port) as id at now, with id's
// current key: it sets Signature-Agent, Signature-Input and Signature in
// h, replacing any the client sent. It returns the key that signed, or an
// error wrapping ErrNoValidKey.
func (s *Signer) Sign(h http.Header, authority string, id *Identity, now time.Time) (*Key, error) {
	RemoveSignatureFields(h)
	k, err := id.Current(now)
	if err != nil {
		return nil, err
	}
	var nonce [nonceBytes]byte
	rand.Read(nonce[:]) // never fails (crypto/rand, Go 1.24)
	p := Params{Created: now.Unix(), Expires: now.Add(s.TTL).Unix(), KeyID: k.id, Alg: "ed25519",
		Nonce: base64.StdEncoding.EncodeToString(nonce[:]), Tag: TagRequest}
	var buf [512]byte
	base, params := appendBase(buf[:0], []Component{
		{ID: requestIDs[0], Value: authority},
		{ID: requestIDs[1], Value: id.agentItem()},
	}, requestIDs, p)
	sig := SignBase(k, base)
	h[FieldSignatureAgent] = []string{Label + "=" + id.agentItem()}
	h[FieldSignatureInput] = []string{Label + "=" + string(params)}
	h[FieldSignature] = []string{Label + "=:" + base64.StdEncoding.EncodeToString(sig) + ":"}
	return k, nil
}

// agentItem is the Signature-Agent URL as a structured field string
// (CheckAgent keeps out what would need escaping).
func (id *Identity) agentItem() string {
	if id.item == "" {
		return `"` + id.Agent + `"`
	}
	return id.item
}
