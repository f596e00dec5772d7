package pace

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/net/publicsuffix"
	"golang.org/x/sync/singleflight"
)

// By says which hosts share a pace (ROBOTSGATE_PACE_BY).
type By string

const (
	// ByHost paces each origin alone, as its scheme, host and port name it.
	ByHost By = "host"
	// ByDomain paces together the hosts of one registrable domain.
	ByDomain By = "domain"
	// ByAddress paces together the hosts that resolve to one address.
	ByAddress By = "address"
)

// UnmarshalText accepts host, domain and address, in any case.
func (b *By) UnmarshalText(text []byte) error {
	switch v := By(strings.ToLower(string(text))); v {
	case ByHost, ByDomain, ByAddress:
		*b = v
		return nil
	}
	return fmt.Errorf("%q is not valid; use %q, %q or %q", text, ByHost, ByDomain, ByAddress)
}

// GrouperOptions configures a [Grouper]; the zero value groups by host.
type GrouperOptions struct {
	// By is the grouping; "" means ByHost.
	By By
	// Resolver resolves hosts' names for ByAddress; nil means
	// net.DefaultResolver.
	Resolver Resolver
	// Timeout bounds one lookup; 0 means 5s.
	Timeout time.Duration
	// TTL is how long a host's address is kept; a failed lookup is kept a
	// tenth as long. 0 means 1m.
	TTL time.Duration
	// MaxHosts bounds the names whose address is kept at once; 0 means
	// 65536.
	MaxHosts int
}

// Defaults of GrouperOptions.
const (
	defaultLookupTimeout = 5 * time.Second
	defaultAddressTTL    = time.Minute
	defaultMaxHosts      = 1 << 16
)

// Resolver resolves a host name; [net.Resolver] is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Grouper names the pace group of an origin. It is safe for concurrent
// use.
//
// ByAddress keeps each name's group in an LRU of MaxHosts names, each for
// TTL: a client naming endless hosts evicts older names (which cost a
// lookup again) but holds no more memory. A lookup runs detached from the
// requests that wait on it, so one that hangs up does not fail the
// others, and is bounded by Timeout; concurrent requests for one name
// share it, and requests for other names never wait on it.
type Grouper struct {
	by       By
	resolver Resolver
	timeout  time.Duration
	ttl      time.Duration

	// names is each name's group. Not golang-lru's expirable LRU: that
	// keeps one TTL for all (a failure is kept a tenth as long) and runs
	// a goroutine it never stops.
	mu    sync.Mutex
	names *simplelru.LRU[string, addressGroup] // guarded by mu

	flights                singleflight.Group
	hits, misses, failures atomic.Uint64
}

// addressGroup is a name's group and until when it holds; group "" is a
// failed lookup, which keeps the origin.
type addressGroup struct {
	group string
	until time.Time
}

// NewGrouper returns a Grouper; see [GrouperOptions] for the defaults.
func NewGrouper(o GrouperOptions) *Grouper {
	g := &Grouper{by: o.By, resolver: o.Resolver, timeout: o.Timeout, ttl: o.TTL}
	if g.by == "" {
		g.by = ByHost
	}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if g.timeout <= 0 {
		g.timeout = defaultLookupTimeout
	}
	if g.ttl <= 0 {
		g.ttl = defaultAddressTTL
	}
	maxHosts := o.MaxHosts
	if maxHosts <= 0 {
		maxHosts = defaultMaxHosts
	}
	// NewLRU fails only for a size below 1.
	g.names, _ = simplelru.NewLRU[string, addressGroup](maxHosts, nil)
	return g
}

// By is the grouping in force.
func (g *Grouper) By() By { return g.by }

// Lookups counts ByAddress's work: hits are calls answered from the
// cache (a kept failure too), misses calls that waited on a lookup (their
// own or one they shared), failures lookups that failed or found no
// address (once however many waited). An IP literal counts in none.
func (g *Grouper) Lookups() (hits, misses, failures uint64) {
	return g.hits.Load(), g.misses.Load(), g.failures.Load()
}

