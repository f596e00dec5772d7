package fetch

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"robotsgate/cache"
	"robotsgate/robots"
)

// TestSlotsClientAtShareWaits: a client holding its share waits for one of
// its own fetches to end, as long as it may, while another client takes a
// free slot at once.
func TestSlotsClientAtShareWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSlots(4, 2)
		for range 2 {
			if _, ok := s.take(t.Context(), "a", 0, nil); !ok {
				t.Fatal("a could not take a free slot within its share")
			}
		}
		start := time.Now()
		var line []int
		if held, ok := s.take(t.Context(), "a", time.Second, func(held, waiting int) { line = []int{held, waiting} }); ok || held != 2 || time.Since(start) != time.Second {
			t.Errorf("a beyond its share: took %v, held %d, after %s; want to wait 1s in vain, holding 2", ok, held, time.Since(start))
		}
		if len(line) != 2 || line[0] != 2 || line[1] != 1 {
			t.Errorf("joining the line was told %v, want 2 held, 1 waiting", line)
		}
		if _, ok := s.take(t.Context(), "b", 0, nil); !ok {
			t.Error("b could not take a free slot while a was at its share")
		}

		done := make(chan bool, 1)
		go func() {
			_, ok := s.take(t.Context(), "a", time.Hour, nil)
			done <- ok
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("a took a slot beyond its share")
		default:
		}
		s.put("a")
		if !<-done {
			t.Error("a's waiting fetch did not get the slot its own fetch gave back")
		}
	})
}

// TestSlotsFewestHeldFirst: a slot that frees goes to the waiting client
// that holds the fewest, the one that came first among equals.
func TestSlotsFewestHeldFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSlots(4, 4)
		for _, client := range []string{"a", "a", "a", "b"} {
			if _, ok := s.take(t.Context(), client, 0, nil); !ok {
				t.Fatalf("%s could not take a free slot", client)
			}
		}
		granted := make(chan string, 8)
		for _, w := range []string{"a1", "c1", "b1", "c2", "d1"} {
			go func() {
				if _, ok := s.take(t.Context(), w[:1], time.Hour, nil); ok {
					granted <- w
				}
			}()
			synctest.Wait() // in line before the next
		}
		for _, step := range []struct {
			put, want string
		}{
			{"a", "c1"}, // a holds 2, b 1, c and d 0: c came first
			{"b", "b1"}, // b holds 0 now, as d does, and came first
			{"a", "d1"}, // a and c hold 1, d 0
			{"c", "c2"}, // c holds 0, a 1
			{"b", "a1"},
		} {
			s.put(step.put)
			synctest.Wait()
			select {
			case got := <-granted:
				if got != step.want {
					t.Errorf("after %s gave a slot back, %s got it; want %s", step.put, got, step.want)
				}
			default:
				t.Errorf("after %s gave a slot back, no one got it; want %s", step.put, step.want)
			}
		}
		if len(granted) != 0 {
			t.Errorf("%d more slots given than were freed", len(granted))
		}
	})
}

// TestSlotsWaiterGivesUp: a fetch that stops waiting leaves the line, and
// the slot goes to the next in it; none is lost or counted twice.
func TestSlotsWaiterGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSlots(1, 1)
		s.take(t.Context(), "a", 0, nil)
		gaveUp := make(chan bool, 1)
		go func() {
			_, ok := s.take(t.Context(), "b", time.Second, nil)
			gaveUp <- !ok
		}()
		cancelled, cancel := context.WithCancel(t.Context())
		go func() {
			_, ok := s.take(cancelled, "d", time.Hour, nil)
			gaveUp <- !ok
		}()
		synctest.Wait()
		got := make(chan bool, 1)
		go func() {
			_, ok := s.take(t.Context(), "c", time.Hour, nil)
			got <- ok
		}()
		synctest.Wait()
		cancel()
		time.Sleep(time.Second)
		if !<-gaveUp || !<-gaveUp {
			t.Fatal("a waiting fetch did not give up at the end of its wait or context")
		}
		s.put("a")
		if !<-got {
			t.Fatal("the slot was not given to the fetch still waiting")
		}
		s.put("c")
		if _, ok := s.take(t.Context(), "e", 0, nil); !ok {
			t.Error("no slot free once every fetch ended")
		}
	})
}

func TestPerClientDefault(t *testing.T) {
	for _, c := range []struct {
		max, perClient, want int
	}{
		{0, 0, DefaultMaxConcurrent / 4},
		{8, 0, 2},
		{2, 0, 1},
		{8, 3, 3},
		{4, 10, 4},
	} {
		got := New(Options{MaxConcurrent: c.max, MaxPerClient: c.perClient}).Options().MaxPerClient
		if got != c.want {
			t.Errorf("MaxConcurrent %d, MaxPerClient %d: works with %d per client, want %d", c.max, c.perClient, got, c.want)
		}
	}
}

