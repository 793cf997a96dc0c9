package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// tree is a read-only, cached view of a repository directory. Every path handed to
// it is a slash-separated path relative to the repository root; reads never leave
// the root, even through symlinks.
//
// A file reached through a symlink inside the repository has several names but one
// content. The tree answers every name with the file's canonical path (every
// symlink along it resolved), and everything that records or replaces a file
// (views, kustomization graphs, edits) keys it by that path: a file replaced under
// one name is seen under all of them, and an app that reads it under any name
// counts as reading it.
type tree struct {
	root string // absolute, symlinks resolved

	mu    sync.Mutex
	files map[string]fileEntry
	dirs  map[string]dirEntry
	stats map[string]statEntry
	kusts map[string]*kustNode
	// lookups counts, per directory not yet listed, the names looked up in it.
	lookups map[string]int
	// bytesRead counts the bytes of every file read, against MaxPlanBytes, and
	// renderedBytes those read by every render, against MaxPlanRenderBytes.
	bytesRead, renderedBytes int
	// links, for a tree identified by a TreeID, collects the symlinks resolved
	// in it: reaches that went through one cannot be carried past its change.
	links *linkSet
}

// rendered counts n more bytes read by a render and returns the total.
func (t *tree) rendered(n int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.renderedBytes += n
	return t.renderedBytes
}

// renderedIfFits counts n more bytes read by a render if the total stays
// within MaxPlanRenderBytes, and reports whether it did.
func (t *tree) renderedIfFits(n int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.renderedBytes+n > MaxPlanRenderBytes {
		return false
	}
	t.renderedBytes += n
	return true
}

type fileEntry struct {
	data []byte
	scan yamlScan
	err  error
}

type dirEntry struct {
	names []string
	modes map[string]fs.FileMode // type bits of each entry, as listed
	err   error
}

type nodeKind int

const (
	kindNone nodeKind = iota
	kindFile
	kindDir
)

type statEntry struct {
	kind nodeKind
	real string // absolute path with symlinks resolved
	// canon is the canonical repository path: every symlink along the path
	// resolved. For a path that does not exist, it is the canonical path of its
	// parent joined with its name, where a new file of that name would be.
	canon string
	// dangling is set on a symlink whose target does not exist: writing a new file
	// under its name would follow it.
	dangling bool
	err      error
}

func openTree(dir string) (*tree, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolve repository directory %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("resolve repository directory %s: %w", dir, err)
	}
	info, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("stat repository directory %s: %w", dir, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("repository %s is not a directory", dir)
	}
	return &tree{
		root:    real,
		files:   map[string]fileEntry{},
		dirs:    map[string]dirEntry{},
		stats:   map[string]statEntry{},
		kusts:   map[string]*kustNode{},
		lookups: map[string]int{},
	}, nil
}

// fsError is the error of a file system operation op on the repository path rel.
// A path longer than the system opens is the repository's doing (git has no such
// limit, and a few folders of long names exceed it): a refusal, which names the
// path within the repository alone.
func fsError(op, rel string, err error) error {
	if errors.Is(err, syscall.ENAMETOOLONG) {
		const shown = 200
		if len(rel) > shown {
			rel = rel[:shown] + "..."
		}
		return refuse(CodeTooLarge, "%s %s: the path is longer than the file system allows", op, rel)
	}
	return fmt.Errorf("%s %s: %w", op, rel, HostPathFree(err))
}

// HostPathFree is err without the path on this host an *fs.PathError names (the
// operation and the system's error stay, for errors.Is): what fails reading a
// repository reaches the plan's history and the change's page, which people outside
// the service read, and the caller names the repository path already.
func HostPathFree(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// cleanRel turns a repository path into its canonical relative form ("." for the
// root). It reports false when the path climbs above the root.
func cleanRel(p string) (string, bool) {
	p = filepath.ToSlash(p)
	p = strings.TrimPrefix(p, "/")
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", false
	}
	return c, true
}

// joinRel resolves ref relative to directory dir, refusing paths that leave the repository.
func joinRel(dir, ref string) (string, error) {
	if path.IsAbs(ref) {
		return "", refuse(CodePathEscape, "%s: absolute path %q is not allowed; kustomize paths are relative", dir, ref)
	}
	c, ok := cleanRel(path.Join(dir, ref))
	if !ok {
		return "", refuse(CodePathEscape, "%s: path %q leaves the repository", dir, ref)
	}
	return c, nil
}

