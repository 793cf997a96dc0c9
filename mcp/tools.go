package mcp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"sort"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kukie/kukie-gitops/api/changes"
	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/render"
)

// Tool names. The list is fixed: see the package documentation.
const (
	ToolListApps         = "list_apps"
	ToolDescribeApp      = "describe_app"
	ToolDecidePath       = "decide_path"
	ToolProposeGitChange = "propose_git_change"
	ToolGetChange        = "get_change"
	ToolCancelChange     = "cancel_change"
	ToolRollbackChange   = "rollback_change"
	ToolListRepoFiles    = "list_repo_files"
	ToolReadRepoFile     = "read_repo_file"
	ToolViewRepository   = "view_repository"
)

// maxRepoFileBytes is the largest file read_repo_file reads: masking parses the
// whole file, and a model gains nothing from megabytes of YAML.
const maxRepoFileBytes = 1 << 20

// Inputs. Descriptions become the tools' input schemas.

// appsInput is list_apps': a page of the listing, as GET
// /api/v1/clusters/{cluster}/argocd/apps pages it. The bounds are said in the
// description, not as schema bounds, and the limit is any number, so a limit out
// of them or not whole (1.5, 1e30) is refused in the words the HTTP API uses
// rather than the schema validator's or the decoder's.
type appsInput struct {
	Cluster string   `json:"cluster" jsonschema:"the team's cluster, as registered"`
	Limit   *float64 `json:"limit,omitempty" jsonschema:"how many apps one answer lists, a whole number from 1 to 500; 100 when not given"`
	Before  string   `json:"before,omitempty" jsonschema:"the next of an earlier answer: lists the apps after that answer's last; the first page when empty"`
}

type appInput struct {
	Cluster   string `json:"cluster" jsonschema:"the team's cluster, as registered"`
	Namespace string `json:"namespace" jsonschema:"namespace of the Argo CD Application (often argocd)"`
	Name      string `json:"name" jsonschema:"name of the Argo CD Application"`
}

type decideInput struct {
	Cluster string        `json:"cluster" jsonschema:"the team's cluster, as registered"`
	Target  objref.Target `json:"target" jsonschema:"the resource to change: apiVersion, kind, namespace, name"`
}

type proposeInput struct {
	Cluster        string        `json:"cluster" jsonschema:"the team's cluster, as registered"`
	Target         objref.Target `json:"target" jsonschema:"the resource to change: apiVersion, kind, namespace, name"`
	Change         render.Change `json:"change" jsonschema:"exactly one of replicas, image, env, resources, new_resource, patch (a JSON merge patch of any fields: merge, or set by JSON pointer), delete_resource ({}: remove the target from Git; refused while other objects of its app name it, warned when the app does not prune)"`
	Application    *plan.AppRef  `json:"application,omitempty" jsonschema:"for new_resource only: the Argo CD Application that will deploy it"`
	Reason         string        `json:"reason" jsonschema:"why, in the user's words, at most 2000 characters; goes into the pull request"`
	RequestedBy    string        `json:"requested_by" jsonschema:"who asked for the change, at most 200 characters"`
	IdempotencyKey string        `json:"idempotency_key,omitempty" jsonschema:"the same key returns the change already made with it; at most 200 characters"`
}

type codeInput struct {
	Code string `json:"code" jsonschema:"the change's plan code"`
}

type cancelInput struct {
	Code   string `json:"code" jsonschema:"the plan code of the change to cancel"`
	Reason string `json:"reason,omitempty" jsonschema:"why it is cancelled, kept in its history, at most 2000 characters"`
}

type rollbackInput struct {
	Code        string `json:"code" jsonschema:"the plan code of the change to revert"`
	Reason      string `json:"reason,omitempty" jsonschema:"why it is rolled back, at most 2000 characters"`
	RequestedBy string `json:"requested_by,omitempty" jsonschema:"who asked for the rollback, at most 200 characters"`
}

