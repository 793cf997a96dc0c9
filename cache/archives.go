// Package cache owns the service's on-disk caches: extracted repository trees by
// commit (Archives, fed by any Fetcher: package github supplies GitHub's tarball
// download) and before-renders of an Application at a commit (Renders), each a
// size-bounded LRU whose entries in use are never evicted, and the render engine that
// reuses those renders (RenderEngine). A commit's tree and its render never change,
// so entries are keyed by commit and never invalidated.
//
// It holds what repositories hold, Secret values included, so entries are written
// with the permissions of the service's own files and never logged. It must not
// decide anything from the content: what to render is render's, when is plan's.
package cache

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/singleflight"

	"github.com/kukie/kukie-gitops/render"
)

// ArchiveLimits bound what one repository archive may unpack to. A repository that
// exceeds the total or the count is refused as a whole: reading half a repository
// would render wrong. A file over MaxFileBytes is kept cut to its first
// MaxFileBytes+1 bytes, so a reader bounded by MaxFileBytes (render reads no file
// over its own 5 MiB) still sees a file over the limit, and refuses that file
// alone: the repository is not refused for a large file no render reads (an
// image, a dashboard).
type ArchiveLimits struct {
	MaxFileBytes  int64 // what is kept of one regular file, beyond which it is cut
	MaxTotalBytes int64 // all regular files together, as kept
	MaxFiles      int   // entries of any kind
}

// DefaultArchiveLimits fit manifest repositories, including large monorepos, and keep
// a hostile archive from filling the disk.
var DefaultArchiveLimits = ArchiveLimits{
	// A file is cut where render stops reading one.
	MaxFileBytes:  render.MaxFileSize,
	MaxTotalBytes: 512 << 20,
	MaxFiles:      100_000,
}

// ErrArchiveTooLarge is wrapped by extraction errors caused by a limit.
var ErrArchiveTooLarge = errors.New("repository archive over the limit")

// entryOverhead is what one archive entry may add to the unpacked stream beyond its
// file's bytes: its header, an extended header for a long name or link target, the
// padding. Headers are read whatever the entry is, and an entry that is skipped
// (a global header, a link or device not created) writes nothing, so the stream as
// a whole is bounded, not only the files written: one blob of a repository can be
// referenced by every entry of its archive.
const entryOverhead = 8 << 10

// maxLinkHops is how many symbolic links resolving one link may pass through, as
// many as Linux follows: a longer chain, or a cycle, would not resolve there either.
const maxLinkHops = 40

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

// Archives holds extracted repository trees keyed by (repository, commit SHA) in a
// size-bounded LRU on disk, so a second plan on the same commit downloads nothing.
// Trees in use are never evicted.
type Archives struct {
	root   string
	limits ArchiveLimits
	lru    *diskLRU
	flight singleflight.Group

	hits, misses atomic.Int64
}

// NewArchives opens (creating if needed) a cache under dir holding at most
// maxBytes of extracted files. Complete trees left by an earlier process are reused.
func NewArchives(dir string, maxBytes int64, limits ArchiveLimits) (*Archives, error) {
	root := filepath.Join(dir, "archives")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create archive cache %s: %w", root, err)
	}
	c := &Archives{root: root, limits: limits, lru: newDiskLRU(maxBytes)}
	if err := c.adoptExisting(); err != nil {
		return nil, err
	}
	return c, nil
}

// Fetcher downloads the gzip tarball of a repository at a commit.
type Fetcher func(ctx context.Context) (io.ReadCloser, error)

