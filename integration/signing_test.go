package integration

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"robotsgate/proxy/signing"
)

// Issue 28, Web Bot Auth: robotsgate signs what it forwards for an
// identity with keys (RFC 9421 in the profile of
// draft-ietf-webbotauth-httpsig-protocol) and publishes the keys in a
// signed directory. These tests run the real binary against origins that
// verify every request they receive with a verifier written here from the
// specification, not from proxy/signing: it parses the fields, fetches the
// key directory from robotsgate and checks that one's signatures too,
// rebuilds the signature base from the request as received, and checks
// the Ed25519 signature. proxy/signing is used only to make key files.
//
// Signature-Agent URLs name hosts such as acme-keys.test: the verifier
// sends its directory requests to robotsgate's listener with that Host, as
// an operator's front end publishing the directory at its own domain does
// (and robotsgate's port is not known before it starts).

// The profile's constants, from the specification.
const (
	wbaRequestTag   = "web-bot-auth"
	wbaDirectoryTag = "http-message-signatures-directory"
	wbaDirPath      = "/.well-known/http-message-signatures-directory"
	wbaDirMediaType = "application/http-message-signatures-directory+json"
	// wbaSkew is how far in its future the verifier accepts a created.
	wbaSkew = time.Second
)

// errSignatureMismatch is the verifier's error for a signature that does
// not verify over the base rebuilt from the request as received: what a
// request changed after signing gets.
var errSignatureMismatch = errors.New("the Ed25519 signature does not verify over the signature base")

// sigVerifier verifies Web Bot Auth signatures. It caches each agent's
// directory and fetches it again for a keyid it does not list (a key
// added by rotation).
type sigVerifier struct {
	client *http.Client
	gate   atomic.Pointer[string] // robotsgate's host:port, where every agent is reached

	mu      sync.Mutex                              // held while a directory is fetched
	dirs    map[string]map[string]ed25519.PublicKey // by agent URL, keys by thumbprint
	fetches int
}

func newSigVerifier(t *testing.T) *sigVerifier {
	v := &sigVerifier{dirs: make(map[string]map[string]ed25519.PublicKey)}
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		Proxy:             nil,
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			gate := v.gate.Load()
			if gate == nil {
				return nil, errors.New("no gate to reach key directories at yet")
			}
			return d.DialContext(ctx, network, *gate)
		},
	}
	v.client = newClient(t, tr) // follows no redirect, as the profile asks
	return v
}

// useGate makes the verifier fetch every key directory from robotsgate at
// addr.
func (v *sigVerifier) useGate(addr string) { v.gate.Store(&addr) }

// sigCheck is what the verifier found of one request.
type sigCheck struct {
	method, target, host string
	header               http.Header // as received
	present              bool        // Signature, Signature-Input or Signature-Agent arrived
	keyid, agent, nonce  string
	created, expires     int64
	err                  error // nil: verified
}

func (c sigCheck) String() string {
	if c.err != nil {
		return fmt.Sprintf("%s %s (Host %s): not verified: %v", c.method, c.target, c.host, c.err)
	}
	return fmt.Sprintf("%s %s (Host %s): verified, keyid %s", c.method, c.target, c.host, c.keyid)
}

// signatureFields are the fields of a signed request, canonical.
var signatureFields = []string{"Signature", "Signature-Input", "Signature-Agent"}

// verify checks r's signature as an origin reached with scheme does.
func (v *sigVerifier) verify(ctx context.Context, r *http.Request, scheme string) sigCheck {
	c := sigCheck{method: r.Method, target: r.RequestURI, host: r.Host, header: r.Header.Clone()}
	for _, f := range signatureFields {
		if len(r.Header.Values(f)) > 0 {
			c.present = true
		}
	}
	c.err = v.check(ctx, r, scheme, &c)
	return c
}

func (v *sigVerifier) check(ctx context.Context, r *http.Request, scheme string, c *sigCheck) error {
	if !c.present {
		return errors.New("no signature fields")
	}
	inputs, err := httpsfv.UnmarshalDictionary(r.Header.Values("Signature-Input"))
	if err != nil {
		return fmt.Errorf("Signature-Input is no dictionary: %w", err)
	}
	sigs, err := httpsfv.UnmarshalDictionary(r.Header.Values("Signature"))
	if err != nil {
		return fmt.Errorf("Signature is no dictionary: %w", err)
	}
	// The profile's signature is the one tagged web-bot-auth.
	var label string
	var input httpsfv.InnerList
	for _, name := range inputs.Names() {
		m, _ := inputs.Get(name)
		il, ok := m.(httpsfv.InnerList)
		if !ok {
			return fmt.Errorf("Signature-Input member %s is not an inner list", name)
		}
		if tag, _ := il.Params.Get("tag"); tag == wbaRequestTag {
			if label != "" {
				return fmt.Errorf("two signatures tagged %s: %s and %s", wbaRequestTag, label, name)
			}
			label, input = name, il
		}
	}
	if label == "" {
		return fmt.Errorf("no signature tagged %s in Signature-Input %q", wbaRequestTag, r.Header.Values("Signature-Input"))
	}
	sigMember, ok := sigs.Get(label)
	if !ok {
		return fmt.Errorf("Signature has no member %s", label)
	}
	sigItem, ok := sigMember.(httpsfv.Item)
	sig, isBytes := sigItem.Value.([]byte)
	if !ok || !isBytes || len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("Signature member %s is not a %d-byte sf-binary", label, ed25519.SignatureSize)
	}

	params, err := requestParams(input)
	if err != nil {
		return err
	}
	c.keyid, c.nonce, c.created, c.expires = params.keyid, params.nonce, params.created, params.expires
	now := time.Now()
	if time.Unix(params.created, 0).After(now.Add(wbaSkew)) {
		return fmt.Errorf("created %d is in the future (now %d)", params.created, now.Unix())
	}
	if !now.Before(time.Unix(params.expires, 0)) {
		return fmt.Errorf("expired at %d (now %d)", params.expires, now.Unix())
	}

	// Covered: @authority (or @target-uri), and the Signature-Agent member
	// of the signature's label.
	agentID := `"signature-agent";key="` + label + `"`
	var base strings.Builder
	seen := map[string]bool{}
	for _, item := range input.Items {
		id, err := httpsfv.Marshal(item)
		if err != nil {
			return fmt.Errorf("component %v: %w", item.Value, err)
		}
		if seen[id] {
			return fmt.Errorf("component %s covered twice", id)
		}
		seen[id] = true
		value, err := requestComponent(item, r, scheme)
		if err != nil {
			return fmt.Errorf("component %s: %w", id, err)
		}
		base.WriteString(id + ": " + value + "\n")
	}
	if !seen[`"@authority"`] && !seen[`"@target-uri"`] {
		return errors.New("neither @authority nor @target-uri is covered")
	}
	if !seen[agentID] {
		return fmt.Errorf("%s is not covered", agentID)
	}
	sp, err := httpsfv.Marshal(input)
	if err != nil {
		return fmt.Errorf("re-serializing the signature parameters: %w", err)
	}
	base.WriteString(`"@signature-params": ` + sp)
	for _, b := range []byte(base.String()) {
		if b > 0x7e || (b < 0x20 && b != '\n') {
			return errors.New("the signature base is not ASCII")
		}
	}

	agents, err := httpsfv.UnmarshalDictionary(r.Header.Values("Signature-Agent"))
	if err != nil {
		return fmt.Errorf("Signature-Agent is no dictionary: %w", err)
	}
	am, _ := agents.Get(label)
	agentItem, _ := am.(httpsfv.Item)
	c.agent, _ = agentItem.Value.(string)
	if c.agent == "" {
		return fmt.Errorf("Signature-Agent has no string member %s", label)
	}
	pub, err := v.key(ctx, c.agent, params.keyid)
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, []byte(base.String()), sig) {
		return fmt.Errorf("%w:\n%s", errSignatureMismatch, base.String())
	}
	return nil
}