// Group names the pace group of origin, the proxy's canonical origin
// ("https://www.example.com:443"), whose host is host (canonical: lower
// case, an IPv6 address without brackets):
//
//   - ByHost: origin itself;
//   - ByDomain: "domain:" and the registrable domain of host
//     ("domain:example.co.uk" for www.example.co.uk); an IP address, or a
//     name with no registrable domain (localhost, a public suffix such as
//     co.uk), keeps origin;
//   - ByAddress: "address:" and the lowest IPv4 address host resolves to,
//     else its lowest IPv6 one ("address:127.0.0.1" for localhost and for
//     127.0.0.1: an IP address is its own, and an IPv4-mapped IPv6
//     address counts as IPv4); a lookup that fails, finds nothing, outlasts
//     Timeout or ctx keeps origin.
//
// Schemes and ports do not matter in domain and address groups.
func (g *Grouper) Group(ctx context.Context, origin, host string) string {
	switch g.by {
	case ByDomain:
		return domainGroup(origin, host)
	case ByAddress:
		return g.addressGroup(ctx, origin, host)
	}
	return origin
}

// domainGroup is Group for ByDomain.
func domainGroup(origin, host string) string {
	if _, ok := ipAddress(host); !ok {
		// The root's dot, should one come, names the same domain.
		if domain, err := publicsuffix.EffectiveTLDPlusOne(strings.TrimSuffix(host, ".")); err == nil {
			return "domain:" + domain
		}
	}
	return origin
}

// addressGroup is Group for ByAddress.
func (g *Grouper) addressGroup(ctx context.Context, origin, host string) string {
	if addr, ok := ipAddress(host); ok {
		return "address:" + addr.Unmap().String()
	}
	g.mu.Lock()
	kept, ok := g.names.Get(host)
	g.mu.Unlock()
	if ok && time.Now().Before(kept.until) {
		g.hits.Add(1)
		return orOrigin(kept.group, origin)
	}
	g.misses.Add(1)
	return orOrigin(g.await(ctx, host), origin)
}

// await waits for host's lookup, its own or one under way, and returns
// its group: "" when the lookup failed, or ctx or Timeout ended first.
// (Apart from addressGroup so that a hit allocates no closure.)
func (g *Grouper) await(ctx context.Context, host string) string {
	flight := g.flights.DoChan(host, func() (any, error) {
		return g.lookup(context.WithoutCancel(ctx), strings.Clone(host)), nil
	})
	// Each waiter's own bound too, should the resolver overrun its
	// context: a name that never answers costs its requests Timeout.
	timeout := time.NewTimer(g.timeout)
	defer timeout.Stop()
	select {
	case r := <-flight:
		return r.Val.(string)
	case <-ctx.Done():
	case <-timeout.C:
	}
	return ""
}

// lookup resolves host, keeps its group and returns it: "" when the
// lookup failed or found nothing. ctx carries no cancellation: the lookup
// is every waiter's, not the first one's.
func (g *Grouper) lookup(ctx context.Context, host string) string {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", host)
	group, ttl := "", g.ttl/10
	if best, ok := lowestAddress(addrs); err == nil && ok {
		group, ttl = "address:"+best.String(), g.ttl
	} else {
		g.failures.Add(1)
	}
	g.mu.Lock()
	g.names.Add(host, addressGroup{group: group, until: time.Now().Add(ttl)})
	g.mu.Unlock()
	return group
}

// lowestAddress is the lowest IPv4 address of addrs (an IPv4-mapped IPv6
// one counts as IPv4), else the lowest IPv6 one.
func lowestAddress(addrs []netip.Addr) (netip.Addr, bool) {
	var best netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		switch {
		case !a.IsValid():
		case !best.IsValid(), a.Is4() && !best.Is4(), a.Is4() == best.Is4() && a.Less(best):
			best = a
		}
	}
	return best, best.IsValid()
}

// ipAddress parses host if it is an IP address. Only what could be one
// is parsed: ParseAddr allocates its error, and a name is the common case
// (its last label is never all digits: CanonicalHost reads such a host as
// an IPv4 address).
func ipAddress(host string) (netip.Addr, bool) {
	if host == "" || strings.IndexByte(host, ':') < 0 && (host[len(host)-1] < '0' || host[len(host)-1] > '9') {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(host)
	return addr, err == nil
}

func orOrigin(group, origin string) string {
	if group == "" {
		return origin
	}
	return group
}
