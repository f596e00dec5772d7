package pace

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// Two clients, as the proxy names them: an address with its ':'.
const (
	hostile = "198.51.100.7:"
	other   = "203.0.113.9:"
)

// inShard returns n identities of client whose schedules at origin fall in
// shard: the tokens prefix0, prefix1... that land there.
func inShard(p *Pacer, origin string, shard uint64, client, prefix string, n int) []Identity {
	var ids []Identity
	for i := 0; len(ids) < n; i++ {
		who := Identity{Token: fmt.Sprint(prefix, i), Client: client}
		if p.scheduleKey(origin, &who)%shardCount == shard {
			ids = append(ids, who)
		}
	}
	return ids
}

// as is who, its request sent by client.
func as(who Identity, client string) Identity {
	who.Client = client
	return who
}

// TestClientShare: a client at its share of a shard is refused a new
// schedule there, saying so, while another client gets one in the same
// shard; the identities it holds are paced as usual, and so is one it
// asks for whose schedule another client holds.
func TestClientShare(t *testing.T) {
	for _, mode := range []Mode{ModeEnforce, ModeAudit} {
		t.Run(string(mode), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Two schedules of each client per shard.
				p := New(Options{Mode: mode, MaxSchedulesPerClient: 2 * shardCount})
				ctx := context.Background()
				d := delay(time.Minute)
				ids := inShard(p, origin, 5, hostile, "bot", 4)
				for _, who := range ids[:2] {
					if a := p.Admit(ctx, origin, origin, who, d); a.Outcome != OnTime {
						t.Fatalf("%s within its share: %v", who.Token, a.Outcome)
					}
				}
				a := p.Admit(ctx, origin, origin, ids[2], d)
				if a.Outcome != Full || !a.ClientShare || a.RetryAfter != time.Second || a.Allowed() != (mode == ModeAudit) {
					t.Fatalf("past its share: %v, client's share %v, retry after %v, allowed %v; want full by the client's share, 1s",
						a.Outcome, a.ClientShare, a.RetryAfter, a.Allowed())
				}
				if a := p.Admit(ctx, origin, origin, as(ids[2], other), d); a.Outcome != OnTime {
					t.Fatalf("another client, same identity, same shard: %v", a.Outcome)
				}
				if a := p.Admit(ctx, origin, origin, as(ids[3], other), d); a.Outcome != OnTime {
					t.Fatalf("another client, its second schedule in the shard: %v", a.Outcome)
				}
				// Not new: paced as usual, whoever started them.
				for _, who := range []Identity{ids[0], ids[2], as(ids[0], other)} {
					if a := p.Admit(ctx, origin, origin, who, d); a.Outcome != TooEarly || a.ClientShare {
						t.Errorf("%s from %s, its schedule held: %v, client's share %v; want too early",
							who.Token, who.Client, a.Outcome, a.ClientShare)
					}
				}
				if n, _ := counter(t, p, "robotsgate_pace_client_share_full_total"); n != 1 {
					t.Errorf("robotsgate_pace_client_share_full_total %v, want 1", n)
				}
				if n, _ := counter(t, p, "robotsgate_pace_schedules_full_total"); n != 0 {
					t.Errorf("robotsgate_pace_schedules_full_total %v, want 0: the table is not full", n)
				}
			})
		})
	}
}

// TestClientShareBound: a client naming itself anew on every request holds
// its share of the table, all of it, and no more; other clients are not
// refused a schedule.
func TestClientShareBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const share = 3 * shardCount
		p := New(Options{MaxSchedulesPerClient: share})
		ctx := context.Background()
		d := delay(time.Minute)
		held, refused := 0, 0
		for i := range 10_000 {
			switch a := p.Admit(ctx, origin, origin, Identity{Token: fmt.Sprint("rotating", i), Client: hostile}, d); a.Outcome {
			case OnTime:
				held++
			case Full:
				refused++
			default:
				t.Fatalf("rotating token %d: %v", i, a.Outcome)
			}
		}
		// 10,000 names fill each sixty-fourth of the share but for a chance
		// of about 64·10⁴·e⁻¹⁵⁶.
		if held != share || refused != 10_000-share {
			t.Errorf("%d schedules, %d refused; want the share, %d, and the rest", held, refused, share)
		}
		for i := range 1000 {
			who := Identity{Token: fmt.Sprint("crawler", i), Client: fmt.Sprintf("203.0.113.%d:", i)}
			if a := p.Admit(ctx, origin, origin, who, d); a.Outcome != OnTime {
				t.Fatalf("another client, %s: %v", who.Client, a.Outcome)
			}
		}
		if n := p.Schedules(); n != share+1000 {
			t.Errorf("%d schedules, want %d", n, share+1000)
		}
	})
}

