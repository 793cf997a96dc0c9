package github

import (
	"math"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// boundedCache is an httpcache.Cache that keeps at most maxBytes of responses, evicting
// the least recently used, and refuses entries larger than maxEntry. httpcache's own
// memory cache grows without limit, which a long-running server cannot afford.
//
// The recency order is golang-lru's; the bound is in bytes, which golang-lru does not
// count, so the cache keeps the size itself and evicts the oldest until it fits.
type boundedCache struct {
	maxBytes, maxEntry int

	mu   sync.Mutex
	size int // bytes held; kept by lru's eviction callback
	lru  *simplelru.LRU[string, []byte]
}

func newBoundedCache(maxBytes, maxEntry int) *boundedCache {
	c := &boundedCache{maxBytes: maxBytes, maxEntry: maxEntry}
	// No count bound of its own: the byte bound evicts first. NewLRU fails only for
	// a size below 1.
	c.lru, _ = simplelru.NewLRU[string, []byte](math.MaxInt, func(_ string, v []byte) { c.size -= len(v) })
	return c
}

// Get implements httpcache.Cache.
func (c *boundedCache) Get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Get(key)
}

// Set implements httpcache.Cache.
func (c *boundedCache) Set(key string, value []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Remove first: golang-lru replaces a value in place without telling the
	// eviction callback, which would leave the size counting the old value.
	c.lru.Remove(key)
	if len(value) > c.maxEntry {
		return
	}
	c.lru.Add(key, value)
	c.size += len(value)
	for c.size > c.maxBytes {
		c.lru.RemoveOldest()
	}
}

// Delete implements httpcache.Cache.
func (c *boundedCache) Delete(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(key)
}
