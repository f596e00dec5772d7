package policy

import (
	"strings"
	"time"

	"robotsgate/proxy/signing"
	"robotsgate/robots"
)

// Match is what the policy says about one crawler on one host: the
// crawler entries naming it and the site entries naming the host. The
// zero Match applies nothing. A Match is a value built without
// allocating; its slices are the policy's own.
type Match struct {
	user, token string
	// host is in the index's form (hostKey); "" when no pattern can name
	// it.
	host string
	// crawlers holds the entries for the user, for the token and for
	// every crawler ("*"), in file order within each.
	crawlers [3][]*crawler
	// sites names the host; each applies to the crawler or not
	// (site.appliesTo).
	sites []*site
	// rules and exceptions say whether an applicable entry has any, so
	// that Judge costs nothing without them.
	rules, exceptions bool
}

// Match finds what applies to a request. user is the authenticated
// credential's name ("" for an anonymous client): it matches user entries
// exactly, and only then, so an anonymous client whose token is a user's
// name gets nothing of that user's entry. token is the product token the
// request is judged as, matched case-insensitively. host is the target's
// host as the proxy keys it (robots.CanonicalHost's form, an IPv6 address
// with or without brackets, no port): patterns match it on every port.
func (p *Policy) Match(user, token, host string) Match {
	if p == nil {
		return Match{}
	}
	var m Match
	if user != "" {
		m.crawlers[0] = p.byUser[user]
	}
	if token != "" && len(p.byToken) > 0 {
		m.crawlers[1] = lookupFold(p.byToken, token)
	}
	m.crawlers[2] = p.every
	m.host = hostKey(host)
	if m.host != "" {
		m.sites = p.hostIndex.lookup(m.host)
	}
	empty := true
	for _, list := range m.crawlers {
		for _, c := range list {
			empty = false
			m.rules = m.rules || c.rules != nil
		}
	}
	for _, s := range m.sites {
		if (s.rules != nil || s.exceptions != nil) && s.appliesTo(user, token) {
			empty = false
			m.rules = m.rules || s.rules != nil
			m.exceptions = m.exceptions || s.exceptions != nil
		}
	}
	if empty {
		return Match{}
	}
	m.user, m.token = user, token
	return m
}

// Destination returns the Finding that keeps the crawler from the host,
// or nil when it may go there: each matching crawler entry's allow_sites
// must name the host, and no deny_sites may.
func (m *Match) Destination() *Finding {
	if m.crawlers[0] == nil && m.crawlers[1] == nil && m.crawlers[2] == nil {
		return nil
	}
	for _, list := range m.crawlers {
		for _, c := range list {
			if c.allow != nil && (m.host == "" || c.allow.lookup(m.host) == nil) {
				return c.allowFinding
			}
			if m.host != "" {
				if f := c.deny.lookup(m.host); f != nil {
					return f
				}
			}
		}
	}
	return nil
}

// Judge applies the policy to robots.txt's verdict v on pathAndQuery (as
// sent, judged with every reading as robots.Robots.CheckReadings does):
//
//  1. a rule of an applicable entry (the crawler's, or a site entry's
//     naming it) that disallows the path refuses it, whatever robots.txt
//     or an exception says: (false, the rule);
//  2. else a path robots.txt disallows by a rule is allowed when an
//     exception of a site entry naming the crawler covers every reading
//     of it: (true, the exception);
//  3. else robots.txt's verdict stands: (v.Allowed, nil).
//
// An exception never overrides a refusal that is not by a rule (an
// unreachable robots.txt, an ambiguous or too costly path).
func (m *Match) Judge(pathAndQuery string, v robots.Verdict) (allowed bool, f *Finding) {
	if !m.rules && !m.exceptions {
		return v.Allowed, nil
	}
	if m.rules {
		for _, list := range m.crawlers {
			for _, c := range list {
				if f := c.rules.refusal(pathAndQuery); f != nil {
					return false, f
				}
			}
		}
		for _, s := range m.sites {
			if s.rules != nil && s.appliesTo(m.user, m.token) {
				if f := s.rules.refusal(pathAndQuery); f != nil {
					return false, f
				}
			}
		}
	}
	if m.exceptions && !v.Allowed && v.Cause == robots.CauseRule {
		for _, s := range m.sites {
			if s.exceptions != nil && s.appliesTo(m.user, m.token) {
				if f := s.exceptions.covering(pathAndQuery); f != nil {
					return true, f
				}
			}
		}
	}
	return v.Allowed, nil
}