// TestClientShareReleased: a client's charge goes with the schedule it
// created: when the schedule is swept once its time passed (within
// shareSweep of that, at its share), and when the request gives its start
// back; not before, whoever keeps the schedule going.
func TestClientShareReleased(t *testing.T) {
	ctx := context.Background()
	// One schedule of each client per shard.
	opts := Options{MaxSchedulesPerClient: shardCount}

	t.Run("swept", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := New(opts)
			ids := inShard(p, origin, 9, hostile, "bot", 4)
			p.Admit(ctx, origin, origin, ids[0], delay(time.Second))
			if a := p.Admit(ctx, origin, origin, ids[1], delay(time.Second)); a.Outcome != Full || !a.ClientShare {
				t.Fatalf("at its share: %v", a.Outcome)
			}
			time.Sleep(time.Second)
			if a := p.Admit(ctx, origin, origin, ids[1], delay(10*time.Millisecond)); a.Outcome != OnTime {
				t.Fatalf("once its schedule passed: %v", a.Outcome)
			}
			if n := p.Schedules(); n != 1 {
				t.Errorf("%d schedules, want the one", n)
			}
			// Swept a moment ago: the one that passed since waits its turn.
			time.Sleep(20 * time.Millisecond)
			if a := p.Admit(ctx, origin, origin, ids[2], delay(time.Second)); a.Outcome != Full || !a.ClientShare {
				t.Fatalf("20ms after a sweep: %v; want full until a second after it", a.Outcome)
			}
			time.Sleep(980 * time.Millisecond)
			if a := p.Admit(ctx, origin, origin, ids[2], delay(time.Second)); a.Outcome != OnTime {
				t.Fatalf("a second after the sweep: %v", a.Outcome)
			}
		})
	})

	t.Run("given back", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Two schedules of each client per shard; the connection
			// bound refuses the hostile client's request to origin.
			p := New(Options{MaxSchedulesPerClient: 2 * shardCount, MaxConnsPerOrigin: 1})
			const elsewhere = "https://elsewhere.example"
			first := p.Admit(ctx, origin, origin, Identity{Token: "bingbot", Client: other}, Delay{})
			defer first.Done()
			xs := inShard(p, elsewhere, 9, hostile, "bot", 3)
			y := inShard(p, origin, 9, hostile, "bot", 1)[0]
			admit := func(origin string, who Identity, want Outcome) Admission {
				t.Helper()
				a := p.Admit(ctx, origin, origin, who, delay(time.Minute))
				if a.Outcome != want {
					t.Fatalf("%s at %s: %q, want %q", who.Token, origin, a.Outcome, want)
				}
				a.Done()
				return a
			}
			undone := admit(elsewhere, xs[0], OnTime)
			admit(elsewhere, xs[1], OnTime)
			// The sweep this makes frees nothing, and none comes for a
			// second: only a charge released at once makes room.
			admit(elsewhere, xs[2], Full)
			undone.Undo()
			// Refused at the connection bound, not at its share: the start
			// is given back, its charge with it.
			admit(origin, y, Busy)
			admit(elsewhere, xs[2], OnTime)
		})
	})

	t.Run("gone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := New(Options{Mode: ModeWait, MaxWait: time.Minute, MaxSchedulesPerClient: shardCount})
			ids := inShard(p, origin, 9, hostile, "bot", 2)
			p.Admit(ctx, origin, origin, ids[0], delay(time.Second))
			// Queued at 1s behind its own start, it hangs up at 0.5s: its
			// start is given back, and the schedule stays the client's.
			held, hangUp := context.WithCancel(ctx)
			gone := make(chan Outcome)
			go func() { gone <- p.Admit(held, origin, origin, ids[0], delay(time.Second)).Outcome }()
			synctest.Wait()
			time.Sleep(500 * time.Millisecond)
			hangUp()
			if o := <-gone; o != Gone {
				t.Fatalf("hung up: %v", o)
			}
			if a := p.Admit(ctx, origin, origin, ids[1], delay(time.Second)); a.Outcome != Full {
				t.Fatalf("while its first schedule holds: %v", a.Outcome)
			}
			// That swept the shard; the next sweep for the client is a
			// second later.
			time.Sleep(time.Second)
			if a := p.Admit(ctx, origin, origin, ids[1], delay(time.Second)); a.Outcome != OnTime {
				t.Fatalf("once it passed: %v", a.Outcome)
			}
		})
	})

	t.Run("kept by another client", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := New(opts)
			ids := inShard(p, origin, 9, hostile, "bot", 3)
			p.Admit(ctx, origin, origin, ids[0], delay(time.Second))
			time.Sleep(time.Second)
			// Passed, not swept: the one schedule, its creator's still.
			if a := p.Admit(ctx, origin, origin, as(ids[0], other), delay(time.Second)); a.Outcome != OnTime {
				t.Fatalf("another client, once the schedule passed: %v", a.Outcome)
			}
			if a := p.Admit(ctx, origin, origin, ids[1], delay(time.Second)); a.Outcome != Full || !a.ClientShare {
				t.Fatalf("the client that created it, while it holds: %v", a.Outcome)
			}
			if a := p.Admit(ctx, origin, origin, as(ids[2], other), delay(time.Second)); a.Outcome != OnTime {
				t.Fatalf("the other client, charged for none: %v", a.Outcome)
			}
			time.Sleep(time.Second)
			if a := p.Admit(ctx, origin, origin, ids[1], delay(time.Second)); a.Outcome != OnTime {
				t.Fatalf("the client that created it, once it passed: %v", a.Outcome)
			}
		})
	})
}

