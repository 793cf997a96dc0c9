package changes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// The operations below are the change API without its transport: the HTTP handlers
// and the MCP tools both call them, so a change asked for either way takes the same
// path through the pipeline and is answered from the same views. Errors are a
// *ClusterNotFoundError, a *ClusterReadError, store.ErrNotFound (no such change for
// the team), a *plan.Error with its stable code, a *ratelimit.RefusedError (the
// team is over one of API's limits: nothing was done), or an internal failure.

// CodeClusterNotFound answers a request naming a cluster the team has not
// registered.
const CodeClusterNotFound = "cluster_not_found"

// ClusterNotFoundError: the team has no cluster of that name. A change naming
// another team's cluster, or none, is not a change the pipeline refuses (no plan is
// stored for it) and has no path to decide.
type ClusterNotFoundError struct{ Name string }

func (e *ClusterNotFoundError) Error() string { return clusteraccess.NoClusterNamed(e.Name) }

// ClusterReadError: the team's cluster could not be read (Err wraps
// clusteraccess.ErrObjectNotFound for a missing Application).
type ClusterReadError struct{ Err error }

func (e *ClusterReadError) Error() string { return "read cluster: " + e.Err.Error() }
func (e *ClusterReadError) Unwrap() error { return e.Err }

// ChangeError is the body of a refused request: the stable code, the reason, the
// structured details (the current decision for not_gitops_managed) and the plan.
type ChangeError struct {
	Error   string      `json:"error"`
	Reason  string      `json:"reason"`
	Details any         `json:"details,omitempty"`
	Plan    *ChangeView `json:"plan,omitempty"`
}

// DecideResponse is the decision and the Argo CD payload.
type DecideResponse struct {
	Path     argocd.Path         `json:"path"`
	Known    bool                `json:"known"`
	Reason   string              `json:"reason"`
	Level    argocd.Level        `json:"level"`
	Failure  argocd.FailureClass `json:"failure,omitempty"`
	ArgoCD   argocd.Payload      `json:"argocd"`
	Decision argocd.Decision     `json:"decision"`
}

// AppDetailView is an Application with the plans that changed it through kukie.
type AppDetailView struct {
	argocd.AppDetail
	Changes []ChangeView `json:"changes"`
}

func actor(t store.Team) string { return "team:" + t.Name }

// decidedRefusals are refusals known as soon as the path is decided; a request is
// answered with them directly, the plan attached.
var decidedRefusals = map[string]bool{
	plan.CodeNotGitOpsManaged: true, plan.CodeRepoNotConnected: true, plan.CodePathMismatch: true,
	plan.CodeAppNotFound: true, plan.CodeUnsupportedSource: true, plan.CodeInvalidRequest: true,
}

// DecidedRefusal is the refusal of a plan refused as soon as its path was decided
// (not managed by Argo CD, repository not connected, path mismatch, ...), with the
// plan and the decision's details; ok is false for any other plan.
func DecidedRefusal(p store.Plan) (body ChangeError, ok bool) {
	if p.Status != string(plan.StatusRefused) || !decidedRefusals[p.ErrorCode] {
		return ChangeError{}, false
	}
	view := View(p)
	body = ChangeError{Error: p.ErrorCode, Reason: p.StatusReason, Plan: &view}
	if view.Problem != nil {
		body.Details = view.Problem.Details
	}
	return body, true
}

// CheckCluster returns a *ClusterNotFoundError unless the team has a cluster named
// name.
func (a *API) CheckCluster(ctx context.Context, t store.Team, name string) error {
	_, err := a.Store.ClusterByName(ctx, t.ID, name)
	if errors.Is(err, store.ErrNotFound) {
		return &ClusterNotFoundError{Name: name}
	}
	if err != nil {
		return fmt.Errorf("read cluster %s of team %s: %w", name, t.Name, err)
	}
	return nil
}

