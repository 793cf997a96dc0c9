package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

// ReadMode says whether a read may be answered from the cache.
type ReadMode int

const (
	// Cached answers from a result up to the cache TTL old (10 s by default).
	Cached ReadMode = iota
	// Refresh re-reads unless the cached result is younger than the refresh floor
	// (2 s by default), so a burst of refresh requests costs one API call.
	Refresh
	// Fresh always asks the API server, without joining a read already in flight,
	// so the answer is never older than the call; it is stored for later readers.
	// For a verdict that must not rest on what another read saw before it, such as
	// a target's rollout after the Application reported the sync.
	Fresh
)

// readCache shares identical reads of one cluster: a result is reused for ttl, and
// concurrent callers of one key wait on a single fetch. Values are immutable once
// stored; they hold cluster objects only, never anything about the caller.
type readCache struct {
	clock        clock.PassiveClock
	ttl          time.Duration
	refreshFloor time.Duration
	// fetchTimeout bounds a shared fetch, which outlives callers that give up.
	fetchTimeout time.Duration

	mu      sync.Mutex
	entries map[readKey]cacheEntry
	flight  singleflight.Group
}

// readKey names one read of a cluster: what is read and, for one object, its
// resource, namespace and name, each in a field of its own. Joined into one string
// ("get <resource> <namespace>/<name>"), namespace "a/b" with name "c" and namespace
// "a" with name "b/c" named one read.
type readKey struct {
	read            string
	resource        schema.GroupVersionResource
	namespace, name string
}

// objectKey is the key of the read of one object.
func objectKey(resource schema.GroupVersionResource, namespace, name string) readKey {
	return readKey{read: "get", resource: resource, namespace: namespace, name: name}
}

// flightKey is the key's name for singleflight, which takes strings: every field
// quoted, so that two keys never share a name.
func (k readKey) flightKey() string {
	return fmt.Sprintf("%q %q %q %q %q %q", k.read, k.resource.Group, k.resource.Version, k.resource.Resource, k.namespace, k.name)
}

type cacheEntry struct {
	value   any
	fetched time.Time
}

// pruneAbove is the entry count above which expired entries are swept on insert.
const pruneAbove = 512

func newReadCache(c clock.PassiveClock, ttl, refreshFloor, fetchTimeout time.Duration) *readCache {
	return &readCache{clock: c, ttl: ttl, refreshFloor: refreshFloor, fetchTimeout: fetchTimeout, entries: map[readKey]cacheEntry{}}
}

// get returns the value for key, from the cache when mode allows, otherwise from
// fetch (a Fresh read always from a fetch of its own). fetch runs detached from the caller's cancellation (other callers may be
// waiting on it) but keeps its values (the logger) and is bounded by fetchTimeout;
// the caller waits at most until ctx is done.
func (c *readCache) get(ctx context.Context, key readKey, mode ReadMode, fetch func(context.Context) (any, error)) (any, error) {
	if mode == Fresh {
		fctx, cancel := context.WithTimeout(ctx, c.fetchTimeout)
		defer cancel()
		v, err := fetch(fctx)
		if err == nil {
			c.store(key, v)
		}
		return v, err
	}
	if v, ok := c.lookup(key, mode); ok {
		return v, nil
	}
	ch := c.flight.DoChan(key.flightKey(), func() (any, error) {
		// A fetch that finished between lookup and DoChan already stored a result.
		if v, ok := c.lookup(key, mode); ok {
			return v, nil
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.fetchTimeout)
		defer cancel()
		v, err := fetch(fctx)
		if err == nil {
			c.store(key, v)
		}
		return v, err
	})
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *readCache) lookup(key readKey, mode ReadMode) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	maxAge := c.ttl
	if mode == Refresh {
		maxAge = c.refreshFloor
	}
	if c.clock.Since(e.fetched) >= maxAge {
		return nil, false
	}
	return e.value, true
}

func (c *readCache) store(key readKey, v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if len(c.entries) >= pruneAbove {
		for k, e := range c.entries {
			if now.Sub(e.fetched) >= c.ttl {
				delete(c.entries, k)
			}
		}
	}
	c.entries[key] = cacheEntry{value: v, fetched: now}
}

// forget drops a key, so the next read fetches.
func (c *readCache) forget(key readKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
}
