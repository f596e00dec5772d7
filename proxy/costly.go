package proxy

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"robotsgate/robots"
)

// costlyDecision is the estimated work (robots.Judgement.Cost) above which
// a decision goes through the costlyGate: about half a millisecond of CPU,
// hundreds of times what an ordinary decision costs.
const costlyDecision = robots.MaxDecisionCost / 20

// maxCostlyWait bounds how long a costly decision waits for its turn.
const maxCostlyWait = 10 * time.Second

// errCostlyWait ends a costly decision that found no turn in time.
var errCostlyWait = errors.New("no turn for a costly decision within 10s")

// costlyGate keeps costly decisions from crowding out everyone else's
// requests: each client (shareKey) runs at most one at a time, and all
// clients together at most half the CPUs, so that a client sending paths
// that are dear to judge spends its own time, not the others'.
type costlyGate struct {
	running chan struct{} // a token per costly decision under way

	mu      sync.Mutex
	clients map[string]*costlyTurn
}

// costlyTurn is one client's line: turn holds a token while one of its
// costly decisions runs; refs counts those running or waiting.
type costlyTurn struct {
	turn chan struct{}
	refs int
}

func newCostlyGate() *costlyGate {
	return &costlyGate{
		running: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)),
		clients: make(map[string]*costlyTurn),
	}
}

// enter waits for the client's turn, then for room among the costly
// decisions under way, until ctx ends or maxCostlyWait has passed. It
// returns the function that leaves, to be called once the decision is
// made.
func (g *costlyGate) enter(ctx context.Context, client string) (leave func(), err error) {
	g.mu.Lock()
	t := g.clients[client]
	if t == nil {
		t = &costlyTurn{turn: make(chan struct{}, 1)}
		g.clients[client] = t
	}
	t.refs++
	g.mu.Unlock()

	timer := time.NewTimer(maxCostlyWait)
	defer timer.Stop()
	select {
	case t.turn <- struct{}{}:
	case <-ctx.Done():
		g.release(client, t)
		return nil, ctx.Err()
	case <-timer.C:
		g.release(client, t)
		return nil, errCostlyWait
	}
	select {
	case g.running <- struct{}{}:
	case <-ctx.Done():
		<-t.turn
		g.release(client, t)
		return nil, ctx.Err()
	case <-timer.C:
		<-t.turn
		g.release(client, t)
		return nil, errCostlyWait
	}
	return func() {
		<-g.running
		<-t.turn
		g.release(client, t)
	}, nil
}

// release drops one reference to the client's line, and the line with
// the last.
func (g *costlyGate) release(client string, t *costlyTurn) {
	g.mu.Lock()
	if t.refs--; t.refs == 0 {
		delete(g.clients, client)
	}
	g.mu.Unlock()
}
