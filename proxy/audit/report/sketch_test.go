package report

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// entries are a sketch's top n as values, for comparing.
func entries(s *sketch[string], n int) []sketchEntry[string] {
	var out []sketchEntry[string]
	for _, e := range s.top(n, strings.Compare) {
		out = append(out, sketchEntry[string]{key: e.key, count: e.count, overcount: e.overcount})
	}
	return out
}

// checkHeap verifies the sketch's own bookkeeping: every entry indexed,
// at its place, the least counted first.
func checkHeap(t *testing.T, s *sketch[string]) {
	t.Helper()
	if len(s.heap) > s.capacity || len(s.index) != len(s.heap) {
		t.Fatalf("%d entries, %d indexed, capacity %d", len(s.heap), len(s.index), s.capacity)
	}
	for i, e := range s.heap {
		if e.at != i || s.index[e.key] != e {
			t.Fatalf("entry %q at %d says %d", e.key, i, e.at)
		}
		if i > 0 && s.heap[(i-1)/2].count > e.count {
			t.Fatalf("entry %d counts less than its parent", i)
		}
	}
}

func TestSketchExactWithinCapacity(t *testing.T) {
	s := newSketch[string](8)
	want := map[string]int64{}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		key := fmt.Sprintf("k%d", rng.IntN(8)*rng.IntN(8)%8) // uneven counts
		s.add(key)
		want[key]++
	}
	checkHeap(t, s)
	if overcounted(s) {
		t.Error("an overcount with no more keys than its capacity")
	}
	got := map[string]int64{}
	for _, e := range entries(s, 8) {
		got[e.key] = e.count
		if e.overcount != 0 {
			t.Errorf("%q overcount %d", e.key, e.overcount)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("counts %v, want %v", got, want)
	}
}

// Space-Saving's guarantees, on a stream of a few heavy keys among many
// that come once or twice: every key counted more than total/capacity
// times is kept, and every count is within its overcount of the truth.
func TestSketchHeavyKeysSurvive(t *testing.T) {
	const capacity = 64
	s := newSketch[string](capacity)
	truth := map[string]int64{}
	rng := rand.New(rand.NewPCG(3, 4))
	heavy := []string{"/a", "/b", "/c", "/d", "/e"}
	var total int64
	for i := range 50_000 {
		var key string
		switch r := rng.IntN(10); {
		case r < len(heavy): // half the stream, 10% each
			key = heavy[r]
		case r == 9:
			key = fmt.Sprintf("/rare/%d", rng.IntN(100)) // comes back now and then
		default:
			key = fmt.Sprintf("/once/%d", i)
		}
		s.add(key)
		truth[key]++
		total++
	}
	checkHeap(t, s)
	if !overcounted(s) {
		t.Error("no overcount in a stream of more keys than its capacity")
	}
	var sum int64
	for _, e := range s.heap {
		sum += e.count
		if n := truth[e.key]; e.count-e.overcount > n || n > e.count {
			t.Errorf("%q: count %d, overcount %d, truth %d", e.key, e.count, e.overcount, n)
		}
	}
	if sum != total {
		t.Errorf("the counts add up to %d, the stream is %d long", sum, total)
	}
	for key, n := range truth {
		if _, kept := s.index[key]; n > total/capacity && !kept {
			t.Errorf("%q counted %d times (more than %d) was forgotten", key, n, total/capacity)
		}
	}
	var top []string
	for _, e := range s.top(len(heavy), strings.Compare) {
		top = append(top, e.key)
	}
	if got := strings.Join(top, " "); len(top) != len(heavy) || strings.Contains(got, "/once/") || strings.Contains(got, "/rare/") {
		t.Errorf("top %v, want the heavy keys", top)
	}
}

func TestSketchTop(t *testing.T) {
	s := newSketch[string](3)
	for _, key := range strings.Fields("b a c a b a") {
		s.add(key)
	}
	want := []sketchEntry[string]{{key: "a", count: 3}, {key: "b", count: 2}, {key: "c", count: 1}}
	if got := entries(s, 10); !reflect.DeepEqual(got, want) {
		t.Errorf("top(10) %+v, want %+v", got, want)
	}
	if got := entries(s, 2); !reflect.DeepEqual(got, want[:2]) {
		t.Errorf("top(2) %+v, want %+v", got, want[:2])
	}
	if got := entries(s, 0); len(got) != 0 {
		t.Errorf("top(0) %+v", got)
	}

	// Ties: the less overcounted first, then by key.
	s = newSketch[string](3)
	for _, key := range strings.Fields("z y x x y d") { // d replaces z, counted 2 over 1
		s.add(key)
	}
	want = []sketchEntry[string]{{key: "x", count: 2}, {key: "y", count: 2}, {key: "d", count: 2, overcount: 1}}
	if got := entries(s, 3); !reflect.DeepEqual(got, want) {
		t.Errorf("ties: %+v, want %+v", got, want)
	}
	checkHeap(t, s)
}

// overcounted says whether a key was ever replaced, leaving its successor
// an overcount.
func overcounted[K comparable](s *sketch[K]) bool {
	for _, e := range s.heap {
		if e.overcount > 0 {
			return true
		}
	}
	return false
}
