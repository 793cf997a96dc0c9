package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
)

// Renders keeps rendered output of one application at one commit (keyed by
// repository, SHA and the render options) on disk in a size-bounded LRU. Entries hold
// what the repository holds (Secret values included), so they live with the same
// permissions as the extracted trees.
type Renders struct {
	root string
	lru  *diskLRU

	hits, misses atomic.Int64
}

// NewRenders opens a cache under dir holding at most maxBytes.
func NewRenders(dir string, maxBytes int64) (*Renders, error) {
	root := filepath.Join(dir, "renders")
	if err := os.RemoveAll(root); err != nil {
		return nil, fmt.Errorf("clear render cache %s: %w", root, err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create render cache %s: %w", root, err)
	}
	return &Renders{root: root, lru: newDiskLRU(maxBytes)}, nil
}

// RenderKey names one render: the same repository, commit, app path and options give
// the same output, so it is safe to share.
func RenderKey(repo, sha, appPath, options string) string {
	h := sha256.Sum256([]byte(repo + "\x00" + sha + "\x00" + appPath + "\x00" + options))
	return hex.EncodeToString(h[:])
}

// Load returns the cached output for key.
func (c *Renders) Load(key string) ([]byte, bool) {
	file, ok := c.lru.acquire(key)
	if !ok {
		c.misses.Add(1)
		return nil, false
	}
	defer c.lru.release(key)
	b, err := os.ReadFile(file)
	if err != nil {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	return b, true
}

// Store records output for key. The entry appears whole or not at all: a
// concurrent Load of the same key never reads a partly written file.
func (c *Renders) Store(key string, out []byte) error {
	tmp, err := os.CreateTemp(c.root, key+".*.tmp")
	if err != nil {
		return fmt.Errorf("write render cache entry: %w", err)
	}
	_, werr := tmp.Write(out)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write render cache entry: %w", err)
	}
	file := filepath.Join(c.root, key)
	if err := os.Rename(tmp.Name(), file); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write render cache entry: %w", err)
	}
	c.lru.add(key, file, int64(len(out)))
	return nil
}

// Stats counts a cache's lookups since it was opened.
type Stats struct {
	Hits, Misses int64
}

// Stats returns the lookups answered from the cache and those that were not.
func (c *Renders) Stats() Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load()}
}
