package github

import (
	"container/list"
	"sync"
)

// boundedCache is an httpcache.Cache that keeps at most maxBytes of responses, evicting
// the least recently used, and refuses entries larger than maxEntry. httpcache's own
// memory cache grows without limit, which a long-running server cannot afford.
type boundedCache struct {
	maxBytes, maxEntry int

	mu      sync.Mutex
	size    int
	order   *list.List // front: most recently used *cacheEntry
	entries map[string]*list.Element
}

type cacheEntry struct {
	key   string
	value []byte
}

func newBoundedCache(maxBytes, maxEntry int) *boundedCache {
	return &boundedCache{
		maxBytes: maxBytes,
		maxEntry: maxEntry,
		order:    list.New(),
		entries:  make(map[string]*list.Element),
	}
}

// Get implements httpcache.Cache.
func (c *boundedCache) Get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).value, true
}

// Set implements httpcache.Cache.
func (c *boundedCache) Set(key string, value []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(key)
	if len(value) > c.maxEntry {
		return
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, value: value})
	c.size += len(value)
	for c.size > c.maxBytes {
		oldest := c.order.Back()
		c.removeLocked(oldest.Value.(*cacheEntry).key)
	}
}

// Delete implements httpcache.Cache.
func (c *boundedCache) Delete(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(key)
}

func (c *boundedCache) removeLocked(key string) {
	el, ok := c.entries[key]
	if !ok {
		return
	}
	c.order.Remove(el)
	delete(c.entries, key)
	c.size -= len(el.Value.(*cacheEntry).value)
}
