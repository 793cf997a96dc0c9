package githubtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage"
	"github.com/google/go-github/v62/github"
)

// repo is one repository: a bare git repository on disk plus GitHub's own records
// (pull requests, check runs, comments) that git does not hold.
type repo struct {
	id            int64
	owner         *account
	name          string
	private       bool
	defaultBranch string
	path          string
	git           *git.Repository
	createdAt     time.Time
	pushedAt      time.Time

	nextNumber       int
	pulls            []*pull
	comments         []*issueComment
	checkRuns        []*checkRun
	checkSuites      map[string]int64 // head SHA → check suite id
	tarballDownloads int
	// roles are the repository roles given to people with SetPermission, by account id.
	roles map[int64]string

	// memo keeps what is computed from commits alone, which never change: the
	// file lists of tree diffs and merge results. GitHub computes them once too;
	// without it every pull request read of a large tree re-reads it whole, and a
	// benchmark against the fake measures the fake.
	memo struct {
		sync.Mutex
		diffs  map[string][]*github.CommitFile
		merges map[string]mergeResult
	}
}

type mergeResult struct {
	tree  plumbing.Hash
	clean bool
}

func (rp *repo) fullName() string { return rp.owner.login + "/" + rp.name }

func (rp *repo) storer() storage.Storer { return rp.git.Storer }

// Author names who makes a commit; Login (optional) links it to a GitHub user.
type Author struct {
	Name  string
	Email string
	Login string
}

// DefaultAuthor is the person tests use for commits "someone else" makes.
var DefaultAuthor = Author{Name: "Octo Cat", Email: "octocat@users.noreply.github.com", Login: "octocat"}

var validName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// CreateRepo creates a private repository owner/name whose default branch holds one
// commit with files (path → content); with no files the repository is empty. It
// returns the commit SHA ("" for an empty repository).
func (s *Server) CreateRepo(t TB, owner, name string, files map[string]string, defaultBranch string) string {
	t.Helper()
	sha, err := s.createRepo(owner, name, files, defaultBranch)
	if err != nil {
		t.Fatalf("create repository %s/%s: %v", owner, name, err)
	}
	return sha
}

func (s *Server) createRepo(owner, name string, files map[string]string, defaultBranch string) (string, error) {
	if !validName.MatchString(owner) || !validName.MatchString(name) {
		return "", fmt.Errorf("invalid owner or name")
	}
	if defaultBranch == "" {
		defaultBranch = "main"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(owner + "/" + name)
	if _, exists := s.repos[key]; exists {
		return "", fmt.Errorf("repository already exists")
	}
	dir := filepath.Join(s.dir, owner, name+".git")
	g, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		Bare:        true,
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(defaultBranch)},
	})
	if err != nil {
		return "", fmt.Errorf("init bare repository: %w", err)
	}
	now := s.clock.Now()
	rp := &repo{
		id:            s.newID(),
		owner:         s.accountLocked(owner, "Organization"),
		name:          name,
		private:       true,
		defaultBranch: defaultBranch,
		path:          dir,
		git:           g,
		createdAt:     now,
		pushedAt:      now,
		checkSuites:   map[string]int64{},
	}
	s.repos[key] = rp
	if len(files) == 0 {
		return "", nil
	}
	sha, err := s.commitFilesLocked(rp, plumbing.ZeroHash, fileChanges(files), "Initial commit", DefaultAuthor)
	if err != nil {
		return "", err
	}
	if err := rp.setRef(plumbing.NewBranchReferenceName(defaultBranch), sha); err != nil {
		return "", err
	}
	return sha.String(), nil
}

// SetPrivate changes a repository's visibility; public repositories can be read
// without credentials.
func (s *Server) SetPrivate(t TB, repoName string, private bool) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRepoLocked(t, repoName).private = private
}

// CloneURL is the smart-HTTP clone URL of the repository ("owner/name").
func (s *Server) CloneURL(repoName string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rp := s.repos[strings.ToLower(repoName)]; rp != nil {
		return s.cloneURL(rp)
	}
	return s.htmlURL("%s.git", repoName)
}

func (s *Server) cloneURL(rp *repo) string { return s.htmlURL("%s.git", rp.fullName()) }

// GitDir is the path of the repository's bare git directory, for tests that inspect it
// with the git CLI.
func (s *Server) GitDir(t TB, repoName string) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mustRepoLocked(t, repoName).path
}

