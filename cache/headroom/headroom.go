// Package headroom gives Go's garbage collector room in proportion to the
// heap that churns, not to a cache that stays.
//
// The collector lets the heap grow by GOGC percent of what it found live
// before it runs again: with the default 100 a process keeps up to as
// much garbage as it has live data. For a proxy whose live heap is mostly
// a cache of parsed files that change once a day, that doubles the
// resident memory of every cached file for garbage the cache never makes.
// Run lowers GOGC after each collection so that the room for garbage is
// what the rest of the heap (connections, requests, parsing) has live,
// at least Floor and at least MinPercent of the whole: a small heap keeps
// Go's default, a heap that is mostly cache gets a fraction of it.
package headroom

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Defaults of [Options].
const (
	// DefaultFloor is the least room for garbage: a busy proxy allocates
	// tens of megabytes a second, and less room would only make the
	// collector run more often.
	DefaultFloor = 64 << 20
	// DefaultMinPercent bounds the collector's work: it runs at most once
	// per quarter of the live heap allocated, however large the cache.
	DefaultMinPercent = 25
	// DefaultInterval is how often Run looks for a finished collection.
	DefaultInterval = 100 * time.Millisecond
)

// maxPercent is Go's default GOGC: Run never gives more room than that.
const maxPercent = 100

// Options configures Run.
type Options struct {
	// Static reports the bytes of the live heap that stay (a cache's
	// charge). It is called after each collection, so it must be cheap.
	Static func() int64
	// Floor is the least room for garbage; zero or less: DefaultFloor.
	Floor int64
	// MinPercent is the least GOGC; zero or less: DefaultMinPercent.
	MinPercent int
	// Interval is how often to look for a finished collection; zero or
	// less: DefaultInterval.
	Interval time.Duration
	// OnChange, when set, is told each GOGC Run sets.
	OnChange func(percent int)
	// Logger gets a debug line per change; nil logs nothing.
	Logger *slog.Logger
}

// Heap is what the last collection found, in bytes.
type Heap struct {
	// Live is the heap marked live; Stacks and Globals the roots the
	// collector scanned, which GOGC's room is a percentage of too.
	Live, Stacks, Globals int64
	// Static is the part of Live that stays (see Options.Static).
	Static int64
}

// Percent is the GOGC that gives h room for garbage equal to the heap
// outside Static (with the stacks and globals), at least floor and at
// least minPercent of what GOGC counts, and never more than Go's
// default, 100.
func Percent(h Heap, floor int64, minPercent int) int {
	base := h.Live + h.Stacks + h.Globals
	if base <= 0 {
		return maxPercent
	}
	static := min(max(h.Static, 0), h.Live)
	room := max(base-static, floor, base*int64(minPercent)/100)
	// Rounded up: the room is never less than asked.
	percent := (room*100 + base - 1) / base
	return int(min(max(percent, int64(minPercent)), maxPercent))
}

// Run sets GOGC after each collection, as Percent says, until ctx ends;
// it then gives GOGC back the value it had. Only one Run may work in a
// process at a time, and nothing else may set GOGC meanwhile: a process
// whose operator set GOGC or GOMEMLIMIT should not call it.
func Run(ctx context.Context, o Options) {
	floor, minPercent, interval := o.Floor, o.MinPercent, o.Interval
	if floor <= 0 {
		floor = DefaultFloor
	}
	if minPercent <= 0 {
		minPercent = DefaultMinPercent
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	samples := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}
	initial := debug.SetGCPercent(maxPercent)
	defer debug.SetGCPercent(initial)
	current := maxPercent
	var cycles uint64
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		metrics.Read(samples)
		if samples[0].Value.Uint64() == cycles {
			continue // no collection since the last look: nothing new
		}
		cycles = samples[0].Value.Uint64()
		h := Heap{
			Live:    int64(samples[1].Value.Uint64()),
			Stacks:  int64(samples[2].Value.Uint64()),
			Globals: int64(samples[3].Value.Uint64()),
			Static:  o.Static(),
		}
		percent := Percent(h, floor, minPercent)
		if percent == current {
			continue
		}
		debug.SetGCPercent(percent)
		current = percent
		if o.Logger != nil {
			o.Logger.Debug("collector headroom", "gogc", percent, "live", h.Live, "static", h.Static)
		}
		if o.OnChange != nil {
			o.OnChange(percent)
		}
	}
}
