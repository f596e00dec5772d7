package fleet_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"robotsgate/cache/fleet"
	"robotsgate/cache/fleet/redistest"
)

const holdsChannel = fleet.DefaultPrefix + "holds"

// hold is one state a Watch applied.
type hold struct{ group, state string }

// watcher records what a Watch of c applies.
type watcher struct {
	mu  sync.Mutex
	got []hold
}

// watch runs c.Holds().Watch until t ends, and checks that it returns
// when its context ends.
func watch(t *testing.T, c *fleet.Client) *watcher {
	t.Helper()
	w := &watcher{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Holds().Watch(ctx, func(group string, state []byte) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.got = append(w.got, hold{group, string(state)})
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Watch did not return within 5s of its context ending")
		}
	})
	return w
}

func (w *watcher) holds() []hold {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]hold(nil), w.got...)
}

// waitHolds waits until w has applied n holds, and returns them.
func (w *watcher) waitHolds(t *testing.T, n int) []hold {
	t.Helper()
	if !waitFor(5*time.Second, func() bool { return len(w.holds()) >= n }) {
		t.Fatalf("Watch applied %q; want %d holds within 5s", w.holds(), n)
	}
	return w.holds()
}

// waitSubscribed waits until n connections listen on the holds channel.
func waitSubscribed(t *testing.T, srv *redistest.Server, n int64) {
	t.Helper()
	raw := srv.Raw(0)
	ok := waitFor(5*time.Second, func() bool {
		subs, err := raw.PubSubNumSub(t.Context(), holdsChannel).Result()
		return err == nil && subs[holdsChannel] == n
	})
	if !ok {
		t.Fatalf("%d watches do not listen on %s within 5s", n, holdsChannel)
	}
}

// store runs h.Store and fails t on an error.
func store(t *testing.T, h *fleet.Holds, group, state string, version int64) bool {
	t.Helper()
	stored, err := h.Store(t.Context(), group, []byte(state), version, time.Minute)
	if err != nil {
		t.Fatalf("Store(%q, version %d): %v", group, version, err)
	}
	return stored
}

// load runs h.Load and fails t on an error.
func load(t *testing.T, h *fleet.Holds, group string) (string, int64) {
	t.Helper()
	state, version, err := h.Load(t.Context(), group)
	if err != nil {
		t.Fatalf("Load(%q): %v", group, err)
	}
	if state == nil && version != 0 {
		t.Fatalf("Load(%q) = nil state, version %d; want version 0 without a state", group, version)
	}
	return string(state), version
}

func TestHoldsCompareAndSet(t *testing.T) {
	srv := startRedis(t)
	ca, _ := newClient(t, srv, fleet.Options{})
	cb, _ := newClient(t, srv, fleet.Options{})
	a, b := ca.Holds(), cb.Holds()
	const group = "https://example.com:443"
	// States are binary: NUL bytes, invalid UTF-8.
	stateA, stateB := "a\x00\xff\x01", "b\x00\xfe"

	if state, version, err := a.Load(t.Context(), group); state != nil || version != 0 || err != nil {
		t.Fatalf("Load of a group never stored = %q, %d, %v; want nil, 0", state, version, err)
	}
	if !store(t, a, group, stateA, 0) {
		t.Fatal("Store of a new group refused")
	}
	if store(t, b, group, stateB, 0) {
		t.Fatal("a second Store on version 0 succeeded; want it refused, A stored first")
	}
	state, v1 := load(t, b, group)
	if state != stateA || v1 <= 0 {
		t.Fatalf("Load = %q, version %d; want A's state, a version above 0", state, v1)
	}
	if !store(t, b, group, stateB, v1) {
		t.Fatal("Store on the version Load returned refused")
	}
	state, v2 := load(t, a, group)
	if state != stateB || v2 <= v1 {
		t.Fatalf("Load = %q, version %d; want B's state, a version above %d", state, v2, v1)
	}
	if store(t, a, group, stateA, v1) {
		t.Error("Store on a version that moved on succeeded")
	}

	// Many instances store on one version at once: one wins.
	var wg sync.WaitGroup
	wins := make([]bool, 8)
	for i := range wins {
		c := ca
		if i%2 == 1 {
			c = cb
		}
		wg.Go(func() { wins[i] = store(t, c.Holds(), group, "racer", v2) })
	}
	wg.Wait()
	n := 0
	for _, won := range wins {
		if won {
			n++
		}
	}
	if n != 1 {
		t.Errorf("Stores racing on one version: %v; want exactly one stored", wins)
	}
	// Groups are apart.
	if state, version := load(t, a, "domain:example.com"); state != "" || version != 0 {
		t.Errorf("Load of another group = %q, %d; want none", state, version)
	}
	if keys := srv.Keys(fleet.DefaultPrefix + "hold:"); len(keys) != 1 || keys[0] != fleet.DefaultPrefix+"hold:"+group {
		t.Errorf("hold keys = %q; want one, %shold:%s", keys, fleet.DefaultPrefix, group)
	}
}