// sigParams are a request signature's parameters.
type sigParams struct {
	keyid, nonce     string
	created, expires int64
}

// requestParams checks the parameters the profile and its verifiers
// require: created, expires, keyid, alg ed25519, and the nonce as
// Cloudflare's verifier wants it (64 bytes, base64url).
func requestParams(input httpsfv.InnerList) (sigParams, error) {
	var p sigParams
	var ok bool
	get := func(name string) any { v, _ := input.Params.Get(name); return v }
	if p.created, ok = get("created").(int64); !ok {
		return p, errors.New("no integer created")
	}
	if p.expires, ok = get("expires").(int64); !ok {
		return p, errors.New("no integer expires")
	}
	if p.expires <= p.created {
		return p, fmt.Errorf("expires %d is not after created %d", p.expires, p.created)
	}
	if p.keyid, ok = get("keyid").(string); !ok || p.keyid == "" {
		return p, errors.New("no keyid")
	}
	if alg := get("alg"); alg != "ed25519" {
		return p, fmt.Errorf("alg %v, want ed25519", alg)
	}
	p.nonce, _ = get("nonce").(string)
	if n, err := base64.RawURLEncoding.DecodeString(p.nonce); err != nil || len(n) != 64 {
		return p, fmt.Errorf("nonce %q is not 64 bytes of base64url", p.nonce)
	}
	return p, nil
}

// requestComponent is a covered component's value in r (RFC 9421 §2.1,
// §2.2), as received by an origin reached with scheme.
func requestComponent(item httpsfv.Item, r *http.Request, scheme string) (string, error) {
	name, ok := item.Value.(string)
	if !ok || name != strings.ToLower(name) {
		return "", errors.New("not a lower-case sf-string")
	}
	path, query, err := splitTarget(r.RequestURI)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(name, "@") {
		if len(item.Params.Names()) > 0 {
			return "", fmt.Errorf("parameters %v on a derived component of a request", item.Params.Names())
		}
		switch name {
		case "@method":
			return r.Method, nil
		case "@authority":
			return normalAuthorityOf(r.Host, scheme), nil
		case "@scheme":
			return scheme, nil
		case "@path":
			return path, nil
		case "@query":
			return "?" + query, nil
		case "@target-uri":
			u := scheme + "://" + normalAuthorityOf(r.Host, scheme) + path
			if strings.Contains(r.RequestURI, "?") {
				u += "?" + query
			}
			return u, nil
		case "@request-target":
			return r.RequestURI, nil
		}
		return "", errors.New("unknown derived component")
	}
	values := r.Header.Values(name)
	if len(values) == 0 {
		return "", errors.New("the field is missing")
	}
	for _, p := range item.Params.Names() {
		if p != "key" {
			return "", fmt.Errorf("parameter %s not supported", p)
		}
	}
	key, hasKey := item.Params.Get("key")
	if !hasKey {
		trimmed := make([]string, len(values))
		for i, v := range values {
			trimmed[i] = strings.Trim(v, " \t")
		}
		return strings.Join(trimmed, ", "), nil
	}
	k, _ := key.(string)
	dict, err := httpsfv.UnmarshalDictionary(values)
	if err != nil {
		return "", fmt.Errorf("not a dictionary: %w", err)
	}
	m, ok := dict.Get(k)
	if !ok {
		return "", fmt.Errorf("no member %q", k)
	}
	sfv, ok := m.(httpsfv.StructuredFieldValue)
	if !ok {
		return "", fmt.Errorf("member %q cannot be serialized", k)
	}
	return httpsfv.Marshal(sfv)
}

// splitTarget splits an origin-form request target into its path, still
// percent-encoded ("/" when empty), and its query without the "?".
func splitTarget(target string) (path, query string, err error) {
	if !strings.HasPrefix(target, "/") {
		u, err := url.ParseRequestURI(target)
		if err != nil || u.Host == "" {
			return "", "", fmt.Errorf("request target %q is neither origin- nor absolute-form", target)
		}
		target = u.EscapedPath()
		if u.ForceQuery || u.RawQuery != "" {
			target += "?" + u.RawQuery
		}
	}
	path, query, _ = strings.Cut(target, "?")
	if path == "" {
		path = "/"
	}
	return path, query, nil
}

// normalAuthorityOf is an authority as RFC 9421 §2.2.3 compares it:
// lower-case, without the scheme's default port.
func normalAuthorityOf(hostport, scheme string) string {
	hostport = strings.ToLower(hostport)
	def := map[string]string{"http": ":80", "https": ":443"}[scheme]
	if def != "" && strings.HasSuffix(hostport, def) {
		return strings.TrimSuffix(hostport, def)
	}
	return hostport
}

// key is the public key keyid of agent's directory: from the cache, else
// from the directory fetched again.
func (v *sigVerifier) key(ctx context.Context, agent, keyid string) (ed25519.PublicKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if pub, ok := v.dirs[agent][keyid]; ok {
		return pub, nil
	}
	keys, err := v.fetchDirectory(ctx, agent)
	if err != nil {
		return nil, err
	}
	v.dirs[agent] = keys
	pub, ok := keys[keyid]
	if !ok {
		return nil, fmt.Errorf("keyid %s is not in the directory of %s (which lists %d keys)", keyid, agent, len(keys))
	}
	return pub, nil
}

// fetchCount is how many times the verifier has fetched a directory.
func (v *sigVerifier) fetchCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.fetches
}

// directory fetches agent's key directory now, bypassing the cache.
func (v *sigVerifier) directory(ctx context.Context, agent string) (map[string]ed25519.PublicKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.fetchDirectory(ctx, agent)
}

