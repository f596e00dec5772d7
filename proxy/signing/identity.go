package signing

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Identity is one crawler's signing identity: who it is, where sites
// fetch its key directory (Signature-Agent), and its keys. NewIdentity
// makes one.
type Identity struct {
	// Name says whose keys these are, in messages and records: "user
	// acme" (a credential's, from the policy) or "token GPTBot" (the
	// pinned token's, ROBOTSGATE_SIGNING_KEY).
	Name string
	// Agent is the Signature-Agent URL: where the key directory is
	// published.
	Agent string
	// Keys are every key of the identity, as configured: the directory
	// lists them all, the newest valid one signs.
	Keys []*Key
	// item is Agent as a structured field string (CheckAgent keeps out
	// what would need escaping), and member the Signature-Agent field
	// naming it, made once.
	item, member string
	// host is Agent's authority as AgentHost gives it.
	host string
}

// MaxKeys bounds an identity's keys: each one signs every directory
// answer, and the current one is looked for on every request.
const MaxKeys = 16

// ErrNoValidKey is wrapped by the error for an identity none of whose
// keys may sign now.
var ErrNoValidKey = errors.New("no valid signing key")

// NewIdentity checks an identity: an absolute http(s) Signature-Agent URL
// and at least one key, none listed twice.
func NewIdentity(name, agent string, keys []*Key) (*Identity, error) {
	if err := CheckAgent(agent); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s has no signing key", name)
	}
	if len(keys) > MaxKeys {
		return nil, fmt.Errorf("%s has %d signing keys; at most %d (rotation needs two or three: remove the expired ones)", name, len(keys), MaxKeys)
	}
	seen := make(map[string]*Key, len(keys))
	for _, k := range keys {
		if prev, ok := seen[k.id]; ok {
			return nil, fmt.Errorf("%s lists key %s twice (%s and %s)", name, k.id, where(prev), where(k))
		}
		seen[k.id] = k
	}
	item := `"` + agent + `"`
	u, _ := url.Parse(agent) // CheckAgent parsed it
	return &Identity{Name: name, Agent: agent, Keys: keys, item: item, member: Label + "=" + item,
		host: NormalAuthority(u.Host)}, nil
}

// LoadIdentity reads the key files of an identity (see ReadKeyFile).
func LoadIdentity(name, agent string, files []string) (*Identity, error) {
	var keys []*Key
	for _, f := range files {
		ks, err := ReadKeyFile(f)
		if err != nil {
			return nil, err
		}
		keys = append(keys, ks...)
	}
	return NewIdentity(name, agent, keys)
}

func where(k *Key) string {
	if k.File == "" {
		return "a key given"
	}
	return k.File
}

// AgentHost is the authority of the Signature-Agent URL, as
// NormalAuthority writes it: the Host a request for the key directory
// names.
func (id *Identity) AgentHost() string { return id.host }

// NormalAuthority is host[:port] in lower case, without port 80 or 443
// (behind a TLS front end the scheme of a request is not known).
func NormalAuthority(hostport string) string {
	hostport = strings.ToLower(hostport)
	for _, port := range [...]string{":80", ":443"} {
		if strings.HasSuffix(hostport, port) {
			return hostport[:len(hostport)-len(port)]
		}
	}
	return hostport
}

// CheckAgent checks a Signature-Agent URL: an origin (the profile's
// "directory" type: the key directory is at DirectoryPath on it), https or
// http (which the profile does not allow, but local tests need), no path,
// user information, query or fragment.
func CheckAgent(agent string) error {
	if agent == "" {
		return errors.New("no Signature-Agent URL: sites need one to find the key directory (https://your-crawler.example, say)")
	}
	u, err := url.Parse(agent)
	if err != nil {
		return fmt.Errorf("Signature-Agent %q is not a URL: %w", agent, err)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("Signature-Agent %q: an http or https URL is needed (https://your-crawler.example, say)", agent)
	case u.Hostname() == "":
		return fmt.Errorf("Signature-Agent %q names no host", agent)
	case !strings.HasPrefix(agent, u.Scheme+"://"):
		// Sent as written: a verifier may look for "https://" as such.
		return fmt.Errorf("Signature-Agent %q: write the scheme in lower case (%s://...)", agent, u.Scheme)
	case u.User != nil:
		return fmt.Errorf("Signature-Agent %q carries user information; sites would see it", agent)
	case u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(agent, "?#"):
		return fmt.Errorf("Signature-Agent %q: a query or fragment is not allowed", agent)
	case strings.ContainsFunc(agent, func(r rune) bool { return r <= ' ' || r > '~' || r == '"' || r == '\\' }):
		return fmt.Errorf("Signature-Agent %q: only printable ASCII without spaces, quotes or backslashes (percent-encode the rest)", agent)
	case u.Path != "" && u.Path != "/":
		return fmt.Errorf("Signature-Agent %q: an origin is needed, without a path (https://your-crawler.example): sites fetch the key directory at %s on it", agent, DirectoryPath)
	}
	return nil
}

// Current is the key that signs at now: of the valid keys, the one valid
// from the latest time, the later listed on a tie (so that a key added
// after another takes over).
func (id *Identity) Current(now time.Time) (*Key, error) {
	var best *Key
	for _, k := range id.Keys {
		if k.ValidAt(now) && (best == nil || !k.NotBefore.Before(best.NotBefore)) {
			best = k
		}
	}
	if best != nil {
		return best, nil
	}
	var why []string
	for _, k := range id.Keys {
		switch {
		case !k.NotAfter.IsZero() && !now.Before(k.NotAfter):
			why = append(why, fmt.Sprintf("%s expired at %s", k.id, stamp(k.NotAfter)))
		default:
			why = append(why, fmt.Sprintf("%s is valid from %s", k.id, stamp(k.NotBefore)))
		}
	}
	return nil, fmt.Errorf("%w for %s: %s", ErrNoValidKey, id.Name, strings.Join(why, "; "))
}