func TestHoldsExpire(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv, fleet.Options{})
	h, raw := c.Holds(), srv.Raw(0)
	tests := []struct {
		name     string
		keep     time.Duration
		min, max time.Duration
	}{
		{"a minute", time.Minute, 59 * time.Second, time.Minute},
		{"rounded up to whole milliseconds", 1500 * time.Microsecond, 0, 2 * time.Millisecond},
		{"at least a millisecond", 0, 0, time.Millisecond},
		{"negative", -time.Second, 0, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			group := "ttl " + tt.name
			stored, err := h.Store(t.Context(), group, []byte("s"), 0, tt.keep)
			if err != nil || !stored {
				t.Fatalf("Store = %v, %v", stored, err)
			}
			ttl, err := raw.PTTL(t.Context(), fleet.DefaultPrefix+"hold:"+group).Result()
			if err != nil {
				t.Fatal(err)
			}
			// -2: gone already, as a 1 ms keep may be by now.
			if ttl != -2 && (ttl < tt.min || ttl > tt.max) {
				t.Errorf("PTTL = %v; want %v to %v", ttl, tt.min, tt.max)
			}
		})
	}

	const group = "short"
	if _, err := h.Store(t.Context(), group, []byte("first"), 0, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	_, before := load(t, h, group)
	if !waitFor(5*time.Second, func() bool { _, v := load(t, h, group); return v == 0 }) {
		t.Fatal("a hold outlived its keep")
	}
	// Versions only grow, across an expiry too: one read before it never
	// matches again.
	if !store(t, h, group, "second", 0) {
		t.Fatal("Store on version 0 after the hold expired refused")
	}
	if _, after := load(t, h, group); after <= before {
		t.Errorf("version after the expiry %d; want above the one before, %d", after, before)
	}
	if store(t, h, group, "stale", before) {
		t.Error("Store on a version read before the expiry succeeded")
	}
}

func TestHoldsHostileValues(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv, fleet.Options{})
	raw := srv.Raw(0)
	tests := []struct {
		name  string
		write func(ctx context.Context, key string) error
	}{
		{"a string", set(raw, "garbage")},
		{"no version", hset(raw, map[string]string{"s": "x"})},
		{"no state", hset(raw, map[string]string{"v": "5"})},
		{"version 0", hset(raw, map[string]string{"v": "0", "s": "x"})},
		{"negative version", hset(raw, map[string]string{"v": "-5", "s": "x"})},
		{"leading zero", hset(raw, map[string]string{"v": "05", "s": "x"})},
		{"hexadecimal", hset(raw, map[string]string{"v": "0x10", "s": "x"})},
		{"exponent", hset(raw, map[string]string{"v": "1e3", "s": "x"})},
		{"spaces", hset(raw, map[string]string{"v": " 5", "s": "x"})},
		{"2^53", hset(raw, map[string]string{"v": "9007199254740992", "s": "x"})},
		{"beyond 2^53", hset(raw, map[string]string{"v": "9007199254740993", "s": "x"})},
		{"state too long", hset(raw, map[string]string{"v": "5", "s": strings.Repeat("x", fleet.MaxHoldBytes+1)})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			group := "hostile " + tt.name
			if err := tt.write(t.Context(), fleet.DefaultPrefix+"hold:"+group); err != nil {
				t.Fatal(err)
			}
			if state, version := load(t, c.Holds(), group); state != "" || version != 0 {
				t.Errorf("Load = %q, %d; want none", state, version)
			}
			if !store(t, c.Holds(), group, "mine", 0) {
				t.Fatal("Store on version 0 refused; want what is there taken for none")
			}
			if state, version := load(t, c.Holds(), group); state != "mine" || version <= 0 {
				t.Errorf("Load after Store = %q, %d; want the state stored", state, version)
			}
		})
	}
	if !c.Status().Up {
		t.Errorf("a hostile hold took Redis for down: %+v", c.Status())
	}
}