func TestSlotErrorMessage(t *testing.T) {
	for _, c := range []struct {
		err  SlotError
		want string
	}{
		{SlotError{Origin: "https://a.example", Held: 2, PerClient: 2, MaxConcurrent: 8, Waited: 5 * time.Second},
			"robots.txt fetch of https://a.example: no free fetch slot within 5s: the client has its share of fetches under way (2)"},
		{SlotError{Origin: "https://a.example", Held: 1, PerClient: 2, MaxConcurrent: 8, Waited: 1500 * time.Millisecond},
			"robots.txt fetch of https://a.example: no free fetch slot within 1.5s: all 8 are in use"},
		{SlotError{Origin: "https://a.example", Held: 0, PerClient: 1, MaxConcurrent: 8, Waited: time.Second},
			"robots.txt fetch of https://a.example: no free fetch slot within 1s: all 8 are in use"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}

// TestFetchPerClientShare: through real origins, a client whose share is
// taken by a robots.txt that hangs gets no more slots (its fetch ends
// with a SlotError, not as the origin's failure), while another client
// fetches at once.
func TestFetchPerClientShare(t *testing.T) {
	arrived := make(chan struct{}, 1)
	hangs := serve(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	ok := serveBody(t, http.StatusOK, testRules)
	f := newTestFetcher(t, Options{MaxConcurrent: 4, MaxPerClient: 1, Timeout: 10 * time.Second})
	hostile := &ClientContext{Context: t.Context(), Client: "hostile"}
	done := make(chan *Result, 1)
	go func() { done <- f.Fetch(hostile, hangs.URL) }()
	<-arrived

	short, cancel := context.WithTimeout(hostile, 200*time.Millisecond)
	defer cancel()
	res, timing := f.FetchTimed(short, ok.URL)
	wantOutcome(t, res, robots.OutcomeUnreachable, "robots.txt not fetched: no free fetch slot")
	slotErr, isSlot := errors.AsType[*SlotError](res.Err)
	if !isSlot || slotErr.Held != 1 || slotErr.PerClient != 1 || slotErr.MaxConcurrent != 4 || slotErr.Origin != ok.URL || slotErr.Timeout != 10*time.Second {
		t.Errorf("err %#v, want a SlotError: 1 held of a share of 1", res.Err)
	}
	if timing.Duration < 200*time.Millisecond || timing.Duration > 5*time.Second {
		t.Errorf("gave up after %s, want the caller's 200ms deadline", timing.Duration)
	}

	healthy := &ClientContext{Context: t.Context(), Client: "healthy"}
	wantOutcome(t, f.Fetch(healthy, ok.URL), robots.OutcomeOK, "")
	hangs.CloseClientConnections()
	<-done
}

// TestLoadDiscardsNoSlot: a fetch that got no slot is discarded, never
// cached or shared: the cache hands it to its Get, and the next Get,
// once a slot is free, fetches the file. The client reaches the fetcher
// through the cache's Get.
func TestLoadDiscardsNoSlot(t *testing.T) {
	srv := serveBody(t, http.StatusOK, testRules)
	f := newTestFetcher(t, Options{MaxConcurrent: 2, MaxPerClient: 1, Timeout: 100 * time.Millisecond, Share: true})
	f.slots.take(t.Context(), "busy", 0, nil)

	r := f.Load(&ClientContext{Context: t.Context(), Client: "busy"}, srv.URL)
	if !r.Discard || r.Failed || r.Shared != nil || r.Outcome != "no_slot" {
		t.Errorf("Load with no slot: Discard %v, Failed %v, Shared %v, Outcome %q; want discarded, no_slot, not shared",
			r.Discard, r.Failed, r.Shared != nil, r.Outcome)
	}

	c, err := cache.New(cache.DefaultOptions(), f.Load)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, info, err := c.Get(&ClientContext{Context: t.Context(), Client: "busy"}, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, isSlot := errors.AsType[*SlotError](res.Err); !isSlot || info.Failed {
		t.Errorf("Get with the client's share taken: %v (err %v), Info %+v; want a SlotError, not a failure", res.Outcome, res.Err, info)
	}
	f.slots.put("busy")
	res, info, err = c.Get(&ClientContext{Context: t.Context(), Client: "busy"}, srv.URL)
	if err != nil || res.Outcome != robots.OutcomeOK || info.Source != cache.SourceLoaded {
		t.Errorf("Get once a slot is free: %v %q from %v (%v); want ok, loaded", res.Outcome, res.Detail, info.Source, err)
	}
	if s := c.Stats(); s.Loads["no_slot"] != 1 || s.FailedLoads != 0 {
		t.Errorf("cache stats %+v, want one no_slot load, none failed", s)
	}
}

func TestClientContext(t *testing.T) {
	type other struct{}
	parent := context.WithValue(t.Context(), other{}, "kept")
	ctx := &ClientContext{Context: parent, Client: "crawler"}
	detached := context.WithoutCancel(ctx) // as the cache runs its loads
	if got := clientOf(detached); got != "crawler" {
		t.Errorf("client %q, want crawler", got)
	}
	if got := detached.Value(other{}); got != "kept" {
		t.Errorf("the parent's value is %v, want kept", got)
	}
	if got := clientOf(t.Context()); got != "" {
		t.Errorf("client of a context naming none: %q", got)
	}
}