// Head returns the SHA a branch points at ("" when the branch does not exist).
func (s *Server) Head(t TB, repoName, branch string) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepoLocked(t, repoName)
	ref, err := rp.storer().Reference(plumbing.NewBranchReferenceName(branch))
	if err != nil {
		return ""
	}
	return ref.Hash().String()
}

// FileAt returns the content of path at ref (branch, tag or SHA) and whether it exists.
func (s *Server) FileAt(t TB, repoName, ref, path string) (string, bool) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepoLocked(t, repoName)
	c, err := rp.resolveCommit(ref)
	if err != nil {
		t.Fatalf("resolve %s in %s: %v", ref, repoName, err)
	}
	tree, err := c.Tree()
	if err != nil {
		t.Fatalf("read tree of %s: %v", c.Hash, err)
	}
	f, err := tree.File(path)
	if errors.Is(err, object.ErrFileNotFound) || errors.Is(err, object.ErrDirectoryNotFound) || errors.Is(err, object.ErrEntryNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatalf("read %s at %s: %v", path, ref, err)
	}
	content, err := f.Contents()
	if err != nil {
		t.Fatalf("read %s at %s: %v", path, ref, err)
	}
	return content, true
}

// CreateBranch creates branch at ref without firing events (setup, not activity).
func (s *Server) CreateBranch(t TB, repoName, branch, ref string) string {
	t.Helper()
	return s.createRef(t, repoName, plumbing.NewBranchReferenceName(branch), ref)
}

// CreateTag creates a lightweight tag at ref.
func (s *Server) CreateTag(t TB, repoName, tag, ref string) string {
	t.Helper()
	return s.createRef(t, repoName, plumbing.NewTagReferenceName(tag), ref)
}

func (s *Server) createRef(t TB, repoName string, name plumbing.ReferenceName, ref string) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepoLocked(t, repoName)
	c, err := rp.resolveCommit(ref)
	if err != nil {
		t.Fatalf("resolve %s in %s: %v", ref, repoName, err)
	}
	if err := rp.setRef(name, c.Hash); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return c.Hash.String()
}

// TarballDownloads is how many archives of the repository were downloaded.
func (s *Server) TarballDownloads(repoName string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rp := s.repos[strings.ToLower(repoName)]; rp != nil {
		return rp.tarballDownloads
	}
	return 0
}

// ArchiveTokens are the tokens of every archive link the tarball redirect handed
// out, sorted: a test looks for them where they must not appear.
func (s *Server) ArchiveTokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.archives))
}

func (s *Server) mustRepoLocked(t TB, name string) *repo {
	t.Helper()
	rp := s.repos[strings.ToLower(name)]
	if rp == nil {
		t.Fatalf("repository %s not found", name)
	}
	return rp
}

func (s *Server) repoFromPath(r *http.Request) *repo {
	name := strings.TrimSuffix(r.PathValue("repo"), ".git")
	return s.repos[strings.ToLower(r.PathValue("owner")+"/"+name)]
}

func (s *Server) sortedReposLocked() []*repo {
	out := make([]*repo, 0, len(s.repos))
	for _, rp := range s.repos {
		out = append(out, rp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// reposNamedLocked resolves "name" (in the account) or "owner/name".
func (s *Server) reposNamedLocked(acc *account, names []string) ([]*repo, error) {
	var out []*repo
	for _, n := range names {
		full := n
		if !strings.Contains(n, "/") {
			full = acc.login + "/" + n
		}
		rp := s.repos[strings.ToLower(full)]
		if rp == nil {
			return nil, fmt.Errorf("repository %s not found", full)
		}
		if rp.owner != acc {
			return nil, fmt.Errorf("repository %s is not owned by %s", full, acc.login)
		}
		out = append(out, rp)
	}
	return out, nil
}

// --- git objects ---

func (rp *repo) writeObject(t plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	obj := rp.storer().NewEncodedObject()
	obj.SetType(t)
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("open %s writer: %w", t, err)
	}
	if _, err := w.Write(data); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write %s: %w", t, err)
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("close %s: %w", t, err)
	}
	h, err := rp.storer().SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store %s: %w", t, err)
	}
	return h, nil
}

func (rp *repo) writeBlob(data []byte) (plumbing.Hash, error) {
	return rp.writeObject(plumbing.BlobObject, data)
}

