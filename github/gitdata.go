package github

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v62/github"
)

// BranchPrefix starts every branch the service writes. It never writes to any other
// branch: base branches change only when a person merges.
const BranchPrefix = "kukie/"

// Errors callers switch on.
var (
	// ErrNotABranch: a targetRevision that names a tag or a commit cannot take a PR.
	ErrNotABranch = errors.New("revision is not a branch")
	// ErrRevisionNotFound: neither a branch nor a tag of that name exists, or, for
	// an archive, the repository does not hold the commit.
	ErrRevisionNotFound = errors.New("revision not found")
	// ErrNotOurBranch: a write to a branch outside BranchPrefix was attempted.
	ErrNotOurBranch = errors.New("branch is not a kukie branch")
)

// Branch is a branch name and the commit it points to.
type Branch struct {
	Name string
	SHA  string
}

// ResolveRevision turns an Application's targetRevision into the branch it follows
// and that branch's head commit. "", "HEAD" and "refs/heads/x" are branches; a commit
// SHA or a tag is ErrNotABranch, because a PR could never change what Argo CD deploys.
func ResolveRevision(ctx context.Context, c *gh.Client, owner, repo, revision string) (Branch, error) {
	rev := strings.TrimPrefix(revision, "refs/heads/")
	if rev == "" || rev == "HEAD" {
		r, _, err := c.Repositories.Get(ctx, owner, repo)
		if err != nil {
			return Branch{}, fmt.Errorf("read repository %s/%s: %w", owner, repo, err)
		}
		rev = r.GetDefaultBranch()
	}
	if strings.HasPrefix(revision, "refs/tags/") {
		return Branch{}, fmt.Errorf("%q is a tag: %w", revision, ErrNotABranch)
	}
	if isHex(rev) && (len(rev) >= 7 && len(rev) <= 40 || len(rev) == 64) {
		if sha, found, err := BranchHead(ctx, c, owner, repo, rev); err == nil && found {
			return Branch{Name: rev, SHA: sha}, nil // a branch whose name looks like hex
		}
		return Branch{}, fmt.Errorf("%q is a commit SHA: %w", revision, ErrNotABranch)
	}
	sha, found, err := BranchHead(ctx, c, owner, repo, rev)
	if err != nil {
		return Branch{}, err
	}
	if found {
		return Branch{Name: rev, SHA: sha}, nil
	}
	_, resp, err := c.Git.GetRef(ctx, owner, repo, "tags/"+rev)
	if err == nil {
		return Branch{}, fmt.Errorf("%q is a tag: %w", revision, ErrNotABranch)
	}
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return Branch{}, fmt.Errorf("%q in %s/%s: %w", revision, owner, repo, ErrRevisionNotFound)
	}
	return Branch{}, fmt.Errorf("read tag %s of %s/%s: %w", rev, owner, repo, err)
}

// BranchHead returns the commit a branch points to, or found=false.
func BranchHead(ctx context.Context, c *gh.Client, owner, repo, branch string) (sha string, found bool, err error) {
	ref, resp, err := c.Git.GetRef(ctx, owner, repo, "heads/"+branch)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return "", false, nil
		}
		return "", false, fmt.Errorf("read branch %s of %s/%s: %w", branch, owner, repo, err)
	}
	// GetRef of "heads/x" may answer with refs matching by prefix ("heads/x-y"); only an
	// exact name counts.
	if ref.GetRef() != "refs/heads/"+branch {
		return "", false, nil
	}
	return ref.GetObject().GetSHA(), true, nil
}

// FileChange is one file of a commit: new content, or a deletion.
type FileChange struct {
	Path    string
	Content []byte
	Delete  bool
}

// CommitInfo is what the pipeline needs to know about an existing commit.
type CommitInfo struct {
	SHA     string
	TreeSHA string
	Parents []string
	Message string
}

// GetCommit reads a commit's tree, parents and message.
func GetCommit(ctx context.Context, c *gh.Client, owner, repo, sha string) (CommitInfo, error) {
	cm, _, err := c.Git.GetCommit(ctx, owner, repo, sha)
	if err != nil {
		return CommitInfo{}, fmt.Errorf("read commit %s of %s/%s: %w", sha, owner, repo, err)
	}
	info := CommitInfo{SHA: cm.GetSHA(), TreeSHA: cm.GetTree().GetSHA(), Message: cm.GetMessage()}
	for _, p := range cm.Parents {
		info.Parents = append(info.Parents, p.GetSHA())
	}
	return info, nil
}