// stat says what rel is. It resolves paths through the cached listings of their
// parent directories, so a path costs no system call once its directory was
// listed; only symlinks are resolved on disk, and refused when they leave the root.
func (t *tree) stat(rel string) statEntry {
	t.mu.Lock()
	if e, ok := t.stats[rel]; ok {
		t.mu.Unlock()
		return e
	}
	t.mu.Unlock()
	e := t.statUncached(rel)
	t.mu.Lock()
	t.stats[rel] = e
	t.mu.Unlock()
	return e
}

func (t *tree) statUncached(rel string) statEntry {
	if rel == "." {
		return statEntry{kind: kindDir, real: t.root, canon: "."}
	}
	dir, name := path.Dir(rel), path.Base(rel)
	parent := t.stat(dir)
	if parent.err != nil {
		return statEntry{err: parent.err}
	}
	canon := rel // the common case, no symlink along the way: no new string
	if parent.canon != dir {
		canon = path.Join(parent.canon, name)
	}
	if parent.kind != kindDir {
		return statEntry{kind: kindNone, canon: canon}
	}
	// The parent's canonical path keys the listing: a directory reached under
	// several names is listed once.
	mode, ok, err := t.entryMode(parent.canon, parent.real, name)
	if err != nil {
		return statEntry{err: err}
	}
	switch {
	case !ok:
		return statEntry{kind: kindNone, canon: canon}
	case mode&fs.ModeSymlink != 0:
		return t.resolveSymlink(rel, canon, filepath.Join(parent.real, name))
	case mode.IsDir():
		return statEntry{kind: kindDir, real: filepath.Join(parent.real, name), canon: canon}
	case mode.IsRegular():
		return statEntry{kind: kindFile, real: filepath.Join(parent.real, name), canon: canon}
	default:
		return statEntry{kind: kindNone, canon: canon}
	}
}

// canonical returns the canonical path of the clean repository path rel: every
// symlink along it resolved, confined to the repository (a symlink leaving it is
// refused). A path that does not exist keeps its last elements as given.
func (t *tree) canonical(rel string) (string, error) {
	st := t.stat(rel)
	return st.canon, st.err
}

// lookupsBeforeListing is how many names of one directory are looked up one at a
// time before the directory is listed instead. Finding a kustomization file looks
// up three names, and a listing costs several lookups: an Application whose
// kustomization only names a base costs three lookups, not a listing.
const lookupsBeforeListing = 3

// entryMode returns the type bits of the entry name in directory dir (real is its
// path on disk), and whether it exists. It answers from the directory's listing
// when there is one, and with one lstat otherwise; neither follows a symlink.
func (t *tree) entryMode(dir, real, name string) (fs.FileMode, bool, error) {
	t.mu.Lock()
	_, listed := t.dirs[dir]
	if !listed {
		t.lookups[dir]++
		listed = t.lookups[dir] > lookupsBeforeListing
	}
	t.mu.Unlock()
	if !listed {
		info, err := os.Lstat(filepath.Join(real, name))
		switch {
		case err == nil:
			return info.Mode().Type(), true, nil
		case errors.Is(err, fs.ErrNotExist):
			return 0, false, nil
		default:
			return 0, false, fsError("stat", path.Join(dir, name), err)
		}
	}
	listing := t.listDir(dir, real)
	if listing.err != nil {
		return 0, false, listing.err
	}
	mode, ok := listing.modes[name]
	return mode, ok, nil
}