// writeTree stores a tree with its entries in git's canonical order.
func (rp *repo) writeTree(entries []object.TreeEntry) (plumbing.Hash, error) {
	sort.Slice(entries, func(i, j int) bool { return treeSortKey(entries[i]) < treeSortKey(entries[j]) })
	obj := rp.storer().NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode tree: %w", err)
	}
	h, err := rp.storer().SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store tree: %w", err)
	}
	return h, nil
}

// treeSortKey sorts directories as if their name ended in "/", as git does.
func treeSortKey(e object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}

func (rp *repo) writeCommit(c *object.Commit) (plumbing.Hash, error) {
	obj := rp.storer().NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode commit: %w", err)
	}
	h, err := rp.storer().SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store commit: %w", err)
	}
	return h, nil
}

// treeChange sets (or deletes) one path of a tree.
type treeChange struct {
	path   string
	mode   filemode.FileMode
	hash   plumbing.Hash
	delete bool
}

// editTree applies changes to the tree base (zero: empty tree) and stores the result.
// Nested paths create or edit subtrees; a subtree left empty disappears, as in git.
func (rp *repo) editTree(base plumbing.Hash, changes []treeChange) (plumbing.Hash, int, error) {
	entries := map[string]object.TreeEntry{}
	if !base.IsZero() {
		t, err := object.GetTree(rp.storer(), base)
		if err != nil {
			return plumbing.ZeroHash, 0, fmt.Errorf("read tree %s: %w", base, err)
		}
		for _, e := range t.Entries {
			entries[e.Name] = e
		}
	}
	nested := map[string][]treeChange{}
	var order []string
	for _, c := range changes {
		first, rest, isNested := strings.Cut(c.path, "/")
		if isNested {
			if _, seen := nested[first]; !seen {
				order = append(order, first)
			}
			c.path = rest
			nested[first] = append(nested[first], c)
			continue
		}
		if c.delete {
			delete(entries, first)
			continue
		}
		entries[first] = object.TreeEntry{Name: first, Mode: c.mode, Hash: c.hash}
	}
	for _, dir := range order {
		var sub plumbing.Hash
		if e, ok := entries[dir]; ok && e.Mode == filemode.Dir {
			sub = e.Hash
		}
		h, n, err := rp.editTree(sub, nested[dir])
		if err != nil {
			return plumbing.ZeroHash, 0, err
		}
		if n == 0 {
			delete(entries, dir)
			continue
		}
		entries[dir] = object.TreeEntry{Name: dir, Mode: filemode.Dir, Hash: h}
	}
	list := make([]object.TreeEntry, 0, len(entries))
	for _, e := range entries {
		list = append(list, e)
	}
	h, err := rp.writeTree(list)
	return h, len(list), err
}

// fileChanges turns path → content into blob changes to apply; content is written as
// a blob when the change is applied.
type fileChange struct {
	path    string
	content *string // nil deletes
	link    bool    // content is the target of a symbolic link
}