func TestHoldsBounds(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv, fleet.Options{})
	h := c.Holds()
	long := strings.Repeat("g", fleet.MaxHoldBytes)
	w := watch(t, c)
	waitSubscribed(t, srv, 1)

	for _, tt := range []struct {
		name, group, state string
		version            int64
	}{
		{"empty group", "", "s", 0},
		{"group too long", long + "g", "s", 0},
		{"state too long", "g", long + "s", 0},
		{"negative version", "g", "s", -1},
		{"version 2^53", "g", "s", 1 << 53},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stored, err := h.Store(t.Context(), tt.group, []byte(tt.state), tt.version, time.Minute)
			if err == nil || stored || errors.Is(err, fleet.ErrUnavailable) {
				t.Errorf("Store = %v, %v; want refused", stored, err)
			}
		})
	}
	if _, _, err := h.Load(t.Context(), long+"g"); err == nil {
		t.Error("Load of a group too long succeeded")
	}
	// At the bound, both fit, in Redis and on the channel.
	if !store(t, h, long, long, 0) {
		t.Fatal("Store at the bound refused")
	}
	if state, _ := load(t, h, long); state != long {
		t.Errorf("Load at the bound = %d bytes; want %d", len(state), len(long))
	}
	if got := w.waitHolds(t, 1); got[0] != (hold{long, long}) {
		t.Errorf("Watch applied a group of %d bytes, a state of %d; want %d and %d", len(got[0].group), len(got[0].state), len(long), len(long))
	}
	if keys := srv.Keys(fleet.DefaultPrefix + "hold:"); len(keys) != 1 {
		t.Errorf("hold keys = %d; want one, at the bound", len(keys))
	}
}

// TestHoldsVersionAtTheTop: another writer's version of 2^53-1, the
// largest, is stepped from as any other, and compare-and-set holds past
// it: cur+1 would be 2^53, and past it a Lua number rounds.
func TestHoldsVersionAtTheTop(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv, fleet.Options{})
	h := c.Holds()
	const group, top = "g", 1<<53 - 1
	if err := hset(srv.Raw(0), map[string]string{"v": strconv.FormatInt(top, 10), "s": "x"})(t.Context(), fleet.DefaultPrefix+"hold:"+group); err != nil {
		t.Fatal(err)
	}
	if state, version := load(t, h, group); state != "x" || version != top {
		t.Fatalf("Load = %q, %d; want %q, %d", state, version, "x", int64(top))
	}
	version := int64(top)
	for i := range 3 {
		if !store(t, h, group, "mine", version) {
			t.Fatalf("Store %d on version %d refused", i, version)
		}
		state, next := load(t, h, group)
		if state != "mine" || next <= 0 || next == version {
			t.Fatalf("Load after Store %d on version %d = %q, %d; want the state, another version", i, version, state, next)
		}
		if store(t, h, group, "stale", version) {
			t.Fatalf("a second Store on version %d succeeded", version)
		}
		version = next
	}
}

// TestHoldsWatch: every instance's Watch applies every state stored, its
// own included, in the order Redis stored them; a Store that lost
// publishes nothing.
func TestHoldsWatch(t *testing.T) {
	srv := startRedis(t)
	ca, _ := newClient(t, srv, fleet.Options{})
	cb, _ := newClient(t, srv, fleet.Options{})
	wa, wb := watch(t, ca), watch(t, cb)
	waitSubscribed(t, srv, 2)

	var want []hold
	groups := []string{"https://example.com:443", "domain:example.com", "address:127.0.0.1"}
	for i := range 12 {
		c := ca
		if i%3 == 1 {
			c = cb
		}
		group := groups[i%len(groups)]
		_, version := load(t, c.Holds(), group)
		state := string(rune('a'+i)) + "\x00" + group
		if !store(t, c.Holds(), group, state, version) {
			t.Fatalf("Store %d refused", i)
		}
		want = append(want, hold{group, state})
		if i == 5 && store(t, cb.Holds(), group, "lost", version) {
			t.Fatal("a Store on a version that moved on succeeded")
		}
	}
	for name, w := range map[string]*watcher{"A": wa, "B": wb} {
		got := w.waitHolds(t, len(want))
		if len(got) != len(want) {
			t.Errorf("Watch of %s applied %d holds; want %d", name, len(got), len(want))
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("Watch of %s: hold %d = %q; want %q", name, i, got[i], want[i])
			}
		}
	}
	if ops := holdMessages(t, ca); ops["applied"] != float64(len(want)) || ops["ignored"] != 0 {
		t.Errorf("hold messages = %v; want %d applied, none ignored", ops, len(want))
	}
}

