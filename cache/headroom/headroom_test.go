package headroom

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercent(t *testing.T) {
	for _, tt := range []struct {
		name string
		heap Heap
		want int
	}{
		{"no heap yet", Heap{}, 100},
		{"small heap: Go's default", Heap{Live: 20 * mib, Stacks: mib}, 100},
		{"small cache: the floor decides", Heap{Live: 200 * mib, Static: 150 * mib}, 32},
		{"churning heap beside the cache", Heap{Live: 600 * mib, Static: 300 * mib}, 50},
		{"mostly cache: the least percent", Heap{Live: 4096 * mib, Static: 4000 * mib, Stacks: 10 * mib}, 25},
		{"stacks and globals count as churning", Heap{Live: 400 * mib, Static: 400 * mib, Stacks: 80 * mib, Globals: 20 * mib}, 25},
		{"a charge above the live heap counts as the live heap", Heap{Live: 300 * mib, Static: 900 * mib}, 25},
		{"a negative charge counts as none", Heap{Live: 300 * mib, Static: -1}, 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percent(tt.heap, DefaultFloor, DefaultMinPercent); got != tt.want {
				t.Errorf("Percent(%+v) = %d, want %d", tt.heap, got, tt.want)
			}
		})
	}
}

// TestPercentGivesTheRoomAsked: the room GOGC gives is never less than the
// heap outside the cache, the floor and the least percent, whatever the
// sizes, unless Go's default gives less.
func TestPercentGivesTheRoomAsked(t *testing.T) {
	for live := int64(mib); live < 64<<30; live = live*3 + 7 {
		for _, share := range []int64{0, 1, 50, 90, 99, 100} {
			h := Heap{Live: live, Static: live * share / 100, Stacks: 2 * mib}
			p := Percent(h, DefaultFloor, DefaultMinPercent)
			base := h.Live + h.Stacks
			room := base * int64(p) / 100
			want := max(base-h.Static, DefaultFloor, base*DefaultMinPercent/100)
			if p < DefaultMinPercent || p > 100 || p < 100 && room < want-base/100 {
				t.Errorf("%+v: GOGC %d gives %d bytes of room, want %d", h, p, room, want)
			}
		}
	}
}

// TestRun: with most of the live heap a cache, Run lowers GOGC after the
// next collection, and gives the old value back when its context ends.
func TestRun(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(80))
	cache := make([]byte, 512*mib) // pointer-free: nothing for the collector to scan
	ctx, cancel := context.WithCancel(context.Background())
	changes := make(chan int, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Options{
			Static:   func() int64 { return int64(len(cache)) },
			Interval: time.Millisecond,
			OnChange: func(p int) { changes <- p },
		})
	}()
	deadline := time.After(10 * time.Second)
	var got int
wait:
	for {
		runtime.GC()
		select {
		case got = <-changes:
			if got < 100 {
				break wait
			}
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatal("GOGC not lowered within 10s of collections")
		}
	}
	if got < DefaultMinPercent || got > 30 {
		t.Errorf("GOGC %d with 512 MiB of a live heap of about 512 MiB cached; want about %d (the 64 MiB floor)", got, 64*100/512)
	}
	if now := gogc(); now != got {
		t.Errorf("GOGC in force is %d, Run said %d", now, got)
	}
	cancel()
	<-done
	if now := gogc(); now != 80 {
		t.Errorf("GOGC after Run is %d, want the 80 it found", now)
	}
	runtime.KeepAlive(cache)
}

func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}