func fileChanges(files map[string]string) []fileChange {
	out := make([]fileChange, 0, len(files))
	for p, c := range files {
		out = append(out, fileChange{path: p, content: ptr(c)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

func signature(a Author, when time.Time) object.Signature {
	return object.Signature{Name: a.Name, Email: a.Email, When: when}
}

// commitFilesLocked writes a commit on parent (zero: root commit) that applies files.
func (s *Server) commitFilesLocked(rp *repo, parent plumbing.Hash, files []fileChange, message string, author Author) (plumbing.Hash, error) {
	var base plumbing.Hash
	var parents []plumbing.Hash
	if !parent.IsZero() {
		c, err := object.GetCommit(rp.storer(), parent)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read parent %s: %w", parent, err)
		}
		base = c.TreeHash
		parents = []plumbing.Hash{parent}
	}
	var changes []treeChange
	for _, f := range files {
		if err := validatePath(f.path); err != nil {
			return plumbing.ZeroHash, err
		}
		if f.content == nil {
			changes = append(changes, treeChange{path: f.path, delete: true})
			continue
		}
		h, err := rp.writeBlob([]byte(*f.content))
		if err != nil {
			return plumbing.ZeroHash, err
		}
		mode := filemode.Regular
		if f.link {
			mode = filemode.Symlink
		}
		changes = append(changes, treeChange{path: f.path, mode: mode, hash: h})
	}
	tree, _, err := rp.editTree(base, changes)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	now := s.clock.Now()
	return rp.writeCommit(&object.Commit{
		Author:       signature(author, now),
		Committer:    signature(author, now),
		Message:      message,
		TreeHash:     tree,
		ParentHashes: parents,
	})
}

func validatePath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return fmt.Errorf("path %q is malformed", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." || part == ".git" {
			return fmt.Errorf("path %q contains a malformed path component", p)
		}
	}
	return nil
}

func (rp *repo) setRef(name plumbing.ReferenceName, h plumbing.Hash) error {
	if err := rp.storer().SetReference(plumbing.NewHashReference(name, h)); err != nil {
		return fmt.Errorf("set %s: %w", name, err)
	}
	return nil
}

func (rp *repo) refHash(name plumbing.ReferenceName) (plumbing.Hash, bool) {
	ref, err := rp.storer().Reference(name)
	if err != nil {
		return plumbing.ZeroHash, false
	}
	return ref.Hash(), true
}

var hexSHA = regexp.MustCompile(`^[0-9a-f]{4,40}$`)

// resolveCommit resolves what GitHub accepts as a ref: a (possibly short) SHA, a
// branch, a tag, or a qualified "refs/…" / "heads/…" / "tags/…" name.
func (rp *repo) resolveCommit(ref string) (*object.Commit, error) {
	if ref == "" {
		ref = rp.defaultBranch
	}
	candidates := []plumbing.ReferenceName{
		plumbing.NewBranchReferenceName(ref),
		plumbing.NewTagReferenceName(ref),
		plumbing.ReferenceName(ref),
		plumbing.ReferenceName("refs/" + ref),
	}
	for _, name := range candidates {
		if h, ok := rp.refHash(name); ok {
			return rp.peelToCommit(h)
		}
	}
	if hexSHA.MatchString(ref) {
		if len(ref) == 40 {
			if c, err := object.GetCommit(rp.storer(), plumbing.NewHash(ref)); err == nil {
				return c, nil
			}
		} else if c := rp.commitByPrefix(ref); c != nil {
			return c, nil
		}
	}
	return nil, fmt.Errorf("no commit found for %s: %w", ref, errNotFound)
}

func (rp *repo) peelToCommit(h plumbing.Hash) (*object.Commit, error) {
	if tag, err := object.GetTag(rp.storer(), h); err == nil {
		return tag.Commit()
	}
	return object.GetCommit(rp.storer(), h)
}

func (rp *repo) commitByPrefix(prefix string) *object.Commit {
	iter, err := rp.storer().IterEncodedObjects(plumbing.CommitObject)
	if err != nil {
		return nil
	}
	defer iter.Close()
	var found *object.Commit
	_ = iter.ForEach(func(o plumbing.EncodedObject) error {
		if strings.HasPrefix(o.Hash().String(), prefix) {
			c, err := object.DecodeCommit(rp.storer(), o)
			if err == nil {
				found = c
			}
			return errStop
		}
		return nil
	})
	return found
}

var errStop = errors.New("stop iteration")

// branches lists the repository's branches with their tips, sorted by name.
func (rp *repo) branches() ([]*plumbing.Reference, error) {
	iter, err := rp.storer().IterReferences()
	if err != nil {
		return nil, fmt.Errorf("list references: %w", err)
	}
	defer iter.Close()
	var out []*plumbing.Reference
	err = iter.ForEach(func(ref *plumbing.Reference) error {
		if ref.Name().IsBranch() && ref.Type() == plumbing.HashReference {
			out = append(out, ref)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, err
}

// gitCLI runs git in the repository's directory; the fake uses it where go-git has no
// equivalent (three-way merges) and for smart HTTP.
func (rp *repo) gitCLI(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = rp.path
	cmd.Env = gitEnv(filepath.Dir(filepath.Dir(rp.path)))
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// gitEnv isolates git from the user's and the system's configuration.
func gitEnv(home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=safe.directory",
		"GIT_CONFIG_VALUE_0=*",
	}
}

// readBlob returns a blob's content.
func (rp *repo) readBlob(h plumbing.Hash) ([]byte, error) {
	b, err := object.GetBlob(rp.storer(), h)
	if err != nil {
		return nil, err
	}
	r, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
