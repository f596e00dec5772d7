package mitm

import (
	"container/list"
	"crypto/tls"
	"sync"
	"time"
)

// leafCache keeps the most recently used leaves, at most max of them. It is
// safe for concurrent use.
type leafCache struct {
	mu     sync.Mutex
	max    int
	recent *list.List               // of *cachedLeaf, most recently used first
	byHost map[string]*list.Element // leafHost.name → element of recent
}

type cachedLeaf struct {
	host    string
	cert    *tls.Certificate
	renewAt time.Time // from then on the leaf is re-signed rather than served
}

func newLeafCache(maxHosts int) *leafCache {
	return &leafCache{
		max:    maxHosts,
		recent: list.New(),
		byHost: make(map[string]*list.Element, min(maxHosts, 1024)),
	}
}

// get returns the cached leaf for host unless it is due for renewal at now,
// in which case it is dropped.
func (c *leafCache) get(host string, now time.Time) (*tls.Certificate, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	elem, ok := c.byHost[host]
	if !ok {
		return nil, false
	}
	entry := elem.Value.(*cachedLeaf)
	if !now.Before(entry.renewAt) {
		c.recent.Remove(elem)
		delete(c.byHost, host)
		return nil, false
	}
	c.recent.MoveToFront(elem)
	return entry.cert, true
}

// put stores a leaf for host, evicting the least recently used one when the
// cache is full.
func (c *leafCache) put(host string, cert *tls.Certificate, renewAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if elem, ok := c.byHost[host]; ok {
		elem.Value = &cachedLeaf{host: host, cert: cert, renewAt: renewAt}
		c.recent.MoveToFront(elem)
		return
	}
	if c.recent.Len() >= c.max {
		oldest := c.recent.Back()
		c.recent.Remove(oldest)
		delete(c.byHost, oldest.Value.(*cachedLeaf).host)
	}
	c.byHost[host] = c.recent.PushFront(&cachedLeaf{host: host, cert: cert, renewAt: renewAt})
}

func (c *leafCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recent.Len()
}
