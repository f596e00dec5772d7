package pace

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// groupAnswer is what groupResolver answers for one name.
type groupAnswer struct {
	addrs []netip.Addr
	err   error
	// wait, when set, holds the answer until it is closed, or until the
	// lookup's context is done; deaf waits for wait alone, as a resolver
	// that overruns its context would.
	wait <-chan struct{}
	deaf bool
}

// groupResolver answers from a table, as DNS the test controls would, and
// counts the lookups of each name. A name not in the table is not found.
type groupResolver struct {
	mu      sync.Mutex
	answers map[string]groupAnswer
	calls   map[string]int
	// ctxErrs is the lookup context's Err when each answer was given.
	ctxErrs []error
}

func newGroupResolver(answers map[string]groupAnswer) *groupResolver {
	return &groupResolver{answers: answers, calls: map[string]int{}}
}

func (r *groupResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.calls[host]++
	a, ok := r.answers[host]
	r.mu.Unlock()
	if network != "ip" {
		return nil, fmt.Errorf("network %q asked, want ip", network)
	}
	if a.wait != nil {
		if a.deaf {
			<-a.wait
		} else {
			select {
			case <-a.wait:
			case <-ctx.Done():
				a = groupAnswer{err: ctx.Err()}
			}
		}
	}
	r.mu.Lock()
	r.ctxErrs = append(r.ctxErrs, ctx.Err())
	r.mu.Unlock()
	if !ok {
		return nil, errors.New("no such host")
	}
	return a.addrs, a.err
}

func (r *groupResolver) answer(host string, a groupAnswer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[host] = a
}

func (r *groupResolver) callsOf(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func TestByText(t *testing.T) {
	for _, c := range []struct {
		text string
		want By
	}{{"host", ByHost}, {"Domain", ByDomain}, {"ADDRESS", ByAddress}} {
		var b By
		if err := b.UnmarshalText([]byte(c.text)); err != nil || b != c.want {
			t.Errorf("UnmarshalText(%q) = %q, %v; want %q", c.text, b, err, c.want)
		}
	}
	for _, text := range []string{"", "ip", "hosts", "origin"} {
		b := ByDomain
		err := b.UnmarshalText([]byte(text))
		if err == nil || b != ByDomain {
			t.Errorf("UnmarshalText(%q) = %q, %v; want an error and no change", text, b, err)
			continue
		}
		if want := `use "host", "domain" or "address"`; !strings.Contains(err.Error(), want) {
			t.Errorf("UnmarshalText(%q): %q does not say %s", text, err, want)
		}
	}
}

func TestGroupByHostAndDomain(t *testing.T) {
	for _, c := range []struct {
		by                 By
		origin, host, want string
	}{
		{"", "https://www.example.co.uk", "www.example.co.uk", "https://www.example.co.uk"},
		{ByHost, "https://www.example.co.uk:8443", "www.example.co.uk", "https://www.example.co.uk:8443"},
		{ByHost, "http://[::1]:8080", "::1", "http://[::1]:8080"},
		{ByDomain, "https://www.example.co.uk", "www.example.co.uk", "domain:example.co.uk"},
		{ByDomain, "http://a.b.example.com:8080", "a.b.example.com", "domain:example.com"},
		{ByDomain, "https://example.com", "example.com", "domain:example.com"},
		{ByDomain, "https://example.com.", "example.com.", "domain:example.com"},
		{ByDomain, "http://localhost:8080", "localhost", "http://localhost:8080"},
		{ByDomain, "http://127.0.0.1:8080", "127.0.0.1", "http://127.0.0.1:8080"},
		{ByDomain, "http://[::1]", "::1", "http://[::1]"},
		{ByDomain, "https://co.uk", "co.uk", "https://co.uk"},
		{ByDomain, "https://com", "com", "https://com"},
		// bücher.de and 中国 (a public suffix), in punycode.
		{ByDomain, "https://www.xn--bcher-kva.de", "www.xn--bcher-kva.de", "domain:xn--bcher-kva.de"},
		{ByDomain, "https://a.example.xn--fiqs8s", "a.example.xn--fiqs8s", "domain:example.xn--fiqs8s"},
		// A private suffix: each user's site is its own domain.
		{ByDomain, "https://alice.github.io", "alice.github.io", "domain:alice.github.io"},
	} {
		g := NewGrouper(GrouperOptions{By: c.by})
		if got := g.Group(context.Background(), c.origin, c.host); got != c.want {
			t.Errorf("by %q: Group(%q, %q) = %q, want %q", c.by, c.origin, c.host, got, c.want)
		}
	}
	if by := NewGrouper(GrouperOptions{}).By(); by != ByHost {
		t.Errorf("By() = %q by default, want %q", by, ByHost)
	}
}

func TestGroupByAddressLiteral(t *testing.T) {
	r := newGroupResolver(map[string]groupAnswer{})
	g := NewGrouper(GrouperOptions{By: ByAddress, Resolver: r})
	for _, c := range []struct{ origin, host, want string }{
		{"http://127.0.0.1:8080", "127.0.0.1", "address:127.0.0.1"},
		{"https://[::1]", "::1", "address:::1"},
		{"https://[2001:db8::1]", "2001:db8::1", "address:2001:db8::1"},
		{"https://[::ffff:192.0.2.1]", "::ffff:192.0.2.1", "address:192.0.2.1"},
	} {
		if got := g.Group(context.Background(), c.origin, c.host); got != c.want {
			t.Errorf("Group(%q, %q) = %q, want %q", c.origin, c.host, got, c.want)
		}
	}
	if len(r.calls) != 0 {
		t.Errorf("IP addresses were looked up: %v", r.calls)
	}
	if hits, misses, failures := g.Lookups(); hits+misses+failures != 0 {
		t.Errorf("Lookups() = %d, %d, %d for IP addresses, want none", hits, misses, failures)
	}
}

// TestGroupByAddressLocalhost resolves through the system's resolver:
// localhost is 127.0.0.1 in any hosts file, and shares its pace.
func TestGroupByAddressLocalhost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g := NewGrouper(GrouperOptions{By: ByAddress})
	name := g.Group(ctx, "http://localhost:8080", "localhost")
	literal := g.Group(ctx, "https://127.0.0.1", "127.0.0.1")
	if name != "address:127.0.0.1" || literal != name {
		t.Errorf("localhost is in %q and 127.0.0.1 in %q, want both in address:127.0.0.1", name, literal)
	}
	if again := g.Group(ctx, "https://localhost", "localhost"); again != name {
		t.Errorf("localhost again is in %q, want %q", again, name)
	}
	if hits, misses, failures := g.Lookups(); hits != 1 || misses != 1 || failures != 0 {
		t.Errorf("Lookups() = %d, %d, %d; want 1 hit, 1 miss, no failure", hits, misses, failures)
	}
}