func TestHoldsWatchIgnoresMalformed(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv, fleet.Options{})
	w := watch(t, c)
	waitSubscribed(t, srv, 1)
	raw := srv.Raw(0)
	long := strings.Repeat("x", fleet.MaxHoldBytes+1)
	garbage := []string{
		"",
		"hello",
		"\x00\xff\xfe",
		"v1:",
		"v1:3",
		"v1::g",
		"v1:x:g",
		"v1:0:",
		"v1:03:abc",
		"v1:-1:g",
		"v1:+1:g",
		"v1: 1:g",
		"v1:5:abc",
		"v1:99999999999999999999:g",
		"v1:4097:" + long,
		"v1:1:g" + long,
		"v2:1:gs",
		"V1:1:gs",
	}
	for _, msg := range garbage {
		if err := raw.Publish(t.Context(), holdsChannel, msg).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Another program's message that reads as a hold is one.
	if err := raw.Publish(t.Context(), holdsChannel, "v1:1:g:s").Err(); err != nil {
		t.Fatal(err)
	}
	if !store(t, c.Holds(), "g", "after", 0) {
		t.Fatal("Store refused")
	}
	if got := w.waitHolds(t, 2); len(got) != 2 || got[0] != (hold{"g", ":s"}) || got[1] != (hold{"g", "after"}) {
		t.Errorf("Watch applied %q; want only the two holds", got)
	}
	if ops := holdMessages(t, c); ops["applied"] != 2 || ops["ignored"] != float64(len(garbage)) {
		t.Errorf("hold messages = %v; want 2 applied, %d ignored", ops, len(garbage))
	}
	if !c.Status().Up {
		t.Errorf("garbage on the channel took Redis for down: %+v", c.Status())
	}
}

// TestHoldsWatchSurvivesRestart: Redis dies and comes back (empty); Watch
// listens again by itself and applies what is stored after.
func TestHoldsWatchSurvivesRestart(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv, fleet.Options{Timeout: testTimeout, RetryEvery: testRetryEvery})
	w := watch(t, c)
	waitSubscribed(t, srv, 1)
	if !store(t, c.Holds(), "g", "before", 0) {
		t.Fatal("Store refused")
	}
	w.waitHolds(t, 1)

	srv.Stop()
	if _, err := c.Holds().Store(t.Context(), "g", []byte("lost"), 0, time.Minute); err == nil {
		t.Fatal("Store on a stopped Redis succeeded")
	}
	if _, err := c.Holds().Store(t.Context(), "g", []byte("lost"), 0, time.Minute); !errors.Is(err, fleet.ErrUnavailable) {
		t.Errorf("Store while Redis is down = %v; want ErrUnavailable", err)
	}
	srv.Start()
	waitSubscribed(t, srv, 1)
	if !waitFor(20*testRetryEvery+testTimeout, func() bool { return c.Status().Up }) {
		t.Fatalf("Status = %+v; want up once Redis is back", c.Status())
	}
	if !store(t, c.Holds(), "g", "after", 0) {
		t.Fatal("Store on the restarted Redis refused")
	}
	if got := w.waitHolds(t, 2); len(got) != 2 || got[1] != (hold{"g", "after"}) {
		t.Errorf("Watch applied %q; want before, then after", got)
	}
}