type viewInput struct {
	Cluster  string `json:"cluster" jsonschema:"the team's cluster, as registered"`
	Repo     string `json:"repo" jsonschema:"the repository URL as the Applications name it"`
	Revision string `json:"revision,omitempty" jsonschema:"a full commit SHA or a branch; the default branch when empty"`
}

type viewResult struct {
	Ownership string `json:"ownership"`
	plan.RepoView
	Note string `json:"note,omitempty"`
}

type repoInput struct {
	Cluster   string `json:"cluster" jsonschema:"the team's cluster, as registered"`
	Namespace string `json:"namespace" jsonschema:"namespace of the Argo CD Application (often argocd)"`
	Name      string `json:"name" jsonschema:"name of the Argo CD Application"`
	Path      string `json:"path,omitempty" jsonschema:"a folder of the repository, from its root; the Application's folder when empty"`
}

// fileInput is read_repo_file's: the file is required, a tool without one having
// nothing to read, so the schema says so rather than the call's refusal.
type fileInput struct {
	Cluster   string `json:"cluster" jsonschema:"the team's cluster, as registered"`
	Namespace string `json:"namespace" jsonschema:"namespace of the Argo CD Application (often argocd)"`
	Name      string `json:"name" jsonschema:"name of the Argo CD Application"`
	Path      string `json:"path" jsonschema:"the file, from the repository's root (list_repo_files lists them)"`
}

// Results. Each starts with the one-line ownership note.

type appListResult struct {
	Ownership string         `json:"ownership"`
	Cluster   string         `json:"cluster"`
	Total     int            `json:"total"`
	SelfHeal  int            `json:"self_heal"`
	OutOfSync int            `json:"out_of_sync"`
	Repos     []string       `json:"repos"`
	Apps      []appListEntry `json:"apps"`
	// Next, when set, is the before of the next page: more apps follow.
	Next string `json:"next,omitempty"`
}

type appListEntry struct {
	Ownership string `json:"ownership"`
	argocd.AppListItem
}

type appResult struct {
	Ownership string `json:"ownership"`
	changes.AppDetailView
}

type decideResult struct {
	Ownership string `json:"ownership"`
	changes.DecideResponse
}

type changeResult struct {
	Ownership      string             `json:"ownership"`
	Code           string             `json:"code"`
	Status         string             `json:"status"`
	PullRequestURL string             `json:"pull_request_url,omitempty"`
	ClusterDiff    any                `json:"cluster_diff,omitempty"`
	Next           string             `json:"next"`
	Change         changes.ChangeView `json:"change"`
}

type filesResult struct {
	Ownership string   `json:"ownership"`
	Repo      string   `json:"repo"`
	SHA       string   `json:"sha"`
	Path      string   `json:"path"`
	Files     []string `json:"files"`
	Note      string   `json:"note,omitempty"`
}

type fileResult struct {
	Ownership string `json:"ownership"`
	Repo      string `json:"repo"`
	SHA       string `json:"sha"`
	Path      string `json:"path"`
	Content   string `json:"content"`
	Note      string `json:"note,omitempty"`
}