// resolveSymlink resolves the symlink rel (link is its own canonical path, full
// its path on disk).
func (t *tree) resolveSymlink(rel, link, full string) statEntry {
	if t.links != nil {
		t.links.add(link)
		t.links.add(linksAlong(t.root, full)...)
	}
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		// A link into a path through a file names nothing, like one to a
		// missing file. A cycle of links is repository content too (git stores
		// one as readily as any link): the plan is refused, not failed.
		_, serr := os.Stat(full)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(serr, syscall.ENOTDIR):
			return statEntry{kind: kindNone, canon: link, dangling: true}
		case errors.Is(serr, syscall.ELOOP):
			return statEntry{err: refuse(CodeRenderFailed, "%s is a symlink that does not resolve (a cycle of symlinks, or more than the system follows)", rel)}
		}
		return statEntry{err: fsError("resolve", rel, err)}
	}
	within, err := filepath.Rel(t.root, real)
	if err != nil || within == ".." || strings.HasPrefix(within, ".."+string(filepath.Separator)) {
		return statEntry{err: refuse(CodeSymlinkEscape, "%s is a symlink to a path outside the repository", rel)}
	}
	info, err := os.Stat(real)
	if err != nil {
		return statEntry{err: fsError("stat", rel, err)}
	}
	canon := filepath.ToSlash(within)
	switch {
	case info.IsDir():
		return statEntry{kind: kindDir, real: real, canon: canon}
	case info.Mode().IsRegular():
		return statEntry{kind: kindFile, real: real, canon: canon}
	}
	return statEntry{kind: kindNone, canon: canon}
}

func (t *tree) listDir(rel, real string) dirEntry {
	t.mu.Lock()
	if e, ok := t.dirs[rel]; ok {
		t.mu.Unlock()
		return e
	}
	t.mu.Unlock()
	e := dirEntry{modes: map[string]fs.FileMode{}}
	entries, err := os.ReadDir(real)
	if err != nil {
		e.err = fsError("read directory", rel, err)
	}
	for _, d := range entries {
		e.names = append(e.names, d.Name())
		e.modes[d.Name()] = d.Type()
	}
	sort.Strings(e.names)
	t.mu.Lock()
	t.dirs[rel] = e
	t.mu.Unlock()
	return e
}

func (t *tree) readFile(rel string) ([]byte, error) {
	e := t.readScanned(rel)
	return e.data, e.err
}

// readScanned reads a file once and checks it against the bounds of one file
// (see scanYAML) before anyone decodes it; a file over a bound is an error.
func (t *tree) readScanned(rel string) fileEntry {
	t.mu.Lock()
	if e, ok := t.files[rel]; ok {
		t.mu.Unlock()
		return e
	}
	t.mu.Unlock()
	var e fileEntry
	e.data, e.err = t.readFileUncached(rel)
	if e.err == nil {
		e.scan = scanYAML(rel, e.data)
		if e.scan.err != nil {
			e.data, e.err = nil, e.scan.err
		}
	}
	t.mu.Lock()
	t.files[rel] = e
	t.mu.Unlock()
	return e
}

func (t *tree) readFileUncached(rel string) ([]byte, error) {
	st := t.stat(rel)
	switch {
	case st.err != nil:
		return nil, st.err
	case st.kind == kindNone:
		return nil, fmt.Errorf("read %s: %w", rel, fs.ErrNotExist)
	case st.kind == kindDir:
		return nil, fmt.Errorf("read %s: is a directory", rel)
	}
	f, err := os.Open(st.real)
	if err != nil {
		return nil, fsError("read", rel, err)
	}
	defer f.Close()
	// Read one byte past the limit to tell a large file from one at the limit.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fsError("read", rel, err)
	}
	if len(data) > MaxFileSize {
		return nil, refuse(CodeFileTooLarge, "%s is over the %d byte limit", rel, MaxFileSize)
	}
	t.mu.Lock()
	t.bytesRead += len(data)
	total := t.bytesRead
	t.mu.Unlock()
	if total > MaxPlanBytes {
		return nil, refuse(CodeTooLarge, "reading %s: the plan reads more than %d bytes of the repository, at most %d", rel, MaxPlanBytes, MaxPlanBytes)
	}
	return data, nil
}

func (t *tree) readDir(rel string) ([]string, error) {
	st := t.stat(rel)
	switch {
	case st.err != nil:
		return nil, st.err
	case st.kind != kindDir:
		return nil, fmt.Errorf("read directory %s: %w", rel, fs.ErrNotExist)
	}
	e := t.listDir(st.canon, st.real)
	return e.names, e.err
}

// maxReachableDirs bounds the directories reachable visits; past it, the whole
// repository counts as reachable.
const maxReachableDirs = 10000

