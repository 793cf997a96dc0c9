package plan

import (
	"context"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/policy"
	"github.com/kukie/kukie-gitops/render"
)

// Cluster is what the pipeline reads from (and dry-runs against) a team's cluster.
type Cluster interface {
	// Decide runs the path decision for one target; it never fails, a failed read is
	// a Decision with Known=false.
	Decide(ctx context.Context, cluster clusteraccess.Ref, target objref.Target) argocd.Decision
	// Applications lists the cluster's Argo CD Applications.
	Applications(ctx context.Context, cluster clusteraccess.Ref) ([]argocd.Application, error)
	// Capabilities reads what the cluster tells a Helm chart of an Application
	// deploying to it (.Capabilities.KubeVersion and APIVersions), as Argo CD
	// passes them to "helm template".
	Capabilities(ctx context.Context, cluster clusteraccess.Ref) (kube.Capabilities, error)
	// ClusterByServer names the team's cluster registered at an Application's
	// destination address, if any (ok), so an app deploying there renders with
	// that cluster's capabilities.
	ClusterByServer(ctx context.Context, teamID, server string) (name string, ok bool, err error)
	// Clusters names the team's registered clusters. Their Applications may deploy
	// from the repository a change edits, so a plan verifies those too.
	Clusters(ctx context.Context, teamID string) ([]string, error)
	// Application reads one Application.
	Application(ctx context.Context, cluster clusteraccess.Ref, namespace, name string) (argocd.Application, error)
	// Object reads one live object (unstructured), or clusteraccess.ErrObjectNotFound,
	// from the API server at the time of the call, never from a cache: the deployment
	// verdict reads it after the Application that reports the sync, and an older copy
	// would show the object before Argo CD applied the change.
	Object(ctx context.Context, cluster clusteraccess.Ref, target objref.Target) (map[string]any, error)
	// DryRun sends objects as a server-side dry-run apply. A rejection by the API
	// server is a *clusteraccess.DryRunRejection; an unreachable cluster is
	// clusteraccess.ErrClusterUnreachable.
	DryRun(ctx context.Context, cluster clusteraccess.Ref, objects []map[string]any) error
}

// Renderer locates, edits and verifies a change (package render). The result's
// Changed objects are what the server-side dry-run sends to the cluster.
type Renderer interface {
	// Plan plans req, whose RepoDir holds the tree of the commit at: renders of
	// that tree may be reused by commit.
	Plan(ctx context.Context, at cache.Commit, req render.Request) (*render.Result, error)
	// Revert undoes an earlier change made on the commit original, on the tree of
	// at in req.RepoDir (req.OriginalDir holds the tree of original), and verifies
	// the revert as Plan verifies an edit.
	Revert(ctx context.Context, at, original cache.Commit, req render.RevertRequest) (*render.Result, error)
	// Render renders one Application from dir, the tree of the commit at, as Plan
	// renders it before an edit (and from the same cache, by commit).
	Render(ctx context.Context, at cache.Commit, dir string, app render.Application) ([]render.Object, error)
}

// Repos is what the pipeline does on GitHub, as one installation of the App. Repos
// are named "owner/name".
type Repos interface {
	ResolveRevision(ctx context.Context, inst int64, repo, revision string) (github.Branch, error)
	Snapshot(ctx context.Context, inst int64, repo, sha string) (*cache.Snapshot, error)
	GetCommit(ctx context.Context, inst int64, repo, sha string) (github.CommitInfo, error)
	CreateCommit(ctx context.Context, inst int64, repo, baseSHA, message string, files []github.FileChange) (github.CommitInfo, error)
	BranchHead(ctx context.Context, inst int64, repo, branch string) (string, bool, error)
	SetBranch(ctx context.Context, inst int64, repo, branch, sha string) error
	OpenPull(ctx context.Context, inst int64, repo string, np github.NewPull) (github.PullRequest, error)
	GetPull(ctx context.Context, inst int64, repo string, number int64) (github.PullRequest, error)
	EditPull(ctx context.Context, inst int64, repo string, number int64, title, body string) error
	ClosePull(ctx context.Context, inst int64, repo string, number int64) error
	// DeleteBranch removes a kukie/ branch (never another); a branch already gone is
	// not an error.
	DeleteBranch(ctx context.Context, inst int64, repo, branch string) error
	PublishCheckRun(ctx context.Context, inst int64, repo, headSHA string, id int64, r github.CheckReport) (github.CheckRunRef, error)
	Contains(ctx context.Context, inst int64, repo, ancestor, head string) (bool, error)
	// Compare lists the files changed from base to head (from their merge base).
	Compare(ctx context.Context, inst int64, repo, base, head string) (github.Comparison, error)
}

// Policy publishes the kukie/policy check run on a plan's head, beside its
// kukie/render run (prcheck.Checker implements it).
type Policy interface {
	CheckPolicy(ctx context.Context, h PolicyHead) error
}

// PolicyHead is a plan's head to check against its repository's policy.
type PolicyHead struct {
	InstallationID int64
	// Repo is "owner/name"; RepoURL its canonical URL, as connections name it.
	Repo, RepoURL       string
	BaseBranch, BaseSHA string
	HeadSHA             string
	// Key is the plan's code, the run's external id as it is kukie/render's.
	Key string
	// DryRun is the outcome of the plan's server-side dry-run; an empty Outcome
	// means none ran.
	DryRun policy.DryRun
}

// Connections answers whether a repository is connected to a team's cluster, and
// through which installation of the App.
type Connections interface {
	// RepoInstallation returns the installation id through which the team reaches a
	// repository (any spelling of its URL) connected to the cluster, or an error
	// wrapping clusteraccess.ErrRepoNotConnected.
	RepoInstallation(ctx context.Context, teamID, cluster, repoURL string) (int64, error)
}

// The production implementations, checked here since their packages do not import
// this one.
var (
	_ Renderer    = cache.RenderEngine{}
	_ Repos       = github.Repos{}
	_ Cluster     = clusteraccess.Clusters{}
	_ Connections = clusteraccess.Connections{}
)
