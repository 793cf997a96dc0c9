// Package changes serves the change API to chat integrations and agents: submitting,
// reading, cancelling, retrying and rolling back changes, deciding a resource's path,
// and reading a cluster's Argo CD Applications, each for the caller's team, plus the
// OpenAPI document that describes these routes and the token routes of packages setup
// and notify (openapi.json, checked against their route tables and types by tests). Mount adds the routes to a server.Server; the same operations (ops.go)
// are exported for the MCP tool server, so both answer from one code path.
//
// It translates requests to the pipeline and back, and nothing more: it must not decide a
// path, edit or render files, or call GitHub or a cluster itself; the pipeline
// (package plan) does, behind the Pipeline and AppReader interfaces.
package changes

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/ratelimit"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
)

// openAPIDocument describes every token route of the service: the change API's, and
// the administrative ones of packages setup and notify; tests check it against their
// routes, the types they decode and answer, and the answers they give.
//
//go:embed openapi.json
var openAPIDocument []byte

// Pipeline is what the change API asks of the pipeline; *plan.Pipeline
// implements it.
type Pipeline interface {
	Submit(ctx context.Context, teamID, actor string, req plan.Request) (store.Plan, bool, error)
	Cancel(ctx context.Context, teamID, code, reason string) (store.Plan, error)
	Retry(ctx context.Context, teamID, code string) (store.Plan, error)
	Rollback(ctx context.Context, teamID, code, requestedBy, reason string) (store.Plan, error)
	Decide(ctx context.Context, cluster clusteraccess.Ref, target objref.Target) argocd.Decision
	RepoView(ctx context.Context, cluster clusteraccess.Ref, repoURL, revision string) (plan.RepoView, error)
}

// AppReader reads the Argo CD Applications of a team's cluster for people. A missing
// Application (or one whose namespace is gone) is clusteraccess.ErrObjectNotFound.
type AppReader interface {
	AppList(ctx context.Context, cluster clusteraccess.Ref) (argocd.AppList, error)
	AppDetail(ctx context.Context, cluster clusteraccess.Ref, namespace, name string) (argocd.AppDetail, error)
}

// API serves the change pipeline to the chat integration.
type API struct {
	Store    *store.DB
	Pipeline Pipeline
	Apps     AppReader
	// ChangeLimit, when set, limits how often each team may start pipeline work:
	// create, retry and roll back changes, over HTTP and MCP alike.
	ChangeLimit *ratelimit.Limiter
	// RepositoryLimit, when set, limits each team's repository views and the MCP
	// tools that open an Application's repository: each may download an archive
	// and render every app deploying from it.
	RepositoryLimit *ratelimit.Limiter
	// ClusterReadLimit, when set, limits each team's path decisions and Argo CD
	// Application reads, over HTTP and MCP alike: each asks the team's cluster
	// through worker slots every team shares.
	ClusterReadLimit *ratelimit.Limiter
}

// changeRoute is one route of the change API and the token scope it needs.
type changeRoute struct {
	handler http.HandlerFunc
	scope   store.Scope
}

// changeRoutes are the routes Mount adds, each with the scope it needs; the OpenAPI
// test walks the same table.
func (a *API) changeRoutes() map[string]changeRoute {
	return map[string]changeRoute{
		"POST /api/v1/changes":                                          {a.createChange, store.ScopeChange},
		"GET /api/v1/changes":                                           {a.listChanges, store.ScopeRead},
		"GET /api/v1/changes/{code}":                                    {a.getChange, store.ScopeRead},
		"POST /api/v1/changes/{code}/cancel":                            {a.cancelChange, store.ScopeChange},
		"POST /api/v1/changes/{code}/rollback":                          {a.rollbackChange, store.ScopeChange},
		"POST /api/v1/changes/{code}/retry":                             {a.retryChange, store.ScopeChange},
		"POST /api/v1/decide":                                           {a.decide, store.ScopeRead},
		"GET /api/v1/clusters/{cluster}/argocd/apps":                    {a.listApps, store.ScopeRead},
		"GET /api/v1/clusters/{cluster}/argocd/apps/{namespace}/{name}": {a.getApp, store.ScopeRead},
		"GET /api/v1/clusters/{cluster}/repository":                     {a.repoView, store.ScopeRead},
	}
}

