package cache

import (
	"container/list"
	"os"
	"sync"
)

// diskLRU tracks files or folders on disk by key and removes the least recently used
// unreferenced ones once their total size is over the bound.
type diskLRU struct {
	mu      sync.Mutex
	max     int64
	used    int64
	order   *list.List // front = most recent
	entries map[string]*list.Element
}

type lruEntry struct {
	key  string
	path string
	size int64
	refs int
}

func newDiskLRU(max int64) *diskLRU {
	return &diskLRU{max: max, order: list.New(), entries: map[string]*list.Element{}}
}

func (l *diskLRU) has(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.entries[key]
	return ok
}

func (l *diskLRU) acquire(key string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.entries[key]
	if !ok {
		return "", false
	}
	l.order.MoveToFront(el)
	e := el.Value.(*lruEntry)
	e.refs++
	return e.path, true
}

func (l *diskLRU) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if el, ok := l.entries[key]; ok {
		el.Value.(*lruEntry).refs--
	}
	l.evictLocked()
}

func (l *diskLRU) add(key, p string, size int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if el, ok := l.entries[key]; ok {
		e := el.Value.(*lruEntry)
		l.used += size - e.size
		e.size = size
		l.order.MoveToFront(el)
	} else {
		l.entries[key] = l.order.PushFront(&lruEntry{key: key, path: p, size: size})
		l.used += size
	}
	// The entry just added is about to be used by its caller; it is evicted later.
	l.evictLocked(key)
}

func (l *diskLRU) evictLocked(keep ...string) {
	for el := l.order.Back(); el != nil && l.used > l.max; {
		prev := el.Prev()
		e := el.Value.(*lruEntry)
		if e.refs == 0 && (len(keep) == 0 || e.key != keep[0]) {
			_ = os.RemoveAll(e.path)
			l.used -= e.size
			l.order.Remove(el)
			delete(l.entries, e.key)
		}
		el = prev
	}
}
