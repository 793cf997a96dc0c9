package github

import (
	"archive/tar"
	"compress/gzip"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	gh "github.com/google/go-github/v62/github"
	"golang.org/x/sync/singleflight"
)

// ArchiveLimits bound what one repository archive may unpack to. A repository that
// exceeds them is refused as a whole: reading half a repository would render wrong.
type ArchiveLimits struct {
	MaxFileBytes  int64 // one regular file
	MaxTotalBytes int64 // all regular files together
	MaxFiles      int   // entries of any kind
}

// DefaultArchiveLimits fit manifest repositories, including large monorepos, and keep
// a hostile archive from filling the disk.
var DefaultArchiveLimits = ArchiveLimits{
	MaxFileBytes:  5 << 20,
	MaxTotalBytes: 512 << 20,
	MaxFiles:      100_000,
}

// ErrArchiveTooLarge is wrapped by extraction errors caused by a limit.
var ErrArchiveTooLarge = errors.New("repository archive over the limit")

// completeMarker is written last into an extracted tree; a directory without it is
// the leftover of an interrupted extraction and is discarded.
const completeMarker = ".kukie-complete"

// Snapshot is a repository tree at one commit, extracted on local disk. Callers must
// call Release when done so the cache may evict it; the directory must not be modified.
type Snapshot struct {
	Dir     string
	Repo    string
	SHA     string
	release func()
}

// Release hands the snapshot back to the cache.
func (s *Snapshot) Release() {
	if s != nil && s.release != nil {
		s.release()
		s.release = nil
	}
}

// ArchiveCache holds extracted repository trees keyed by (repository, commit SHA) in a
// size-bounded LRU on disk, so a second plan on the same commit downloads nothing.
// Trees in use are never evicted.
type ArchiveCache struct {
	root   string
	limits ArchiveLimits
	lru    *diskLRU
	flight singleflight.Group

	hits, misses atomic.Int64
}

// NewArchiveCache opens (creating if needed) a cache under dir holding at most
// maxBytes of extracted files. Complete trees left by an earlier process are reused.
func NewArchiveCache(dir string, maxBytes int64, limits ArchiveLimits) (*ArchiveCache, error) {
	root := filepath.Join(dir, "archives")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create archive cache %s: %w", root, err)
	}
	c := &ArchiveCache{root: root, limits: limits, lru: newDiskLRU(maxBytes)}
	if err := c.adoptExisting(); err != nil {
		return nil, err
	}
	return c, nil
}

// Fetcher downloads the gzip tarball of a repository at a commit.
type Fetcher func(ctx context.Context) (io.ReadCloser, error)

// Get returns the tree of repo at sha, downloading and extracting it with fetch only
// when the cache does not hold it. Concurrent calls for one key share one download.
func (c *ArchiveCache) Get(ctx context.Context, repo, sha string, fetch Fetcher) (*Snapshot, error) {
	if !validSHA(sha) {
		return nil, fmt.Errorf("archive of %s: %q is not a commit SHA", repo, sha)
	}
	key := repo + "@" + sha
	if snap := c.acquire(key, repo, sha); snap != nil {
		c.hits.Add(1)
		return snap, nil
	}
	// A miss whether this call downloads or waits on another's download.
	c.misses.Add(1)
	_, err, _ := c.flight.Do(key, func() (any, error) {
		if c.lru.has(key) {
			return nil, nil
		}
		dir := c.dirFor(repo, sha)
		size, err := c.download(ctx, dir, fetch)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("archive of %s at %s: %w", repo, sha, err)
		}
		c.lru.add(key, dir, size)
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	if snap := c.acquire(key, repo, sha); snap != nil {
		return snap, nil
	}
	return nil, fmt.Errorf("archive of %s at %s: evicted before use (cache too small)", repo, sha)
}

func (c *ArchiveCache) acquire(key, repo, sha string) *Snapshot {
	dir, ok := c.lru.acquire(key)
	if !ok {
		return nil
	}
	return &Snapshot{Dir: dir, Repo: repo, SHA: sha, release: func() { c.lru.release(key) }}
}

func (c *ArchiveCache) dirFor(repo, sha string) string {
	return filepath.Join(c.root, safeName(repo), sha)
}

func (c *ArchiveCache) download(ctx context.Context, dir string, fetch Fetcher) (int64, error) {
	if err := os.RemoveAll(dir); err != nil {
		return 0, fmt.Errorf("clear %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("create %s: %w", dir, err)
	}
	body, err := fetch(ctx)
	if err != nil {
		return 0, fmt.Errorf("download: %w", err)
	}
	defer body.Close()
	size, err := ExtractTarball(body, dir, c.limits)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, completeMarker), nil, 0o600); err != nil {
		return 0, fmt.Errorf("mark %s complete: %w", dir, err)
	}
	return size, nil
}

