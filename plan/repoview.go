package plan

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/render"
)

// RepoView is a connected repository at one commit as the cluster's Argo CD uses
// it: which folders which Applications deploy, and what each renders to.
type RepoView struct {
	Repo     string `json:"repo"`
	Revision string `json:"revision"`
	SHA      string `json:"sha"`
	// Folders are the folders Applications deploy from, each with its apps.
	Folders []RepoFolder `json:"folders"`
	Apps    []RepoApp    `json:"apps"`
}

// RepoFolder is one folder of the repository and the Applications deploying it.
type RepoFolder struct {
	Path string   `json:"path"`
	Apps []string `json:"apps"`
}

// RepoApp is one Application's render at the commit: its YAML with Secret values
// and secret-looking values masked, or why it could not be rendered.
type RepoApp struct {
	Name       string       `json:"name"`
	Path       string       `json:"path"`
	SourceType string       `json:"source_type"`
	Level      argocd.Level `json:"level"`
	Ownership  string       `json:"ownership"`
	Objects    int          `json:"objects"`
	YAML       string       `json:"yaml,omitempty"`
	Problem    string       `json:"problem,omitempty"`
	// Warning says what the render could not take from the cluster: a Helm app
	// rendered with Helm's default capabilities, and why.
	Warning string `json:"warning,omitempty"`
}

// RepoView renders, from the repository repoURL connected to the cluster, every
// Application of the cluster whose source is that repository, at revision (a
// commit SHA, or a branch whose head is read; empty for the default branch). The
// tree comes from the archive cache and the renders from the render cache, both by
// commit: the same commit is neither downloaded nor rendered twice. Refusals are
// *Error: repo_not_connected, unsupported_source, revision_not_found.
func (p *Pipeline) RepoView(ctx context.Context, cluster clusteraccess.Ref, repoURL, revision string) (RepoView, error) {
	repo, err := github.ParseRepoURL(repoURL)
	if err != nil {
		return RepoView{}, refusal(CodeUnsupportedSource, "%q is not a GitHub repository this service can read: %v", repoURL, err)
	}
	inst, err := p.conns.RepoInstallation(ctx, cluster.TeamID, cluster.Name, repoURL)
	if errors.Is(err, clusteraccess.ErrRepoNotConnected) {
		return RepoView{}, refusal(CodeRepoNotConnected,
			"repository %s is not connected to cluster %s: connect it with POST /api/v1/clusters/%s/repos", repo.FullName(), cluster.Name, cluster.Name)
	}
	if err != nil {
		return RepoView{}, fmt.Errorf("look up connection of %s: %w", repo.FullName(), err)
	}
	sha := strings.ToLower(revision)
	if !commitSHA.MatchString(sha) {
		branch, err := p.repos.ResolveRevision(ctx, inst, repo.FullName(), revision)
		switch {
		case errors.Is(err, github.ErrNotABranch):
			return RepoView{}, refusal(CodeRevisionNotFound, "revision %q is neither a branch nor a full commit SHA of %s", revision, repo.FullName())
		case errors.Is(err, github.ErrRevisionNotFound):
			return RepoView{}, refusal(CodeRevisionNotFound, "revision %q does not exist in %s", revision, repo.FullName())
		case err != nil:
			return RepoView{}, fmt.Errorf("resolve %q of %s: %w", revision, repo.FullName(), err)
		}
		sha = branch.SHA
	}
	apps, err := p.cluster.Applications(ctx, cluster)
	if err != nil {
		return RepoView{}, fmt.Errorf("list Applications of %s: %w", cluster.Name, err)
	}
	snap, err := p.repos.Snapshot(ctx, inst, repo.FullName(), sha)
	if errors.Is(err, github.ErrRevisionNotFound) {
		return RepoView{}, refusal(CodeRevisionNotFound, "commit %s does not exist in %s", sha, repo.FullName())
	}
	if err != nil {
		return RepoView{}, fmt.Errorf("snapshot %s at %s: %w", repo.FullName(), sha, err)
	}
	defer snap.Release()

	view := RepoView{Repo: repo.FullName(), Revision: revision, SHA: sha, Folders: []RepoFolder{}, Apps: []RepoApp{}}
	folders := map[string][]string{}
	at := cache.Commit{Repo: repo.FullName(), SHA: sha}
	// Helm apps render with the cluster's capabilities, as Argo CD renders them.
	caps, registered := p.capabilities(ctx, cluster), p.registered(ctx, cluster.TeamID)
	for _, a := range apps {
		level := a.Level()
		converted := render.FromArgoCD(a, func(src argocd.AppSource) bool { return fromRepo(src, repo.FullName()) })
		warning, err := ClusterCapabilities(a, converted, DestinationRead(a, caps, registered))
		if err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("cluster", cluster.Name).Str("app", a.Key().String()).
				Msg("Could not read the cluster's capabilities; its Helm apps render with Helm's defaults")
		}
		for _, ra := range converted {
			folders[ra.Path] = append(folders[ra.Path], ra.Name)
			out := RepoApp{Name: ra.Name, Path: ra.Path, SourceType: string(ra.SourceType), Level: level,
				Ownership: argocd.OwnershipNote(a.Key(), level)}
			if ra.SourceType == render.SourceHelm {
				out.Warning = warning
			}
			out.Objects, out.YAML, out.Problem = p.renderMasked(ctx, at, snap.Dir, ra)
			view.Apps = append(view.Apps, out)
		}
	}
	for path, names := range folders {
		sort.Strings(names)
		view.Folders = append(view.Folders, RepoFolder{Path: path, Apps: names})
	}
	sort.Slice(view.Folders, func(i, j int) bool { return view.Folders[i].Path < view.Folders[j].Path })
	sort.Slice(view.Apps, func(i, j int) bool { return view.Apps[i].Name < view.Apps[j].Name })
	return view, nil
}

// renderMasked renders one app for people: its object count and masked YAML, or
// the reason it cannot be rendered (a refusal, never a failure of the whole view).
func (p *Pipeline) renderMasked(ctx context.Context, at cache.Commit, dir string, app render.Application) (int, string, string) {
	if app.Unsupported != "" {
		return 0, "", app.Unsupported
	}
	objs, err := p.render.Render(ctx, at, dir, app)
	var ref *render.Refusal
	switch {
	case errors.As(err, &ref):
		return 0, "", ref.Reason
	case err != nil:
		return 0, "", "the render failed; see the server log"
	}
	text, err := render.MaskedManifests(objs)
	if err != nil {
		return 0, "", "the render could not be written out"
	}
	return len(objs), text, ""
}

// fromRepo reports whether a source deploys a tree of repo ("owner/name").
func fromRepo(src argocd.AppSource, repo string) bool {
	if src.Chart != "" {
		return false
	}
	r, err := github.ParseRepoURL(src.RepoURL)
	return err == nil && strings.EqualFold(r.FullName(), repo)
}
