package render

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/rs/zerolog"
	"sigs.k8s.io/kustomize/api/konfig"
)

// PriorTree names an earlier tree of the same repository and every path that
// differs between it and the tree being planned (Request.Since): the reach index
// of a new commit is built from the previous commit's, so a plan on it reads the
// kustomizations of the Applications the commit touched, not of all of them.
type PriorTree struct {
	// TreeID identifies the earlier tree, as Request.TreeID did when it was planned.
	TreeID string
	// Changed lists every repository path added, modified or removed between the
	// two trees; a renamed file is listed under both names. It must be complete:
	// a path left out gives wrong affected apps.
	Changed []string
}

// maxIndexedTrees bounds the trees whose symlink sets are looked up by TreeID.
// A reach keeps its own set (reachCall.links), so a tree that drops out only
// starts a new set for the reaches computed after.
const maxIndexedTrees = 256

// indexedTrees holds, per TreeID, the symlinks that reads of that tree resolved.
var indexedTrees = func() *lru.Cache[string, *linkSet] {
	c, err := lru.New[string, *linkSet](maxIndexedTrees)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return c
}()

// treeLinks returns the symlink set of the tree treeID.
func treeLinks(treeID string) *linkSet {
	s := &linkSet{}
	if prev, ok, _ := indexedTrees.PeekOrAdd(treeID, s); ok {
		return prev
	}
	return s
}

// openIndexedTree opens the tree at dir; with a treeID, the symlinks its reads
// resolve are collected in that tree's set.
func openIndexedTree(dir, treeID string) (*tree, error) {
	t, err := openTree(dir)
	if err != nil || treeID == "" {
		return t, err
	}
	t.links = treeLinks(treeID)
	return t, nil
}

// linkSet is the repository paths of symlinks a tree's reads went through. A
// reach that went through a symlink depends on where it points, which its files
// do not show, so a change of any of these paths rebuilds every reach.
type linkSet struct {
	mu    sync.Mutex
	paths map[string]bool
}

func (s *linkSet) add(paths ...string) {
	if s == nil || len(paths) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paths == nil {
		s.paths = map[string]bool{}
	}
	for _, p := range paths {
		s.paths[p] = true
	}
}

// addAll adds every path of o.
func (s *linkSet) addAll(o *linkSet) {
	if s == nil || o == nil || s == o {
		return
	}
	o.mu.Lock()
	paths := make([]string, 0, len(o.paths))
	for p := range o.paths {
		paths = append(paths, p)
	}
	o.mu.Unlock()
	s.add(paths...)
}

// touches reports whether f is one of the symlinks or lies below one.
func (s *linkSet) touches(f string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := f; p != "." && p != "/"; p = path.Dir(p) {
		if s.paths[p] {
			return true
		}
	}
	return false
}

// maxLinkHops bounds the symlinks followed while listing a chain, as the kernel does.
const maxLinkHops = 255

// linksAlong returns, relative to root, every symlink that resolving full (an
// absolute path) passes through, full's own first. Symlinks outside root are
// left out; a chain that cannot be read ends where it breaks.
func linksAlong(root, full string) []string {
	var out []string
	todo := full
	for range maxLinkHops {
		link, rest, ok := firstLink(todo)
		if !ok {
			return out
		}
		if within, err := filepath.Rel(root, link); err == nil && within != ".." && !strings.HasPrefix(within, ".."+string(filepath.Separator)) {
			out = append(out, filepath.ToSlash(within))
		}
		target, err := os.Readlink(link)
		if err != nil {
			return out
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(link), target)
		}
		todo = filepath.Join(target, rest)
	}
	return out
}

// firstLink finds the first element of the absolute path p that is a symlink,
// and the rest of p after it.
func firstLink(p string) (link, rest string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(p), string(filepath.Separator)), string(filepath.Separator))
	cur := string(filepath.Separator)
	for i, part := range parts {
		if part == "" {
			continue
		}
		cur = filepath.Join(cur, part)
		info, err := os.Lstat(cur)
		if err != nil {
			return "", "", false
		}
		if info.Mode()&os.ModeSymlink != 0 {
			return cur, filepath.Join(parts[i+1:]...), true
		}
	}
	return "", "", false
}

// priorReaches is what a plan may reuse of the earlier tree of Request.Since.
type priorReaches struct {
	treeID string
	// changed are the changed paths; each is its own canonical path in this tree.
	changed []string
}

// prior checks Request.Since once per plan: the earlier tree's reaches can be
// reused only when no changed path lies on a symlink in this tree. It returns
// nil when there is nothing to reuse, and logs why a given tree is not reused.
func (p *planner) prior() *priorReaches {
	p.priorOnce.Do(func() {
		since := p.req.Since
		if p.req.TreeID == "" || since == nil || since.TreeID == "" || since.TreeID == p.req.TreeID {
			return
		}
		changed := make([]string, 0, len(since.Changed))
		for _, f := range since.Changed {
			c, ok := cleanRel(f)
			if !ok || c == "." {
				p.fullIndex(since.TreeID, "changed path "+f+" is not a file of the repository")
				return
			}
			if st := p.t.stat(c); st.err != nil || st.canon != c || st.dangling {
				p.fullIndex(since.TreeID, "changed path "+c+" lies on a symlink")
				return
			}
			if old, ok := indexedTrees.Peek(since.TreeID); ok && old.touches(c) {
				p.fullIndex(since.TreeID, "changed path "+c+" was a symlink reads went through")
				return
			}
			changed = append(changed, c)
		}
		p.priorTree = &priorReaches{treeID: since.TreeID, changed: changed}
	})
	return p.priorTree
}

// fullIndex records that the reaches of this tree are read in full, not from the
// earlier tree's.
func (p *planner) fullIndex(since, reason string) {
	zerolog.Ctx(p.ctx).Info().Str("tree", p.req.TreeID).Str("since", since).Str("reason", reason).
		Msg("Reach index built in full")
}

// carried returns app's reach in the earlier tree when the changes cannot alter
// it, with the symlinks it went through, or nil; remembered is the app's key in
// this tree (nil when the tree has no TreeID). Only a reach that was computed
// and succeeded is carried: a refusal may be about a file the change adds.
func (p *planner) carried(app Application, remembered *reachMemoKey) (*appReach, *linkSet) {
	if remembered == nil {
		return nil, nil
	}
	prior := p.prior()
	if prior == nil {
		return nil, nil
	}
	key := *remembered
	key.tree = prior.treeID
	c := rememberedReaches.peek(key)
	if c == nil || !c.done.Load() || c.reach.err != nil {
		return nil, nil
	}
	for _, f := range prior.changed {
		if c.links.touches(f) || c.reach.reads(app.SourceType, f) || c.reach.findsKustomization(f) {
			return nil, nil
		}
	}
	return c.reach, c.links
}

// findsKustomization reports whether f would be a kustomization file of one of
// the directories the build visits: a second one makes kustomize refuse.
func (r *appReach) findsKustomization(f string) bool {
	if r.kust == nil {
		return false
	}
	dir, name := path.Dir(f), path.Base(f)
	for _, n := range r.kust.nodes {
		if n.dir == dir {
			for _, k := range konfig.RecognizedKustomizationFileNames() {
				if name == k {
					return true
				}
			}
		}
	}
	return false
}
