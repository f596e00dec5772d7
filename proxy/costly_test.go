package proxy

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// TestCostlyGate: a client runs one costly decision at a time, all clients
// together at most half the CPUs; a wait ends with the client or after
// maxCostlyWait, and leaves nothing behind.
func TestCostlyGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newCostlyGate()
		slots := cap(g.running)
		if want := max(1, runtime.GOMAXPROCS(0)/2); slots != want {
			t.Fatalf("%d costly decisions at once, want %d", slots, want)
		}
		ctx := t.Context()
		leaveA, err := g.enter(ctx, "a:")
		if err != nil {
			t.Fatal(err)
		}

		// A second decision of the same client waits for the first.
		second := make(chan error, 1)
		go func() {
			leave, err := g.enter(ctx, "a:")
			if err == nil {
				leave()
			}
			second <- err
		}()
		synctest.Wait()
		select {
		case err := <-second:
			t.Fatalf("a client's second costly decision ran beside its first (err %v)", err)
		default:
		}

		// Other clients fill the remaining slots, then wait too.
		var leaves []func()
		for i := 1; i < slots; i++ {
			leave, err := g.enter(ctx, string(rune('b'+i))+":")
			if err != nil {
				t.Fatal(err)
			}
			leaves = append(leaves, leave)
		}
		waitCtx, cancel := context.WithCancel(ctx)
		third := make(chan error, 1)
		go func() {
			_, err := g.enter(waitCtx, "z:")
			third <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-third; !errors.Is(err, context.Canceled) {
			t.Errorf("a wait whose client left ended with %v, want context.Canceled", err)
		}

		leaveA()
		if err := <-second; err != nil {
			t.Errorf("the client's second decision, once the first was done: %v", err)
		}
		for _, leave := range leaves {
			leave()
		}

		// A decision that waits too long gives up after maxCostlyWait.
		leaveA, _ = g.enter(ctx, "a:")
		start := time.Now()
		if _, err := g.enter(ctx, "a:"); !errors.Is(err, errCostlyWait) || time.Since(start) != maxCostlyWait {
			t.Errorf("a wait past its bound ended with %v after %v, want errCostlyWait after %v", err, time.Since(start), maxCostlyWait)
		}
		leaveA()
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.clients) != 0 || len(g.running) != 0 {
			t.Errorf("after every decision left: %d clients, %d running", len(g.clients), len(g.running))
		}
	})
}
