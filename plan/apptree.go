package plan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/render"
)

// AppTree is the repository an Application deploys from, at the Application's
// revision, open for reading. Close it when done: the tree is a cached snapshot
// that is not evicted while open.
type AppTree struct {
	App      argocd.AppKey
	Level    argocd.Level
	Repo     string // owner/name
	Revision string // the Application's targetRevision, as written
	SHA      string // the commit read
	Path     string // the Application's folder in the repository ("" or "." for the root)
	// Apps are the sources of this repository of the cluster's Applications, the
	// one read among them, as render reads them: which files are Helm values. A
	// file is masked as values when any of them reads it as values, not only
	// when the Application read does.
	Apps []render.Application
	// FS is the repository tree, confined to it: a symbolic link cannot lead out.
	FS fs.FS

	snap *cache.Snapshot
	root *os.Root
}

// Close releases the tree.
func (t *AppTree) Close() {
	if t.root != nil {
		_ = t.root.Close()
	}
	t.snap.Release()
}

var commitSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// AppTree opens the repository of the Application's primary source at the
// revision Argo CD compares it to (status.sync.revision), or, before Argo CD
// recorded one, at the head of the branch its targetRevision names. The snapshot
// comes from the same cache as a plan's, so the same commit is downloaded once.
// Refusals are *Error: application_not_found, unsupported_source,
// repo_not_connected, revision_not_a_branch, revision_not_found (also for a
// commit the repository does not hold).
func (p *Pipeline) AppTree(ctx context.Context, cluster clusteraccess.Ref, namespace, name string) (*AppTree, error) {
	app, err := p.cluster.Application(ctx, cluster, namespace, name)
	if errors.Is(err, clusteraccess.ErrObjectNotFound) {
		return nil, refusal(CodeAppNotFound, "cluster %s has no Argo CD Application %s/%s", cluster.Name, namespace, name)
	}
	if err != nil {
		return nil, fmt.Errorf("read application %s/%s: %w", namespace, name, err)
	}
	src, ok := app.PrimarySource()
	if !ok {
		return nil, refusal(CodeUnsupportedSource, "Application %s/%s has no source", namespace, name)
	}
	repo, err := github.ParseRepoURL(src.RepoURL)
	if err != nil {
		return nil, refusal(CodeUnsupportedSource, "the Application's source %q is not a GitHub repository this service can read: %v", src.RepoURL, err)
	}
	inst, err := p.conns.RepoInstallation(ctx, cluster.TeamID, cluster.Name, src.RepoURL)
	if errors.Is(err, clusteraccess.ErrRepoNotConnected) {
		return nil, refusal(CodeRepoNotConnected,
			"repository %s (source of Application %s/%s) is not connected to cluster %s: connect it with POST /api/v1/clusters/%s/repos", repo.FullName(), namespace, name, cluster.Name, cluster.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("look up connection of %s: %w", repo.FullName(), err)
	}
	sha := argocd.DescribeApp(app).Revision
	if !commitSHA.MatchString(sha) {
		branch, err := p.repos.ResolveRevision(ctx, inst, repo.FullName(), src.TargetRevision)
		switch {
		case errors.Is(err, github.ErrNotABranch):
			return nil, refusal(CodeRevisionNotABranch,
				"Application %s/%s deploys targetRevision %q, which is not a branch, and Argo CD has not recorded the commit it deployed yet: read it again after the first sync", namespace, name, src.TargetRevision)
		case errors.Is(err, github.ErrRevisionNotFound):
			return nil, refusal(CodeRevisionNotFound, "targetRevision %q of Application %s/%s does not exist in %s", src.TargetRevision, namespace, name, repo.FullName())
		case err != nil:
			return nil, fmt.Errorf("resolve %s of %s: %w", src.TargetRevision, repo.FullName(), err)
		}
		sha = branch.SHA
	}
	// Without the other Applications a values file of theirs would be read as
	// a manifest and shown less masked: the read fails instead.
	others, err := p.cluster.Applications(ctx, cluster)
	if err != nil {
		return nil, fmt.Errorf("list Applications of %s: %w", cluster.Name, err)
	}
	snap, err := p.repos.Snapshot(ctx, inst, repo.FullName(), sha)
	if errors.Is(err, github.ErrRevisionNotFound) {
		// The commit Argo CD recorded, or the branch's head of a moment ago, was
		// there: a force push removed it.
		return nil, refusal(CodeRevisionNotFound,
			"commit %s of Application %s/%s (%s) is no longer in %s (a force push may have removed it): read it again once Argo CD has synced another", sha, namespace, name, src.TargetRevision, repo.FullName())
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot %s at %s: %w", repo.FullName(), sha, err)
	}
	root, err := os.OpenRoot(snap.Dir)
	if err != nil {
		snap.Release()
		return nil, fmt.Errorf("open snapshot of %s at %s: %w", repo.FullName(), sha, err)
	}
	return &AppTree{App: app.Key(), Level: app.Level(), Repo: repo.FullName(), Revision: src.TargetRevision, SHA: sha,
		Path: src.Path, Apps: repoApps(app, others, repo.FullName()), FS: root.FS(), snap: snap, root: root}, nil
}

// repoApps are the sources of repo of app and of the others (a cluster's
// Applications, app among them or not yet), as render reads them. Any revision
// counts: a file some branch reads as values is no less secret on another.
func repoApps(app argocd.Application, others []argocd.Application, repo string) []render.Application {
	keep := func(s argocd.AppSource) bool { return fromRepo(s, repo) }
	out := render.FromArgoCD(app, keep)
	for _, a := range others {
		if a.Key() != app.Key() {
			out = append(out, render.FromArgoCD(a, keep)...)
		}
	}
	return out
}