// Mount adds the change API (team-authenticated) and its OpenAPI document to srv.
func (a *API) Mount(srv *server.Server) {
	for pattern, route := range a.changeRoutes() {
		srv.HandleFunc(pattern, route.handler, server.TeamAuth(route.scope))
	}
	srv.HandleFunc("GET /api/v1/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openAPIDocument)
	})
}

// ChangeView is a plan as the API shows it. File contents never appear; the git
// diff is render's, with secret values masked.
type ChangeView struct {
	Code               string               `json:"code"`
	Status             string               `json:"status"`
	Path               string               `json:"path"`
	Cluster            string               `json:"cluster"`
	Target             objref.Target        `json:"target"`
	Change             json.RawMessage      `json:"change"`
	Reason             string               `json:"reason"`
	RequestedBy        string               `json:"requested_by"`
	IdempotencyKey     string               `json:"idempotency_key,omitempty"`
	Problem            *plan.Error          `json:"problem,omitempty"`
	Decision           *plan.DecisionInfo   `json:"decision,omitempty"`
	ArgoCD             *argocd.Payload      `json:"argocd,omitempty"`
	Application        *argocd.PayloadApp   `json:"application,omitempty"`
	Warnings           []string             `json:"warnings"`
	Repo               string               `json:"repo,omitempty"`
	BaseBranch         string               `json:"base_branch,omitempty"`
	BaseSHA            string               `json:"base_sha,omitempty"`
	Branch             string               `json:"branch,omitempty"`
	HeadSHA            string               `json:"head_sha,omitempty"`
	PullRequest        *PullRequestView     `json:"pull_request,omitempty"`
	CheckRun           *CheckRunView        `json:"check_run,omitempty"`
	GitDiff            string               `json:"git_diff,omitempty"`
	ClusterDiff        []render.ObjectDiff  `json:"cluster_diff,omitempty"`
	Renames            []render.Rename      `json:"renames,omitempty"`
	ClusterCheck       string               `json:"cluster_check,omitempty"`
	ClusterCheckNote   string               `json:"cluster_check_note,omitempty"`
	NotChecked         []string             `json:"not_checked,omitempty"`
	Verification       *render.Verification `json:"verification,omitempty"`
	VerificationResult string               `json:"verification_result,omitempty"`
	WaitingOn          string               `json:"waiting_on,omitempty"`
	MergeSHA           string               `json:"merge_sha,omitempty"`
	Deployment         *plan.Deployment     `json:"deployment,omitempty"`
	RollbackOf         string               `json:"rollback_of,omitempty"`
	RolledBackBy       string               `json:"rolled_back_by,omitempty"`
	RollbackReference  string               `json:"rollback_reference,omitempty"`
	CancelReason       string               `json:"cancel_reason,omitempty"`
	CreatedAt          time.Time            `json:"created_at"`
	UpdatedAt          time.Time            `json:"updated_at"`
	History            []EventView          `json:"history,omitempty"`
}

// PullRequestView is a plan's pull request.
type PullRequestView struct {
	Number int64  `json:"number"`
	URL    string `json:"url"`
}

// CheckRunView is a plan's kukie/render check run.
type CheckRunView struct {
	ID         int64  `json:"id"`
	URL        string `json:"url"`
	Conclusion string `json:"conclusion,omitempty"`
}

// EventView is one entry of a plan's history.
type EventView struct {
	At      time.Time `json:"at"`
	Actor   string    `json:"actor"`
	From    string    `json:"from,omitempty"`
	To      string    `json:"to"`
	Step    string    `json:"step,omitempty"`
	Message string    `json:"message,omitempty"`
}