// reachable returns the canonical directories a reader of root may enter:
// root and everything below it, symlinked directories followed (each once, so a
// symlink cycle ends), and the canonical paths of the files it reads under
// another name, through a symlink to a file elsewhere in the repository (a
// chart's templates/_helpers.tpl linked to shared helpers): those lie in none
// of the directories. Entries that cannot be resolved (symlinks leaving the
// repository) reach nothing in it and are left out.
func (t *tree) reachable(root string) (dirs []string, linked map[string]bool) {
	start, err := t.canonical(root)
	if err != nil || start == "." {
		return []string{"."}, nil
	}
	seen := map[string]bool{start: true}
	queue := []string{start}
	for i := 0; i < len(queue); i++ {
		if len(queue) > maxReachableDirs {
			return []string{"."}, nil
		}
		names, err := t.readDir(queue[i])
		if err != nil {
			continue
		}
		for _, n := range names {
			st := t.stat(path.Join(queue[i], n))
			if st.err != nil || seen[st.canon] {
				continue
			}
			if st.kind == kindFile && st.canon != path.Join(queue[i], n) {
				if linked == nil {
					linked = map[string]bool{}
				}
				linked[st.canon] = true
			}
			if st.kind != kindDir {
				continue
			}
			if st.canon == "." {
				return []string{"."}, nil
			}
			seen[st.canon] = true
			queue = append(queue, st.canon)
		}
	}
	return queue, linked
}

// view is the repository as one render sees it: the tree plus replaced or added
// files. It implements kustomize's filesys.FileSystem with the repository root at
// "/", so nothing outside the repository is reachable by any path. Writes land in
// the view only.
//
// Like kustomize's own file system on disk, the view resolves symlinks: CleanedAbs
// answers with canonical paths, so kustomize resolves a symlinked base's own
// references from where the base really is, and the view keys replaced files by
// canonical path, so a replacement is read under every name of the file.
type view struct {
	t *tree
	// files replaces or adds file contents by canonical relative path; a nil
	// content removes the file (a revert of a created file).
	files map[string][]byte
	// budget, when set, counts this render's reads (see metered).
	budget *readBudget
}

var _ filesys.FileSystem = (*view)(nil)

func newView(t *tree, files map[string][]byte) *view {
	own := make(map[string][]byte, len(files))
	for k, b := range files {
		own[t.key(k)] = b
	}
	return &view{t: t, files: own}
}

// metered returns the view as one render under ctx reads it: every read counts
// against the bounds of one render, and fails once ctx is done.
func (v *view) metered(ctx context.Context) *view {
	return &view{t: v.t, files: v.files, budget: newReadBudget(ctx, v.t)}
}

// with returns a view that also holds files, reading under the same budget.
func (v *view) with(files map[string][]byte) *view {
	nv := &view{t: v.t, files: make(map[string][]byte, len(v.files)+len(files)), budget: v.budget}
	for k, b := range v.files {
		nv.files[k] = b
	}
	for k, b := range files {
		nv.files[v.t.key(k)] = b
	}
	return nv
}

// key is the canonical path under which a view holds the file rel. A path that
// cannot be resolved keeps its name: every read of it fails on the same error
// before the view is consulted.
func (t *tree) key(rel string) string {
	c, ok := cleanRel(rel)
	if !ok {
		return rel
	}
	if canon, err := t.canonical(c); err == nil {
		return canon
	}
	return c
}

// rel maps a path of the view to a repository path. Paths are rooted at the
// repository, so ".." cannot climb above it, as in any absolute path at "/".
func (v *view) rel(p string) string {
	c := strings.TrimPrefix(path.Clean("/"+filepath.ToSlash(p)), "/")
	if c == "" {
		return "."
	}
	return c
}

func (v *view) kind(rel string) (nodeKind, error) {
	st := v.t.stat(rel)
	if st.err != nil {
		return kindNone, st.err
	}
	if b, ok := v.files[st.canon]; ok {
		if b == nil {
			return kindNone, nil
		}
		return kindFile, nil
	}
	if st.kind == kindNone {
		for f, b := range v.files {
			if b != nil && (strings.HasPrefix(f, st.canon+"/") || st.canon == ".") {
				return kindDir, nil
			}
		}
	}
	return st.kind, nil
}

