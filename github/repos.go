package github

import (
	"context"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v62/github"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/palantir/go-githubapp/githubapp"
)

// Repos is every repository operation of the change pipeline (plan.Repos), each
// through the client of the installation named by the call. Repositories are named
// "owner/name"; snapshots come through the archive cache, so a commit is downloaded
// once. The errors of its calls are marked as GitHub's (see Answer).
type Repos struct {
	Clients  githubapp.ClientCreator
	Archives *cache.Archives
}

func (g Repos) client(inst int64, repo string) (*gh.Client, string, string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok {
		return nil, "", "", fmt.Errorf("repository %q is not owner/name", repo)
	}
	c, err := g.Clients.NewInstallationClient(inst)
	if err != nil {
		return nil, "", "", fmt.Errorf("client for installation %d: %w", inst, err)
	}
	return c, owner, name, nil
}

// ResolveRevision is the package function ResolveRevision through the installation's client.
func (g Repos) ResolveRevision(ctx context.Context, inst int64, repo, revision string) (Branch, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return Branch{}, err
	}
	return calledWith(ResolveRevision(ctx, c, owner, name, revision))
}

// Snapshot is the tree of repo at sha, from the archive cache or downloaded as a
// tarball through the installation's client.
func (g Repos) Snapshot(ctx context.Context, inst int64, repo, sha string) (*cache.Snapshot, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return nil, err
	}
	return calledWith(g.Archives.Get(ctx, repo, sha, TarballFetcher(c, owner, name, sha)))
}

// GetCommit is the package function GetCommit through the installation's client.
func (g Repos) GetCommit(ctx context.Context, inst int64, repo, sha string) (CommitInfo, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return CommitInfo{}, err
	}
	return calledWith(GetCommit(ctx, c, owner, name, sha))
}

// CreateCommit is the package function CreateCommit through the installation's client.
func (g Repos) CreateCommit(ctx context.Context, inst int64, repo, baseSHA, message string, files []FileChange) (CommitInfo, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return CommitInfo{}, err
	}
	return calledWith(CreateCommit(ctx, c, owner, name, baseSHA, message, files))
}

// BranchHead is the package function BranchHead through the installation's client.
func (g Repos) BranchHead(ctx context.Context, inst int64, repo, branch string) (string, bool, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return "", false, err
	}
	sha, ok, err := BranchHead(ctx, c, owner, name, branch)
	return sha, ok, called(err)
}

// SetBranch is the package function SetBranch through the installation's client.
func (g Repos) SetBranch(ctx context.Context, inst int64, repo, branch, sha string) error {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return err
	}
	return called(SetBranch(ctx, c, owner, name, branch, sha))
}

// OpenPull is the package function OpenPull through the installation's client.
func (g Repos) OpenPull(ctx context.Context, inst int64, repo string, np NewPull) (PullRequest, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return PullRequest{}, err
	}
	return calledWith(OpenPull(ctx, c, owner, name, np))
}

// GetPull is the package function GetPull through the installation's client.
func (g Repos) GetPull(ctx context.Context, inst int64, repo string, number int64) (PullRequest, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return PullRequest{}, err
	}
	return calledWith(GetPull(ctx, c, owner, name, number))
}

// EditPull is the package function EditPull through the installation's client.
func (g Repos) EditPull(ctx context.Context, inst int64, repo string, number int64, title, body string) error {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return err
	}
	return called(EditPull(ctx, c, owner, name, number, title, body))
}

// ClosePull is the package function ClosePull through the installation's client.
func (g Repos) ClosePull(ctx context.Context, inst int64, repo string, number int64) error {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return err
	}
	return called(ClosePull(ctx, c, owner, name, number))
}

// DeleteBranch is the package function DeleteBranch through the installation's client.
func (g Repos) DeleteBranch(ctx context.Context, inst int64, repo, branch string) error {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return err
	}
	return called(DeleteBranch(ctx, c, owner, name, branch))
}

// PublishCheckRun is the package function PublishCheckRun through the installation's client.
func (g Repos) PublishCheckRun(ctx context.Context, inst int64, repo, headSHA string, id int64, r CheckReport) (CheckRunRef, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return CheckRunRef{}, err
	}
	return calledWith(PublishCheckRun(ctx, c, owner, name, headSHA, id, r))
}

// Contains is the package function Contains through the installation's client.
func (g Repos) Contains(ctx context.Context, inst int64, repo, ancestor, head string) (bool, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return false, err
	}
	return calledWith(Contains(ctx, c, owner, name, ancestor, head))
}

// calledWith is a call's result with its error, if any, marked as GitHub's.
func calledWith[T any](v T, err error) (T, error) { return v, called(err) }