// View is how the API shows a plan, over HTTP and MCP alike.
func View(p store.Plan) ChangeView {
	change := maskedChange(p.Target, p.Change)
	if IsSecretKind(p.Target.Kind) || newSecret(p.Change) {
		change = redactedSecretChange(p.Change)
	}
	v := ChangeView{
		Code: p.Code, Status: p.Status, Path: p.Path, Cluster: p.Cluster, Target: p.Target, Change: change,
		Reason: p.Reason, RequestedBy: p.RequestedBy, IdempotencyKey: p.IdempotencyKey, Repo: p.Repo,
		BaseBranch: p.BaseBranch, BaseSHA: p.BaseSHA, Branch: p.Branch, HeadSHA: p.HeadSHA, WaitingOn: p.WaitingOn,
		MergeSHA: p.MergeSHA, RollbackOf: p.RollbackOf, RolledBackBy: p.RolledBackBy,
		CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt, Warnings: []string{},
	}
	if p.PRNumber != 0 {
		v.PullRequest = &PullRequestView{Number: p.PRNumber, URL: p.PRURL}
	}
	if p.RollbackOf != "" {
		v.Change = revertChange(p.RollbackOf, "", change)
	}
	pay, err := plan.PayloadOf(p)
	if err != nil {
		return v
	}
	if p.RollbackOf != "" {
		v.Change = revertChange(p.RollbackOf, plan.RevertedMerge(p, pay), change)
	}
	v.Target = plan.ShownTarget(p, pay)
	if p.CheckRunID != 0 {
		v.CheckRun = &CheckRunView{ID: p.CheckRunID, URL: p.CheckRunURL, Conclusion: pay.CheckConclusion}
	}
	v.Problem, v.Decision, v.ArgoCD, v.Application = pay.Problem, pay.Decision, pay.ArgoCD, pay.App
	if pay.ArgoCD != nil && pay.ArgoCD.Warning != "" {
		v.Warnings = append(v.Warnings, pay.ArgoCD.Warning)
	}
	v.Warnings = append(v.Warnings, pay.Warnings...)
	v.GitDiff, v.ClusterDiff, v.Verification, v.VerificationResult = pay.GitDiff, pay.ClusterDiff, pay.Verification, pay.VerificationResult
	v.Renames = pay.Renames
	v.ClusterCheck, v.ClusterCheckNote = pay.ClusterCheck, pay.ClusterCheckNote
	v.NotChecked = pay.NotChecked
	v.Deployment, v.RollbackReference = pay.Deployment, pay.RollbackReference
	v.CancelReason = pay.CancelReason
	return v
}

// RevertChange is the change of a revert (a rollback's plan) as a view shows it:
// the plan it reverts, that plan's merge commit and the change it undoes. A
// revert keeps its plan's change to render the revert from; shown as its own
// change, it read as that change asked for again.
type RevertChange struct {
	Revert RevertOf `json:"revert"`
}

// RevertOf says what a revert undoes.
type RevertOf struct {
	Plan string `json:"plan"`
	// MergeCommit is the reverted plan's merge commit, when known.
	MergeCommit string `json:"merge_commit,omitempty"`
	// Undoes is the reverted plan's change as a view of that plan shows it.
	Undoes json.RawMessage `json:"undoes"`
}

// revertChange is a revert's change of plan code, merged as merge, whose change
// as shown is undoes.
func revertChange(code, merge string, undoes json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(undoes)) == 0 {
		undoes = json.RawMessage(`{}`)
	}
	b, err := json.Marshal(RevertChange{Revert: RevertOf{Plan: code, MergeCommit: merge, Undoes: undoes}})
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}

// IsSecretKind reports whether kind names a Secret, in whatever case it was given
// (a target's kind in another case names the kind the render spells so).
func IsSecretKind(kind string) bool { return strings.EqualFold(kind, "Secret") }

// newSecret reports whether raw is a new resource's change whose manifest holds
// a Secret, whatever object the target names beside it.
func newSecret(raw json.RawMessage) bool {
	var c struct {
		NewResource *render.NewResource `json:"new_resource"`
	}
	return json.Unmarshal(raw, &c) == nil && c.NewResource != nil && c.NewResource.HoldsSecret()
}

// maskedChange is the change of any other kind as a view shows it: as asked,
// but for the values its diffs mask (see render.MaskedChange), since the request
// is read back by every token of the team that may read changes.
func maskedChange(target objref.Target, raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers are shown as they were asked
	var c map[string]any
	if err := dec.Decode(&c); err != nil {
		return json.RawMessage(`{}`)
	}
	out, err := json.Marshal(render.MaskedChange(target.APIVersion, target.Kind, c))
	if err != nil {
		return json.RawMessage(`{}`)
	}
	if asked, err := json.Marshal(c); err == nil && bytes.Equal(asked, out) {
		return raw // nothing masked: shown byte for byte as asked
	}
	return out
}

// redactedValue is what a Secret's value is shown as, the word render's masking
// writes.
const redactedValue = "[redacted]"