// CreateChange submits req as team t; created is false when the idempotency key
// named an existing change. A plan refused at once is returned, not an error (see
// DecidedRefusal).
func (a *API) CreateChange(ctx context.Context, t store.Team, req plan.Request) (p store.Plan, created bool, err error) {
	fields := []boundedField{{"reason", req.Reason, MaxReasonChars}, {"requested_by", req.RequestedBy, MaxRequestedByChars},
		{"target.apiVersion", req.Target.APIVersion, maxAPIVersionChars}, {"target.kind", req.Target.Kind, maxNameChars},
		{"target.namespace", req.Target.Namespace, maxNameChars}, {"target.name", req.Target.Name, maxNameChars}}
	if req.Application != nil {
		fields = append(fields, boundedField{"application.namespace", req.Application.Namespace, maxNameChars},
			boundedField{"application.name", req.Application.Name, maxNameChars})
	}
	if err := checkBounds(fields...); err != nil {
		return store.Plan{}, false, err
	}
	// A request no repository can make right is refused before it takes one of
	// the team's changes, and whether or not this process runs a pipeline (the
	// pipeline checks it again).
	if err := req.Validate(); err != nil {
		return store.Plan{}, false, err
	}
	if err := a.ChangeLimit.AllowRepeat(t.ID, req.IdempotencyKey); err != nil {
		return store.Plan{}, false, err
	}
	if req.Cluster != "" {
		if err := a.CheckCluster(ctx, t, req.Cluster); err != nil {
			return store.Plan{}, false, err
		}
	}
	return a.Pipeline.Submit(plan.WithActor(ctx, actor(t)), t.ID, actor(t), req)
}

// Change is one of the team's changes with its history.
func (a *API) Change(ctx context.Context, t store.Team, code string) (ChangeView, error) {
	p, err := a.Store.TeamPlan(ctx, t.ID, code)
	if err != nil {
		return ChangeView{}, err
	}
	view := View(p)
	events, err := a.Store.PlanEvents(ctx, p.Code)
	if err != nil {
		return ChangeView{}, err
	}
	for _, e := range events {
		view.History = append(view.History, EventView{At: e.CreatedAt, Actor: e.Actor, From: e.FromStatus, To: e.ToStatus, Step: e.Step, Message: e.Message})
	}
	return view, nil
}

// CancelChange closes the change's pull request and releases its files; reason,
// which may be empty, is why, kept in the change's history and its cancel_reason.
func (a *API) CancelChange(ctx context.Context, t store.Team, code, reason string) (ChangeView, error) {
	if err := plan.CheckReason("reason", reason); err != nil {
		return ChangeView{}, err
	}
	p, err := a.Pipeline.Cancel(plan.WithActor(ctx, actor(t)), t.ID, code, reason)
	return View(p), err
}

// RollbackChange starts (or returns the running) revert of the change.
func (a *API) RollbackChange(ctx context.Context, t store.Team, code, requestedBy, reason string) (ChangeView, error) {
	if err := checkBounds(boundedField{"reason", reason, MaxReasonChars}, boundedField{"requested_by", requestedBy, MaxRequestedByChars}); err != nil {
		return ChangeView{}, err
	}
	for _, problem := range []string{plan.WordsProblem("reason", reason, true), plan.WordsProblem("requested_by", requestedBy, false)} {
		if problem != "" {
			return ChangeView{}, &plan.Error{Code: plan.CodeInvalidRequest, Reason: problem}
		}
	}
	if err := a.ChangeLimit.Allow(t.ID); err != nil {
		return ChangeView{}, err
	}
	p, err := a.Pipeline.Rollback(plan.WithActor(ctx, actor(t)), t.ID, code, requestedBy, reason)
	return View(p), err
}

// Decide is the path decision for one target on the team's cluster.
func (a *API) Decide(ctx context.Context, t store.Team, cluster string, target objref.Target) (DecideResponse, error) {
	if err := a.ClusterReadLimit.Allow(t.ID); err != nil {
		return DecideResponse{}, err
	}
	if cluster == "" || target.Kind == "" || target.Name == "" || target.APIVersion == "" {
		return DecideResponse{}, &plan.Error{Code: plan.CodeInvalidRequest, Reason: "cluster and target {apiVersion, kind, name} are required"}
	}
	if err := plan.CheckTarget(target); err != nil {
		return DecideResponse{}, err
	}
	if err := a.CheckCluster(ctx, t, cluster); err != nil {
		return DecideResponse{}, err
	}
	d := a.Pipeline.Decide(ctx, clusteraccess.Ref{TeamID: t.ID, Name: cluster}, target)
	return DecideResponse{Path: d.Path, Known: d.Known, Reason: d.Reason, Level: d.Level,
		Failure: d.Failure, ArgoCD: d.Payload(), Decision: d}, nil
}