func (s *Server) addTools() {
	readOnly := &sdk.ToolAnnotations{ReadOnlyHint: true}
	addTool(s.server, &sdk.Tool{Name: ToolListApps, Annotations: readOnly,
		Description: fmt.Sprintf("List the cluster's Argo CD Applications, problem apps first, each with its ownership note (sync policy: self-heal reverts direct changes). "+
			"Answers limit apps at a time (%d without it, at most %d) with the whole cluster's counts; an answer with next has more: call again with before set to it.",
			changes.DefaultAppsPage, changes.MaxAppsPage)},
		s.listApps)
	addTool(s.server, &sdk.Tool{Name: ToolDescribeApp, Annotations: readOnly,
		Description: "Describe one Argo CD Application: sources, sync and health, sync policy, out-of-sync resources, conditions, and the changes made through this service that touched it."},
		s.describeApp)
	addBodyTool(s.server, &sdk.Tool{Name: ToolDecidePath, Annotations: readOnly,
		Description: "Decide whether a change to a resource goes through Git (a pull request) or directly to the cluster, with the warning level and the Argo CD card payload. Code decides; call this before proposing."},
		s.decidePath)
	addBodyTool(s.server, &sdk.Tool{Name: ToolProposeGitChange,
		Description: "Request a change through Git: a verified pull request on the repository Argo CD deploys the resource from. Returns the plan code and status; the pull request URL and the cluster diff appear when ready (get_change). Refused with the current decision when the resource does not take the Git path. Needs a token with the change scope."},
		s.proposeGitChange)
	addTool(s.server, &sdk.Tool{Name: ToolGetChange, Annotations: readOnly,
		Description: "A change by plan code: status, decision, pull request, check run, diffs, deployment and history."},
		s.getChange)
	addTool(s.server, &sdk.Tool{Name: ToolCancelChange,
		Description: "Cancel a change: close its pull request and release its files. Needs a token with the change scope."},
		s.cancelChange)
	addTool(s.server, &sdk.Tool{Name: ToolRollbackChange,
		Description: "Roll back a merged change with a revert pull request, verified like any change. Returns the revert, a change of its own whose change is {revert: {plan, merge_commit, undoes}}: the change it reverts, that change's merge commit and what that change was. Needs a token with the change scope."},
		s.rollbackChange)
	addTool(s.server, &sdk.Tool{Name: ToolListRepoFiles, Annotations: readOnly,
		Description: fmt.Sprintf("List the files of an Application's repository at the Application's revision, under its folder or a given path. Cut at %d characters with a note.", MaxResultChars)},
		s.listRepoFiles)
	addTool(s.server, &sdk.Tool{Name: ToolReadRepoFile, Annotations: readOnly,
		Description: fmt.Sprintf("Read one file of an Application's repository at the Application's revision, with Secrets and secret-looking values masked: each reads [redacted], which no change may set (a change holding it is refused), so never copy one into a change. Cut at %d characters with a note.", MaxResultChars)},
		s.readRepoFile)
	addTool(s.server, &sdk.Tool{Name: ToolViewRepository, Annotations: readOnly,
		Description: fmt.Sprintf("View a connected repository at a commit: which folders which Argo CD Applications deploy, and each app's rendered YAML with Secrets and secret-looking values masked as [redacted], which no change may set. Rendered YAML is cut at %d characters in all, with a note.", MaxResultChars)},
		s.viewRepository)
}

func (s *Server) viewRepository(ctx context.Context, _ *sdk.CallToolRequest, in viewInput) (*sdk.CallToolResult, any, error) {
	t, err := caller(ctx)
	if err != nil {
		return nil, nil, err
	}
	v, err := s.deps.Changes.RepoView(ctx, t, in.Cluster, in.Repo, in.Revision)
	if err != nil {
		return nil, nil, toolError(err)
	}
	out := viewResult{RepoView: v, Ownership: fmt.Sprintf("%d Argo CD app(s) deploy from %s; each app's line says who owns its resources", len(v.Apps), v.Repo)}
	left, cut := MaxResultChars, 0
	for i := range out.Apps {
		y := []rune(out.Apps[i].YAML)
		if len(y) > left {
			out.Apps[i].YAML, cut = string(y[:left]), cut+1
		}
		left -= len([]rune(out.Apps[i].YAML))
	}
	if cut > 0 {
		out.Note = fmt.Sprintf("rendered YAML cut at %d characters in all: %d app(s) shown in part or not at all; list_repo_files and read_repo_file read the sources", MaxResultChars, cut)
	}
	return nil, out, nil
}