// redactedSecretChange is the change of a Secret as a view shows it: its fields and
// the paths it sets, not one value. A change of a Secret is refused, but its request
// is kept with the change and would be read back by every token of the team that
// may read changes (a chat's read token among them).
func redactedSecretChange(raw json.RawMessage) json.RawMessage {
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		return json.RawMessage(`{}`)
	}
	var redact func(v any) any
	redact = func(v any) any {
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				t[k] = redact(x)
			}
			return t
		case []any:
			for i := range t {
				t[i] = redact(t[i])
			}
			return t
		case nil:
			return nil
		default:
			return redactedValue
		}
	}
	if p, ok := c["patch"].(map[string]any); ok {
		if m, ok := p["merge"]; ok {
			p["merge"] = redact(m)
		}
		if set, ok := p["set"].([]any); ok {
			for _, item := range set {
				if f, ok := item.(map[string]any); ok {
					if v, ok := f["value"]; ok {
						f["value"] = redact(v)
					}
				}
			}
		}
	}
	if n, ok := c["new_resource"].(map[string]any); ok {
		n["manifest"] = redactedValue
	}
	if e, ok := c["env"].(map[string]any); ok {
		if set, ok := e["set"]; ok {
			e["set"] = redact(set)
		}
	}
	out, err := json.Marshal(c)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return out
}

// writeError answers an error of one of the operations (see ops.go) with its
// status and stable code.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	var noCluster *ClusterNotFoundError
	var unreadable *ClusterReadError
	var limited *ratelimit.RefusedError
	switch {
	case errors.As(err, &limited):
		server.WriteRateLimited(w, limited)
		return
	case errors.As(err, &noCluster):
		server.WriteError(w, http.StatusNotFound, CodeClusterNotFound, noCluster.Error())
		return
	case errors.As(err, &unreadable) && (errors.Is(err, clusteraccess.ErrObjectNotFound) || errors.Is(err, store.ErrNotFound)):
		server.WriteError(w, http.StatusNotFound, plan.CodeNotFound, unreadable.Err.Error())
		return
	case errors.As(err, &unreadable):
		server.WriteError(w, http.StatusBadGateway, "cluster_unavailable", "the cluster could not be read: "+unreadable.Err.Error())
		return
	case errors.Is(err, store.ErrNotFound):
		server.WriteError(w, http.StatusNotFound, plan.CodeNotFound, "no such change for this team")
		return
	}
	e, ok := plan.AsError(err)
	if !ok {
		zerolog.Ctx(r.Context()).Error().Err(err).Msg("Change API request failed")
		server.WriteError(w, http.StatusInternalServerError, "internal", "the request failed; it can be retried")
		return
	}
	status := http.StatusUnprocessableEntity
	switch e.Code {
	case plan.CodeInvalidRequest:
		status = http.StatusBadRequest
	case plan.CodeConflict:
		status = http.StatusConflict
	case plan.CodePipelineUnavailable:
		status = http.StatusServiceUnavailable
	}
	server.WriteJSON(w, status, ChangeError{Error: e.Code, Reason: e.Reason, Details: e.Details})
}

func teamOf(w http.ResponseWriter, r *http.Request) (store.Team, bool) {
	t, ok := server.TeamFrom(r.Context())
	if !ok {
		server.WriteError(w, http.StatusUnauthorized, "unauthorized", "an API token is required")
	}
	return t, ok
}

func (a *API) createChange(w http.ResponseWriter, r *http.Request) {
	t, ok := teamOf(w, r)
	if !ok {
		return
	}
	var req plan.Request
	if !server.DecodeJSON(w, r, &req) {
		return
	}
	p, created, err := a.CreateChange(r.Context(), t, req)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if body, refused := DecidedRefusal(p); refused {
		server.WriteJSON(w, http.StatusUnprocessableEntity, body)
		return
	}
	status := http.StatusAccepted
	if !created {
		status = http.StatusOK
	}
	w.Header().Set("Location", "/api/v1/changes/"+p.Code)
	server.WriteJSON(w, status, View(p))
}

func (a *API) getChange(w http.ResponseWriter, r *http.Request) {
	t, ok := teamOf(w, r)
	if !ok {
		return
	}
	view, err := a.Change(r.Context(), t, r.PathValue("code"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, view)
}

// changeList is the answer of GET /api/v1/changes.
type changeList struct {
	Changes []ChangeView `json:"changes"`
	// Next, when set, is the before of the next page: more changes may follow.
	Next string `json:"next,omitempty"`
}

// MaxChangesPage is the most changes GET /api/v1/changes answers at once, and how
// many it answers without a limit: each carries its diffs.
const MaxChangesPage = 100

// changesCursor is the before (and next) of GET /api/v1/changes: the position of
// the last change of a page, as "<created_at ms>.<code>" in base64url. It is no
// secret: the listing is of the caller's team's changes whatever it says.
func changesCursor(p store.Plan) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(p.CreatedAt.UnixMilli(), 10) + "." + p.Code))
}

