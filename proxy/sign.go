package proxy

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"robotsgate/proxy/audit"
	"robotsgate/proxy/pace"
	"robotsgate/proxy/signing"
)

// SigningOptions say how forwarded requests are signed (Web Bot Auth): the
// policy's users sign with their own keys, the crawler Token pins with
// Pinned's.
type SigningOptions struct {
	// TTL is how long a signature is valid; 0 means a minute.
	TTL time.Duration
	// Pinned signs the requests judged as Token (ROBOTSGATE_TOKEN's
	// crawler); nil signs none of them.
	Pinned *signing.Identity
	Token  string
}

// signingIdentity is whose keys sign d's request: its credential user's
// (from the policy), else the pinned token's when the request is judged
// as that token; nil when none.
func (d *decision) signingIdentity() *signing.Identity {
	if d.policy != nil {
		if id := d.policy.match.Signer(); id != nil {
			return id
		}
	}
	if opts := &d.s.opts.Signing; opts.Pinned != nil && d.who.token == opts.Token {
		return opts.Pinned
	}
	return nil
}

// sign signs the outgoing request when its identity has keys, reporting
// false when it must not be sent: no key of the identity is valid, and
// the client has been answered 503. The client's own signature fields are
// gone by then (removeRewriting): no bot speaks for the operator.
func (d *decision) sign(w http.ResponseWriter, r *http.Request, out *http.Request) bool {
	id := d.signingIdentity()
	if id == nil || !d.enforcementWouldSend() {
		return true
	}
	key, err := d.s.signer.Sign(out.Header, signing.Target{Method: r.Method, Authority: d.target.hostHeader,
		Path: d.target.path, Query: d.target.query}, id, time.Now())
	if err == nil {
		d.signedBy = key
		d.s.metrics.signed.WithLabelValues(id.Name).Inc()
		return true
	}
	d.admission.Undo() // nothing reached the origin: its slot is given back
	if errors.Is(err, signing.ErrNotASCII) {
		d.outcome.status = http.StatusBadRequest
		d.outcome.cause = "signing: " + err.Error()
		plainPage(http.StatusBadRequest, "robotsgate did not send this request: it must be signed as "+id.Name+
			" (Web Bot Auth), and "+err.Error()+".\n").write(w, r)
		return false
	}
	d.s.metrics.signingFailures.WithLabelValues(id.Name).Inc()
	why := err.Error()
	d.outcome.status = http.StatusServiceUnavailable
	d.outcome.cause = "signing: " + why
	p := plainPage(http.StatusServiceUnavailable, "robotsgate did not send this request: the requests of "+id.Name+
		" are signed (Web Bot Auth), and none of its keys is valid now: "+keysWhy(why)+".\n"+
		"Retry when a key becomes valid (Retry-After, when one will), or ask the operator for a valid key (robotsgate keygen FILE).\n")
	p.header.Set(decisionHeader, "unsigned; token="+quoteHeader(shown(d.who.token))+"; identity="+quoteHeader(id.Name)+
		"; reason="+quoteHeader(why))
	if next := nextValid(id, time.Now()); !next.IsZero() {
		p.header.Set("Retry-After", strconv.Itoa(int(time.Until(next).Seconds())+1))
	}
	if wantsJSON(r.Header.Get("Accept")) {
		body := unsignedJSON{forbiddenJSON: forbiddenJSON{Status: p.status, Decision: d.robotsDecision()}, Identity: id.Name, Error: d.outcome.cause}
		body.UserAgent, body.Token = shown(body.UserAgent), shown(body.Token)
		p.body, _ = json.MarshalIndent(body, "", "  ") // plain strings and ints: cannot fail
		p.body = append(p.body, '\n')
		p.header.Set("Content-Type", "application/json")
	}
	p.write(w, r)
	return false
}

// enforcementWouldSend reports whether enforcement would have sent d's
// request: robots.txt and the policy allow it, no usage preference
// refuses it, and it comes on time. The audit modes forward the others
// too, unsigned: a signature says the gate judged the request fit to send.
func (d *decision) enforcementWouldSend() bool {
	return d.verdict.Allowed && (d.usage == nil || d.usage.action != audit.UsageRecorded) &&
		(d.admission.Outcome == pace.OnTime || d.admission.Outcome == pace.Waited)
}

// unsignedJSON is the 503 body, for clients that accept only JSON, of a
// request not sent for want of a valid key: the decision, the identity
// and why, in the audit record's words.
type unsignedJSON struct {
	forbiddenJSON
	Identity string `json:"identity"`
	Error    string `json:"error"`
}