// read is the one way a render reads a file: checked against the bounds of one
// file (the repository's files once per plan, the view's own files at each read)
// and counted against the render's budget, before any decoder sees the bytes.
func (v *view) read(rel string) ([]byte, error) {
	canon, err := v.t.canonical(rel)
	if err != nil {
		return nil, err
	}
	var e fileEntry
	if b, ok := v.files[canon]; ok {
		if b == nil {
			return nil, fmt.Errorf("read %s: %w", rel, fs.ErrNotExist)
		}
		e.data, e.scan = b, scanYAML(canon, b)
		e.err = e.scan.err
	} else {
		e = v.t.readScanned(canon)
	}
	if v.budget != nil {
		if err := v.budget.take(canon, len(e.data), e.scan, e.err); err != nil {
			return nil, err
		}
	}
	if e.err != nil {
		return nil, e.err
	}
	return e.data, nil
}

// readAhead is the reading ahead of one build's files in a view: files read
// for the build before it asks for them, counted against the render's budget
// as its reads, and given back when it did not read them.
type readAhead struct {
	v     *view
	mu    sync.Mutex
	taken map[string]taken
}

// taken is what one file read ahead took from the budget.
type taken struct {
	size int
	scan yamlScan
}

func (v *view) readingAhead() *readAhead {
	return &readAhead{v: v, taken: map[string]taken{}}
}

// read reads the view's file p as ReadFile does, if the read succeeds and fits
// the render's bounds: a read that fails or would pass a bound is left to the
// build, which fails on it where it reads it (if it does), as it would in
// process.
func (a *readAhead) read(p string) ([]byte, bool) {
	v := a.v
	canon, err := v.t.canonical(v.rel(p))
	if err != nil {
		return nil, false
	}
	var e fileEntry
	if b, ok := v.files[canon]; ok {
		if b == nil {
			return nil, false
		}
		e.data, e.scan = b, scanYAML(canon, b)
		e.err = e.scan.err
	} else {
		e = v.t.readScanned(canon)
	}
	if e.err != nil || v.budget != nil && !v.budget.takeIfFits(len(e.data), e.scan) {
		return nil, false
	}
	a.mu.Lock()
	a.taken[p] = taken{size: len(e.data), scan: e.scan}
	a.mu.Unlock()
	return e.data, true
}

// unread gives back to the budget what the read of p ahead took.
func (a *readAhead) unread(p string) {
	a.mu.Lock()
	t, ok := a.taken[p]
	delete(a.taken, p)
	a.mu.Unlock()
	if ok && a.v.budget != nil {
		a.v.budget.giveBack(t.size, t.scan)
	}
}

