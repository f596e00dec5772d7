package report

import (
	"cmp"
	"container/heap"
	"slices"
)

// sketch counts the most frequent keys of a stream in bounded memory: the
// Space-Saving algorithm (Metwally, Agrawal, El Abbadi, 2005). It keeps at
// most capacity keys; a new key past that takes the place of the least
// counted one and inherits its count, remembered as the overcount bound.
// Every key counted more than total/capacity times is kept, and counts
// are exact until a key is first forgotten.
type sketch[K comparable] struct {
	capacity int
	index    map[K]*sketchEntry[K]
	heap     sketchHeap[K] // least counted first
}

type sketchEntry[K comparable] struct {
	key       K
	count     int64
	overcount int64
	at        int // position in the heap
}

func newSketch[K comparable](capacity int) *sketch[K] {
	return &sketch[K]{capacity: capacity, index: make(map[K]*sketchEntry[K])}
}

// add counts key once.
func (s *sketch[K]) add(key K) {
	if e, ok := s.index[key]; ok {
		e.count++
		heap.Fix(&s.heap, e.at)
		return
	}
	if len(s.heap) < s.capacity {
		e := &sketchEntry[K]{key: key, count: 1}
		s.index[key] = e
		heap.Push(&s.heap, e)
		return
	}
	e := s.heap[0]
	delete(s.index, e.key)
	e.key, e.overcount = key, e.count
	e.count++
	s.index[key] = e
	heap.Fix(&s.heap, 0)
}

// top returns the n most counted keys, most first; ties go to less
// overcounted, then to less(a, b).
func (s *sketch[K]) top(n int, less func(a, b K) int) []*sketchEntry[K] {
	all := slices.Clone([]*sketchEntry[K](s.heap))
	slices.SortFunc(all, func(a, b *sketchEntry[K]) int {
		if c := cmp.Compare(b.count, a.count); c != 0 {
			return c
		}
		if c := cmp.Compare(a.overcount, b.overcount); c != 0 {
			return c
		}
		return less(a.key, b.key)
	})
	return all[:min(n, len(all))]
}

type sketchHeap[K comparable] []*sketchEntry[K]

func (h sketchHeap[K]) Len() int           { return len(h) }
func (h sketchHeap[K]) Less(i, j int) bool { return h[i].count < h[j].count }
func (h sketchHeap[K]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}
func (h *sketchHeap[K]) Push(x any) {
	e := x.(*sketchEntry[K])
	e.at = len(*h)
	*h = append(*h, e)
}
func (h *sketchHeap[K]) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