func (s *Server) listApps(ctx context.Context, _ *sdk.CallToolRequest, in appsInput) (*sdk.CallToolResult, any, error) {
	t, err := caller(ctx)
	if err != nil {
		return nil, nil, err
	}
	limit := changes.DefaultAppsPage
	if in.Limit != nil {
		// 0, which AppListPage refuses, for a number no page can hold.
		limit = 0
		if f := *in.Limit; f == math.Trunc(f) && math.Abs(f) <= changes.MaxAppsPage+1 {
			limit = int(f)
		}
	}
	list, err := s.deps.Changes.AppListPage(ctx, t, in.Cluster, limit, in.Before)
	if err != nil {
		return nil, nil, toolError(err)
	}
	out := appListResult{Cluster: in.Cluster, Total: list.Total, SelfHeal: list.SelfHeal, OutOfSync: list.OutOfSync,
		Repos: list.Repos, Apps: make([]appListEntry, len(list.Apps)), Next: list.Next}
	for i, a := range list.Apps {
		out.Apps[i] = appListEntry{Ownership: argocd.OwnershipNote(argocd.AppKey{Namespace: a.Namespace, Name: a.Name}, a.Level), AppListItem: a}
	}
	out.Ownership = fmt.Sprintf("%d Argo CD app(s) on cluster %s, %d with self-heal: a direct change to a resource they manage is reverted; each app's line says who owns its resources",
		list.Total, in.Cluster, list.SelfHeal)
	return nil, out, nil
}

func (s *Server) describeApp(ctx context.Context, _ *sdk.CallToolRequest, in appInput) (*sdk.CallToolResult, any, error) {
	t, err := caller(ctx)
	if err != nil {
		return nil, nil, err
	}
	d, err := s.deps.Changes.AppDetail(ctx, t, in.Cluster, in.Namespace, in.Name)
	if err != nil {
		return nil, nil, toolError(err)
	}
	return nil, appResult{Ownership: argocd.OwnershipNote(argocd.AppKey{Namespace: d.Namespace, Name: d.Name}, d.Level), AppDetailView: d}, nil
}

func (s *Server) decidePath(ctx context.Context, _ *sdk.CallToolRequest, in decideInput) (*sdk.CallToolResult, any, error) {
	t, err := caller(ctx)
	if err != nil {
		return nil, nil, err
	}
	d, err := s.deps.Changes.Decide(ctx, t, in.Cluster, in.Target)
	if err != nil {
		return nil, nil, toolError(err)
	}
	return nil, decideResult{Ownership: d.Decision.OwnershipNote(), DecideResponse: d}, nil
}