// keysWhy is what an ErrNoValidKey error says of each key ("KEYID is
// valid from T"), after the identity it names.
func keysWhy(why string) string {
	if _, keys, ok := strings.Cut(why, ": "); ok {
		return keys
	}
	return why
}

// nextValid is when the first of id's keys not yet valid becomes valid,
// zero when none will.
func nextValid(id *signing.Identity, now time.Time) time.Time {
	var next time.Time
	for _, k := range id.Keys {
		if k.NotBefore.After(now) && (next.IsZero() || k.NotBefore.Before(next)) {
			next = k.NotBefore
		}
	}
	return next
}

// signingIdentities are every identity that signs: the pinned token's and
// the policy's users'.
func (s *Server) signingIdentities() []*signing.Identity {
	var ids []*signing.Identity
	if s.opts.Signing.Pinned != nil {
		ids = append(ids, s.opts.Signing.Pinned)
	}
	if s.opts.Policy != nil {
		if p := s.opts.Policy.Current(); p != nil {
			ids = append(ids, p.Identities()...)
		}
	}
	return ids
}

// serveKeyDirectory answers a request for the key directory: the keys of
// every identity whose Signature-Agent names the host asked (the Host of
// the request, as a site's verifier sends it through the operator's front
// end, or to robotsgate itself), signed by each of them.
func (s *Server) serveKeyDirectory(w http.ResponseWriter, r *http.Request) {
	host := signing.NormalAuthority(r.Host)
	ids := s.signingIdentities()
	var keys []*signing.Key
	var agents []string
	for _, id := range ids {
		if id.AgentHost() == host {
			keys = append(keys, id.Keys...)
		} else if !slices.Contains(agents, id.Agent) && len(agents) < maxAgentsNamed {
			agents = append(agents, id.Agent)
		}
	}
	if keys == nil {
		text := "robotsgate signs no requests: no signing keys are configured (ROBOTSGATE_SIGNING_KEY, or signing_keys in ROBOTSGATE_POLICY).\n"
		if len(ids) > 0 {
			text = "No identity of this robotsgate publishes its key directory at " + r.Host + ". The Signature-Agent URLs are: " +
				strings.Join(agents, ", ") + "; each one's directory is served to requests with its host in Host.\n"
		}
		plainPage(http.StatusNotFound, text).write(w, r)
		return
	}
	dir := s.directories.get(host, keys, time.Now())
	h := w.Header()
	h.Set("Content-Type", signing.DirectoryMediaType)
	h.Set("Cache-Control", "max-age="+strconv.Itoa(int(signing.DirectoryMaxAge.Seconds())))
	h.Set("Content-Digest", dir.ContentDigest)
	h.Set(signing.FieldSignatureInput, dir.SignatureInput)
	h.Set(signing.FieldSignature, dir.Signature)
	w.Write(dir.Body)
}

// maxAgentsNamed bounds the agents a 404 for the key directory names.
const maxAgentsNamed = 16

// directoryLife is how long a host's signed directory is served again
// before it is made anew: anyone may ask for it, and each answer costs a
// signature per key.
const directoryLife = time.Minute

// directoryCache keeps each agent host's signed key directory for
// directoryLife, or until its keys change (a policy reload) or one of
// them expires (the directory lists no expired key). Only hosts
// that some identity names get an entry, so it holds as many as there
// are agents.
type directoryCache struct {
	mu     sync.Mutex
	byHost map[string]cachedDirectory
}

type cachedDirectory struct {
	dir   signing.Directory
	keys  []*signing.Key
	until time.Time
}

func (c *directoryCache) get(host string, keys []*signing.Key, now time.Time) signing.Directory {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.byHost[host]; ok && now.Before(d.until) && slices.Equal(d.keys, keys) {
		return d.dir
	}
	if c.byHost == nil {
		c.byHost = make(map[string]cachedDirectory)
	}
	for h, d := range c.byHost {
		if !now.Before(d.until) {
			delete(c.byHost, h) // an agent no longer named, say
		}
	}
	until := now.Add(directoryLife)
	for _, k := range keys {
		if k.NotAfter.After(now) && k.NotAfter.Before(until) {
			until = k.NotAfter
		}
	}
	dir := signing.NewDirectory(keys, host, now)
	c.byHost[host] = cachedDirectory{dir: dir, keys: keys, until: until}
	return dir
}