// adoptExisting registers complete trees found on disk and removes incomplete ones.
func (c *ArchiveCache) adoptExisting() error {
	repos, err := os.ReadDir(c.root)
	if err != nil {
		return fmt.Errorf("read archive cache %s: %w", c.root, err)
	}
	for _, r := range repos {
		shas, err := os.ReadDir(filepath.Join(c.root, r.Name()))
		if err != nil {
			continue
		}
		for _, s := range shas {
			dir := filepath.Join(c.root, r.Name(), s.Name())
			if _, err := os.Stat(filepath.Join(dir, completeMarker)); err != nil {
				_ = os.RemoveAll(dir)
				continue
			}
			c.lru.add(unsafeName(r.Name())+"@"+s.Name(), dir, dirSize(dir))
		}
	}
	return nil
}

// ExtractTarball unpacks a GitHub repository tarball (one top-level folder named after
// the commit) into dir and returns the bytes written. Paths leaving dir, symlinks that
// point outside it, devices and other special files are never created; limits are
// enforced on the bytes actually read, not on what headers claim.
func ExtractTarball(r io.Reader, dir string, limits ArchiveLimits) (int64, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return 0, fmt.Errorf("open gzip: %w", err)
	}
	defer zr.Close()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", dir, err)
	}
	defer root.Close()

	tr := tar.NewReader(zr)
	var total int64
	files := 0
	// Symlinks created so far. An entry below one is refused: git never writes such a
	// tree, and a link's target is checked lexically from its own folder, which holds
	// only while no folder on the way is itself a link (a link "a/up -> .." followed by
	// "a/up/l -> ../../x" would otherwise point outside the tree).
	links := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("read tar: %w", err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // GitHub puts the commit SHA in a pax global header
		}
		files++
		if files > limits.MaxFiles {
			return total, fmt.Errorf("%w: more than %d entries", ErrArchiveTooLarge, limits.MaxFiles)
		}
		name, ok := stripTopDir(hdr.Name)
		if !ok {
			return total, fmt.Errorf("archive entry %q leaves the repository tree", hdr.Name)
		}
		if name == "" || name == completeMarker {
			continue
		}
		if link, below := belowLink(name, links); below {
			return total, fmt.Errorf("archive entry %q lies beyond the symbolic link %q", hdr.Name, link)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o700); err != nil {
				return total, fmt.Errorf("create folder %s: %w", name, err)
			}
		case tar.TypeReg:
			if hdr.Size > limits.MaxFileBytes {
				return total, fmt.Errorf("%w: %s is %d bytes (limit %d)", ErrArchiveTooLarge, name, hdr.Size, limits.MaxFileBytes)
			}
			n, err := writeConfined(root, name, tr, limits.MaxFileBytes)
			total += n
			if err != nil {
				return total, err
			}
			if total > limits.MaxTotalBytes {
				return total, fmt.Errorf("%w: more than %d bytes in all", ErrArchiveTooLarge, limits.MaxTotalBytes)
			}
		case tar.TypeSymlink:
			if !symlinkStaysInside(name, hdr.Linkname) {
				continue // the tree is read as if the link did not exist; render refuses what it cannot find
			}
			if err := mkParent(root, name); err != nil {
				return total, err
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return total, fmt.Errorf("create link %s: %w", name, err)
			}
			links[name] = true
		default:
			// Hard links, devices, fifos: never part of a manifest repository.
		}
	}
}

// belowLink reports the symlink among links that is a parent folder of name, if any.
func belowLink(name string, links map[string]bool) (string, bool) {
	if len(links) == 0 {
		return "", false
	}
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		if links[d] {
			return d, true
		}
	}
	return "", false
}

func writeConfined(root *os.Root, name string, r io.Reader, limit int64) (int64, error) {
	if err := mkParent(root, name); err != nil {
		return 0, err
	}
	f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", name, err)
	}
	n, err := io.Copy(f, io.LimitReader(r, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("write %s: %w", name, err)
	}
	if n > limit {
		return n, fmt.Errorf("%w: %s is over %d bytes", ErrArchiveTooLarge, name, limit)
	}
	return n, nil
}

func mkParent(root *os.Root, name string) error {
	if d := path.Dir(name); d != "." {
		if err := root.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create folder %s: %w", d, err)
		}
	}
	return nil
}

