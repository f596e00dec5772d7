package policy

import (
	"cmp"
	"fmt"
	"iter"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"

	"robotsgate/robots"
)

// Hosts are matched in the form the proxy keys a request by (its
// target.host): robots.CanonicalHost's spelling, lower-cased, an IPv4
// address in dotted decimal, an IPv6 address as RFC 5952 writes it and
// without brackets, an internationalised name in punycode, no port.
// Patterns are brought to that form when the file is loaded.

// hostPattern is a site pattern in that form.
type hostPattern struct {
	host  string
	self  bool // matches host itself
	under bool // matches every host under host, at any depth
}

// parseHostPattern reads a site pattern: "example.com", "*.example.com",
// "domain:example.com", an IP address. The error says what is wrong and,
// where it can, what to write instead.
func parseHostPattern(s string) (hostPattern, error) {
	switch {
	case s == "":
		return hostPattern{}, fmt.Errorf("an empty host pattern")
	case s == "*":
		return hostPattern{}, fmt.Errorf(`"*" alone is not a site pattern: a crawler entry speaks for every site; name hosts here (example.com, *.example.com, domain:example.com)`)
	case strings.TrimSpace(s) != s || strings.ContainsAny(s, " \t"):
		return hostPattern{}, fmt.Errorf("%q has white space in it", s)
	case strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@"):
		hint := ""
		if u, err := url.Parse(s); err == nil && u.Hostname() != "" {
			hint = ": write the host alone (" + u.Hostname() + ")"
		}
		return hostPattern{}, fmt.Errorf("%q is a URL, not a host%s", s, hint)
	}
	var p hostPattern
	name := s
	switch {
	case strings.HasPrefix(s, "domain:"):
		name, p.self, p.under = s[len("domain:"):], true, true
	case strings.HasPrefix(s, "*."):
		name, p.under = s[len("*."):], true
	default:
		p.self = true
	}
	if strings.Contains(name, "*") {
		return hostPattern{}, fmt.Errorf("%q: '*' may only start a pattern, as its own label (*.example.com)", s)
	}
	host, err := canonicalPatternHost(name)
	if err != nil {
		return hostPattern{}, fmt.Errorf("%q: %w", s, err)
	}
	p.host = host
	if !p.under {
		return p, nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return hostPattern{}, fmt.Errorf("%q: an IP address has no hosts under it; write the address alone", s)
	}
	if !p.self { // *.name
		if suffix, _ := publicsuffix.PublicSuffix(host); suffix == host {
			return hostPattern{}, fmt.Errorf("%q: %s is a public suffix, its sites belong to many owners; name their domains (*.example.%s)", s, host, host)
		}
		return p, nil
	}
	registrable, err := publicsuffix.EffectiveTLDPlusOne(host)
	switch {
	case err != nil:
		return hostPattern{}, fmt.Errorf("%q: %s is a public suffix, not a registrable domain; name a domain under it (domain:example.%s)", s, host, host)
	case registrable != host:
		return hostPattern{}, fmt.Errorf("%q: %s is not a registrable domain: its registrable domain is %s; write domain:%s, or %s and *.%s", s, host, registrable, registrable, host, host)
	}
	return p, nil
}

// canonicalPatternHost brings the host of a pattern to the proxy's form:
// punycode for a name with letters beyond ASCII, robots.CanonicalHost,
// an IPv6 address without brackets. A port is an error: patterns match a
// host on every port.
func canonicalPatternHost(name string) (string, error) {
	if strings.IndexFunc(name, func(r rune) bool { return r >= 0x80 }) >= 0 {
		ascii, err := idna.Lookup.ToASCII(name)
		if err != nil {
			return "", fmt.Errorf("not an internationalised domain name: %w", err)
		}
		name = ascii
	}
	if addr, err := netip.ParseAddr(name); err == nil && addr.Is6() {
		name = "[" + name + "]"
	} else if strings.HasPrefix(name, "[") {
		if end := strings.IndexByte(name, ']'); end >= 0 && end < len(name)-1 {
			return "", fmt.Errorf("a port (ports are ignored: a pattern matches the host on every port); write %s", name[:end+1])
		}
	} else if colon := strings.LastIndexByte(name, ':'); colon >= 0 {
		return "", fmt.Errorf("a port (ports are ignored: a pattern matches the host on every port); write %s", name[:colon])
	}
	host, err := robots.CanonicalHost(name)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), nil
}