// TestClientShareShared: with Shared schedules, a client's share bounds
// the starts this Pacer records, and refuses only while the Shared
// schedules fail.
func TestClientShareShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := newMemSchedules()
		p := New(Options{Shared: shared, MaxSchedulesPerClient: shardCount})
		ctx := context.Background()
		ids := inShard(p, origin, 9, hostile, "bot", 3)
		for _, who := range ids[:2] {
			if a := p.Admit(ctx, origin, origin, who, delay(time.Minute)); a.Outcome != OnTime {
				t.Fatalf("%s, Shared: %v", who.Token, a.Outcome)
			}
		}
		if n := p.Schedules(); n != 1 {
			t.Errorf("%d schedules kept here, want its share, 1", n)
		}
		shared.setFailing(true)
		if a := p.Admit(ctx, origin, origin, ids[2], delay(time.Minute)); a.Outcome != Full || !a.ClientShare {
			t.Errorf("a new identity past its share while Shared fails: %v", a.Outcome)
		}
		if a := p.Admit(ctx, origin, origin, as(ids[2], other), delay(time.Minute)); a.Outcome != OnTime {
			t.Errorf("another client while Shared fails: %v", a.Outcome)
		}
	})
}

func TestClientShareDefault(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want int
	}{
		{Options{}, DefaultMaxSchedules / 16},
		{Options{MaxSchedules: 1 << 16}, 1 << 12},
		{Options{MaxSchedulesPerClient: 1000}, 1000},
		{Options{MaxSchedules: 1 << 16, MaxSchedulesPerClient: 1 << 20}, 1 << 16},
	} {
		if got := New(c.opts).MaxSchedulesPerClient(); got != c.want {
			t.Errorf("%+v: %d, want %d", c.opts, got, c.want)
		}
	}
}