// TestHoldsWatchQuietConnection: a Watch whose connection goes silent
// (Redis paused, as a host gone would be) notices by its PING and listens
// again, rather than wait on a dead connection forever.
func TestHoldsWatchQuietConnection(t *testing.T) {
	srv := startRedis(t)
	c, _ := newClient(t, srv, fleet.Options{Timeout: testTimeout, RetryEvery: testRetryEvery})
	w := watch(t, c)
	waitSubscribed(t, srv, 1)
	raw := srv.Raw(0)
	firstID := subscriberID(t, raw)
	// CLIENT PAUSE ALL holds every reply, the PING's too.
	if err := raw.ClientPause(t.Context(), 4*testTimeout).Err(); err != nil {
		t.Fatal(err)
	}
	ok := waitFor(5*time.Second, func() bool {
		id := subscriberID(t, raw)
		return id != 0 && id != firstID
	})
	if !ok {
		t.Fatal("Watch kept its silent connection; want a new subscription")
	}
	if !waitFor(5*time.Second, func() bool { return c.Status().Up }) {
		t.Fatalf("Status = %+v; want up", c.Status())
	}
	if !store(t, c.Holds(), "g", "after", 0) {
		t.Fatal("Store refused")
	}
	if got := w.waitHolds(t, 1); got[0] != (hold{"g", "after"}) {
		t.Errorf("Watch applied %q; want the hold stored after the pause", got)
	}
}

// subscriberID is the id of the connection subscribed to the holds
// channel, 0 when none is (or Redis does not answer).
func subscriberID(t *testing.T, raw *redis.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	list, err := raw.ClientList(ctx).Result()
	if err != nil {
		return 0
	}
	for line := range strings.Lines(list) {
		if !strings.Contains(line, " sub=1 ") {
			continue
		}
		for field := range strings.FieldsSeq(line) {
			if id, ok := strings.CutPrefix(field, "id="); ok {
				n, _ := strconv.ParseInt(id, 10, 64)
				return n
			}
		}
	}
	return 0
}