// isIP reports whether host, in the proxy's form, is an IP address: an
// IPv6 one has ':' in it, an IPv4 one a last label of digits only (a
// canonical name never has: robots.CanonicalHost reads such a name as an
// IPv4 address). A name merely ending in a digit (app.corp1) is a name,
// under its patterns like any other.
func isIP(host string) bool {
	if strings.IndexByte(host, ':') >= 0 {
		return true
	}
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}

// hostSet is a crawler entry's allow_sites or deny_sites: each pattern's
// Finding by the host it names itself or names the hosts under.
type hostSet struct {
	self  map[string]*Finding
	under map[string]*Finding
}

// add adds a pattern; the first pattern naming a host keeps it.
func (s *hostSet) add(p hostPattern, f *Finding) {
	if p.self {
		if s.self == nil {
			s.self = make(map[string]*Finding)
		}
		if _, ok := s.self[p.host]; !ok {
			s.self[p.host] = f
		}
	}
	if p.under {
		if s.under == nil {
			s.under = make(map[string]*Finding)
		}
		if _, ok := s.under[p.host]; !ok {
			s.under[p.host] = f
		}
	}
}

// lookup returns the Finding of a pattern matching host, or nil: for
// a.b.example.com it looks up the host itself, then b.example.com,
// example.com and com among the patterns naming hosts under them.
func (s *hostSet) lookup(host string) *Finding {
	if f := s.self[host]; f != nil {
		return f
	}
	if len(s.under) == 0 || isIP(host) {
		return nil
	}
	for name := range above(host) {
		if f := s.under[name]; f != nil {
			return f
		}
	}
	return nil
}

// above yields the names a host lies under, nearest first: for
// a.b.example.com, b.example.com, example.com and com.
func above(host string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for rest := host; ; {
			dot := strings.IndexByte(rest, '.')
			if dot < 0 || !yield(rest[dot+1:]) {
				return
			}
			rest = rest[dot+1:]
		}
	}
}

// siteIndex finds the site entries naming a host with one map lookup per
// label. Each name that a pattern names has a node holding, merged in
// file order, the entries matching that host itself and those matching
// every host under it; a host that is no key is under the longest key it
// ends in (".key"), and that node's list is complete: every pattern for
// hosts under a shorter suffix is in it too.
type siteIndex struct {
	nodes map[string]*hostNode
}

type hostNode struct {
	self, below []*site
}

// siteIndexBuilder collects site patterns before the index is built.
type siteIndexBuilder struct {
	self, under map[string][]*site
}

func (b *siteIndexBuilder) add(p hostPattern, s *site) {
	if b.self == nil {
		b.self, b.under = make(map[string][]*site), make(map[string][]*site)
	}
	if p.self {
		b.self[p.host] = append(b.self[p.host], s)
	}
	if p.under {
		b.under[p.host] = append(b.under[p.host], s)
	}
}

func (b *siteIndexBuilder) build() siteIndex {
	if len(b.self)+len(b.under) == 0 {
		return siteIndex{}
	}
	x := siteIndex{nodes: make(map[string]*hostNode, len(b.self)+len(b.under))}
	// above collects the entries for hosts under any proper suffix of key.
	above := func(key string, lists ...[]*site) []*site {
		var all []*site
		for _, l := range lists {
			all = append(all, l...)
		}
		if !isIP(key) {
			for rest := key; ; {
				dot := strings.IndexByte(rest, '.')
				if dot < 0 {
					break
				}
				rest = rest[dot+1:]
				all = append(all, b.under[rest]...)
			}
		}
		slices.SortFunc(all, func(a, b *site) int { return cmp.Compare(a.index, b.index) })
		return slices.Clip(slices.Compact(all))
	}
	for _, m := range []map[string][]*site{b.self, b.under} {
		for key := range m {
			if x.nodes[key] == nil {
				x.nodes[key] = &hostNode{self: above(key, b.self[key]), below: above(key, b.under[key])}
			}
		}
	}
	return x
}

// lookup returns the site entries naming host, in file order; the slice
// is shared.
func (x *siteIndex) lookup(host string) []*site {
	if len(x.nodes) == 0 {
		return nil
	}
	if n := x.nodes[host]; n != nil {
		return n.self
	}
	if isIP(host) {
		return nil
	}
	for name := range above(host) {
		if n := x.nodes[name]; n != nil {
			return n.below
		}
	}
	return nil
}