// fetchDirectory fetches and checks agent's key directory: a 200 with the
// directory media type, a Content-Digest that matches the body, a JWK set
// of Ed25519 public keys, each signed for by a valid signature tagged
// http-message-signatures-directory over "@authority";req and
// "content-digest". It returns the keys by their thumbprints.
func (v *sigVerifier) fetchDirectory(ctx context.Context, agent string) (map[string]ed25519.PublicKey, error) {
	v.fetches++
	au, err := url.Parse(agent)
	if err != nil || au.Scheme != "http" || au.Host == "" {
		return nil, fmt.Errorf("Signature-Agent %q: the test reaches http:// agents only", agent)
	}
	authority := normalAuthorityOf(au.Host, au.Scheme)
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, agent+wbaDirPath, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", wbaDirMediaType)
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the directory of %s: %w", agent, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the directory of %s: %w", agent, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("directory of %s: status %d, want 200: %q", agent, resp.StatusCode, body)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != wbaDirMediaType {
		return nil, fmt.Errorf("directory of %s: Content-Type %q, want %s", agent, resp.Header.Get("Content-Type"), wbaDirMediaType)
	}
	digests, err := httpsfv.UnmarshalDictionary(resp.Header.Values("Content-Digest"))
	if err != nil {
		return nil, fmt.Errorf("directory of %s: Content-Digest %q: %w", agent, resp.Header.Values("Content-Digest"), err)
	}
	dm, _ := digests.Get("sha-256")
	di, _ := dm.(httpsfv.Item)
	sum := sha256.Sum256(body)
	if got, _ := di.Value.([]byte); string(got) != string(sum[:]) {
		return nil, fmt.Errorf("directory of %s: Content-Digest %q is not the body's sha-256", agent, resp.Header.Values("Content-Digest"))
	}

	var set struct {
		Keys []struct {
			Kty, Crv, X, Kid, D string
		} `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("directory of %s is no JWK set: %w\n%s", agent, err, body)
	}
	keys := make(map[string]ed25519.PublicKey, len(set.Keys))
	for _, k := range set.Keys {
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if k.Kty != "OKP" || k.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("directory of %s: a key that is not Ed25519: %+v", agent, k)
		}
		if k.D != "" {
			return nil, fmt.Errorf("directory of %s publishes a private key", agent)
		}
		// RFC 7638: the required members of an OKP key, in lexical order.
		tp := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + k.X + `"}`))
		id := base64.RawURLEncoding.EncodeToString(tp[:])
		if k.Kid != "" && k.Kid != id {
			return nil, fmt.Errorf("directory of %s: kid %s is not the key's thumbprint %s", agent, k.Kid, id)
		}
		keys[id] = x
	}

	inputs, err := httpsfv.UnmarshalDictionary(resp.Header.Values("Signature-Input"))
	if err != nil {
		return nil, fmt.Errorf("directory of %s: Signature-Input: %w", agent, err)
	}
	sigs, err := httpsfv.UnmarshalDictionary(resp.Header.Values("Signature"))
	if err != nil {
		return nil, fmt.Errorf("directory of %s: Signature: %w", agent, err)
	}
	signed := map[string]bool{}
	for _, label := range inputs.Names() {
		m, _ := inputs.Get(label)
		il, ok := m.(httpsfv.InnerList)
		if !ok {
			continue
		}
		if tag, _ := il.Params.Get("tag"); tag != wbaDirectoryTag {
			continue
		}
		keyid, err := directorySignature(il, label, sigs, authority, resp.Header, keys)
		if err != nil {
			return nil, fmt.Errorf("directory of %s: signature %s: %w", agent, label, err)
		}
		signed[keyid] = true
	}
	for id := range keys {
		if !signed[id] {
			return nil, fmt.Errorf("directory of %s lists key %s without a signature by it", agent, id)
		}
	}
	return keys, nil
}

// directorySignature verifies one signature of a directory answer to a
// request for authority, and returns its keyid.
func directorySignature(il httpsfv.InnerList, label string, sigs *httpsfv.Dictionary, authority string,
	h http.Header, keys map[string]ed25519.PublicKey) (string, error) {
	keyid, _ := il.Params.Get("keyid")
	id, _ := keyid.(string)
	pub, ok := keys[id]
	if !ok {
		return "", fmt.Errorf("keyid %v is not listed", keyid)
	}
	created, _ := il.Params.Get("created")
	expires, _ := il.Params.Get("expires")
	c, okc := created.(int64)
	e, oke := expires.(int64)
	now := time.Now()
	if !okc || !oke || time.Unix(c, 0).After(now.Add(wbaSkew)) || !now.Before(time.Unix(e, 0)) {
		return "", fmt.Errorf("created %v, expires %v: not valid now (%d)", created, expires, now.Unix())
	}
	var base strings.Builder
	covered := map[string]bool{}
	for _, item := range il.Items {
		cid, err := httpsfv.Marshal(item)
		if err != nil {
			return "", err
		}
		covered[cid] = true
		var value string
		switch cid {
		case `"@authority";req`:
			value = authority
		case `"content-digest"`:
			value = strings.Join(h.Values("Content-Digest"), ", ")
		default:
			return "", fmt.Errorf("unexpected component %s", cid)
		}
		base.WriteString(cid + ": " + value + "\n")
	}
	if !covered[`"@authority";req`] || !covered[`"content-digest"`] {
		return "", fmt.Errorf(`covers %v; want "@authority";req and "content-digest"`, covered)
	}
	sp, err := httpsfv.Marshal(il)
	if err != nil {
		return "", err
	}
	base.WriteString(`"@signature-params": ` + sp)
	m, _ := sigs.Get(label)
	item, _ := m.(httpsfv.Item)
	sig, _ := item.Value.([]byte)
	if !ed25519.Verify(pub, []byte(base.String()), sig) {
		return "", fmt.Errorf("%w:\n%s", errSignatureMismatch, base.String())
	}
	return id, nil
}

// signedOrigin is an origin that verifies every request it receives and
// records what it found; it answers 200 whatever it found, with the
// finding in Wba-Result, and allows everything in its robots.txt.
type signedOrigin struct {
	*origin

	mu     sync.Mutex
	checks []sigCheck // every request but /robots.txt, in order
}

func newSignedOrigin(t *testing.T, useTLS bool, v *sigVerifier) *signedOrigin {
	t.Helper()
	scheme := "http"
	if useTLS {
		scheme = "https"
	}
	o := &signedOrigin{}
	o.origin = newOriginElse(t, useTLS, map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: *\nAllow: /\n")},
		func(w http.ResponseWriter, r *http.Request) {
			c := v.verify(r.Context(), r, scheme)
			o.mu.Lock()
			o.checks = append(o.checks, c)
			o.mu.Unlock()
			if c.err != nil {
				w.Header().Set("Wba-Result", "rejected")
			} else {
				w.Header().Set("Wba-Result", "verified "+c.keyid)
			}
			fmt.Fprintf(w, "page %s from %s\n", r.URL.Path, o.addr)
		})
	return o
}

// checksOf are the findings of the requests for path, in order.
func (o *signedOrigin) checksOf(path string) []sigCheck {
	o.mu.Lock()
	defer o.mu.Unlock()
	var found []sigCheck
	for _, c := range o.checks {
		if p, _, _ := strings.Cut(c.target, "?"); p == path {
			found = append(found, c)
		}
	}
	return found
}

