package cache

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"
)

// admissionWindow is a small byte-bounded LRU for entries ristretto refused
// (see Cache.store). Only Gets that miss in ristretto consult it, so the hit
// path never takes its lock. Every such Get still reaches ristretto first,
// which records the access, so a key used from the window gains the
// frequency that gets it admitted when it is next reloaded.
type admissionWindow[V any] struct {
	mu       sync.Mutex
	maxBytes int64
	used     int64
	order    *list.List // of *windowItem[V], most recently used first
	items    map[string]*list.Element

	evictions, expirations atomic.Uint64
}

type windowItem[V any] struct {
	key string
	e   *entry[V]
}

func newAdmissionWindow[V any](maxBytes int64) *admissionWindow[V] {
	return &admissionWindow[V]{
		maxBytes: maxBytes,
		order:    list.New(),
		items:    make(map[string]*list.Element),
	}
}

// get returns the entry for key, or nil if there is none or it is past its
// keepUntil (it is then dropped).
func (w *admissionWindow[V]) get(key string, now time.Time) *entry[V] {
	w.mu.Lock()
	defer w.mu.Unlock()
	el, ok := w.items[key]
	if !ok {
		return nil
	}
	it := el.Value.(*windowItem[V])
	if !now.Before(it.e.keepUntil) {
		w.drop(el)
		w.expirations.Add(1)
		return nil
	}
	w.order.MoveToFront(el)
	return it.e
}

// put stores e for key, evicting the least recently used entries to make
// room. It reports false, storing nothing, when e alone exceeds the window.
func (w *admissionWindow[V]) put(key string, e *entry[V]) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if el, ok := w.items[key]; ok {
		w.drop(el)
	}
	if e.cost > w.maxBytes {
		return false
	}
	for w.used+e.cost > w.maxBytes {
		w.drop(w.order.Back())
		w.evictions.Add(1)
	}
	w.items[key] = w.order.PushFront(&windowItem[V]{key: key, e: e})
	w.used += e.cost
	return true
}

// remove drops key's entry, if any.
func (w *admissionWindow[V]) remove(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if el, ok := w.items[key]; ok {
		w.drop(el)
	}
}

func (w *admissionWindow[V]) drop(el *list.Element) {
	it := w.order.Remove(el).(*windowItem[V])
	delete(w.items, it.key)
	w.used -= it.e.cost
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
	w.order.Init()
	clear(w.items)
	w.used = 0
}