// parseChangesCursor reads a before that changesCursor wrote.
func parseChangesCursor(s string) (store.PlanPosition, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return store.PlanPosition{}, false
	}
	ms, code, ok := strings.Cut(string(raw), ".")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || code == "" {
		return store.PlanPosition{}, false
	}
	return store.PlanPosition{CreatedAt: time.UnixMilli(n), Code: code}, true
}

// listChanges answers GET /api/v1/changes: the team's changes, newest first, a page
// of limit (at most MaxChangesPage) at a time, the next from before=next.
func (a *API) listChanges(w http.ResponseWriter, r *http.Request) {
	t, ok := teamOf(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit := MaxChangesPage
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxChangesPage {
			server.WriteError(w, http.StatusBadRequest, plan.CodeInvalidRequest,
				fmt.Sprintf("limit must be a whole number from 1 to %d", MaxChangesPage))
			return
		}
		limit = n
	}
	// A cluster the team does not have is said to be none, as everywhere else: an
	// empty listing would read as "no changes there" for a name mistyped or
	// holding a letter of another script. (A cluster is never removed, so every
	// change's cluster is the team's.)
	if cluster := q.Get("cluster"); cluster != "" {
		if err := a.CheckCluster(r.Context(), t, cluster); err != nil {
			writeError(w, r, err)
			return
		}
	}
	// One more than the page, to know whether another follows.
	f := store.PlanFilter{TeamID: t.ID, Cluster: q.Get("cluster"), Limit: limit + 1}
	if s := q.Get("before"); s != "" {
		pos, ok := parseChangesCursor(s)
		if !ok {
			server.WriteError(w, http.StatusBadRequest, plan.CodeInvalidRequest,
				"before must be the next of an earlier answer of this listing")
			return
		}
		f.Before = &pos
	}
	if s := r.URL.Query().Get("status"); s != "" {
		for _, one := range strings.Split(s, ",") {
			if !plan.Status(one).Valid() {
				known := make([]string, len(plan.AllStatuses))
				for i, st := range plan.AllStatuses {
					known[i] = string(st)
				}
				server.WriteError(w, http.StatusBadRequest, plan.CodeInvalidRequest,
					"unknown status "+strconv.Quote(one)+"; status takes one or more, comma-separated, of "+strings.Join(known, ", "))
				return
			}
			f.Statuses = append(f.Statuses, one)
		}
	}
	plans, err := a.Store.ListPlans(r.Context(), f)
	if err != nil {
		writeError(w, r, err)
		return
	}
	var out changeList
	if len(plans) > limit {
		plans = plans[:limit]
		out.Next = changesCursor(plans[limit-1])
	}
	out.Changes = make([]ChangeView, len(plans))
	for i, p := range plans {
		out.Changes[i] = View(p)
	}
	server.WriteJSON(w, http.StatusOK, out)
}

// cancelRequest is the optional body of a cancel.
type cancelRequest struct {
	Reason string `json:"reason"`
}

func (a *API) cancelChange(w http.ResponseWriter, r *http.Request) {
	// The body is optional, as before it was read at all; one that is sent is held
	// to what a cancel takes, so that a misspelt field or a truncated body is
	// refused rather than a reason silently dropped from the history.
	// A body of null is none, as it is for a rollback.
	var body cancelRequest
	a.act(w, r, &body, func(ctx context.Context, t store.Team, code string) (ChangeView, error) {
		return a.CancelChange(ctx, t, code, body.Reason)
	}, http.StatusOK)
}

func (a *API) retryChange(w http.ResponseWriter, r *http.Request) {
	a.act(w, r, nil, func(ctx context.Context, t store.Team, code string) (ChangeView, error) {
		if err := a.ChangeLimit.Allow(t.ID); err != nil {
			return ChangeView{}, err
		}
		p, err := a.Pipeline.Retry(plan.WithActor(ctx, actor(t)), t.ID, code)
		return View(p), err
	}, http.StatusAccepted)
}

// rollbackRequest is the optional body of a rollback.
type rollbackRequest struct {
	Reason      string `json:"reason"`
	RequestedBy string `json:"requested_by"`
}