func (v *view) list(rel string) ([]string, error) {
	canon, err := v.t.canonical(rel)
	if err != nil {
		return nil, err
	}
	rel = canon
	names := map[string]bool{}
	base, err := v.t.readDir(rel)
	if err != nil && len(v.files) == 0 {
		return nil, err
	}
	for _, n := range base {
		names[n] = true
	}
	prefix := rel + "/"
	if rel == "." {
		prefix = ""
	}
	for f, b := range v.files {
		if rest, ok := strings.CutPrefix(f, prefix); ok {
			first, deeper, _ := strings.Cut(rest, "/")
			switch {
			case b != nil:
				names[first] = true
			case deeper == "":
				delete(names, first) // removed in this view
			}
		}
	}
	if len(names) == 0 && err != nil {
		return nil, err
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

func abs(rel string) string {
	if rel == "." {
		return "/"
	}
	return "/" + rel
}

// Create is not supported: a render never creates files.
func (v *view) Create(p string) (filesys.File, error) {
	return nil, fmt.Errorf("create %s: the repository view is read-only", p)
}

// Mkdir is not supported: a render never creates directories.
func (v *view) Mkdir(p string) error {
	return fmt.Errorf("mkdir %s: the repository view is read-only", p)
}

// MkdirAll is not supported: a render never creates directories.
func (v *view) MkdirAll(p string) error {
	return fmt.Errorf("mkdir %s: the repository view is read-only", p)
}

// RemoveAll is not supported: a render never removes files.
func (v *view) RemoveAll(p string) error {
	return fmt.Errorf("remove %s: the repository view is read-only", p)
}

// Open opens a file for reading.
func (v *view) Open(p string) (filesys.File, error) {
	rel := v.rel(p)
	data, err := v.read(rel)
	if err != nil {
		return nil, err
	}
	return &viewFile{name: path.Base(rel), Reader: bytes.NewReader(data), size: int64(len(data))}, nil
}

// IsDir reports whether p is a directory.
func (v *view) IsDir(p string) bool {
	k, _ := v.kind(v.rel(p))
	return k == kindDir
}

// ReadDir lists the names in directory p.
func (v *view) ReadDir(p string) ([]string, error) {
	return v.list(v.rel(p))
}

// CleanedAbs splits p into its directory and file name, symlinks resolved as
// kustomize's file system on disk does.
func (v *view) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	rel, err := v.t.canonical(v.rel(p))
	if err != nil {
		return "", "", err
	}
	k, err := v.kind(rel)
	if err != nil {
		return "", "", err
	}
	switch k {
	case kindDir:
		return filesys.ConfirmedDir(abs(rel)), "", nil
	case kindFile:
		return filesys.ConfirmedDir(abs(path.Dir(rel))), path.Base(rel), nil
	default:
		return "", "", fmt.Errorf("'%s' doesn't exist: %w", p, fs.ErrNotExist)
	}
}

// Exists reports whether p exists. A path that cannot be read safely (a symlink
// leaving the repository) counts as existing, so that kustomize reads it and fails
// with the reason instead of treating it as a remote base.
func (v *view) Exists(p string) bool {
	k, err := v.kind(v.rel(p))
	return err != nil || k != kindNone
}

// Glob matches pattern against the files of one directory; only the last element
// of the pattern may hold wildcards.
func (v *view) Glob(pattern string) ([]string, error) {
	rel := v.rel(pattern)
	dir, base := path.Dir(rel), path.Base(rel)
	if strings.ContainsAny(dir, "*?[") {
		return nil, fmt.Errorf("glob %s: wildcards are supported in the last path element only", pattern)
	}
	names, err := v.list(dir)
	if err != nil {
		return nil, nil //nolint:nilerr // like filepath.Glob, a missing directory matches nothing
	}
	var out []string
	for _, n := range names {
		ok, err := path.Match(base, n)
		if err != nil {
			return nil, fmt.Errorf("glob %s: %w", pattern, err)
		}
		if ok {
			out = append(out, abs(path.Join(dir, n)))
		}
	}
	return out, nil
}

// ReadFile returns the contents of file p.
func (v *view) ReadFile(p string) ([]byte, error) {
	return v.read(v.rel(p))
}

// WriteFile stores data in this view only; the repository is never written.
func (v *view) WriteFile(p string, data []byte) error {
	v.files[v.t.key(v.rel(p))] = append([]byte{}, data...) // never nil: nil removes
	return nil
}

// Walk walks the files under p in lexical order.
func (v *view) Walk(p string, fn filepath.WalkFunc) error {
	rel := v.rel(p)
	err := v.walk(rel, fn)
	if errors.Is(err, filepath.SkipDir) || errors.Is(err, filepath.SkipAll) {
		return nil
	}
	return err
}

func (v *view) walk(rel string, fn filepath.WalkFunc) error {
	k, err := v.kind(rel)
	if err != nil {
		return fn(abs(rel), nil, err)
	}
	if k == kindFile {
		data, err := v.read(rel)
		return fn(abs(rel), fileInfo{name: path.Base(rel), size: int64(len(data))}, err)
	}
	if err := fn(abs(rel), fileInfo{name: path.Base(rel), dir: true}, nil); err != nil {
		if errors.Is(err, filepath.SkipDir) {
			return nil
		}
		return err
	}
	names, err := v.list(rel)
	if err != nil {
		return fn(abs(rel), nil, err)
	}
	for _, n := range names {
		if err := v.walk(path.Join(rel, n), fn); err != nil {
			return err
		}
	}
	return nil
}

type viewFile struct {
	*bytes.Reader
	name string
	size int64
}

func (f *viewFile) Write([]byte) (int, error) {
	return 0, fmt.Errorf("write %s: the repository view is read-only", f.name)
}
func (f *viewFile) Close() error               { return nil }
func (f *viewFile) Stat() (os.FileInfo, error) { return fileInfo{name: f.name, size: f.size}, nil }

type fileInfo struct {
	name string
	size int64
	dir  bool
}

func (i fileInfo) Name() string { return i.name }
func (i fileInfo) Size() int64  { return i.size }
func (i fileInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.dir }
func (i fileInfo) Sys() any           { return nil }
