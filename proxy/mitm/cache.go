package mitm

import (
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// leafCache keeps the most recently used leaves, a bounded number. It is
// safe for concurrent use. It locks a simplelru itself, rather than use the
// locked lru.Cache, so that get can drop a leaf due for renewal in the same
// critical section that found it.
type leafCache struct {
	mu  sync.Mutex
	lru *simplelru.LRU[string, cachedLeaf] // leafHost.name → leaf
}

type cachedLeaf struct {
	cert    *tls.Certificate
	renewAt time.Time // from then on the leaf is re-signed rather than served
}

func newLeafCache(maxHosts int) (*leafCache, error) {
	lru, err := simplelru.NewLRU[string, cachedLeaf](maxHosts, nil)
	if err != nil {
		return nil, fmt.Errorf("leaf cache of %d hosts: %w", maxHosts, err)
	}
	return &leafCache{lru: lru}, nil
}

// get returns the cached leaf for host unless it is due for renewal at now,
// in which case it is dropped.
func (c *leafCache) get(host string, now time.Time) (*tls.Certificate, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	leaf, ok := c.lru.Get(host)
	if !ok {
		return nil, false
	}
	if !now.Before(leaf.renewAt) {
		c.lru.Remove(host)
		return nil, false
	}
	return leaf.cert, true
}

// put stores a leaf for host, evicting the least recently used one when the
// cache is full.
func (c *leafCache) put(host string, cert *tls.Certificate, renewAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Add(host, cachedLeaf{cert: cert, renewAt: renewAt})
}

func (c *leafCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