// Get returns the tree of repo at sha, downloading and extracting it with fetch only
// when the cache does not hold it. Concurrent calls for one key share one download.
func (c *Archives) Get(ctx context.Context, repo, sha string, fetch Fetcher) (*Snapshot, error) {
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

func (c *Archives) acquire(key, repo, sha string) *Snapshot {
	dir, ok := c.lru.acquire(key)
	if !ok {
		return nil
	}
	return &Snapshot{Dir: dir, Repo: repo, SHA: sha, release: func() { c.lru.release(key) }}
}

func (c *Archives) dirFor(repo, sha string) string {
	return filepath.Join(c.root, safeName(repo), sha)
}

func (c *Archives) download(ctx context.Context, dir string, fetch Fetcher) (int64, error) {
	if err := os.RemoveAll(dir); err != nil {
		return 0, fmt.Errorf("clear the archive's folder: %w", render.HostPathFree(err))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("create the archive's folder: %w", render.HostPathFree(err))
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
		return 0, fmt.Errorf("mark the archive complete: %w", render.HostPathFree(err))
	}
	return size, nil
}

// adoptExisting registers complete trees found on disk and removes incomplete ones.
func (c *Archives) adoptExisting() error {
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
// point outside it (by themselves or through other links), devices and other special
// files are never created; limits are enforced on the bytes actually read, not on
// what headers claim, and on the whole unpacked stream, headers included.
func ExtractTarball(r io.Reader, dir string, limits ArchiveLimits) (int64, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return 0, fmt.Errorf("open gzip: %w", err)
	}
	defer zr.Close()
	stream := &countingReader{r: zr, limit: limits.MaxTotalBytes + int64(limits.MaxFiles+1)*entryOverhead}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("open the archive's folder: %w", render.HostPathFree(err))
	}
	defer root.Close()

	tr := tar.NewReader(stream)
	var total int64
	files := 0
	// Symlinks created so far. An entry below one is refused: git never writes such a
	// tree, and a link's target is checked lexically from its own folder, which holds
	// only while no folder on the way is itself a link (a link "a/up -> .." followed by
	// "a/up/l -> ../../x" would otherwise point outside the tree). Each maps to its
	// target.
	links := map[string]string{}
	for {
		hdr, err := tr.Next()
		if stream.over() {
			return total, fmt.Errorf("%w: the archive unpacks to more than %d bytes of headers and files", ErrArchiveTooLarge, stream.limit)
		}
		if errors.Is(err, io.EOF) {
			return total, removeEscapingLinks(root, links)
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
			links[name] = hdr.Linkname
		default:
			// Hard links, devices, fifos: never part of a manifest repository.
		}
	}
}

// belowLink reports the symlink among links that is a parent folder of name, if any.
func belowLink(name string, links map[string]string) (string, bool) {
	if len(links) == 0 {
		return "", false
	}
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		if _, ok := links[d]; ok {
			return d, true
		}
	}
	return "", false
}

// removeEscapingLinks removes, once the whole tree is written, each link that
// resolves outside it through other links. A link's target was checked from its
// own folder, but a link it passes through may lead to a folder of another depth
// ("p/q/y -> ../../t" is one folder deep, so "p/q/x -> y/../../../etc" climbs out of
// the tree), and the link passed through may come later in the archive. The tree
// is then read as if the link did not exist, like one that points outside by itself.
func removeEscapingLinks(root *os.Root, links map[string]string) error {
	for name := range links {
		if linkResolvesInside(name, links) {
			continue
		}
		if err := root.Remove(name); err != nil {
			return fmt.Errorf("remove link %s: %w", name, err)
		}
	}
	return nil
}

// linkResolvesInside resolves the link name as the kernel would, through the
// links of the tree, and reports whether it ends inside the tree (not at its top
// folder) within maxLinkHops links.
func linkResolvesInside(name string, links map[string]string) bool {
	hops := 0
	// resolve follows target from the folder dir (its path elements).
	var resolve func(dir []string, target string) ([]string, bool)
	resolve = func(dir []string, target string) ([]string, bool) {
		cur := slices.Clone(dir)
		for _, el := range strings.Split(target, "/") {
			switch el {
			case "", ".":
				continue
			case "..":
				if len(cur) == 0 {
					return nil, false
				}
				cur = cur[:len(cur)-1]
				continue
			}
			cur = append(cur, el)
			next, isLink := links[strings.Join(cur, "/")]
			if !isLink {
				continue
			}
			if hops++; hops > maxLinkHops {
				return nil, false
			}
			var ok bool
			if cur, ok = resolve(cur[:len(cur)-1], next); !ok {
				return nil, false
			}
		}
		return cur, true
	}
	var dir []string
	if d := path.Dir(name); d != "." {
		dir = strings.Split(d, "/")
	}
	end, ok := resolve(dir, links[name])
	return ok && len(end) > 0
}

// countingReader counts the bytes read through it and stops at limit.
type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.over() {
		return 0, ErrArchiveTooLarge
	}
	if rest := c.limit + 1 - c.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// over reports whether more than limit bytes were read.
func (c *countingReader) over() bool { return c.n > c.limit }

// writeConfined writes the file name from r, cut past limit+1 bytes (the tar
// reader skips the rest of the entry).
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

// Stats returns the lookups answered from the cache and those that were not (a
// download, or a wait on a download in flight).
func (c *Archives) Stats() Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load()}
}