// CreateCommit writes files as one commit on top of baseSHA through the git data API
// (blobs, a tree on the base tree, the commit), so GitHub signs it as the App. No
// branch moves; see SetBranch.
func CreateCommit(ctx context.Context, c *gh.Client, owner, repo, baseSHA, message string, files []FileChange) (CommitInfo, error) {
	if len(files) == 0 {
		return CommitInfo{}, errors.New("create commit: no files")
	}
	base, err := GetCommit(ctx, c, owner, repo, baseSHA)
	if err != nil {
		return CommitInfo{}, err
	}
	entries := make([]*gh.TreeEntry, 0, len(files))
	for _, f := range files {
		entry := &gh.TreeEntry{Path: gh.String(f.Path), Mode: gh.String("100644"), Type: gh.String("blob")}
		if !f.Delete {
			blob, _, err := c.Git.CreateBlob(ctx, owner, repo, &gh.Blob{
				Content:  gh.String(base64.StdEncoding.EncodeToString(f.Content)),
				Encoding: gh.String("base64"),
			})
			if err != nil {
				return CommitInfo{}, fmt.Errorf("create blob for %s: %w", f.Path, err)
			}
			entry.SHA = blob.SHA
		}
		entries = append(entries, entry)
	}
	tree, _, err := c.Git.CreateTree(ctx, owner, repo, base.TreeSHA, entries)
	if err != nil {
		return CommitInfo{}, fmt.Errorf("create tree on %s: %w", baseSHA, err)
	}
	cm, _, err := c.Git.CreateCommit(ctx, owner, repo, &gh.Commit{
		Message: gh.String(message),
		Tree:    &gh.Tree{SHA: tree.SHA},
		Parents: []*gh.Commit{{SHA: gh.String(baseSHA)}},
	}, nil)
	if err != nil {
		return CommitInfo{}, fmt.Errorf("create commit on %s: %w", baseSHA, err)
	}
	return CommitInfo{SHA: cm.GetSHA(), TreeSHA: tree.GetSHA(), Parents: []string{baseSHA}, Message: message}, nil
}

// SetBranch points a kukie branch at sha, creating it when missing and moving it
// (force) when it exists. Any branch outside BranchPrefix is refused.
func SetBranch(ctx context.Context, c *gh.Client, owner, repo, branch, sha string) error {
	if !strings.HasPrefix(branch, BranchPrefix) {
		return fmt.Errorf("set branch %s: %w", branch, ErrNotOurBranch)
	}
	ref := &gh.Reference{Ref: gh.String("refs/heads/" + branch), Object: &gh.GitObject{SHA: gh.String(sha)}}
	_, resp, err := c.Git.CreateRef(ctx, owner, repo, ref)
	if err == nil {
		return nil
	}
	if resp == nil || resp.StatusCode != http.StatusUnprocessableEntity {
		return fmt.Errorf("create branch %s: %w", branch, err)
	}
	// "Reference already exists": a resumed step or a branch moved by someone else.
	if _, _, err := c.Git.UpdateRef(ctx, owner, repo, ref, true); err != nil {
		return fmt.Errorf("move branch %s to %s: %w", branch, sha, err)
	}
	return nil
}

// DeleteBranch removes a kukie branch; a missing branch is not an error.
func DeleteBranch(ctx context.Context, c *gh.Client, owner, repo, branch string) error {
	if !strings.HasPrefix(branch, BranchPrefix) {
		return fmt.Errorf("delete branch %s: %w", branch, ErrNotOurBranch)
	}
	resp, err := c.Git.DeleteRef(ctx, owner, repo, "heads/"+branch)
	if err != nil && (resp == nil || (resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusUnprocessableEntity)) {
		return fmt.Errorf("delete branch %s: %w", branch, err)
	}
	return nil
}

// Contains reports whether commit ancestor is part of the history of head (equal or
// an ancestor), using the compare endpoint.
func Contains(ctx context.Context, c *gh.Client, owner, repo, ancestor, head string) (bool, error) {
	if ancestor == head {
		return true, nil
	}
	cmp, _, err := c.Repositories.CompareCommits(ctx, owner, repo, ancestor, head, &gh.ListOptions{PerPage: 1})
	if err != nil {
		return false, fmt.Errorf("compare %s...%s: %w", ancestor, head, err)
	}
	switch cmp.GetStatus() {
	case "ahead", "identical":
		return true, nil
	}
	return false, nil
}

func isHex(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}