func TestGroupByAddressChoice(t *testing.T) {
	const www = "https://www.example.com:8443"
	for _, c := range []struct {
		name   string
		answer groupAnswer
		want   string
	}{
		{"lowest IPv4", groupAnswer{addrs: addrs("2001:db8::1", "192.0.2.9", "10.0.0.2", "::ffff:10.0.0.1")}, "address:10.0.0.1"},
		{"IPv4 over a lower IPv6", groupAnswer{addrs: addrs("::1", "192.0.2.9")}, "address:192.0.2.9"},
		{"lowest IPv6", groupAnswer{addrs: addrs("2001:db8::2", "2001:db8::1")}, "address:2001:db8::1"},
		{"nothing found", groupAnswer{}, www},
		{"failure", groupAnswer{addrs: addrs("192.0.2.1"), err: errors.New("server misbehaving")}, www},
	} {
		r := newGroupResolver(map[string]groupAnswer{"www.example.com": c.answer})
		g := NewGrouper(GrouperOptions{By: ByAddress, Resolver: r})
		if got := g.Group(context.Background(), www, "www.example.com"); got != c.want {
			t.Errorf("%s: Group = %q, want %q", c.name, got, c.want)
		}
		wantFailures := uint64(0)
		if c.want == www {
			wantFailures = 1
		}
		if _, misses, failures := g.Lookups(); misses != 1 || failures != wantFailures {
			t.Errorf("%s: %d misses, %d failures; want 1, %d", c.name, misses, failures, wantFailures)
		}
	}
}

func TestGroupByAddressTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGroupResolver(map[string]groupAnswer{"a.example": {addrs: addrs("192.0.2.1")}})
		g := NewGrouper(GrouperOptions{By: ByAddress, Resolver: r, TTL: time.Minute})
		group := func(host string) string { return g.Group(t.Context(), "https://"+host, host) }

		if got := group("a.example"); got != "address:192.0.2.1" {
			t.Fatalf("Group = %q, want address:192.0.2.1", got)
		}
		r.answer("a.example", groupAnswer{addrs: addrs("192.0.2.2")})
		time.Sleep(time.Minute - time.Nanosecond)
		if got, calls := group("a.example"), r.callsOf("a.example"); got != "address:192.0.2.1" || calls != 1 {
			t.Errorf("within the TTL: Group = %q after %d lookups, want the kept address:192.0.2.1 after 1", got, calls)
		}
		time.Sleep(time.Nanosecond)
		if got, calls := group("a.example"), r.callsOf("a.example"); got != "address:192.0.2.2" || calls != 2 {
			t.Errorf("after the TTL: Group = %q after %d lookups, want address:192.0.2.2 after 2", got, calls)
		}

		// A failure is kept a tenth as long.
		if got := group("gone.example"); got != "https://gone.example" {
			t.Fatalf("Group = %q for a name not found, want its origin", got)
		}
		time.Sleep(6*time.Second - time.Nanosecond)
		if group("gone.example"); r.callsOf("gone.example") != 1 {
			t.Errorf("a failure was looked up again within a tenth of the TTL")
		}
		time.Sleep(time.Nanosecond)
		if group("gone.example"); r.callsOf("gone.example") != 2 {
			t.Errorf("a failure was not looked up again after a tenth of the TTL")
		}
		if hits, misses, failures := g.Lookups(); hits != 2 || misses != 4 || failures != 2 {
			t.Errorf("Lookups() = %d, %d, %d; want 2 hits, 4 misses, 2 failures", hits, misses, failures)
		}
	})
}

func TestGroupByAddressMaxHosts(t *testing.T) {
	r := newGroupResolver(map[string]groupAnswer{
		"a.example": {addrs: addrs("192.0.2.1")},
		"b.example": {addrs: addrs("192.0.2.2")},
		"c.example": {addrs: addrs("192.0.2.3")},
	})
	g := NewGrouper(GrouperOptions{By: ByAddress, Resolver: r, MaxHosts: 2})
	group := func(host string) string { return g.Group(context.Background(), "https://"+host, host) }
	for _, host := range []string{"a.example", "b.example", "c.example"} {
		group(host)
	}
	if n := g.names.Len(); n != 2 {
		t.Errorf("%d names kept, want MaxHosts, 2", n)
	}
	group("c.example")
	group("a.example")
	if c, a := r.callsOf("c.example"), r.callsOf("a.example"); c != 1 || a != 2 {
		t.Errorf("c.example looked up %d times, a.example %d; want the newest kept (1) and the oldest evicted (2)", c, a)
	}

	// A flood of names, found or not, holds no more.
	for i := range 1000 {
		group(fmt.Sprintf("n%d.example", i))
		if n := g.names.Len(); n > 2 {
			t.Fatalf("%d names kept after %d more, want at most 2", n, i+1)
		}
	}
}

func TestGroupByAddressSharesLookup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answer := make(chan struct{})
		r := newGroupResolver(map[string]groupAnswer{"shared.example": {addrs: addrs("192.0.2.7"), wait: answer}})
		g := NewGrouper(GrouperOptions{By: ByAddress, Resolver: r})
		const callers = 10
		groups := make(chan string, callers)
		for i := range callers {
			go func() {
				groups <- g.Group(t.Context(), fmt.Sprintf("https://shared.example:%d", 8000+i), "shared.example")
			}()
		}
		synctest.Wait()
		if calls := r.callsOf("shared.example"); calls != 1 {
			t.Errorf("%d callers made %d lookups, want 1", callers, calls)
		}
		close(answer)
		for range callers {
			if got := <-groups; got != "address:192.0.2.7" {
				t.Errorf("Group = %q, want address:192.0.2.7", got)
			}
		}
		if hits, misses, failures := g.Lookups(); hits != 0 || misses != callers || failures != 0 {
			t.Errorf("Lookups() = %d, %d, %d; want 0 hits, %d misses, 0 failures", hits, misses, failures, callers)
		}
	})
}