func TestHoldsWatchEndsWithClient(t *testing.T) {
	srv := startRedis(t)
	c, err := fleet.New(t.Context(), fleet.Options{URL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Holds().Watch(context.Background(), func(string, []byte) {})
	}()
	waitSubscribed(t, srv, 1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return within 5s of its Client closing")
	}
	waitSubscribed(t, srv, 0)
}

// holdMessages returns robotsgate_redis_hold_messages_total of c by result.
func holdMessages(t *testing.T, c *fleet.Client) map[string]float64 {
	t.Helper()
	return counters(t, c, "robotsgate_redis_hold_messages_total", "result")
}

// TestHoldsChannelRefused: a user whose ACL lacks the channel (Redis 7's
// default for a new user) is told once, and Watch listens as soon as the
// ACL allows it; with it, the user the manual describes does everything.
func TestHoldsChannelRefused(t *testing.T) {
	srv := startRedis(t)
	admin := srv.Raw(0)
	if err := admin.Do(t.Context(), "ACL", "SETUSER", "gate", "on", ">pw", "~"+fleet.DefaultPrefix+"*", "resetchannels",
		"+@read", "+@write", "+@scripting", "+@pubsub", "+@connection", "+@transaction", "+time").Err(); err != nil {
		t.Fatal(err)
	}
	c, logs := newClient(t, srv, fleet.Options{URL: "redis://gate:pw@" + srv.Addr(), Timeout: testTimeout, RetryEvery: testRetryEvery})
	w := watch(t, c)
	refusals := func() []string {
		var found []string
		for _, line := range logs.lines("WARN") {
			if strings.Contains(line, "redis refuses robotsgate the holds channel") {
				found = append(found, line)
			}
		}
		return found
	}
	// Several tries, one warning.
	if !waitFor(5*time.Second, func() bool { return strings.Count(logs.String(), "hold watch: subscribing again") >= 3 }) {
		t.Fatalf("Watch does not try again:\n%s", logs)
	}
	if got := refusals(); len(got) != 1 || !strings.Contains(got[0], "NOPERM") {
		t.Errorf("warnings of the refused channel = %q; want one, with Redis's NOPERM", got)
	}
	if _, err := c.Holds().Store(t.Context(), "g", []byte("s"), 0, time.Minute); err == nil || !strings.Contains(err.Error(), "publish") {
		t.Errorf("Store without the channel = %v; want Redis refusing the publish", err)
	}
	// Refused, it stored nothing the others would not hear of.
	if keys := srv.Keys(fleet.DefaultPrefix + "hold:"); len(keys) != 0 {
		t.Errorf("a refused Store left %q", keys)
	}
	// Only the hold is this instance's alone: Redis is up for the rest.
	if !c.Status().Up {
		t.Errorf("Status = %+v after a refused Store; want up", c.Status())
	}
	if _, _, _, err := c.Schedules().Take(t.Context(), "https://example.com:443", time.Second, 0); err != nil {
		t.Errorf("Take right after a refused Store: %v", err)
	}

	if err := admin.Do(t.Context(), "ACL", "SETUSER", "gate", "&"+holdsChannel).Err(); err != nil {
		t.Fatal(err)
	}
	waitSubscribed(t, srv, 1)
	if !store(t, c.Holds(), "g", "s", 0) {
		t.Fatal("Store refused")
	}
	if got := w.waitHolds(t, 1); got[0] != (hold{"g", "s"}) {
		t.Errorf("Watch applied %q", got)
	}
	// The categories the manual names are all the rest needs.
	for op, err := range everyOp(t.Context(), c) {
		if err != nil {
			t.Errorf("%s as the ACL user: %v", op, err)
		}
	}
}

// TestPermissionRefusedIsNoOutage: Redis refusing the ACL user one
// operation fails that operation alone, each time, and says so once per
// message; the Client stays up and every other operation goes to Redis.
func TestPermissionRefusedIsNoOutage(t *testing.T) {
	base := []string{"on", ">pw", "+@read", "+@write", "+@scripting", "+@pubsub", "+@connection", "+@transaction", "+time"}
	tests := []struct {
		name    string
		acl     []string
		refused []string // the operations of everyOp Redis refuses
	}{
		{"no channel", []string{"~" + fleet.DefaultPrefix + "*", "resetchannels"}, []string{"hold_store"}},
		{"no hold keys", []string{"~" + fleet.DefaultPrefix + "robots*", "~" + fleet.DefaultPrefix + "pace*", "&" + holdsChannel}, []string{"hold_load", "hold_store"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startRedis(t)
			acl := append([]any{"ACL", "SETUSER", "gate"}, toAny(base)...)
			if err := srv.Raw(0).Do(t.Context(), append(acl, toAny(tt.acl)...)...).Err(); err != nil {
				t.Fatal(err)
			}
			c, logs := newClient(t, srv, fleet.Options{URL: "redis://gate:pw@" + srv.Addr(), Timeout: testTimeout, RetryEvery: testRetryEvery})
			messages := map[string]bool{}
			const rounds = 3
			for round := range rounds {
				for op, err := range everyOp(t.Context(), c) {
					if !slices.Contains(tt.refused, op) {
						if err != nil {
							t.Errorf("round %d: %s: %v; want it done", round, op, err)
						}
						continue
					}
					rerr, ok := errors.AsType[redis.Error](err)
					if !ok || errors.Is(err, fleet.ErrUnavailable) {
						t.Errorf("round %d: %s = %v; want Redis refusing it", round, op, err)
						continue
					}
					messages[rerr.Error()] = true
				}
				if st := c.Status(); !st.Up {
					t.Fatalf("round %d: Status = %+v; want up", round, st)
				}
			}
			ops := operations(t, c)
			for _, op := range tt.refused {
				if ops[op+"/error"] != rounds || ops[op+"/skipped"] != 0 {
					t.Errorf("%s: %v errors, %v skipped; want %d errors, none skipped", op, ops[op+"/error"], ops[op+"/skipped"], rounds)
				}
			}
			if changes := counters(t, c, "robotsgate_redis_state_changes_total")[""]; changes != 0 {
				t.Errorf("robotsgate_redis_state_changes_total = %v; want 0", changes)
			}
			var warned []string
			for _, line := range logs.lines("WARN") {
				if strings.Contains(line, "redis refuses robotsgate's user an operation") {
					warned = append(warned, line)
				}
			}
			if len(warned) != len(messages) {
				t.Errorf("warnings of refused operations = %q; want one for each of %q", warned, slices.Collect(maps.Keys(messages)))
			}
			if strings.Contains(logs.String(), "redis unreachable") || strings.Contains(logs.String(), "reachable again") {
				t.Errorf("a refused operation was logged as Redis going away:\n%s", logs)
			}
		})
	}
}

func toAny(s []string) []any {
	a := make([]any, len(s))
	for i, v := range s {
		a[i] = v
	}
	return a
}