func (s *Server) proposeGitChange(ctx context.Context, _ *sdk.CallToolRequest, in proposeInput) (*sdk.CallToolResult, any, error) {
	t, err := caller(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := needChange(ctx, ToolProposeGitChange); err != nil {
		return nil, nil, err
	}
	// The tool proposes the Git path; the pipeline refuses a target it routes
	// elsewhere (path_mismatch, not_gitops_managed) with the decision.
	req := plan.Request{Cluster: in.Cluster, Target: in.Target, Change: in.Change, Application: in.Application,
		Reason: in.Reason, RequestedBy: in.RequestedBy, IdempotencyKey: in.IdempotencyKey, ExpectedPath: string(argocd.PathGit)}
	p, _, err := s.deps.Changes.CreateChange(ctx, t, req)
	if err != nil {
		return nil, nil, toolError(err)
	}
	if body, refused := changes.DecidedRefusal(p); refused {
		return nil, nil, errors.New(refusalText(body.Error, body.Reason, body.Plan))
	}
	return nil, changeResultOf(changes.View(p)), nil
}

func (s *Server) getChange(ctx context.Context, _ *sdk.CallToolRequest, in codeInput) (*sdk.CallToolResult, any, error) {
	t, err := caller(ctx)
	if err != nil {
		return nil, nil, err
	}
	v, err := s.deps.Changes.Change(ctx, t, in.Code)
	if err != nil {
		return nil, nil, toolError(err)
	}
	return nil, changeResultOf(v), nil
}

func (s *Server) cancelChange(ctx context.Context, _ *sdk.CallToolRequest, in cancelInput) (*sdk.CallToolResult, any, error) {
	t, err := caller(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := needChange(ctx, ToolCancelChange); err != nil {
		return nil, nil, err
	}
	v, err := s.deps.Changes.CancelChange(ctx, t, in.Code, in.Reason)
	if err != nil {
		return nil, nil, toolError(err)
	}
	return nil, changeResultOf(v), nil
}

func (s *Server) rollbackChange(ctx context.Context, _ *sdk.CallToolRequest, in rollbackInput) (*sdk.CallToolResult, any, error) {
	t, err := caller(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := needChange(ctx, ToolRollbackChange); err != nil {
		return nil, nil, err
	}
	v, err := s.deps.Changes.RollbackChange(ctx, t, in.Code, in.RequestedBy, in.Reason)
	if err != nil {
		return nil, nil, toolError(err)
	}
	return nil, changeResultOf(v), nil
}

// changeResultOf puts what an assistant needs first: code, status, the pull
// request and the cluster diff when there are any, and what happens next.
func changeResultOf(v changes.ChangeView) changeResult {
	r := changeResult{Ownership: changeOwnership(v), Code: v.Code, Status: v.Status, Change: v}
	if v.PullRequest != nil {
		r.PullRequestURL = v.PullRequest.URL
	}
	if len(v.ClusterDiff) > 0 {
		r.ClusterDiff = v.ClusterDiff
	}
	r.Next = nextStep(v)
	return r
}

// nextStep says in one sentence what happens to a change in its status.
func nextStep(v changes.ChangeView) string {
	switch plan.Status(v.Status) {
	case plan.StatusPROpen:
		// The check is what tells a pull request ready from one that is not: a
		// person's commit on the branch, a retarget or a cluster not checked.
		conclusion := ""
		if v.CheckRun != nil {
			conclusion = v.CheckRun.Conclusion
		}
		switch conclusion {
		case github.ConclusionFailure:
			return "the pull request is open, but its kukie/render check failed: do not merge it as it is; change.verification_result and the check run say why"
		case github.ConclusionActionRequired:
			return "the pull request is open, and its kukie/render check asks for action before it is merged; change.verification_result and the check run say what"
		}
		return "the pull request waits for a person to review and merge it"
	case plan.StatusWaiting:
		return "another change holds the same file; this one is prepared again when that one is merged or closed"
	case plan.StatusMerged, plan.StatusDeploying:
		return "merged; Argo CD is deploying it, get_change shows the deployment"
	case plan.StatusDeployed:
		return "running in the cluster"
	case plan.StatusFailed:
		// A failed step (GitHub failing past its retries) resumes where it stopped,
		// which no tool does: the problem alone ("503 Service Unavailable") does not
		// say so.
		return fmt.Sprintf("stopped: the change's problem says why; once that is mended, POST /api/v1/changes/%s/retry resumes it at the step that failed", v.Code)
	case plan.StatusRefused, plan.StatusDeployFailed:
		return "stopped: the change's problem says why and what can be done"
	case plan.StatusClosed, plan.StatusRolledBack:
		return "finished; nothing more happens"
	default:
		return "in progress; call get_change for the pull request and cluster diff when ready"
	}
}

func (s *Server) openTree(ctx context.Context, in repoInput) (*plan.AppTree, error) {
	t, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	// The repository view's limit: opening the tree may download an archive.
	if err := s.deps.Changes.AllowRepositoryRead(t); err != nil {
		return nil, toolError(err)
	}
	// The change API's cluster check, so a cluster the team does not have is
	// answered as everywhere else.
	if err := s.deps.Changes.CheckCluster(ctx, t, in.Cluster); err != nil {
		return nil, toolError(err)
	}
	if problem := changes.ApplicationNameProblem(in.Namespace, in.Name); problem != "" {
		return nil, fmt.Errorf("%s: cluster %s has no Argo CD Application %q/%q: %s; list_apps lists them",
			plan.CodeAppNotFound, in.Cluster, in.Namespace, in.Name, problem)
	}
	tree, err := s.deps.Trees.AppTree(ctx, clusteraccess.Ref{TeamID: t.ID, Name: in.Cluster}, in.Namespace, in.Name)
	if err != nil {
		return nil, toolError(err)
	}
	return tree, nil
}

// repoPath cleans a path given by the model into one inside the repository. White
// space around the path is dropped; a path that cleaning leaves with white space
// at an end ("web /" is "web ") is refused, since the path answered would then
// name another file when given back.
func repoPath(p string) (string, error) {
	p = strings.TrimPrefix(path.Clean("/"+strings.TrimSpace(p)), "/")
	if p == "" {
		return ".", nil
	}
	if !fs.ValidPath(p) {
		return "", fmt.Errorf("invalid_request: %q is not a path inside the repository", p)
	}
	if strings.TrimSpace(p) != p {
		return "", fmt.Errorf("invalid_request: %q begins or ends with white space once cleaned; give the path without it", p)
	}
	return p, nil
}

func (s *Server) listRepoFiles(ctx context.Context, _ *sdk.CallToolRequest, in repoInput) (*sdk.CallToolResult, any, error) {
	tree, err := s.openTree(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	defer tree.Close()
	dir := in.Path
	if strings.TrimSpace(dir) == "" {
		dir = tree.Path
	}
	root, err := repoPath(dir)
	if err != nil {
		return nil, nil, err
	}
	out := filesResult{Ownership: argocd.OwnershipNote(tree.App, tree.Level), Repo: tree.Repo, SHA: tree.SHA, Path: root, Files: []string{}}
	size, total := 0, 0
	err = fs.WalkDir(tree.FS, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		total++
		if size+len(p)+1 > MaxResultChars {
			return nil
		}
		size += len(p) + 1
		out.Files = append(out.Files, p)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("not_found: %s has no path %q at %s", tree.Repo, root, tree.SHA)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list %s at %s: %w", root, tree.SHA, err)
	}
	sort.Strings(out.Files)
	if len(out.Files) < total {
		out.Note = fmt.Sprintf("cut at %d characters: %d of %d files listed; ask for a narrower path", MaxResultChars, len(out.Files), total)
	}
	return nil, out, nil
}

func (s *Server) readRepoFile(ctx context.Context, _ *sdk.CallToolRequest, in fileInput) (*sdk.CallToolResult, any, error) {
	name, err := repoPath(in.Path)
	if err != nil || name == "." {
		return nil, nil, fmt.Errorf("invalid_request: path must name a file in the repository (list_repo_files lists them)")
	}
	tree, err := s.openTree(ctx, repoInput(in))
	if err != nil {
		return nil, nil, err
	}
	defer tree.Close()
	info, err := fs.Stat(tree.FS, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("not_found: %s has no file %q at %s", tree.Repo, name, tree.SHA)
	case err != nil:
		return nil, nil, fmt.Errorf("read %s at %s: %w", name, tree.SHA, err)
	case info.IsDir():
		return nil, nil, fmt.Errorf("invalid_request: %q is a folder; list_repo_files lists it", name)
	case info.Size() > maxRepoFileBytes:
		return nil, nil, fmt.Errorf("file_too_large: %q has %d bytes; this tool reads files up to %d", name, info.Size(), maxRepoFileBytes)
	}
	text, err := render.MaskedFile(tree.FS, name, tree.Apps)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s at %s: %w", name, tree.SHA, err)
	}
	out := fileResult{Ownership: argocd.OwnershipNote(tree.App, tree.Level), Repo: tree.Repo, SHA: tree.SHA, Path: name}
	if r := []rune(text); len(r) > MaxResultChars {
		out.Note = fmt.Sprintf("cut at %d characters of %d; the rest of the file is not shown", MaxResultChars, len(r))
		text = string(r[:MaxResultChars])
	}
	out.Content = text
	return nil, out, nil
}
