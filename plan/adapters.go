package plan

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/store"
)

// GitHubRepos implements Repos with the App's installation clients and the archive
// cache.
type GitHubRepos struct {
	Clients  githubapp.ClientCreator
	Archives *github.ArchiveCache
}

func (g GitHubRepos) client(inst int64, repo string) (*gh.Client, string, string, error) {
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

// ResolveRevision implements Repos.
func (g GitHubRepos) ResolveRevision(ctx context.Context, inst int64, repo, revision string) (github.Branch, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return github.Branch{}, err
	}
	return github.ResolveRevision(ctx, c, owner, name, revision)
}

// Snapshot implements Repos.
func (g GitHubRepos) Snapshot(ctx context.Context, inst int64, repo, sha string) (*github.Snapshot, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return nil, err
	}
	return g.Archives.Get(ctx, repo, sha, github.TarballFetcher(c, owner, name, sha))
}

// GetCommit implements Repos.
func (g GitHubRepos) GetCommit(ctx context.Context, inst int64, repo, sha string) (github.CommitInfo, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return github.CommitInfo{}, err
	}
	return github.GetCommit(ctx, c, owner, name, sha)
}

// CreateCommit implements Repos.
func (g GitHubRepos) CreateCommit(ctx context.Context, inst int64, repo, baseSHA, message string, files []github.FileChange) (github.CommitInfo, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return github.CommitInfo{}, err
	}
	return github.CreateCommit(ctx, c, owner, name, baseSHA, message, files)
}

// BranchHead implements Repos.
func (g GitHubRepos) BranchHead(ctx context.Context, inst int64, repo, branch string) (string, bool, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return "", false, err
	}
	return github.BranchHead(ctx, c, owner, name, branch)
}

// SetBranch implements Repos.
func (g GitHubRepos) SetBranch(ctx context.Context, inst int64, repo, branch, sha string) error {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return err
	}
	return github.SetBranch(ctx, c, owner, name, branch, sha)
}

// OpenPull implements Repos.
func (g GitHubRepos) OpenPull(ctx context.Context, inst int64, repo string, np github.NewPull) (github.PullRequest, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return github.PullRequest{}, err
	}
	return github.OpenPull(ctx, c, owner, name, np)
}

// GetPull implements Repos.
func (g GitHubRepos) GetPull(ctx context.Context, inst int64, repo string, number int64) (github.PullRequest, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return github.PullRequest{}, err
	}
	return github.GetPull(ctx, c, owner, name, number)
}

// EditPull implements Repos.
func (g GitHubRepos) EditPull(ctx context.Context, inst int64, repo string, number int64, title, body string) error {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return err
	}
	return github.EditPull(ctx, c, owner, name, number, title, body)
}

// ClosePull implements Repos.
func (g GitHubRepos) ClosePull(ctx context.Context, inst int64, repo string, number int64) error {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return err
	}
	return github.ClosePull(ctx, c, owner, name, number)
}

// DeleteBranch implements Repos.
func (g GitHubRepos) DeleteBranch(ctx context.Context, inst int64, repo, branch string) error {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return err
	}
	return github.DeleteBranch(ctx, c, owner, name, branch)
}

// PublishCheckRun implements Repos.
func (g GitHubRepos) PublishCheckRun(ctx context.Context, inst int64, repo, headSHA string, id int64, r github.CheckReport) (github.CheckRunRef, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return github.CheckRunRef{}, err
	}
	return github.PublishCheckRun(ctx, c, owner, name, headSHA, id, r)
}

// Contains implements Repos.
func (g GitHubRepos) Contains(ctx context.Context, inst int64, repo, ancestor, head string) (bool, error) {
	c, owner, name, err := g.client(inst, repo)
	if err != nil {
		return false, err
	}
	return github.Contains(ctx, c, owner, name, ancestor, head)
}

// StoreConnections implements Connections with the repository connections and
// installations in the store.
type StoreConnections struct{ DB *store.DB }

// RepoInstallation implements Connections.
func (s StoreConnections) RepoInstallation(ctx context.Context, teamID, clusterName, repoURL string) (int64, error) {
	canonical, err := github.NormalizeRepoURL(repoURL)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrRepoNotConnected, err)
	}
	cl, err := s.DB.ClusterByName(ctx, teamID, clusterName)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("cluster %s is not registered: %w", clusterName, ErrRepoNotConnected)
	}
	if err != nil {
		return 0, err
	}
	conn, err := s.DB.RepoConnectionFor(ctx, cl.ID, canonical)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("%s: %w", canonical, ErrRepoNotConnected)
	}
	if err != nil {
		return 0, err
	}
	if conn.Status != store.ConnectionConnected {
		return 0, fmt.Errorf("%s is %s: %w", canonical, conn.Status, ErrRepoNotConnected)
	}
	insts, err := s.DB.InstallationsForRepo(ctx, teamID, canonical)
	if err != nil {
		return 0, err
	}
	for _, in := range insts {
		if in.Status == store.InstallationActive && in.InstallationID != 0 {
			return in.InstallationID, nil
		}
	}
	return 0, fmt.Errorf("no active installation of the App can reach %s: %w", canonical, ErrRepoNotConnected)
}