// AppList is the overview of the cluster's Argo CD Applications, problem apps first.
func (a *API) AppList(ctx context.Context, t store.Team, cluster string) (argocd.AppList, error) {
	if err := a.ClusterReadLimit.Allow(t.ID); err != nil {
		return argocd.AppList{}, err
	}
	if err := a.CheckCluster(ctx, t, cluster); err != nil {
		return argocd.AppList{}, err
	}
	list, err := a.Apps.AppList(ctx, clusteraccess.Ref{TeamID: t.ID, Name: cluster})
	if err != nil {
		return argocd.AppList{}, &ClusterReadError{Err: err}
	}
	return list, nil
}

// errAppsLimit and errAppsCursor refuse a page of the Application listing that
// none can be: over HTTP and MCP alike, in these words.
var (
	errAppsLimit = &plan.Error{Code: plan.CodeInvalidRequest,
		Reason: fmt.Sprintf("limit must be a whole number from 1 to %d", MaxAppsPage)}
	errAppsCursor = &plan.Error{Code: plan.CodeInvalidRequest,
		Reason: "before must be the next of an earlier answer of this listing"}
)

// AppListPage is a page of AppList: limit Applications (1 to MaxAppsPage) after
// before, the next of an earlier page ("" for the first). A page goes on after the
// position its before names, so an Application added or gone meanwhile moves
// nothing else between pages; one whose problems changed meanwhile moves to its
// new place in the order. A limit or before no page can have is refused
// invalid_request before the cluster is read or the team's limit is taken.
func (a *API) AppListPage(ctx context.Context, t store.Team, cluster string, limit int, before string) (AppListPage, error) {
	if limit < 1 || limit > MaxAppsPage {
		return AppListPage{}, errAppsLimit
	}
	var after *argocd.AppPosition
	if before != "" {
		pos, ok := parseAppsCursor(before)
		if !ok {
			return AppListPage{}, errAppsCursor
		}
		after = &pos
	}
	list, err := a.AppList(ctx, t, cluster)
	if err != nil {
		return AppListPage{}, err
	}
	apps := list.Apps
	if after != nil {
		// The list is in position order: the page starts at the first after before.
		apps = apps[sort.Search(len(apps), func(i int) bool { return after.Before(apps[i].Position()) }):]
	}
	out := AppListPage{AppList: list}
	if len(apps) > limit {
		apps = apps[:limit]
		out.Next = appsCursor(apps[limit-1].Position())
	}
	out.Apps = apps
	return out, nil
}

// AppDetail is one Application with the team's changes that touched it.
func (a *API) AppDetail(ctx context.Context, t store.Team, cluster, namespace, name string) (AppDetailView, error) {
	if err := a.ClusterReadLimit.Allow(t.ID); err != nil {
		return AppDetailView{}, err
	}
	if err := a.CheckCluster(ctx, t, cluster); err != nil {
		return AppDetailView{}, err
	}
	// A name no Kubernetes object can have is not asked of the cluster: the client
	// refuses some ("..", one holding "/" or "%") as a failed read, which would be
	// answered, and counted, as the cluster's failure.
	if problem := ApplicationNameProblem(namespace, name); problem != "" {
		// Quoted in ASCII, as every name the caller sent: a lookalike letter or a
		// text-reordering character is shown as what it is.
		return AppDetailView{}, &ClusterReadError{Err: fmt.Errorf("application %+q/%+q: %s: %w",
			namespace, name, problem, clusteraccess.ErrObjectNotFound)}
	}
	detail, err := a.Apps.AppDetail(ctx, clusteraccess.Ref{TeamID: t.ID, Name: cluster}, namespace, name)
	if err != nil {
		return AppDetailView{}, &ClusterReadError{Err: err}
	}
	// The sources are shown as a cluster diff shows the Application: a Helm
	// parameter or valuesObject may hold a secret, which Argo CD may quote.
	if detail, err = render.MaskedAppDetail(detail); err != nil {
		return AppDetailView{}, fmt.Errorf("mask the sources of %s/%s: %w", namespace, name, err)
	}
	plans, err := a.Store.ListPlans(ctx, store.PlanFilter{TeamID: t.ID, Cluster: cluster, Limit: 1000})
	if err != nil {
		return AppDetailView{}, err
	}
	out := AppDetailView{AppDetail: detail, Changes: []ChangeView{}}
	for _, p := range plans {
		pay, err := plan.PayloadOf(p)
		if err == nil && pay.App != nil && pay.App.Namespace == namespace && pay.App.Name == name {
			out.Changes = append(out.Changes, View(p))
		}
	}
	return out, nil
}