// stripTopDir removes the "<owner>-<repo>-<sha>/" prefix and checks that what is left
// is a clean relative path.
func stripTopDir(name string) (string, bool) {
	name = strings.TrimPrefix(name, "./")
	if path.IsAbs(name) {
		return "", false
	}
	_, rest, found := strings.Cut(name, "/")
	if !found {
		return "", true // the top folder itself
	}
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" {
		return "", true
	}
	if !fs.ValidPath(rest) || strings.Contains(rest, `\`) {
		return "", false
	}
	return rest, true
}

func symlinkStaysInside(name, target string) bool {
	if target == "" || path.IsAbs(target) || strings.Contains(target, `\`) {
		return false
	}
	resolved := path.Join(path.Dir(name), target)
	return fs.ValidPath(resolved) && resolved != "."
}

func validSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// safeName turns "owner/repo" into one path element that cannot collide.
func safeName(repo string) string { return strings.ReplaceAll(strings.ToLower(repo), "/", "~") }

func unsafeName(name string) string { return strings.ReplaceAll(name, "~", "/") }

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// TarballFetcher downloads the tarball of owner/repo at sha through the archive link
// endpoint, following GitHub's redirect with the same authenticated client.
func TarballFetcher(client *gh.Client, owner, repo, sha string) Fetcher {
	return func(ctx context.Context) (io.ReadCloser, error) {
		// go-github sends the link request straight to the transport, past the
		// client's timeout, so a GitHub that never answers would hold the caller
		// forever: bound it with the same timeout.
		linkCtx, cancel := ctx, context.CancelFunc(func() {})
		if timeout := client.Client().Timeout; timeout > 0 {
			linkCtx, cancel = context.WithTimeout(ctx, timeout)
		}
		link, resp, err := client.Repositories.GetArchiveLink(linkCtx, owner, repo, gh.Tarball, &gh.RepositoryContentGetOptions{Ref: sha}, 0)
		cancel()
		if err != nil {
			var er *gh.ErrorResponse
			if resp != nil && resp.Response != nil && !errors.As(err, &er) {
				// go-github reports an unexpected status as plain text; keep the status
				// and headers so a 5xx or a rate limit is recognised as such.
				err = &StatusError{Op: "get tarball link", StatusCode: resp.StatusCode, Header: resp.Header}
			}
			return nil, fmt.Errorf("get tarball link: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, link.String(), nil)
		if err != nil {
			return nil, fmt.Errorf("build tarball request: %w", err)
		}
		dl, err := client.Client().Do(req)
		if err != nil {
			return nil, fmt.Errorf("download tarball: %w", err)
		}
		if dl.StatusCode != http.StatusOK {
			dl.Body.Close()
			return nil, &StatusError{Op: "download tarball", StatusCode: dl.StatusCode, Header: dl.Header}
		}
		return dl.Body, nil
	}
}

// RenderCache keeps rendered output of one application at one commit (keyed by
// repository, SHA and the render options) on disk in a size-bounded LRU. Entries hold
// what the repository holds (Secret values included), so they live with the same
// permissions as the extracted trees.
type RenderCache struct {
	root string
	lru  *diskLRU

	hits, misses atomic.Int64
}

// NewRenderCache opens a cache under dir holding at most maxBytes.
func NewRenderCache(dir string, maxBytes int64) (*RenderCache, error) {
	root := filepath.Join(dir, "renders")
	if err := os.RemoveAll(root); err != nil {
		return nil, fmt.Errorf("clear render cache %s: %w", root, err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create render cache %s: %w", root, err)
	}
	return &RenderCache{root: root, lru: newDiskLRU(maxBytes)}, nil
}

// RenderKey names one render: the same repository, commit, app path and options give
// the same output, so it is safe to share.
func RenderKey(repo, sha, appPath, options string) string {
	h := sha256.Sum256([]byte(repo + "\x00" + sha + "\x00" + appPath + "\x00" + options))
	return hex.EncodeToString(h[:])
}

// Load returns the cached output for key.
func (c *RenderCache) Load(key string) ([]byte, bool) {
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
func (c *RenderCache) Store(key string, out []byte) error {
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

// CacheStats counts a cache's lookups since it was opened.
type CacheStats struct {
	Hits, Misses int64
}

// Stats returns the lookups answered from the cache and those that were not.
func (c *RenderCache) Stats() CacheStats {
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load()}
}

// Stats returns the lookups answered from the cache and those that were not (a
// download, or a wait on a download in flight).
func (c *ArchiveCache) Stats() CacheStats {
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load()}
}

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