// TestGroupByAddressCallerLeaves: a client that hangs up stops waiting,
// and neither cancels the lookup others wait on nor loses its result.
func TestGroupByAddressCallerLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answer := make(chan struct{})
		r := newGroupResolver(map[string]groupAnswer{"slow.example": {addrs: addrs("192.0.2.8"), wait: answer}})
		g := NewGrouper(GrouperOptions{By: ByAddress, Resolver: r})
		leaving, leave := context.WithCancel(t.Context())
		left, stayed := make(chan string, 1), make(chan string, 1)
		// The caller that leaves starts the lookup: it is the one whose
		// context the lookup must not inherit.
		go func() { left <- g.Group(leaving, "https://slow.example", "slow.example") }()
		synctest.Wait()
		go func() { stayed <- g.Group(t.Context(), "http://slow.example", "slow.example") }()
		synctest.Wait()
		leave()
		synctest.Wait()
		select {
		case got := <-left:
			if got != "https://slow.example" {
				t.Errorf("the caller that left got %q, want its origin", got)
			}
		default:
			t.Fatal("the caller that left is still waiting")
		}
		select {
		case got := <-stayed:
			t.Fatalf("the caller that stayed got %q before the answer", got)
		default:
		}
		close(answer)
		if got := <-stayed; got != "address:192.0.2.8" {
			t.Errorf("the caller that stayed got %q, want address:192.0.2.8", got)
		}
		if len(r.ctxErrs) != 1 || r.ctxErrs[0] != nil {
			t.Errorf("the lookup's context ended %v, want it live when answered", r.ctxErrs)
		}
		if got := g.Group(t.Context(), "https://slow.example", "slow.example"); got != "address:192.0.2.8" || r.callsOf("slow.example") != 1 {
			t.Errorf("then Group = %q after %d lookups, want the kept address:192.0.2.8", got, r.callsOf("slow.example"))
		}
	})
}

// TestGroupByAddressTimeout: a name whose DNS never answers costs its
// own requests Timeout, and no one else anything.
func TestGroupByAddressTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		never := make(chan struct{})
		defer close(never) // lets the deaf lookup end with the test
		r := newGroupResolver(map[string]groupAnswer{
			"silent.example": {addrs: addrs("192.0.2.1"), wait: never},
			"deaf.example":   {addrs: addrs("192.0.2.2"), wait: never, deaf: true},
			"quick.example":  {addrs: addrs("192.0.2.3")},
		})
		g := NewGrouper(GrouperOptions{By: ByAddress, Resolver: r, Timeout: 5 * time.Second})
		for _, host := range []string{"silent.example", "deaf.example"} {
			start := time.Now()
			done := make(chan string, 1)
			go func() { done <- g.Group(t.Context(), "https://"+host, host) }()
			synctest.Wait()
			if got := g.Group(t.Context(), "https://quick.example", "quick.example"); got != "address:192.0.2.3" || time.Since(start) != 0 {
				t.Errorf("while %s hangs: quick.example is in %q after %v, want address:192.0.2.3 at once", host, got, time.Since(start))
			}
			if got := <-done; got != "https://"+host || time.Since(start) != 5*time.Second {
				t.Errorf("%s is in %q after %v, want its origin after the 5s timeout", host, got, time.Since(start))
			}
		}
		if len(r.ctxErrs) < 2 || !errors.Is(r.ctxErrs[1], context.DeadlineExceeded) {
			t.Errorf("silent.example's lookup ended with %v, want its deadline", r.ctxErrs)
		}
		// The silent name's failure is kept: it costs nothing more for a while.
		start := time.Now()
		if got := g.Group(t.Context(), "https://silent.example", "silent.example"); got != "https://silent.example" || time.Since(start) != 0 || r.callsOf("silent.example") != 1 {
			t.Errorf("silent.example again: %q after %v and %d lookups, want its origin at once, from the kept failure", got, time.Since(start), r.callsOf("silent.example"))
		}
	})
}

func TestGroupAllocations(t *testing.T) {
	r := newGroupResolver(map[string]groupAnswer{"www.example.com": {addrs: addrs("192.0.2.1")}})
	for _, by := range []By{ByHost, ByAddress} {
		g := NewGrouper(GrouperOptions{By: by, Resolver: r})
		ctx := context.Background()
		g.Group(ctx, "https://www.example.com", "www.example.com")
		if n := testing.AllocsPerRun(100, func() { g.Group(ctx, "https://www.example.com", "www.example.com") }); n != 0 {
			t.Errorf("by %s: Group allocates %v times, want 0", by, n)
		}
	}
}

func BenchmarkGroupByHost(b *testing.B) {
	g := NewGrouper(GrouperOptions{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		g.Group(ctx, "https://www.example.com", "www.example.com")
	}
}

func BenchmarkGroupByAddressHit(b *testing.B) {
	r := newGroupResolver(map[string]groupAnswer{"www.example.com": {addrs: addrs("192.0.2.1")}})
	g := NewGrouper(GrouperOptions{By: ByAddress, Resolver: r})
	ctx := context.Background()
	g.Group(ctx, "https://www.example.com", "www.example.com")
	b.ReportAllocs()
	for b.Loop() {
		g.Group(ctx, "https://www.example.com", "www.example.com")
	}
}