func (a *API) rollbackChange(w http.ResponseWriter, r *http.Request) {
	// The body is optional: none at all, however it is sent, is a rollback
	// without a reason.
	var body rollbackRequest
	a.act(w, r, &body, func(ctx context.Context, t store.Team, code string) (ChangeView, error) {
		return a.RollbackChange(ctx, t, code, body.RequestedBy, body.Reason)
	}, http.StatusAccepted)
}

// act answers fn's view of the team's change named by the path. body, when not
// nil, is the route's optional body, read into it only once the caller is known
// and the change is the team's: whether a body would be taken is nobody's to learn
// without access to the change.
func (a *API) act(w http.ResponseWriter, r *http.Request, body any, fn func(context.Context, store.Team, string) (ChangeView, error), status int) {
	t, ok := teamOf(w, r)
	if !ok {
		return
	}
	code := r.PathValue("code")
	if body != nil {
		if _, err := a.Store.TeamPlan(r.Context(), t.ID, code); err != nil {
			writeError(w, r, err)
			return
		}
		if !server.DecodeOptionalJSON(w, r, body) {
			return
		}
	}
	view, err := fn(r.Context(), t, code)
	if err != nil {
		writeError(w, r, err)
		return
	}
	server.WriteJSON(w, status, view)
}

// decideRequest is the body of POST /api/v1/decide.
type decideRequest struct {
	Cluster string        `json:"cluster"`
	Target  objref.Target `json:"target"`
}

func (a *API) decide(w http.ResponseWriter, r *http.Request) {
	t, ok := teamOf(w, r)
	if !ok {
		return
	}
	var req decideRequest
	if !server.DecodeJSON(w, r, &req) {
		return
	}
	d, err := a.Decide(r.Context(), t, req.Cluster, req.Target)
	if err != nil {
		writeError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, d)
}

// AppListPage is the answer of GET /api/v1/clusters/{cluster}/argocd/apps and of
// the MCP tool list_apps: the cluster's counts and repositories, whole on every
// page, and one page of its Applications.
type AppListPage struct {
	argocd.AppList
	// Next, when set, is the before of the next page: more Applications follow.
	Next string `json:"next,omitempty"`
}

// Pages of the Application listing: DefaultAppsPage Applications without a
// limit, MaxAppsPage at most. An item is a few hundred bytes, so a page holds
// more of them than a page of changes, which carry diffs.
const (
	DefaultAppsPage = 100
	MaxAppsPage     = 500
)

// appsCursor is the before (and next) of the Application listing: the position
// of the last Application of a page, as "<severity>/<namespace>/<name>" in
// base64url (neither name holds a slash). It is no secret: what a cursor says
// changes nothing of which cluster is read or who may read it.
func appsCursor(p argocd.AppPosition) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(p.Severity) + "/" + p.Namespace + "/" + p.Name))
}

// parseAppsCursor reads a before that appsCursor wrote.
func parseAppsCursor(s string) (argocd.AppPosition, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return argocd.AppPosition{}, false
	}
	sev, rest, ok := strings.Cut(string(raw), "/")
	ns, name, ok2 := strings.Cut(rest, "/")
	n, err := strconv.Atoi(sev)
	if !ok || !ok2 || err != nil || name == "" || strings.Contains(name, "/") {
		return argocd.AppPosition{}, false
	}
	return argocd.AppPosition{Severity: n, Namespace: ns, Name: name}, true
}

// listApps answers GET /api/v1/clusters/{cluster}/argocd/apps (see
// API.AppListPage): a limit that is no whole number is refused as one out of
// bounds is.
func (a *API) listApps(w http.ResponseWriter, r *http.Request) {
	t, ok := teamOf(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit := DefaultAppsPage
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			writeError(w, r, errAppsLimit)
			return
		}
		limit = n
	}
	out, err := a.AppListPage(r.Context(), t, r.PathValue("cluster"), limit, q.Get("before"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, out)
}

func (a *API) getApp(w http.ResponseWriter, r *http.Request) {
	t, ok := teamOf(w, r)
	if !ok {
		return
	}
	out, err := a.AppDetail(r.Context(), t, r.PathValue("cluster"), r.PathValue("namespace"), r.PathValue("name"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, out)
}

func (a *API) repoView(w http.ResponseWriter, r *http.Request) {
	t, ok := teamOf(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	view, err := a.RepoView(r.Context(), t, r.PathValue("cluster"), q.Get("repo"), q.Get("revision"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, view)
}
