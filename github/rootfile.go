package github

import (
	"context"
	"fmt"

	gh "github.com/google/go-github/v62/github"
)

// DefaultBranchFile reads a file at the root of a repository's default branch, as
// the branch is now: its content, the branch's name, and found=false when the root
// has no such file. A file over maxBytes is ErrBlobTooLarge, read no further.
func DefaultBranchFile(ctx context.Context, c *gh.Client, owner, repo, name string, maxBytes int) (data []byte, branch string, found bool, err error) {
	r, _, err := c.Repositories.Get(ctx, owner, repo)
	if err != nil {
		return nil, "", false, fmt.Errorf("read repository %s/%s: %w", owner, repo, err)
	}
	branch = r.GetDefaultBranch()
	// The root's tree, not the contents API: one listing however large the file,
	// and its blob read with the size known first.
	tree, _, err := c.Git.GetTree(ctx, owner, repo, branch, false)
	if err != nil {
		return nil, branch, false, fmt.Errorf("read the root of %s/%s at %s: %w", owner, repo, branch, err)
	}
	for _, e := range tree.Entries {
		if e.GetPath() != name || e.GetType() != "blob" {
			continue
		}
		if e.GetSize() > maxBytes {
			return nil, branch, true, fmt.Errorf("%s at %s has %d bytes: %w", name, branch, e.GetSize(), ErrBlobTooLarge)
		}
		data, err := Blob(ctx, c, owner, repo, e.GetSHA(), maxBytes)
		if err != nil {
			return nil, branch, true, err
		}
		return data, branch, true, nil
	}
	return nil, branch, false, nil
}

// DefaultBranchFile is the package function DefaultBranchFile through the
// installation's client.
func (g Repos) DefaultBranchFile(ctx context.Context, inst int64, repo, name string, maxBytes int) ([]byte, string, bool, error) {
	c, owner, nm, err := g.client(inst, repo)
	if err != nil {
		return nil, "", false, err
	}
	b, sha, found, err := DefaultBranchFile(ctx, c, owner, nm, name, maxBytes)
	return b, sha, found, called(err)
}