// ApplicationNameProblem says why no Application can have namespace and name (a
// namespace is a DNS label, a name a DNS subdomain), or "". Such a name is not
// asked of a cluster: its client refuses some ("a/b", "a%b") as a failed read.
func ApplicationNameProblem(namespace, name string) string {
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return "no namespace has that name (" + strings.Join(msgs, "; ") + ")"
	}
	if ns, rest, ok := strings.Cut(name, "/"); ok && len(validation.IsDNS1123Label(ns)) == 0 && len(validation.IsDNS1123Subdomain(rest)) == 0 {
		// "argocd/web", as Argo CD's CLI and UI write an Application: the
		// namespace goes on its own.
		return fmt.Sprintf(`no Application has a name holding "/": give namespace %q and name %q apart`, ns, rest)
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "no Application has that name (" + strings.Join(msgs, "; ") + ")"
	}
	return ""
}

// RepoView is a repository connected to the team's cluster at a revision: which
// folders which Applications deploy, and each app's render, masked.
func (a *API) RepoView(ctx context.Context, t store.Team, cluster, repo, revision string) (plan.RepoView, error) {
	if err := a.AllowRepositoryRead(t); err != nil {
		return plan.RepoView{}, err
	}
	if repo == "" {
		return plan.RepoView{}, &plan.Error{Code: plan.CodeInvalidRequest, Reason: "repo is required: the repository URL as the Applications name it"}
	}
	if err := a.CheckCluster(ctx, t, cluster); err != nil {
		return plan.RepoView{}, err
	}
	return a.Pipeline.RepoView(ctx, clusteraccess.Ref{TeamID: t.ID, Name: cluster}, repo, revision)
}

// AllowRepositoryRead takes one of the team's repository reads (API.RepositoryLimit)
// or returns the *ratelimit.RefusedError saying when the next is allowed: the
// repository view takes one, and so does each MCP tool that opens an Application's
// repository, before it asks the cluster or GitHub anything.
func (a *API) AllowRepositoryRead(t store.Team) error {
	return a.RepositoryLimit.Allow(t.ID)
}

// Bounds of a change request's words. A request's reason and requester are copied
// into its pull request, commit, check run, notifications and every listing of it,
// so the body limit alone would let each change carry a megabyte of them.
const (
	// MaxReasonChars bounds a change's, rollback's or cancel's reason.
	MaxReasonChars = plan.MaxReasonChars
	// MaxRequestedByChars bounds who asked for it.
	MaxRequestedByChars = 200
	// maxNameChars is the longest Kubernetes name (a DNS subdomain), which bounds
	// a target's kind, namespace and name and an Application's.
	maxNameChars = 253
	// maxAPIVersionChars is a group of maxNameChars, a slash and a version label.
	maxAPIVersionChars = maxNameChars + 1 + 63
)

// boundedField is a field of a request and the most characters it may hold.
type boundedField struct {
	name  string
	value string
	max   int
}

// checkBounds refuses a request whose fields are longer than their bounds, naming
// each, before it takes anything of the team's limits.
func checkBounds(fields ...boundedField) error {
	var over []string
	for _, f := range fields {
		if n := utf8.RuneCountInString(f.value); n > f.max {
			over = append(over, fmt.Sprintf("%s is %d characters long, at most %d are taken", f.name, n, f.max))
		}
	}
	if len(over) > 0 {
		return &plan.Error{Code: plan.CodeInvalidRequest, Reason: strings.Join(over, "; ")}
	}
	return nil
}
