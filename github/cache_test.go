package github

import "testing"

func TestBoundedCacheEvictsOldestAndSkipsLargeEntries(t *testing.T) {
	c := newBoundedCache(10, 6)
	c.Set("a", []byte("aaaa"))
	c.Set("b", []byte("bbbb"))
	if _, ok := c.Get("a"); !ok { // a is now the most recently used
		t.Fatal("a missing")
	}
	c.Set("c", []byte("cccc")) // 12 bytes > 10: evicts b, the least recently used
	if _, ok := c.Get("b"); ok {
		t.Error("b still cached, want evicted")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.Get(k); !ok {
			t.Errorf("%s evicted, want kept", k)
		}
	}
	c.Set("big", []byte("0123456789"))
	if _, ok := c.Get("big"); ok {
		t.Error("entry above the per-entry limit was cached")
	}
	c.Delete("a")
	if _, ok := c.Get("a"); ok {
		t.Error("a still cached after Delete")
	}
	if c.size != 4 {
		t.Errorf("size = %d, want 4", c.size)
	}
}

// TestBoundedCacheReplacingAnEntryCountsOnlyTheNewValue: setting a key again
// replaces its bytes in the bound, and a replacement too large for the cache drops the
// old value rather than keeping it.
func TestBoundedCacheReplacingAnEntryCountsOnlyTheNewValue(t *testing.T) {
	c := newBoundedCache(10, 6)
	c.Set("a", []byte("aaaa"))
	c.Set("a", []byte("aaaaaa"))
	c.Set("b", []byte("bbbb"))
	if c.size != 10 {
		t.Fatalf("size = %d, want 10 (a's second value and b)", c.size)
	}
	for _, k := range []string{"a", "b"} {
		if _, ok := c.Get(k); !ok {
			t.Errorf("%s evicted, want kept: the cache holds exactly its bound", k)
		}
	}
	c.Set("a", []byte("0123456789"))
	if v, ok := c.Get("a"); ok {
		t.Errorf("a = %q after a replacement above the per-entry limit, want dropped", v)
	}
	if c.size != 4 {
		t.Errorf("size = %d, want 4 (b only)", c.size)
	}
}
