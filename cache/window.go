package cache

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// admissionWindow is a small byte-bounded LRU for entries ristretto refused
// (see Cache.store). Only Gets that miss in ristretto consult it, so the hit
// path never takes its lock. Every such Get still reaches ristretto first,
// which records the access, so a key used from the window gains the
// frequency that gets it admitted when it is next reloaded.
type admissionWindow[V any] struct {
	mu       sync.Mutex
	maxBytes int64
	used     int64 // kept by the LRU's eviction callback, which every removal calls
	lru      *simplelru.LRU[string, *entry[V]]

	evictions, expirations atomic.Uint64
}

func newAdmissionWindow[V any](maxBytes int64) (*admissionWindow[V], error) {
	w := &admissionWindow[V]{maxBytes: maxBytes}
	// Bytes bound the window, not a count: put evicts to fit maxBytes, so
	// the LRU's own bound is set out of reach.
	lru, err := simplelru.NewLRU(math.MaxInt, func(key string, e *entry[V]) { w.used -= windowCost(key, e) })
	if err != nil {
		return nil, fmt.Errorf("admission window: %w", err)
	}
	w.lru = lru
	return w, nil
}

// get returns the entry for key, or nil if there is none or it is past its
// keepUntil (it is then dropped).
func (w *admissionWindow[V]) get(key string, now int64) *entry[V] {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.lru.Get(key)
	if !ok {
		return nil
	}
	if now >= e.keepUntil {
		w.lru.Remove(key)
		w.expirations.Add(1)
		return nil
	}
	return e
}

// put stores e for key, evicting the least recently used entries to make
// room. It reports false, storing nothing, when e alone exceeds the window.
func (w *admissionWindow[V]) put(key string, e *entry[V]) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Removed rather than replaced by Add, which would skip the callback
	// that accounts for the old entry's bytes.
	w.lru.Remove(key)
	cost := windowCost(key, e)
	if cost > w.maxBytes {
		return false
	}
	for w.used+cost > w.maxBytes {
		w.lru.RemoveOldest()
		w.evictions.Add(1)
	}
	w.lru.Add(key, e)
	w.used += cost
	return true
}

// windowNodeBytes is what the LRU keeps per entry beside the entry: its
// list node (80 bytes) and its map slot.
const windowNodeBytes = 128

// windowCost is what e costs held in the window under key: its cost, the
// LRU's node, and the key, which the LRU keeps (ristretto keeps a hash).
func windowCost[V any](key string, e *entry[V]) int64 {
	return e.cost + windowNodeBytes + int64((len(key)+15)&^15)
}

// remove drops key's entry, if any.
func (w *admissionWindow[V]) remove(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lru.Remove(key)
}

// bytes returns the cost currently held.
func (w *admissionWindow[V]) bytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.used
}

// clear drops every entry.
func (w *admissionWindow[V]) clear() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lru.Purge()
}