// DisallowsAll returns the rule of an applicable entry that refuses every
// path on the site, or nil: what a proxy that cannot see paths (a tunnel
// it does not intercept) can still enforce. Exceptions are not weighed:
// they allow only what robots.txt refuses.
func (m *Match) DisallowsAll() *Finding {
	if !m.rules {
		return nil
	}
	for _, list := range m.crawlers {
		for _, c := range list {
			if f := c.rules.everything(); f != nil {
				return f
			}
		}
	}
	for _, s := range m.sites {
		if s.rules != nil && s.appliesTo(m.user, m.token) {
			if f := s.rules.everything(); f != nil {
				return f
			}
		}
	}
	return nil
}

// Signer is the signing identity of the authenticated user's entry (its
// signing_keys), nil when there is none: an anonymous client, a user
// without keys. A token's entries never give one.
func (m *Match) Signer() *signing.Identity {
	for _, c := range m.crawlers[0] {
		if c.signer != nil {
			return c.signer
		}
	}
	return nil
}

// MinDelay is the longest min_delay of the matching crawler entries, and
// its Finding; 0 and nil when none sets one.
func (m *Match) MinDelay() (time.Duration, *Finding) {
	var d time.Duration
	var f *Finding
	for _, list := range m.crawlers {
		for _, c := range list {
			if c.minDelay > d {
				d, f = c.minDelay, c.minDelayFinding
			}
		}
	}
	return d, f
}

// MaxConcurrency is the smallest max_concurrency of the matching crawler
// entries, and its Finding; 0 and nil when none sets one.
func (m *Match) MaxConcurrency() (int, *Finding) {
	n := 0
	var f *Finding
	for _, list := range m.crawlers {
		for _, c := range list {
			if c.maxConc > 0 && (n == 0 || c.maxConc < n) {
				n, f = c.maxConc, c.maxConcFinding
			}
		}
	}
	return n, f
}

// Purposes is the union of the matching crawler entries' purposes, in
// file order. When one entry declares them all it is that entry's slice,
// shared: never modify it. Only a union of several allocates.
func (m *Match) Purposes() []string {
	var first *crawler
	var out []string
	for _, list := range m.crawlers {
		for _, c := range list {
			switch {
			case len(c.purposes) == 0:
			case first == nil:
				first = c
			case out == nil:
				out = append([]string(nil), first.purposes...)
				fallthrough
			default:
				for _, p := range c.purposes {
					if !contains(out, p) {
						out = append(out, p)
					}
				}
			}
		}
	}
	switch {
	case out != nil:
		return out
	case first != nil:
		return first.purposes
	}
	return nil
}

// lookupFold looks a token up in a map keyed by lower-cased tokens,
// without allocating for a token of up to 64 bytes.
func lookupFold(m map[string][]*crawler, key string) []*crawler {
	upper := false
	for i := 0; i < len(key); i++ {
		if c := key[i]; c >= 'A' && c <= 'Z' {
			upper = true
			break
		}
	}
	if !upper {
		return m[key]
	}
	var buf [64]byte
	if len(key) > len(buf) {
		return m[strings.ToLower(key)]
	}
	b := buf[:len(key)]
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return m[string(b)]
}

// hostKey brings a host in the proxy's form to the index's: brackets
// around an IPv6 address and a final '.' dropped, letters lower-cased
// should the caller not have (the one case that allocates). It is "" for
// a host no pattern can name: empty, or longer than a DNS name.
func hostKey(host string) string {
	if len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	host = strings.TrimSuffix(host, ".")
	if len(host) > 253 {
		return ""
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(host)
		}
	}
	return host
}