// checkOf is the finding of the one request whose request-target was
// exactly target.
func (o *signedOrigin) checkOf(t *testing.T, target string) sigCheck {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	var found []sigCheck
	for _, c := range o.checks {
		if c.target == target {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s received %s %d times, want once: %v", o.base(), target, len(found), o.checks)
	}
	return found[0]
}

// only is the finding of the one request for path.
func (o *signedOrigin) only(t *testing.T, path string) sigCheck {
	t.Helper()
	found := o.checksOf(path)
	if len(found) != 1 {
		t.Fatalf("%s received %s %d times, want once: %v", o.base(), path, len(found), found)
	}
	return found[0]
}

// wantVerified fails unless the one request for path arrived verified,
// signed by keyid with agent as its Signature-Agent.
func (o *signedOrigin) wantVerified(t *testing.T, path, keyid, agent string) sigCheck {
	t.Helper()
	c := o.only(t, path)
	switch {
	case c.err != nil:
		t.Errorf("%s: %v", o.base(), c)
	case c.keyid != keyid:
		t.Errorf("%s: %s signed by %s, want %s", o.base(), path, c.keyid, keyid)
	case c.agent != agent:
		t.Errorf("%s: %s names the Signature-Agent %s, want %s", o.base(), path, c.agent, agent)
	}
	return c
}

// wantUnsigned fails unless the one request for path arrived without any
// signature field.
func (o *signedOrigin) wantUnsigned(t *testing.T, path string) {
	t.Helper()
	if c := o.only(t, path); c.present {
		t.Errorf("%s: %s arrived with signature fields, want none: %q %q %q", o.base(), path,
			c.header.Values("Signature-Agent"), c.header.Values("Signature-Input"), c.header.Values("Signature"))
	}
}

// newSigningKey makes a key valid from nbf to exp (zero: unbounded).
func newSigningKey(t *testing.T, nbf, exp time.Time) *signing.Key {
	t.Helper()
	k, err := signing.GenerateKey(nil, nbf, exp)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// writeSigningKey writes k to dir/name, as a JWK when name ends in .jwk,
// else as PEM, with mode, and returns its path.
func writeSigningKey(t *testing.T, dir, name string, k *signing.Key, mode os.FileMode) string {
	t.Helper()
	data := k.MarshalJWK()
	if !strings.HasSuffix(name, ".jwk") {
		var err error
		if data, err = k.MarshalPEM(); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return path
}

// metricSample is the value of name{identity="…"} in robotsgate's
// /metrics, 0 when it has no such sample.
func metricSample(t *testing.T, p *proxyProcess, name, identity string) float64 {
	t.Helper()
	r := get(t, directClient(t), p.url.String()+"/metrics", "test")
	re := regexp.MustCompile(`(?m)^` + name + `\{identity="` + regexp.QuoteMeta(identity) + `"\} (\S+)$`)
	m := re.FindSubmatch(r.body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("%s{identity=%q}: %v", name, identity, err)
	}
	return v
}

func wantMetric(t *testing.T, p *proxyProcess, name, identity string, want float64) {
	t.Helper()
	if got := metricSample(t, p, name, identity); got != want {
		t.Errorf("/metrics %s{identity=%q} = %v, want %v", name, identity, got, want)
	}
}

// wantKeyID checks the audit record of rawURL names keyid as the key that
// signed it ("" : none).
func wantKeyID(t *testing.T, recs []auditRecord, rawURL, keyid string) auditRecord {
	t.Helper()
	rec := auditFor(t, recs, rawURL)
	got, present := rec.raw["signature_keyid"]
	switch {
	case keyid == "" && present:
		t.Errorf("audit record of %s has signature_keyid %v, want none", rawURL, got)
	case keyid != "" && got != keyid:
		t.Errorf("audit record of %s has signature_keyid %v, want %s", rawURL, got, keyid)
	}
	return rec
}

// wantDirectory checks agent's directory lists exactly the keys ids.
func wantDirectory(t *testing.T, v *sigVerifier, agent string, ids ...string) {
	t.Helper()
	keys, err := v.directory(context.Background(), agent)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for id := range keys {
		listed = append(listed, id)
	}
	if len(keys) != len(ids) {
		t.Errorf("the directory of %s lists %v, want %v", agent, listed, ids)
		return
	}
	for _, id := range ids {
		if _, ok := keys[id]; !ok {
			t.Errorf("the directory of %s lists %v, want %v", agent, listed, ids)
		}
	}
}

// TestSigningHTTPAndHTTPS: the pinned token's requests, plain HTTP and
// inside an intercepted tunnel, arrive signed by its key, and verify with
// the directory robotsgate serves for its Signature-Agent; the audit log
// names the key, /metrics counts them.
func TestSigningHTTPAndHTTPS(t *testing.T) {
	t.Parallel()
	const agent = "http://mybot-keys.test"
	v := newSigVerifier(t)
	plain, secure := newSignedOrigin(t, false, v), newSignedOrigin(t, true, v)
	key := newSigningKey(t, time.Time{}, time.Time{})
	keyFile := writeSigningKey(t, t.TempDir(), "mybot.pem", key, 0o600)
	p := startProxy(t, "ROBOTSGATE_TOKEN=MyBot", "ROBOTSGATE_SIGNING_KEY="+keyFile,
		"ROBOTSGATE_SIGNATURE_AGENT="+agent, upstreamCA(t, secure.origin))
	v.useGate(p.addr)

	client := p.client(t)
	// A percent-encoded path and a query: @path and @query as sent.
	plainURL := plain.base() + "/signed/plain%20page?q=a%2Fb&x=1"
	secureURL := secure.base() + "/signed/secure?q=1"
	for _, u := range []string{plainURL, secureURL} {
		if r := get(t, client, u, "MyBot/1.0"); r.status != http.StatusOK || r.header.Get("Wba-Result") != "verified "+key.ID() {
			t.Errorf("GET %s: status %d, Wba-Result %q; want 200 verified by %s; body %q",
				u, r.status, r.header.Get("Wba-Result"), key.ID(), r.body)
		}
	}
	cp := plain.wantVerified(t, "/signed/plain%20page", key.ID(), agent)
	cs := secure.wantVerified(t, "/signed/secure", key.ID(), agent)
	if cp.nonce == cs.nonce {
		t.Errorf("two requests signed with the same nonce %s", cp.nonce)
	}
	for _, c := range []sigCheck{cp, cs} {
		if ttl := c.expires - c.created; ttl < 10 || ttl > 3600 {
			t.Errorf("%s: expires - created = %ds, want the signature TTL (default 60s)", c.target, ttl)
		}
	}
	if n := v.fetchCount(); n != 1 {
		t.Errorf("the verifier fetched the directory %d times for two requests by one key, want 1", n)
	}

	// The directory as an origin gets it: cacheable, the one key.
	r := get(t, directClient(t), p.url.String()+wbaDirPath, "test")
	if r.status != http.StatusNotFound {
		t.Errorf("directory asked with Host %s: status %d, want 404: no identity's agent is there", p.addr, r.status)
	}
	wantDirectory(t, v, agent, key.ID())
	req, _ := http.NewRequest(http.MethodGet, agent+wbaDirPath, nil)
	resp, err := v.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cc := resp.Header.Get("Cache-Control"); !regexp.MustCompile(`max-age=[1-9]`).MatchString(cc) {
		t.Errorf("directory Cache-Control %q, want a max-age", cc)
	}

	wantMetric(t, p, "robotsgate_signed_requests_total", "token MyBot", 2)
	wantMetric(t, p, "robotsgate_signing_failures_total", "token MyBot", 0)
	p.stop()
	recs := p.audit()
	wantKeyID(t, recs, plainURL, key.ID())
	wantKeyID(t, recs, secureURL, key.ID())
}

// TestSigningRequestTargets: what robotsgate signs is what the origin
// receives, for request targets and authorities it forwards byte for
// byte or in their canonical spelling: escaped and unusual paths, empty
// and repeated queries, a URL without a path, the scheme and the address
// spelt otherwise, and methods other than GET, plain and in a tunnel.
func TestSigningRequestTargets(t *testing.T) {
	t.Parallel()
	const agent = "http://mybot-keys.test"
	v := newSigVerifier(t)
	plain, secure := newSignedOrigin(t, false, v), newSignedOrigin(t, true, v)
	key := newSigningKey(t, time.Time{}, time.Time{})
	p := startProxy(t, "ROBOTSGATE_TOKEN=MyBot", "ROBOTSGATE_SIGNATURE_AGENT="+agent,
		"ROBOTSGATE_SIGNING_KEY="+writeSigningKey(t, t.TempDir(), "k.pem", key, 0o600), upstreamCA(t, secure.origin))
	v.useGate(p.addr)

	paths := []string{
		"/t/a%2Fb%20c",
		"/t/pipe|x",
		"//t//double",
		"/t/empty-query?",
		"/t/q?a=1&a=2&b=%41&c",
		"/t/semi;p=1/~x",
		"/t/UPPER/Case",
		"/t/euro-%E2%82%AC",
	}
	type request struct {
		method, target, host, body string
		received                   string // the request-target the origin receives
	}
	for _, o := range []*signedOrigin{plain, secure} {
		_, port, _ := net.SplitHostPort(o.addr)
		var reqs []request
		for _, path := range paths {
			target := path
			if o.TLS == nil {
				target = o.base() + path
			}
			reqs = append(reqs, request{http.MethodGet, target, o.addr, "", path})
		}
		prefix := ""
		if o.TLS == nil {
			prefix = o.base()
			reqs = append(reqs,
				request{http.MethodGet, o.base() + "?nopath=1", o.addr, "", "/?nopath=1"},
				request{http.MethodGet, "HTTP://" + o.addr + "/t/scheme-case", o.addr, "", "/t/scheme-case"},
				request{http.MethodGet, "http://0x7f.0.0.1:" + port + "/t/hex-host", "0x7f.0.0.1:" + port, "", "/t/hex-host"})
		}
		reqs = append(reqs,
			request{http.MethodPost, prefix + "/t/post", o.addr, "a=1&b=2", "/t/post"},
			request{http.MethodHead, prefix + "/t/head", o.addr, "", "/t/head"},
			request{http.MethodDelete, prefix + "/t/delete?x=1", o.addr, "", "/t/delete?x=1"})

		t.Run(o.URL[:strings.Index(o.URL, ":")], func(t *testing.T) {
			for _, rq := range reqs {
				var conn net.Conn
				var br *bufio.Reader
				if o.TLS == nil {
					conn = p.dial(t)
					br = bufio.NewReader(conn)
				} else {
					kc := p.interceptAs(t, o.addr, "MyBot/1.0", "")
					conn, br = kc.conn, kc.br
				}
				r := rawDo(t, conn, br, rq.method, rq.target, rq.host, rq.body, "User-Agent: MyBot/1.0", "Connection: close")
				conn.Close()
				if r.status != http.StatusOK {
					t.Errorf("%s %s: status %d, want 200; body %q", rq.method, rq.target, r.status, r.body)
					continue
				}
				c := o.checkOf(t, rq.received)
				if c.err != nil || c.keyid != key.ID() {
					t.Errorf("%s %s: %v", rq.method, rq.target, c)
				}
			}

			// Raw UTF-8 in the path: no signature base can hold it, so
			// it is refused, not sent unsigned.
			target := "/t/raw-\xe2\x82\xac"
			var conn net.Conn
			var br *bufio.Reader
			if o.TLS == nil {
				conn = p.dial(t)
				br = bufio.NewReader(conn)
				target = o.base() + target
			} else {
				kc := p.interceptAs(t, o.addr, "MyBot/1.0", "")
				conn, br = kc.conn, kc.br
			}
			r := rawDo(t, conn, br, http.MethodGet, target, o.addr, "", "User-Agent: MyBot/1.0", "Connection: close")
			conn.Close()
			if r.status != http.StatusBadRequest {
				t.Errorf("GET %q: status %d, want 400; body %q", target, r.status, r.body)
			}
			if n := len(o.checksOf("/t/raw-\xe2\x82\xac")); n != 0 {
				t.Errorf("the origin received GET %q %d times, want never", target, n)
			}
		})
	}
}

// TestSigningTTL: ROBOTSGATE_SIGNATURE_TTL is, as documented, the
// signature's expires minus its created; created is at most a few
// seconds before the request (verifiers allow no skew into their future,
// so a little backdating is fine).
func TestSigningTTL(t *testing.T) {
	t.Parallel()
	const agent = "http://mybot-keys.test"
	v := newSigVerifier(t)
	site := newSignedOrigin(t, false, v)
	key := newSigningKey(t, time.Time{}, time.Time{})
	p := startProxy(t, "ROBOTSGATE_TOKEN=MyBot", "ROBOTSGATE_SIGNATURE_AGENT="+agent, "ROBOTSGATE_SIGNATURE_TTL=30s",
		"ROBOTSGATE_SIGNING_KEY="+writeSigningKey(t, t.TempDir(), "k.pem", key, 0o600))
	v.useGate(p.addr)
	sent := time.Now()
	if r := get(t, p.client(t), site.base()+"/ttl", "MyBot/1.0"); r.status != http.StatusOK {
		t.Fatalf("status %d", r.status)
	}
	done := time.Now()
	c := site.wantVerified(t, "/ttl", key.ID(), agent)
	if ttl := c.expires - c.created; ttl != 30 {
		t.Errorf("expires %d - created %d = %ds, want ROBOTSGATE_SIGNATURE_TTL, 30s", c.expires, c.created, ttl)
	}
	if c.created < sent.Unix()-5 || c.created > done.Unix() {
		t.Errorf("created %d, want within a few seconds before the request (sent at %d)", c.created, sent.Unix())
	}
}

// replay sends, directly to addr, a request with method, target, Host
// host and the header h (a signed request's, as an origin received it),
// and returns the origin's Wba-Result.
func replay(t *testing.T, addr, method, target, host string, h http.Header) string {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	req.Header = h.Clone()
	for _, hop := range []string{"Accept-Encoding", "Connection", "Content-Length"} {
		req.Header.Del(hop)
	}
	resp, err := directClient(t).Do(req)
	if err != nil {
		t.Fatalf("replay %s %s: %v", method, target, err)
	}
	resp.Body.Close()
	return resp.Header.Get("Wba-Result")
}

// TestSigningRejectsChangedAuthority: a signed request's fields, replayed
// by someone who saw them (an origin, a log) for another authority,
// path, query or method, do not verify; replayed unchanged within their
// validity they do (the profile has no replay database), which shows the
// rejections come from the change.
func TestSigningRejectsChangedAuthority(t *testing.T) {
	t.Parallel()
	const agent = "http://mybot-keys.test"
	v := newSigVerifier(t)
	site, other := newSignedOrigin(t, false, v), newSignedOrigin(t, false, v)
	key := newSigningKey(t, time.Time{}, time.Time{})
	p := startProxy(t, "ROBOTSGATE_TOKEN=MyBot", "ROBOTSGATE_SIGNATURE_AGENT="+agent,
		"ROBOTSGATE_SIGNING_KEY="+writeSigningKey(t, t.TempDir(), "k.pem", key, 0o600))
	v.useGate(p.addr)

	const path = "/replay/original?x=1"
	if r := get(t, p.client(t), site.base()+path, "MyBot/1.0"); r.status != http.StatusOK {
		t.Fatalf("GET %s: status %d", site.base()+path, r.status)
	}
	signed := site.wantVerified(t, "/replay/original", key.ID(), agent)
	if t.Failed() {
		return
	}
	_, sitePort, _ := net.SplitHostPort(site.addr)
	_, otherPort, _ := net.SplitHostPort(other.addr)
	for _, c := range []struct {
		name, addr, method, target, host string
		verifies                         bool
	}{
		{"unchanged", site.addr, http.MethodGet, path, site.addr, true},
		{"another site", other.addr, http.MethodGet, path, other.addr, false},
		{"another host name for the site", site.addr, http.MethodGet, path, "localhost:" + sitePort, false},
		{"another port in Host", site.addr, http.MethodGet, path, "127.0.0.1:" + otherPort, false},
		{"another path", site.addr, http.MethodGet, "/replay/other?x=1", site.addr, false},
		{"another query", site.addr, http.MethodGet, "/replay/original?x=2", site.addr, false},
		{"no query", site.addr, http.MethodGet, "/replay/original", site.addr, false},
		{"another method", site.addr, http.MethodDelete, path, site.addr, false},
	} {
		got := replay(t, c.addr, c.method, c.target, c.host, signed.header)
		switch {
		case c.verifies && got != "verified "+key.ID():
			t.Errorf("%s: Wba-Result %q, want verified", c.name, got)
		case !c.verifies && got != "rejected":
			t.Errorf("%s: Wba-Result %q, want rejected", c.name, got)
		}
	}
	// Each rejection is the signature's, not a field missing.
	for _, o := range []*signedOrigin{site, other} {
		o.mu.Lock()
		for _, c := range o.checks {
			if c.err != nil && !errors.Is(c.err, errSignatureMismatch) {
				t.Errorf("%v: rejected for another reason than the signature", c)
			}
		}
		o.mu.Unlock()
	}
}

// forgedFields are signature fields a client sends, in odd cases and
// repeated: none may reach an origin. Every value says "forged" or
// carries its base64 (Zm9yZ2Vk).
var forgedFields = []string{
	`signature-input: sig1=("@authority" "signature-agent";key="sig1");created=1;expires=4889289600;keyid="forged-key";alg="ed25519";tag="web-bot-auth"`,
	`SIGNATURE: sig1=:Zm9yZ2VkLXNpZ25hdHVyZQ==:`,
	`Signature-Agent: sig1="http://forged.test"`,
	`Signature-Input: sig2=("@method");keyid="forged-key-2";tag="web-bot-auth"`,
	`signature-agent: sig2="http://forged.test/2"`,
	`Signature: sig2=:Zm9yZ2Vk:`,
	`sIgNaTuRe-InPuT: sig3=("@path");keyid="forged-key-3"`,
}

// rawDo sends a request with method for target (absolute-form through
// the proxy, or origin-form in a tunnel) with Host host, the header lines
// as written and body, and reads the answer.
func rawDo(t *testing.T, conn net.Conn, br *bufio.Reader, method, target, host, body string, lines ...string) reply {
	t.Helper()
	conn.SetDeadline(time.Now().Add(requestTimeout))
	msg := method + " " + target + " HTTP/1.1\r\nHost: " + host + "\r\n"
	for _, l := range lines {
		msg += l + "\r\n"
	}
	if body != "" {
		msg += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n"
	}
	if _, err := io.WriteString(conn, msg+"\r\n"+body); err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, target, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, target, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: got}
}

// sendForged sends a GET for path to o with the forged fields, through
// the proxy (plain) or in a tunnel (TLS origin), presenting auth unless
// it is "".
func sendForged(t *testing.T, p *proxyProcess, o *signedOrigin, path, ua, auth string) reply {
	t.Helper()
	lines := append([]string{"User-Agent: " + ua}, forgedFields...)
	if o.TLS == nil {
		if auth != "" {
			lines = append(lines, "Proxy-Authorization: "+auth)
		}
		conn := p.dial(t)
		return rawDo(t, conn, bufio.NewReader(conn), http.MethodGet, o.base()+path, o.addr, "", lines...)
	}
	kc := p.interceptAs(t, o.addr, ua, auth)
	defer kc.conn.Close()
	return rawDo(t, kc.conn, kc.br, http.MethodGet, path, o.addr, "", lines...)
}

// wantNoForged fails if any signature field the origin received for path
// is the client's.
func wantNoForged(t *testing.T, o *signedOrigin, path string) {
	t.Helper()
	c := o.only(t, path)
	for _, f := range signatureFields {
		values := c.header.Values(f)
		for _, v := range values {
			if strings.Contains(v, "forged") || strings.Contains(v, "Zm9yZ2Vk") {
				t.Errorf("%s received the client's %s: %q", path, f, v)
			}
		}
		if len(values) > 1 {
			t.Errorf("%s received %d %s lines, want robotsgate's one: %q", path, len(values), f, values)
		}
	}
}

// TestSigningClientSignatureNeverForwarded: signature fields a client
// sends, however spelt and repeated, never reach an origin: a signing
// identity's request carries robotsgate's signature alone, and a
// non-signing client's carries none, on a gate with signing identities
// or without any.
func TestSigningClientSignatureNeverForwarded(t *testing.T) {
	t.Parallel()
	const agent = "http://acme-keys.test"
	v := newSigVerifier(t)
	plain, secure := newSignedOrigin(t, false, v), newSignedOrigin(t, true, v)
	acme := newCredential("acme", "")
	dir := t.TempDir()
	key := newSigningKey(t, time.Time{}, time.Time{})
	writeSigningKey(t, dir, "acme.pem", key, 0o600)
	pol := filepath.Join(dir, "pol.yaml")
	if err := os.WriteFile(pol, []byte("crawlers:\n  - user: acme\n    signing_keys: [acme.pem]\n    signature_agent: "+agent+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, "ROBOTSGATE_CREDENTIALS_FILE="+credentialsFile(t, acme), "ROBOTSGATE_AUTH=optional",
		"ROBOTSGATE_POLICY="+pol, upstreamCA(t, secure.origin))
	v.useGate(p.addr)
	bare := startProxy(t, upstreamCA(t, secure.origin))

	for _, o := range []*signedOrigin{plain, secure} {
		t.Run(o.URL[:strings.Index(o.URL, ":")], func(t *testing.T) {
			if r := sendForged(t, p, o, "/forged/signer", "AcmeBot/1.0", acme.proxyAuth()); r.status != http.StatusOK {
				t.Errorf("acme: status %d, want 200; body %q", r.status, r.body)
			}
			o.wantVerified(t, "/forged/signer", key.ID(), agent)
			wantNoForged(t, o, "/forged/signer")

			if r := sendForged(t, p, o, "/forged/anonymous", "AcmeBot/1.0", ""); r.status != http.StatusOK {
				t.Errorf("anonymous: status %d, want 200; body %q", r.status, r.body)
			}
			o.wantUnsigned(t, "/forged/anonymous")

			if r := sendForged(t, bare, o, "/forged/no-signing-gate", "AcmeBot/1.0", ""); r.status != http.StatusOK {
				t.Errorf("gate without keys: status %d, want 200; body %q", r.status, r.body)
			}
			o.wantUnsigned(t, "/forged/no-signing-gate")
		})
	}
}

// sharedGatePolicy gives acme and carol keys, each at its own agent, and
// beta none.
const sharedGatePolicy = `crawlers:
  - user: acme
    signing_keys: [acme.pem]
    signature_agent: http://acme-keys.test
  - user: beta
    allow_sites: ["127.0.0.1"]
  - user: carol
    signing_keys: [carol.jwk]
    signature_agent: http://carol-keys.test
`

// TestSigningSharedGate: on a gate bots share, each credential user's
// requests are signed with its own keys and no one else's: acme's by
// acme's key, beta (no keys) not at all, even claiming acme's name in its
// User-Agent; each agent's directory lists its own identity's keys only.
func TestSigningSharedGate(t *testing.T) {
	t.Parallel()
	const acmeAgent, carolAgent = "http://acme-keys.test", "http://carol-keys.test"
	v := newSigVerifier(t)
	plain, secure := newSignedOrigin(t, false, v), newSignedOrigin(t, true, v)
	acme, beta, carol := newCredential("acme", ""), newCredential("beta", ""), newCredential("carol", "")
	dir := t.TempDir()
	acmeKey, carolKey := newSigningKey(t, time.Time{}, time.Time{}), newSigningKey(t, time.Time{}, time.Time{})
	writeSigningKey(t, dir, "acme.pem", acmeKey, 0o600)
	writeSigningKey(t, dir, "carol.jwk", carolKey, 0o600)
	pol := filepath.Join(dir, "pol.yaml")
	if err := os.WriteFile(pol, []byte(sharedGatePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, "ROBOTSGATE_CREDENTIALS_FILE="+credentialsFile(t, acme, beta, carol), "ROBOTSGATE_AUTH=required",
		"ROBOTSGATE_POLICY="+pol, upstreamCA(t, secure.origin))
	v.useGate(p.addr)

	cases := []struct {
		who        credential
		path, ua   string
		key, agent string // "": unsigned
	}{
		{acme, "/shared/acme", "AcmeBot/1.0", acmeKey.ID(), acmeAgent},
		{beta, "/shared/beta", "BetaBot/1.0", "", ""},
		{beta, "/shared/beta-as-acme", "acme", "", ""},
		{carol, "/shared/carol", "CarolBot/1.0", carolKey.ID(), carolAgent},
	}
	var urls []string
	for _, o := range []*signedOrigin{plain, secure} {
		for _, c := range cases {
			u := o.base() + c.path
			urls = append(urls, u)
			if r := get(t, p.clientAs(t, c.who), u, c.ua); r.status != http.StatusOK {
				t.Errorf("%s: GET %s: status %d, want 200; body %q", c.who.name, u, r.status, r.body)
				continue
			}
			if c.key == "" {
				o.wantUnsigned(t, c.path)
			} else {
				o.wantVerified(t, c.path, c.key, c.agent)
			}
		}
	}
	wantDirectory(t, v, acmeAgent, acmeKey.ID())
	wantDirectory(t, v, carolAgent, carolKey.ID())
	if _, err := v.directory(context.Background(), "http://beta-keys.test"); err == nil || !strings.Contains(err.Error(), "status 404") {
		t.Errorf("directory of an agent no identity names: %v, want a 404", err)
	}
	wantMetric(t, p, "robotsgate_signed_requests_total", "user acme", 2)
	wantMetric(t, p, "robotsgate_signed_requests_total", "user carol", 2)
	wantMetric(t, p, "robotsgate_signed_requests_total", "user beta", 0)

	p.stop()
	recs := p.audit()
	for i, u := range urls {
		wantKeyID(t, recs, u, cases[i%len(cases)].key)
	}
}

// TestSigningKeyRotation: rotating keys keeps every request signed and
// verified, with no gap: by validity (a new key valid before the old one
// expires takes over at its nbf) and by editing the policy (a key added
// takes over at the reload).
func TestSigningKeyRotation(t *testing.T) {
	t.Parallel()

	t.Run("validity", func(t *testing.T) {
		t.Parallel()
		const agent = "http://mybot-keys.test"
		v := newSigVerifier(t)
		site := newSignedOrigin(t, false, v)
		// Whole seconds: JWK nbf and exp are.
		t0 := time.Now().Truncate(time.Second)
		switchAt, oldExpires := t0.Add(5*time.Second), t0.Add(7*time.Second)
		oldKey := newSigningKey(t, time.Time{}, oldExpires)
		newKey := newSigningKey(t, switchAt, time.Time{})
		dir := t.TempDir()
		files := writeSigningKey(t, dir, "old.jwk", oldKey, 0o600) + "," + writeSigningKey(t, dir, "new.jwk", newKey, 0o600)
		p := startProxy(t, "ROBOTSGATE_TOKEN=MyBot", "ROBOTSGATE_SIGNING_KEY="+files, "ROBOTSGATE_SIGNATURE_AGENT="+agent)
		v.useGate(p.addr)
		if time.Now().After(switchAt.Add(-time.Second)) {
			t.Fatalf("robotsgate took until %v past the switch to start: the machine is too slow for this test", time.Since(switchAt))
		}
		wantDirectory(t, v, agent, oldKey.ID(), newKey.ID())

		client := p.client(t)
		old, switched := 0, 0
		nonces := map[string]bool{}
		deadline := oldExpires.Add(1500 * time.Millisecond)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; time.Now().Before(deadline); i++ {
			path := "/rotate/" + strconv.Itoa(i)
			sent := time.Now()
			r := get(t, client, site.base()+path, "MyBot/1.0")
			done := time.Now()
			if r.status != http.StatusOK {
				t.Fatalf("GET %s at %v from the switch: status %d, want 200; X-Robotsgate-Decision %q",
					path, sent.Sub(switchAt), r.status, r.header.Get("X-Robotsgate-Decision"))
			}
			c := site.only(t, path)
			if c.err != nil {
				t.Fatalf("%v, %v from the switch", c, sent.Sub(switchAt))
			}
			if nonces[c.nonce] {
				t.Errorf("%s signed with a nonce used before", path)
			}
			nonces[c.nonce] = true
			switch c.keyid {
			case oldKey.ID():
				old++
				if switched > 0 {
					t.Errorf("%s signed by the old key after the new one signed", path)
				}
				// The newest valid key signs: the new one from its nbf,
				// before the old one expires.
				if !sent.Before(switchAt) {
					t.Errorf("%s sent %v after the new key's nbf, signed by the old key", path, sent.Sub(switchAt))
				}
			case newKey.ID():
				switched++
				if done.Before(switchAt) {
					t.Errorf("%s answered %v before the new key's nbf, signed by it", path, switchAt.Sub(done))
				}
			default:
				t.Errorf("%s signed by %s, neither key", path, c.keyid)
			}
			<-tick.C
		}
		if old == 0 || switched == 0 {
			t.Errorf("%d requests by the old key, %d by the new; want both", old, switched)
		}
		// The old key expired: the directory leaves it out.
		wantDirectory(t, v, agent, newKey.ID())
		wantMetric(t, p, "robotsgate_signing_failures_total", "token MyBot", 0)
	})

	t.Run("policy", func(t *testing.T) {
		t.Parallel()
		const agent = "http://acme-keys.test"
		v := newSigVerifier(t)
		site := newSignedOrigin(t, false, v)
		acme := newCredential("acme", "")
		dir := t.TempDir()
		keyA, keyB := newSigningKey(t, time.Time{}, time.Time{}), newSigningKey(t, time.Time{}, time.Time{})
		writeSigningKey(t, dir, "a.pem", keyA, 0o600)
		writeSigningKey(t, dir, "b.pem", keyB, 0o600)
		const entry = "crawlers:\n  - user: acme\n    signature_agent: " + agent + "\n    signing_keys: "
		pol := filepath.Join(dir, "pol.yaml")
		if err := os.WriteFile(pol, []byte(entry+"[a.pem]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		p := startProxy(t, "ROBOTSGATE_CREDENTIALS_FILE="+credentialsFile(t, acme), "ROBOTSGATE_POLICY="+pol,
			"ROBOTSGATE_WATCH_INTERVAL=100ms")
		v.useGate(p.addr)

		client := p.clientAs(t, acme)
		var keyids []string
		rewritten, afterB := false, 0
		deadline := time.Now().Add(10 * time.Second)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; afterB < 5; i++ {
			if time.Now().After(deadline) {
				t.Fatalf("key B did not sign within 10s of the policy listing it; keyids: %v", keyids)
			}
			path := "/rotate/" + strconv.Itoa(i)
			if r := get(t, client, site.base()+path, "AcmeBot/1.0"); r.status != http.StatusOK {
				t.Fatalf("GET %s: status %d, want 200; X-Robotsgate-Decision %q", path, r.status, r.header.Get("X-Robotsgate-Decision"))
			}
			c := site.only(t, path)
			if c.err != nil {
				t.Fatalf("%v", c)
			}
			keyids = append(keyids, c.keyid)
			switch {
			case c.keyid == keyB.ID():
				afterB++
			case afterB > 0:
				t.Errorf("request %d signed by %s after key B signed", i, c.keyid)
			case c.keyid != keyA.ID():
				t.Errorf("request %d signed by %s, neither key", i, c.keyid)
			case !rewritten && i >= 2:
				// A signed; now list B after it: the later listed of
				// keys valid from the same time signs.
				replaceFile(t, pol, entry+"[a.pem, b.pem]\n")
				rewritten = true
			}
			<-tick.C
		}
		if !rewritten {
			t.Errorf("key B signed before the policy listed it: %v", keyids)
		}
		if n := v.fetchCount(); n < 2 {
			t.Errorf("the verifier fetched the directory %d times; want again for key B", n)
		}
		wantDirectory(t, v, agent, keyA.ID(), keyB.ID())
	})
}

// noKeyPolicy gives acme an expired key and later one valid in an hour,
// at ROBOTSGATE_SIGNATURE_AGENT's agent; beta signs nothing.
const noKeyPolicy = `crawlers:
  - user: acme
    signing_keys: [expired.jwk]
  - user: later
    signing_keys: [later.jwk]
  - user: beta
    allow_sites: ["127.0.0.1"]
`

// TestSigningNoValidKey: a request that must be signed when no key of its
// identity is valid is answered 503 naming the identity and why (with
// Retry-After when a key becomes valid later), never sent unsigned; it is
// recorded and counted; a crawler without keys on the same gate is served.
func TestSigningNoValidKey(t *testing.T) {
	t.Parallel()
	v := newSigVerifier(t)
	plain, secure := newSignedOrigin(t, false, v), newSignedOrigin(t, true, v)
	acme, later, beta := newCredential("acme", ""), newCredential("later", ""), newCredential("beta", "")
	dir := t.TempDir()
	now := time.Now().Truncate(time.Second)
	expired := newSigningKey(t, now.Add(-2*time.Hour), now.Add(-time.Hour))
	notYet := newSigningKey(t, now.Add(time.Hour), time.Time{})
	writeSigningKey(t, dir, "expired.jwk", expired, 0o600)
	writeSigningKey(t, dir, "later.jwk", notYet, 0o600)
	pol := filepath.Join(dir, "pol.yaml")
	if err := os.WriteFile(pol, []byte(noKeyPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, "ROBOTSGATE_CREDENTIALS_FILE="+credentialsFile(t, acme, later, beta),
		"ROBOTSGATE_SIGNATURE_AGENT=http://gate-keys.test", "ROBOTSGATE_POLICY="+pol, upstreamCA(t, secure.origin))
	v.useGate(p.addr)

	refused := []struct {
		who        credential
		o          *signedOrigin
		identity   string
		why        string
		retryAfter bool
	}{
		{acme, plain, "user acme", expired.ID() + " expired", false},
		{acme, secure, "user acme", expired.ID() + " expired", false},
		{later, plain, "user later", notYet.ID() + " is valid from", true},
	}
	var urls []string
	for _, c := range refused {
		u := c.o.base() + "/nokey/" + c.who.name
		urls = append(urls, u)
		r := get(t, p.clientAs(t, c.who), u, "SomeBot/1.0")
		if r.status != http.StatusServiceUnavailable {
			t.Errorf("%s: GET %s: status %d, want 503; body %q", c.who.name, u, r.status, r.body)
			continue
		}
		h := r.header.Get("X-Robotsgate-Decision")
		if !strings.HasPrefix(h, "unsigned;") || !strings.Contains(h, `identity="`+c.identity+`"`) || !strings.Contains(h, c.why) {
			t.Errorf("%s: X-Robotsgate-Decision %q, want unsigned, identity %q and %q", c.who.name, h, c.identity, c.why)
		}
		if !strings.Contains(string(r.body), c.identity) {
			t.Errorf("%s: the page does not name %q: %q", c.who.name, c.identity, r.body)
		}
		ra := r.header.Get("Retry-After")
		switch secs, err := strconv.Atoi(ra); {
		case !c.retryAfter && ra != "":
			t.Errorf("%s: Retry-After %q, want none: no key will become valid", c.who.name, ra)
		case c.retryAfter && (err != nil || secs < 3590 || secs > 3602):
			t.Errorf("%s: Retry-After %q, want the seconds until the key's nbf, an hour", c.who.name, ra)
		}
	}
	for _, o := range []*signedOrigin{plain, secure} {
		if n := len(o.checksOf("/nokey/acme")) + len(o.checksOf("/nokey/later")); n != 0 {
			t.Errorf("%s received %d requests that could not be signed, want none", o.base(), n)
		}
	}
	for _, o := range []*signedOrigin{plain, secure} {
		u := o.base() + "/nokey/beta"
		if r := get(t, p.clientAs(t, beta), u, "BetaBot/1.0"); r.status != http.StatusOK {
			t.Errorf("beta: GET %s: status %d, want 200; body %q", u, r.status, r.body)
		}
		o.wantUnsigned(t, "/nokey/beta")
	}
	wantMetric(t, p, "robotsgate_signing_failures_total", "user acme", 2)
	wantMetric(t, p, "robotsgate_signing_failures_total", "user later", 1)
	wantMetric(t, p, "robotsgate_signed_requests_total", "user acme", 0)
	wantMetric(t, p, "robotsgate_signing_failures_total", "user beta", 0)

	p.stop()
	recs := p.audit()
	for _, u := range urls {
		rec := wantKeyID(t, recs, u, "")
		if rec.Status != http.StatusServiceUnavailable || rec.Forwarded {
			t.Errorf("audit record of %s: status %d, forwarded %v; want 503, not forwarded", u, rec.Status, rec.Forwarded)
		}
	}
}

// TestSigningStartErrors: signing settings robotsgate cannot use stop it
// before it listens, with exit status 2 and a message naming the variable
// or the policy line, never the private key.
func TestSigningStartErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := newSigningKey(t, time.Time{}, time.Time{})
	good := writeSigningKey(t, dir, "good.pem", key, 0o600)
	exposed := writeSigningKey(t, dir, "exposed.pem", key, 0o644)
	notKey := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notKey, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenPolicy := filepath.Join(dir, "token.yaml")
	if err := os.WriteFile(tokenPolicy, []byte("crawlers:\n  - token: GPTBot\n    signing_keys: [good.pem]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exposedPolicy := filepath.Join(dir, "exposed.yaml")
	if err := os.WriteFile(exposedPolicy, []byte("crawlers:\n  - user: acme\n    signature_agent: http://acme-keys.test\n    signing_keys: [exposed.pem]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var jwk struct{ D string }
	if err := json.Unmarshal(key.MarshalJWK(), &jwk); err != nil || jwk.D == "" {
		t.Fatalf("the key's JWK has no d: %v", err)
	}
	seed := jwk.D
	const keyVar, agent = "ROBOTSGATE_SIGNING_KEY", "ROBOTSGATE_SIGNATURE_AGENT=http://mybot-keys.test"
	for _, c := range []struct {
		name string
		env  []string
		want []string // regular expressions stderr matches
	}{
		{"key without a token", []string{keyVar + "=" + good, agent}, []string{keyVar, "ROBOTSGATE_TOKEN"}},
		{"key without an agent", []string{keyVar + "=" + good, "ROBOTSGATE_TOKEN=MyBot"}, []string{keyVar, "ROBOTSGATE_SIGNATURE_AGENT"}},
		{"group-readable key", []string{keyVar + "=" + exposed, "ROBOTSGATE_TOKEN=MyBot", agent},
			[]string{keyVar, regexp.QuoteMeta(exposed), "chmod 600"}},
		{"not a key", []string{keyVar + "=" + notKey, "ROBOTSGATE_TOKEN=MyBot", agent}, []string{keyVar, regexp.QuoteMeta(notKey)}},
		{"token entry with keys", []string{"ROBOTSGATE_POLICY=" + tokenPolicy, agent},
			[]string{"ROBOTSGATE_POLICY", `token\.yaml:3\b`, "token"}},
		{"user's key group-readable", []string{"ROBOTSGATE_POLICY=" + exposedPolicy, "ROBOTSGATE_CREDENTIALS_FILE=" + credentialsFile(t, newCredential("acme", ""))},
			[]string{"ROBOTSGATE_POLICY", `exposed\.yaml:4\b`, "chmod 600"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			stderr := refusedStart(t, c.env, c.want...)
			if strings.Contains(stderr, seed) {
				t.Errorf("stderr shows the private key:\n%s", stderr)
			}
		})
	}
}
