package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/api/changes"
	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/servicetest"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/mcp"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/ratelimit"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

const (
	connectedRepo   = "https://github.com/acme/deploy"
	unconnectedRepo = "https://github.com/acme/elsewhere"
	deployedSHA     = "0123456789abcdef0123456789abcdef01234567"
	// plantedSecret is a value the repository fixture hides in a Secret; no tool
	// result may carry it.
	plantedSecret = "kkPlantedSecret1"
)

func application(name, repo, revision, syncedSHA string, selfHeal bool) argocd.Application {
	a := argocd.Application{Name: name, Namespace: "argocd", Spec: argocd.AppSpec{
		Source: &argocd.AppSource{RepoURL: repo, Path: "apps/" + name, TargetRevision: revision}},
		Status: argocd.AppStatus{SourceType: "Kustomize", Sync: argocd.AppSyncStatus{Status: "Synced", Revision: syncedSHA}, Health: argocd.AppHealth{Status: "Healthy"}}}
	if selfHeal {
		a.Spec.SyncPolicy = &argocd.AppSyncPolicy{Automated: &argocd.AppSyncAutomated{SelfHeal: true}}
	}
	return a
}

// fakeCluster is a cluster whose Argo CD has three Applications: web (self-heal,
// from a connected repository, synced to deployedSHA), tagged (deploys a tag and has
// not synced yet) and other (from a repository that is not connected).
type fakeCluster struct{ apps []argocd.Application }

func newFakeCluster() *fakeCluster {
	return &fakeCluster{apps: []argocd.Application{
		application("web", connectedRepo, "main", deployedSHA, true),
		application("tagged", connectedRepo, "v1.2.0", "", false),
		application("other", unconnectedRepo, "main", deployedSHA, false),
	}}
}

func (c *fakeCluster) app(namespace, name string) (*argocd.Application, bool) {
	for i := range c.apps {
		if c.apps[i].Namespace == namespace && c.apps[i].Name == name {
			return &c.apps[i], true
		}
	}
	return nil, false
}

// Decide: a Deployment named after an Application carries that Application's
// tracking id; any other carries none. The decision is argocd's own.
func (c *fakeCluster) Decide(_ context.Context, _ clusteraccess.Ref, t objref.Target) argocd.Decision {
	ref := argocd.ResourceRef{Group: "apps", Kind: t.Kind, Namespace: t.Namespace, Name: t.Name}
	res := &argocd.Resource{Ref: ref, Annotations: map[string]string{}}
	if _, ok := c.app("argocd", t.Name); ok {
		res.Annotations[argocd.TrackingIDAnnotation] = t.Name + ":apps/" + t.Kind + ":" + t.Namespace + "/" + t.Name
	}
	return argocd.Decide(argocd.DecideInput{Apps: argocd.NewAppIndex(c.apps), Targets: []argocd.TargetRead{{Ref: ref, Resource: res}}})
}

func (c *fakeCluster) Applications(context.Context, clusteraccess.Ref) ([]argocd.Application, error) {
	return c.apps, nil
}

func (c *fakeCluster) Capabilities(context.Context, clusteraccess.Ref) (kube.Capabilities, error) {
	return kube.Capabilities{}, nil
}

// ClusterByServer finds no cluster: the team registered none beside the plan's.
func (c *fakeCluster) ClusterByServer(context.Context, string, string) (string, bool, error) {
	return "", false, nil
}

func (c *fakeCluster) Clusters(context.Context, string) ([]string, error) {
	return []string{"prod"}, nil
}

// invalidSegment is what the cluster's client refuses to put in a request path
// (client-go's IsValidPathSegmentName): it fails the read rather than find nothing.
func invalidSegment(s ...string) error {
	for _, v := range s {
		if v == "." || v == ".." || strings.ContainsAny(v, "/%") {
			return fmt.Errorf("invalid resource name %q: may not contain '/' or '%%'", v)
		}
	}
	return nil
}

func (c *fakeCluster) Application(_ context.Context, _ clusteraccess.Ref, namespace, name string) (argocd.Application, error) {
	if err := invalidSegment(namespace, name); err != nil {
		return argocd.Application{}, err
	}
	if a, ok := c.app(namespace, name); ok {
		return *a, nil
	}
	return argocd.Application{}, clusteraccess.ErrObjectNotFound
}

func (c *fakeCluster) Object(context.Context, clusteraccess.Ref, objref.Target) (map[string]any, error) {
	return nil, errors.New("no live objects in this test")
}

func (c *fakeCluster) DryRun(context.Context, clusteraccess.Ref, []map[string]any) error {
	return errors.New("no dry-run in this test")
}

func (c *fakeCluster) AppList(context.Context, clusteraccess.Ref) (argocd.AppList, error) {
	return argocd.SummarizeApps(c.apps), nil
}

func (c *fakeCluster) AppDetail(_ context.Context, _ clusteraccess.Ref, namespace, name string) (argocd.AppDetail, error) {
	if err := invalidSegment(namespace, name); err != nil {
		return argocd.AppDetail{}, err
	}
	if a, ok := c.app(namespace, name); ok {
		return argocd.DescribeApp(*a), nil
	}
	return argocd.AppDetail{}, clusteraccess.ErrObjectNotFound
}

// fakeRepos serves one repository tree at any commit; the pipeline is never
// started, so only the reads the tools make are implemented.
type fakeRepos struct {
	plan.Repos
	dir       string
	snapshots []string
	// snapshotErr, when set, is every snapshot's failure.
	snapshotErr error
}

func (r *fakeRepos) ResolveRevision(_ context.Context, _ int64, _, revision string) (github.Branch, error) {
	if strings.HasPrefix(revision, "v") {
		return github.Branch{}, github.ErrNotABranch
	}
	return github.Branch{Name: revision, SHA: strings.Repeat("b", 40)}, nil
}

func (r *fakeRepos) Snapshot(_ context.Context, _ int64, repo, sha string) (*cache.Snapshot, error) {
	r.snapshots = append(r.snapshots, sha)
	if r.snapshotErr != nil {
		return nil, r.snapshotErr
	}
	return &cache.Snapshot{Dir: r.dir, Repo: repo, SHA: sha}, nil
}

type fakeConnections struct{}

func (fakeConnections) RepoInstallation(_ context.Context, _, _, repoURL string) (int64, error) {
	if repoURL == connectedRepo {
		return 1, nil
	}
	return 0, clusteraccess.ErrRepoNotConnected
}

// renderCount counts the Application renders the pipeline makes that succeed
// (a refused render is not cached, so it is tried again).
type renderCount struct {
	mu sync.Mutex
	n  int
}

func (c *renderCount) Rendered(_ render.SourceType, _ time.Duration, _ int, err error) {
	if err != nil {
		return
	}
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *renderCount) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

type env struct {
	renders *renderCount
	db      *store.DB
	repos   *fakeRepos
	url     string
	team    store.Team
	read    secret.Secret // read scope only
	change  secret.Secret // read and change
	outside string        // a file next to the repository that no tool may reach
	api     *changes.API  // its limits may be set before the first call
	cluster *fakeCluster  // its Applications may be added to before the first call
	// base is the server's root: the HTTP API is mounted beside the tools, so a
	// test can ask both the same.
	base string
	// logs is what the server logged.
	logs *servicetest.SyncBuffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, storetest.SQLite(t))
}

// newEnvOn is newEnv on db.
func newEnvOn(t *testing.T, db *store.DB) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{db: db, logs: &servicetest.SyncBuffer{}}
	var err error
	if e.team, err = e.db.CreateTeam(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.CreateCluster(ctx, store.Cluster{TeamID: e.team.ID, Name: "prod", Access: store.ClusterInCluster}); err != nil {
		t.Fatal(err)
	}
	if _, e.read, err = e.db.CreateAPIToken(ctx, e.team.ID, "private chat", store.ScopeRead); err != nil {
		t.Fatal(err)
	}
	if _, e.change, err = e.db.CreateAPIToken(ctx, e.team.ID, "shared chat", store.ScopeRead, store.ScopeChange); err != nil {
		t.Fatal(err)
	}

	base := t.TempDir()
	e.outside = filepath.Join(base, "outside.txt")
	writeFile(t, e.outside, "outside the repository\n")
	repo := filepath.Join(base, "repo")
	writeFile(t, filepath.Join(repo, "apps/web/kustomization.yaml"), "resources:\n- deployment.yaml\n- secret.yaml\n")
	writeFile(t, filepath.Join(repo, "apps/web/deployment.yaml"), "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n")
	writeFile(t, filepath.Join(repo, "apps/web/secret.yaml"), "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: "+plantedSecret+"\n")
	writeFile(t, filepath.Join(repo, "apps/web/big.yaml"), "# "+strings.Repeat("x", 30000)+"\n")
	writeFile(t, filepath.Join(repo, "README.md"), "deploy repo\n")
	if err := os.Symlink(e.outside, filepath.Join(repo, "apps/web/escape.yaml")); err != nil {
		t.Fatal(err)
	}
	e.repos = &fakeRepos{dir: repo}

	cluster := newFakeCluster()
	e.cluster = cluster
	renders, err := cache.NewRenders(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	e.renders = &renderCount{}
	pipeline := plan.New(plan.Deps{Store: e.db, Clusters: cluster, Repos: e.repos, Connections: fakeConnections{},
		Renderer: cache.RenderEngine{Renders: renders, Observer: e.renders}}, plan.Config{})
	// Closed before any plan runs: Submit still decides at once, as it does in
	// service, and nothing later than the decision runs in the background.
	pipeline.Close()

	api := &changes.API{Store: e.db, Pipeline: pipeline, Apps: cluster}
	e.api = api
	srv, err := server.New(server.Config{}, server.Deps{Logger: zerolog.New(e.logs), Auth: e.db})
	if err != nil {
		t.Fatal(err)
	}
	mcp.New(mcp.Deps{Changes: api, Trees: pipeline, Version: "test"}).Mount(srv)
	api.Mount(srv)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	e.base, e.url = hs.URL, hs.URL+mcp.Path
	return e
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

type bearer struct{ token secret.Secret }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token.Reveal())
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens a session with the SDK's own client, as an assistant would.
// requirePlans fails t unless the team has want plans after what the test did.
func (e *env) requirePlans(t *testing.T, want int, after string) {
	t.Helper()
	plans, err := e.db.ListPlans(context.Background(), store.PlanFilter{TeamID: e.team.ID})
	if err != nil || len(plans) != want {
		t.Fatalf("plans after %s: %d, %v; want %d", after, len(plans), err, want)
	}
}

func (e *env) connect(t *testing.T, token secret.Secret) *sdk.ClientSession {
	t.Helper()
	cs, err := e.dial(token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func (e *env) dial(token secret.Secret) (*sdk.ClientSession, error) {
	client := sdk.NewClient(&sdk.Implementation{Name: "assistant", Version: "test"}, nil)
	return client.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint: e.url, HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
}

// call calls a tool and returns its structured result, or the text of its tool
// error.
func call(t *testing.T, cs *sdk.ClientSession, tool string, args any) (map[string]any, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", tool, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if strings.Contains(text.String(), plantedSecret) {
		t.Fatalf("%s answered the planted secret:\n%s", tool, text.String())
	}
	if res.IsError {
		return nil, text.String()
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", tool, raw, err)
	}
	if note, _ := out["ownership"].(string); note == "" {
		t.Fatalf("%s result has no ownership note: %s", tool, raw)
	}
	return out, ""
}

func mustOK(t *testing.T, cs *sdk.ClientSession, tool string, args any) map[string]any {
	t.Helper()
	out, errText := call(t, cs, tool, args)
	if out == nil {
		t.Fatalf("%s: tool error %s", tool, errText)
	}
	return out
}

func mustRefuse(t *testing.T, cs *sdk.ClientSession, tool string, args any, wants ...string) string {
	t.Helper()
	out, errText := call(t, cs, tool, args)
	if out != nil {
		t.Fatalf("%s = %v, want a tool error", tool, out)
	}
	for _, w := range wants {
		if !strings.Contains(errText, w) {
			t.Fatalf("%s tool error %q does not say %q", tool, errText, w)
		}
	}
	return errText
}

var webTarget = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "web"}

func TestToolListIsTheSameForEveryToken(t *testing.T) {
	e := newEnv(t)
	want := []string{"cancel_change", "decide_path", "describe_app", "get_change", "list_apps", "list_repo_files",
		"propose_git_change", "read_repo_file", "rollback_change", "view_repository"}
	for name, token := range map[string]secret.Secret{"read": e.read, "change": e.change} {
		res, err := e.connect(t, token).ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tool := range res.Tools {
			got = append(got, tool.Name)
			if tool.Description == "" || tool.InputSchema == nil {
				t.Errorf("tool %s has no description or input schema", tool.Name)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s token lists %v, want %v", name, got, want)
		}
	}
}

func TestToolServerNeedsTheTeamsToken(t *testing.T) {
	e := newEnv(t)
	for name, token := range map[string]secret.Secret{"none": "", "unknown": secret.New("kuk_unknown")} {
		if _, err := e.dial(token); err == nil {
			t.Errorf("%s token: the session was opened", name)
		}
		req, _ := http.NewRequest("POST", e.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := (&http.Client{Transport: bearer{token}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s token: %d, want 401", name, resp.StatusCode)
		}
	}
	// A token of another scope set without read is refused before any tool runs.
	_, adminOnly, err := e.db.CreateAPIToken(context.Background(), e.team.ID, "ops", store.ScopeAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.dial(adminOnly); err == nil {
		t.Error("an admin-only token opened a session; the tools need the read scope")
	}
}

func TestAppAndDecisionTools(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, e.read)

	list := mustOK(t, cs, mcp.ToolListApps, map[string]any{"cluster": "prod"})
	apps, _ := list["apps"].([]any)
	if len(apps) != 3 {
		t.Fatalf("list_apps apps = %v, want 3", list["apps"])
	}
	notes := map[string]string{}
	for _, a := range apps {
		m := a.(map[string]any)
		notes[m["name"].(string)], _ = m["ownership"].(string)
	}
	if notes["web"] != "managed by Argo CD app argocd/web with self-heal" || notes["other"] != "managed by Argo CD app argocd/other with manual sync" {
		t.Errorf("per-app ownership notes = %v", notes)
	}
	mustRefuse(t, cs, mcp.ToolListApps, map[string]any{"cluster": "staging"}, "cluster_not_found", `"staging"`)

	app := mustOK(t, cs, mcp.ToolDescribeApp, map[string]any{"cluster": "prod", "namespace": "argocd", "name": "web"})
	if app["ownership"] != "managed by Argo CD app argocd/web with self-heal" || app["revision"] != deployedSHA {
		t.Errorf("describe_app = %v", app)
	}
	mustRefuse(t, cs, mcp.ToolDescribeApp, map[string]any{"cluster": "prod", "namespace": "argocd", "name": "gone"}, "not_found")

	d := mustOK(t, cs, mcp.ToolDecidePath, map[string]any{"cluster": "prod", "target": webTarget})
	if d["path"] != "git" || d["level"] != "self_heal" || d["ownership"] != "managed by Argo CD app argocd/web with self-heal" || d["argocd"] == nil {
		t.Errorf("decide_path web = %v", d)
	}
	adhoc := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "adhoc"}
	d = mustOK(t, cs, mcp.ToolDecidePath, map[string]any{"cluster": "prod", "target": adhoc})
	if d["path"] != "direct" || d["ownership"] != "not managed by Argo CD: a direct change stays as made" {
		t.Errorf("decide_path adhoc = %v", d)
	}
	mustRefuse(t, cs, mcp.ToolDecidePath, map[string]any{"cluster": "prod", "target": map[string]any{"kind": "Deployment"}}, "invalid_request: ", "target {apiVersion, kind, name} are required")
}

func TestChangeToolsNeedTheChangeScope(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, e.read)
	scale := map[string]any{"cluster": "prod", "target": webTarget, "change": map[string]any{"replicas": map[string]any{"count": 4}},
		"reason": "traffic", "requested_by": "alice"}
	for tool, args := range map[string]any{
		mcp.ToolProposeGitChange: scale,
		mcp.ToolCancelChange:     map[string]any{"code": "anything"},
		mcp.ToolRollbackChange:   map[string]any{"code": "anything"},
	} {
		mustRefuse(t, cs, tool, args, tool+" needs a token with the change scope", "this token has only read")
	}
	e.requirePlans(t, 0, "refused change tools")
}

// TestChangeToolsAreRateLimited: the change tools share the team's limit of the
// change API; past it a tool is refused rate_limited, saying when to retry, and
// nothing is stored.
func TestChangeToolsAreRateLimited(t *testing.T) {
	e := newEnv(t)
	limit, err := ratelimit.New("changes for this team", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	e.api.ChangeLimit = limit
	cs := e.connect(t, e.change)
	request := func(name string) map[string]any {
		return map[string]any{"cluster": "prod", "target": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": name},
			"change": map[string]any{"replicas": map[string]any{"count": 4}}, "reason": "traffic", "requested_by": "alice"}
	}
	proposed := mustOK(t, cs, mcp.ToolProposeGitChange, request("web"))
	mustRefuse(t, cs, mcp.ToolProposeGitChange, request("web"), "rate_limited: too many changes for this team", "retry in 60 s")
	code, _ := proposed["code"].(string)
	mustRefuse(t, cs, mcp.ToolRollbackChange, map[string]any{"code": code}, "rate_limited: too many changes for this team")
	e.requirePlans(t, 1, "the limit")
}

func TestChangeTools(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cs := e.connect(t, e.change)
	request := func(target map[string]any) map[string]any {
		return map[string]any{"cluster": "prod", "target": target, "change": map[string]any{"replicas": map[string]any{"count": 4}},
			"reason": "traffic", "requested_by": "alice", "idempotency_key": target["name"]}
	}

	proposed := mustOK(t, cs, mcp.ToolProposeGitChange, request(webTarget))
	code, _ := proposed["code"].(string)
	if code == "" || proposed["status"] != "preparing" || proposed["ownership"] != "managed by Argo CD app argocd/web with self-heal" {
		t.Fatalf("propose_git_change = %v", proposed)
	}

	// Code decides the route: a resource no Application manages is refused with the
	// decision, though the tool asks for Git.
	mustRefuse(t, cs, mcp.ToolProposeGitChange, request(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "adhoc"}),
		"path_mismatch", "Current decision: path direct", "Ownership: not managed by Argo CD")
	mustRefuse(t, cs, mcp.ToolProposeGitChange, request(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "other"}),
		"repo_not_connected", "connect it with POST /api/v1/clusters/prod/repos", "Ownership: managed by Argo CD app argocd/other")
	mustRefuse(t, cs, mcp.ToolProposeGitChange, map[string]any{"cluster": "prod", "target": webTarget, "change": map[string]any{}, "reason": "x", "requested_by": "alice"},
		"invalid_request", "exactly one of")
	patched := mustOK(t, cs, mcp.ToolProposeGitChange, map[string]any{"cluster": "prod", "target": webTarget, "reason": "owner", "requested_by": "alice", "idempotency_key": "patch",
		"change": map[string]any{"patch": map[string]any{"merge": map[string]any{"metadata": map[string]any{"annotations": map[string]any{"example.com/owner": "shop"}}}}}})
	if patched["status"] != "preparing" {
		t.Fatalf("propose_git_change of a merge patch = %v", patched)
	}
	mustOK(t, cs, mcp.ToolProposeGitChange, map[string]any{"cluster": "prod", "target": webTarget, "reason": "ready", "requested_by": "alice", "idempotency_key": "patch-set",
		"change": map[string]any{"patch": map[string]any{"set": []any{map[string]any{"path": "/spec/minReadySeconds", "value": 10}}}}})
	mustRefuse(t, cs, mcp.ToolProposeGitChange, map[string]any{"cluster": "prod", "target": webTarget, "reason": "x", "requested_by": "alice",
		"change": map[string]any{"patch": map[string]any{"set": []any{map[string]any{"path": "/metadata/name", "value": "web2"}}}}},
		"invalid_request", "/metadata/name")
	deleted := mustOK(t, cs, mcp.ToolProposeGitChange, map[string]any{"cluster": "prod", "target": webTarget, "reason": "retired", "requested_by": "alice", "idempotency_key": "delete",
		"change": map[string]any{"delete_resource": map[string]any{}}})
	if deleted["status"] != "preparing" {
		t.Fatalf("propose_git_change of a deletion = %v", deleted)
	}
	mustRefuse(t, cs, mcp.ToolProposeGitChange, map[string]any{"cluster": "prod", "target": webTarget, "reason": "x", "requested_by": "alice",
		"change": map[string]any{"delete_resource": map[string]any{}, "replicas": map[string]any{"count": 1}}},
		"invalid_request", "delete_resource (got 2)")
	mustRefuse(t, cs, mcp.ToolProposeGitChange, map[string]any{"cluster": "staging", "target": webTarget, "change": map[string]any{"replicas": map[string]any{"count": 1}}, "reason": "x", "requested_by": "alice"},
		"cluster_not_found")

	// Once the pipeline has opened the pull request, get_change carries its URL.
	p, err := e.db.PlanByCode(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	p.Status, p.PRNumber, p.PRURL = string(plan.StatusPROpen), 7, "https://github.com/acme/deploy/pull/7"
	if p, err = e.db.UpdatePlan(ctx, p, store.PlanEvent{Actor: "system", Step: "pull_request"}); err != nil {
		t.Fatal(err)
	}
	got := mustOK(t, cs, mcp.ToolGetChange, map[string]any{"code": code})
	if got["pull_request_url"] != p.PRURL || got["status"] != "pr_open" || got["ownership"] != "managed by Argo CD app argocd/web with self-heal" {
		t.Fatalf("get_change = %v", got)
	}
	mustRefuse(t, cs, mcp.ToolGetChange, map[string]any{"code": "nope"}, "not_found")

	// Rollback is for merged changes; cancel for open ones.
	mustRefuse(t, cs, mcp.ToolRollbackChange, map[string]any{"code": code}, "conflict", "only merged plans can be rolled back")
	p.Status, p.PRNumber, p.MergeSHA = string(plan.StatusMerged), 0, strings.Repeat("c", 40)
	if _, err := e.db.UpdatePlan(ctx, p, store.PlanEvent{Actor: "system", Step: "merged"}); err != nil {
		t.Fatal(err)
	}
	rb := mustOK(t, cs, mcp.ToolRollbackChange, map[string]any{"code": code, "reason": "errors", "requested_by": "bob"})
	change, _ := rb["change"].(map[string]any)
	if rb["code"] == code || change["rollback_of"] != code {
		t.Fatalf("rollback_change = %v", rb)
	}
	cancelled := mustOK(t, cs, mcp.ToolCancelChange, map[string]any{"code": rb["code"]})
	if cancelled["status"] != "closed" {
		t.Fatalf("cancel_change = %v", cancelled)
	}
	mustRefuse(t, cs, mcp.ToolCancelChange, map[string]any{"code": rb["code"]}, "conflict", "can no longer be cancelled")
}

func TestRepositoryTools(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, e.read)
	web := func(path string) map[string]any {
		return map[string]any{"cluster": "prod", "namespace": "argocd", "name": "web", "path": path}
	}

	files := mustOK(t, cs, mcp.ToolListRepoFiles, web(""))
	if files["sha"] != deployedSHA || files["path"] != "apps/web" || files["ownership"] != "managed by Argo CD app argocd/web with self-heal" {
		t.Fatalf("list_repo_files = %v", files)
	}
	var names []string
	for _, f := range files["files"].([]any) {
		names = append(names, f.(string))
	}
	if !slices.Contains(names, "apps/web/deployment.yaml") || slices.Contains(names, "README.md") {
		t.Fatalf("files of the app's folder = %v", names)
	}
	root := mustOK(t, cs, mcp.ToolListRepoFiles, web("/"))
	if !slices.Contains(root["files"].([]any), any("README.md")) {
		t.Fatalf("files of the repository root = %v", root["files"])
	}

	secretFile := mustOK(t, cs, mcp.ToolReadRepoFile, web("apps/web/secret.yaml"))
	if content := secretFile["content"].(string); !strings.Contains(content, "kind: Secret") || !strings.Contains(content, "password:") {
		t.Fatalf("masked Secret = %q", content)
	}
	deploy := mustOK(t, cs, mcp.ToolReadRepoFile, web("apps/web/deployment.yaml"))
	if !strings.Contains(deploy["content"].(string), "replicas: 2") || deploy["note"] != nil {
		t.Fatalf("deployment = %v", deploy)
	}
	big := mustOK(t, cs, mcp.ToolReadRepoFile, web("apps/web/big.yaml"))
	if n := len([]rune(big["content"].(string))); n != mcp.MaxResultChars || !strings.Contains(big["note"].(string), "cut at 24000 characters") {
		t.Fatalf("big file: %d characters, note %v", n, big["note"])
	}

	mustRefuse(t, cs, mcp.ToolReadRepoFile, web("apps/web/missing.yaml"), "not_found")
	mustRefuse(t, cs, mcp.ToolReadRepoFile, web("apps/web"), "is a folder")
	// Paths stay inside the repository: dot-dots are cleaned away, and a symbolic
	// link that leads out is not followed.
	mustRefuse(t, cs, mcp.ToolReadRepoFile, web("../outside.txt"), "not_found")
	if text := mustRefuse(t, cs, mcp.ToolReadRepoFile, web("apps/web/escape.yaml")); strings.Contains(text, "outside the repository") {
		t.Fatalf("the link out of the repository was followed: %s", text)
	}

	// A tool that cannot act says why and what the user can do.
	mustRefuse(t, cs, mcp.ToolListRepoFiles, map[string]any{"cluster": "prod", "namespace": "argocd", "name": "tagged"},
		"revision_not_a_branch", `"v1.2.0"`)
	mustRefuse(t, cs, mcp.ToolListRepoFiles, map[string]any{"cluster": "prod", "namespace": "argocd", "name": "other"},
		"repo_not_connected", "connect it")
	mustRefuse(t, cs, mcp.ToolListRepoFiles, map[string]any{"cluster": "prod", "namespace": "argocd", "name": "gone"}, "application_not_found")
	mustRefuse(t, cs, mcp.ToolReadRepoFile, map[string]any{"cluster": "staging", "namespace": "argocd", "name": "web", "path": "README.md"}, "cluster_not_found")
}

// Each call acts as the team of its own token: the server keeps no session in
// which one caller's team could answer another's call.
func TestEachCallActsAsItsTokensTeam(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	other, err := e.db.CreateTeam(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	_, otherToken, err := e.db.CreateAPIToken(ctx, other.ID, "chat")
	if err != nil {
		t.Fatal(err)
	}
	shop, elsewhere := e.connect(t, e.read), e.connect(t, otherToken)
	for i := 0; i < 3; i++ {
		mustOK(t, shop, mcp.ToolListApps, map[string]any{"cluster": "prod"})
		mustRefuse(t, elsewhere, mcp.ToolListApps, map[string]any{"cluster": "prod"}, "cluster_not_found")
	}
}

// The repository view: which folders which apps deploy, each app's render masked,
// cached by commit (the same commit is not rendered again).
func TestRepositoryView(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, e.read)
	args := map[string]any{"cluster": "prod", "repo": connectedRepo, "revision": deployedSHA}
	view := mustOK(t, cs, mcp.ToolViewRepository, args)
	if view["sha"] != deployedSHA || view["repo"] != "acme/deploy" {
		t.Fatalf("view = %v", view)
	}
	raw, _ := json.Marshal(view["folders"])
	if !strings.Contains(string(raw), `{"apps":["argocd/web"],"path":"apps/web"}`) || !strings.Contains(string(raw), `"apps/tagged"`) || strings.Contains(string(raw), "other") {
		t.Fatalf("folders = %s; want the connected repository's apps only", raw)
	}
	apps := map[string]map[string]any{}
	for _, a := range view["apps"].([]any) {
		m := a.(map[string]any)
		apps[m["name"].(string)] = m
	}
	web := apps["argocd/web"]
	if web == nil || web["ownership"] != "managed by Argo CD app argocd/web with self-heal" {
		t.Fatalf("web = %v", web)
	}
	yaml, _ := web["yaml"].(string)
	if !strings.Contains(yaml, "kind: Deployment") || !strings.Contains(yaml, "kind: Secret") {
		t.Fatalf("web render:\n%s\nproblem: %v", yaml, web["problem"])
	}
	if p, _ := apps["argocd/tagged"]["problem"].(string); p == "" {
		t.Fatalf("tagged app, whose folder does not exist, = %v; want its problem", apps["argocd/tagged"])
	}
	renders := e.renders.count()
	if renders != 1 {
		t.Fatalf("%d successful renders, want web's one", renders)
	}
	mustOK(t, cs, mcp.ToolViewRepository, args)
	if again := e.renders.count(); again != renders {
		t.Fatalf("the same commit was rendered again: %d renders, then %d", renders, again)
	}

	mustRefuse(t, cs, mcp.ToolViewRepository, map[string]any{"cluster": "prod", "repo": unconnectedRepo}, "repo_not_connected", "connect it")
	mustRefuse(t, cs, mcp.ToolViewRepository, map[string]any{"cluster": "staging", "repo": connectedRepo}, "cluster_not_found")
	mustRefuse(t, cs, mcp.ToolViewRepository, map[string]any{"cluster": "prod", "repo": connectedRepo, "revision": "v1.2.0"}, "revision_not_found")
}

// TestReadToolsAreRateLimited: the repository tools share the team's limit of
// repository views with the HTTP API, and the app and decision tools its limit of
// cluster reads; past each the (N+1)th call is refused rate_limited, saying when to
// retry, the other limit still lets its tools through, and another team is not held
// back.
func TestReadToolsAreRateLimited(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnvOn(t, db)
		ctx := context.Background()
		newLimit := func(what string) *ratelimit.Limiter {
			// One a minute after a burst of 3: no refill within the test.
			l, err := ratelimit.New(what, 1, 3)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		e.api.RepositoryLimit, e.api.ClusterReadLimit = newLimit("repository reads for this team"), newLimit("cluster reads for this team")
		web := map[string]any{"cluster": "prod", "namespace": "argocd", "name": "web"}
		file := map[string]any{"cluster": "prod", "namespace": "argocd", "name": "web", "path": "apps/web/deployment.yaml"}
		view := map[string]any{"cluster": "prod", "repo": connectedRepo, "revision": deployedSHA}
		repository := []struct {
			tool string
			args map[string]any
		}{{mcp.ToolListRepoFiles, web}, {mcp.ToolReadRepoFile, file}, {mcp.ToolViewRepository, view}}
		clusterReads := []struct {
			tool string
			args map[string]any
		}{{mcp.ToolListApps, map[string]any{"cluster": "prod"}}, {mcp.ToolDescribeApp, web},
			{mcp.ToolDecidePath, map[string]any{"cluster": "prod", "target": webTarget}}}

		readOnly, shared := e.connect(t, e.read), e.connect(t, e.change)
		for _, c := range repository {
			mustOK(t, readOnly, c.tool, c.args)
		}
		for _, c := range repository {
			mustRefuse(t, shared, c.tool, c.args, "rate_limited: too many repository reads for this team", "retry in 60 s")
		}
		for _, c := range clusterReads {
			mustOK(t, shared, c.tool, c.args)
		}
		for _, c := range clusterReads {
			mustRefuse(t, readOnly, c.tool, c.args, "rate_limited: too many cluster reads for this team", "retry in 60 s")
		}

		billing, err := e.db.CreateTeam(ctx, "billing")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.db.CreateCluster(ctx, store.Cluster{TeamID: billing.ID, Name: "prod", Access: store.ClusterInCluster}); err != nil {
			t.Fatal(err)
		}
		_, other, err := e.db.CreateAPIToken(ctx, billing.ID, "chat")
		if err != nil {
			t.Fatal(err)
		}
		elsewhere := e.connect(t, other)
		for _, c := range append(repository, clusterReads...) {
			mustOK(t, elsewhere, c.tool, c.args)
		}
	})
}

// TestToolSchemasSayWhatTheToolsTake: each tool's input schema requires what its
// handler refuses without, and says the bounds its handler holds the words to, so a
// model reads them before a call rather than in a refusal (failed before:
// read_repo_file's path was optional, described as defaulting to the app's folder,
// and no schema named the 2000 and 200 characters of a reason and its requester).
func TestToolSchemasSayWhatTheToolsTake(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, e.read)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	type property struct {
		Description string `json:"description"`
	}
	schemas := map[string]struct {
		Required   []string            `json:"required"`
		Properties map[string]property `json:"properties"`
	}{}
	for _, tool := range res.Tools {
		raw, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		s := schemas[tool.Name]
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: input schema %s: %v", tool.Name, raw, err)
		}
		schemas[tool.Name] = s
	}
	if read := schemas[mcp.ToolReadRepoFile]; !slices.Contains(read.Required, "path") || strings.Contains(read.Properties["path"].Description, "when empty") {
		t.Errorf("read_repo_file requires %v, path described %q: want path required, no default", read.Required, read.Properties["path"].Description)
	}
	if list := schemas[mcp.ToolListRepoFiles]; slices.Contains(list.Required, "path") || !strings.Contains(list.Properties["path"].Description, "Application's folder when empty") {
		t.Errorf("list_repo_files requires %v, path described %q: want path optional, defaulting to the app's folder", list.Required, list.Properties["path"].Description)
	}
	for _, tool := range []string{mcp.ToolProposeGitChange, mcp.ToolRollbackChange} {
		props := schemas[tool].Properties
		if d := props["reason"].Description; !strings.Contains(d, fmt.Sprintf("at most %d characters", changes.MaxReasonChars)) {
			t.Errorf("%s reason described %q, without its bound", tool, d)
		}
		if d := props["requested_by"].Description; !strings.Contains(d, fmt.Sprintf("at most %d characters", changes.MaxRequestedByChars)) {
			t.Errorf("%s requested_by described %q, without its bound", tool, d)
		}
	}
	// The schema is what the call is held to: a call without the file is refused
	// naming the missing path before the handler runs.
	mustRefuse(t, cs, mcp.ToolReadRepoFile, map[string]any{"cluster": "prod", "namespace": "argocd", "name": "web"}, "invalid_request: path is required")
}

// noTokens authenticates nothing: the OpenAPI document needs no token.
type noTokens struct{}

func (noTokens) AuthenticateAPIToken(context.Context, secret.Secret) (store.APITokenAuth, error) {
	return store.APITokenAuth{}, store.ErrNotFound
}

// TestChangeSchemaIsTheOpenAPIDocuments: propose_git_change's change and the HTTP
// API's Change schema require the same fields of each kind of change, as both
// requests are decoded into one type and refused alike without them (failed
// before: the OpenAPI document required none, so a client written from it could
// send an image change without its container, which the pipeline refuses).
func TestChangeSchemaIsTheOpenAPIDocuments(t *testing.T) {
	srv, err := server.New(server.Config{}, server.Deps{Logger: zerolog.Nop(), Auth: noTokens{}})
	if err != nil {
		t.Fatal(err)
	}
	(&changes.API{}).Mount(srv)
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/openapi.json", nil))
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.Components.Schemas["Change"] == nil {
		t.Fatalf("openapi.json: %v", err)
	}
	openAPI := schemaObject(t, doc.Components.Schemas["Change"])

	e := newEnv(t)
	res, err := e.connect(t, e.read).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var tool jsonObject
	for _, tl := range res.Tools {
		if tl.Name == mcp.ToolProposeGitChange {
			raw, err := json.Marshal(tl.InputSchema)
			if err != nil {
				t.Fatal(err)
			}
			tool = schemaObject(t, schemaObject(t, raw).Properties["change"])
		}
	}
	if len(tool.Properties) == 0 {
		t.Fatal("propose_git_change has no change kinds in its input schema")
	}
	for kind, raw := range tool.Properties {
		mcpKind, docKind := schemaObject(t, raw), schemaObject(t, openAPI.Properties[kind])
		if got, want := docKind.required(), mcpKind.required(); !slices.Equal(got, want) {
			t.Errorf("change.%s: openapi.json requires %v, the tool's schema %v", kind, got, want)
		}
		if set := mcpKind.Properties["set"]; set != nil && schemaObject(t, set).Items != nil {
			got := schemaObject(t, schemaObject(t, docKind.Properties["set"]).Items).required()
			if want := schemaObject(t, schemaObject(t, set).Items).required(); !slices.Equal(got, want) {
				t.Errorf("change.%s.set[]: openapi.json requires %v, the tool's schema %v", kind, got, want)
			}
		}
	}
}

// jsonObject is the part of a JSON schema the comparison reads.
type jsonObject struct {
	Required   []string                   `json:"required"`
	Properties map[string]json.RawMessage `json:"properties"`
	Items      json.RawMessage            `json:"items"`
}

func (o jsonObject) required() []string {
	out := slices.Clone(o.Required)
	slices.Sort(out)
	return out
}

// schemaObject reads raw as an object schema; a boolean schema (true: anything)
// or none reads as one requiring nothing.
func schemaObject(t *testing.T, raw json.RawMessage) jsonObject {
	t.Helper()
	var o jsonObject
	if len(raw) == 0 || raw[0] != '{' {
		return o
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	return o
}

// TestToolFailureIsLogged: a tool that fails for a reason the assistant cannot act
// on answers "internal" without the cause, which only the log can then tell: it is
// logged with the request id, as the HTTP API logs its internal failures (failed
// before: read_repo_file's failed download of the repository was told nowhere).
func TestToolFailureIsLogged(t *testing.T) {
	e := newEnv(t)
	e.repos.snapshotErr = errors.New("archive of acme/deploy: GitHub answered 404 Not Found")
	cs := e.connect(t, e.read)
	text := mustRefuse(t, cs, mcp.ToolReadRepoFile, map[string]any{"cluster": "prod", "namespace": "argocd", "name": "web", "path": "README.md"}, "internal:")
	if strings.Contains(text, "404") {
		t.Errorf("tool error %q tells the assistant the internal cause", text)
	}
	var logged bool
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, `"level":"error"`) && strings.Contains(line, "GitHub answered 404 Not Found") &&
			strings.Contains(line, `"request_id"`) && strings.Contains(line, mcp.ToolReadRepoFile) {
			logged = true
		}
	}
	if !logged {
		t.Errorf("the failure is not logged as an error with its cause, request id and tool:\n%s", e.logs.String())
	}
}

// TestRepositoryToolsAtACommitGitHubDoesNotHold: a commit the repository does not
// hold (a SHA mistyped into view_repository, the one Argo CD synced before a force
// push removed it) is refused revision_not_found naming it (failed before:
// "internal: the request failed; it can be retried", which no retry mends).
func TestRepositoryToolsAtACommitGitHubDoesNotHold(t *testing.T) {
	e := newEnv(t)
	e.repos.snapshotErr = fmt.Errorf("archive of acme/deploy: get tarball link: %w", github.ErrRevisionNotFound)
	cs := e.connect(t, e.read)
	missing := strings.Repeat("d", 40)
	mustRefuse(t, cs, mcp.ToolViewRepository, map[string]any{"cluster": "prod", "repo": connectedRepo, "revision": missing},
		"revision_not_found", "commit "+missing, "acme/deploy")
	mustRefuse(t, cs, mcp.ToolReadRepoFile, map[string]any{"cluster": "prod", "namespace": "argocd", "name": "web", "path": "README.md"},
		"revision_not_found", "commit "+deployedSHA, "argocd/web")
	mustRefuse(t, cs, mcp.ToolListRepoFiles, map[string]any{"cluster": "prod", "namespace": "argocd", "name": "web"},
		"revision_not_found", "commit "+deployedSHA)
}

// TestAppToolsNamingNoPossibleAppSayNotFound: an Application named by a namespace or
// name no Kubernetes object can have ("a/b", "a%b", capitals) is not found, said so
// with what is wrong with the name, by describe_app and the repository tools alike
// (failed before: the cluster client's refusal came back as "internal: the request
// failed; it can be retried" from list_repo_files and read_repo_file, and as
// cluster_unavailable from describe_app).
func TestAppToolsNamingNoPossibleAppSayNotFound(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, e.read)
	for _, name := range []string{"a%b", "Web"} {
		args := map[string]any{"cluster": "prod", "namespace": "argocd", "name": name}
		mustRefuse(t, cs, mcp.ToolDescribeApp, args, "not_found", "no Application has that name")
		mustRefuse(t, cs, mcp.ToolListRepoFiles, args, "application_not_found", strconv.Quote(name), "no Application has that name", "list_apps")
		mustRefuse(t, cs, mcp.ToolReadRepoFile, map[string]any{"cluster": "prod", "namespace": "argocd", "name": name, "path": "README.md"},
			"application_not_found", "no Application has that name")
	}
	// "argocd/web", as Argo CD writes an Application, in the name: the answer
	// says to give the namespace apart.
	apart := `give namespace "argocd" and name "web" apart`
	args := map[string]any{"cluster": "prod", "namespace": "argocd", "name": "argocd/web"}
	mustRefuse(t, cs, mcp.ToolDescribeApp, args, "not_found", apart)
	mustRefuse(t, cs, mcp.ToolListRepoFiles, args, "application_not_found", apart, "list_apps")
	mustRefuse(t, cs, mcp.ToolListRepoFiles, map[string]any{"cluster": "prod", "namespace": "argo/cd", "name": "web"}, "application_not_found", "no namespace has that name")
}

// TestProposeRefusesNonStringLabelAndEnvValues: propose_git_change refuses a label
// or annotation value that is not a string when it is called, naming the field and
// the value's JSON type, and stores no change (failed before: the change was taken
// and refused only once the target was read and rendered), as an env value that
// is not a string is.
func TestProposeRefusesNonStringLabelAndEnvValues(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, e.change)
	propose := func(change map[string]any) map[string]any {
		return map[string]any{"cluster": "prod", "target": webTarget, "change": change, "reason": "owner", "requested_by": "alice"}
	}
	mustRefuse(t, cs, mcp.ToolProposeGitChange,
		propose(map[string]any{"patch": map[string]any{"merge": map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": 3}}}}}),
		"invalid_request", `/metadata/labels/team: must be a string, got number 3; give the string "3"`)
	mustRefuse(t, cs, mcp.ToolProposeGitChange,
		propose(map[string]any{"patch": map[string]any{"set": []any{map[string]any{"path": "/metadata/annotations/example.com~1on", "value": true}}}}),
		"invalid_request", "/metadata/annotations/example.com~1on: must be a string, got boolean true")
	mustRefuse(t, cs, mcp.ToolProposeGitChange,
		propose(map[string]any{"env": map[string]any{"container": "web", "set": map[string]any{"PORT": 8080}}}),
		"invalid_request", `env.set.PORT: must be a string, got number 8080; give the string "8080"`)
	mustRefuse(t, cs, mcp.ToolProposeGitChange,
		propose(map[string]any{"env": map[string]any{"container": "web", "set": map[string]any{"DEBUG": nil}}}),
		"invalid_request", "env.set.DEBUG: must be a string, got null")
	e.requirePlans(t, 0, "the refused changes")
}

// TestReadRepoFileMasksTheAppsValuesFiles: a values file the Application names
// is Helm values, masked by key, even when it holds a kind and an apiVersion of
// its own (a chart's settings), which would make it a built-in kind's manifest.
func TestReadRepoFileMasksTheAppsValuesFiles(t *testing.T) {
	e := newEnv(t)
	chart := application("chart", connectedRepo, "main", deployedSHA, false)
	chart.Status.SourceType = "Helm"
	chart.Spec.Source.Helm = &argocd.AppSourceHelm{ValueFiles: []string{"../../envs/prod/values.yaml"}}
	e.cluster.apps = append(e.cluster.apps, chart)
	writeFile(t, filepath.Join(e.repos.dir, "envs/prod/values.yaml"), "apiVersion: v1\nkind: Deployment\nreplicaCount: 2\ndb:\n  password: "+plantedSecret+"\n")
	cs := e.connect(t, e.read)
	got := mustOK(t, cs, mcp.ToolReadRepoFile, map[string]any{"cluster": "prod", "namespace": "argocd", "name": "chart", "path": "envs/prod/values.yaml"})
	content := got["content"].(string)
	if strings.Contains(content, plantedSecret) || !strings.Contains(content, "  password: [redacted]\n") || !strings.Contains(content, "replicaCount: 2\n") {
		t.Fatalf("values file read as %q", content)
	}
}

// TestReadRepoFileMasksValuesFilesOfOtherApps: a values file of the repository is
// Helm values, masked by key, whichever Application of the cluster names it, and
// not only when the file is read through that Application: read through web (a
// kustomize app of the same repository), a file chart names among its valueFiles,
// and one a chart from a Helm repository reads as $values/..., are masked as
// values (failed before: read through web, they were taken for a built-in kind's
// manifest, and a password in them was shown).
func TestReadRepoFileMasksValuesFilesOfOtherApps(t *testing.T) {
	e := newEnv(t)
	chart := application("chart", connectedRepo, "main", deployedSHA, false)
	chart.Status.SourceType = "Helm"
	chart.Spec.Source.Helm = &argocd.AppSourceHelm{ValueFiles: []string{"../../envs/prod/values.yaml"}}
	redis := argocd.Application{Name: "redis", Namespace: "argocd", Spec: argocd.AppSpec{Sources: []argocd.AppSource{
		{RepoURL: "https://charts.example.com", Chart: "redis", TargetRevision: "18.1.0", Helm: &argocd.AppSourceHelm{ValueFiles: []string{"$values/envs/prod/redis.yaml"}}},
		{RepoURL: connectedRepo, TargetRevision: "main", Ref: "values"},
	}}, Status: argocd.AppStatus{SourceTypes: []string{"Helm", ""}, Sync: argocd.AppSyncStatus{Status: "Synced", Revision: deployedSHA}}}
	e.cluster.apps = append(e.cluster.apps, chart, redis)
	values := "apiVersion: v1\nkind: Deployment\nreplicaCount: 2\ndb:\n  password: " + plantedSecret + "\n"
	writeFile(t, filepath.Join(e.repos.dir, "envs/prod/values.yaml"), values)
	writeFile(t, filepath.Join(e.repos.dir, "envs/prod/redis.yaml"), values)
	cs := e.connect(t, e.read)
	for _, file := range []string{"envs/prod/values.yaml", "envs/prod/redis.yaml"} {
		got := mustOK(t, cs, mcp.ToolReadRepoFile, map[string]any{"cluster": "prod", "namespace": "argocd", "name": "web", "path": file})
		content := got["content"].(string)
		if strings.Contains(content, plantedSecret) || !strings.Contains(content, "  password: [redacted]\n") || !strings.Contains(content, "replicaCount: 2\n") {
			t.Errorf("%s read through web as %q", file, content)
		}
	}
}

// TestRepositoryViewDoesNotQuoteSecrets: an app that cannot be rendered is shown
// with its problem, and the problem does not quote a secret of the files the
// render read (failed before: kustomize's "invalid literal source" quoted a
// secretGenerator literal in the view).
func TestRepositoryViewDoesNotQuoteSecrets(t *testing.T) {
	e := newEnv(t)
	e.cluster.apps = append(e.cluster.apps, application("broken", connectedRepo, "main", deployedSHA, false))
	writeFile(t, filepath.Join(e.repos.dir, "apps/broken/kustomization.yaml"), "secretGenerator:\n- name: db\n  literals:\n  - "+plantedSecret+"\n")
	cs := e.connect(t, e.read)
	view := mustOK(t, cs, mcp.ToolViewRepository, map[string]any{"cluster": "prod", "repo": connectedRepo, "revision": deployedSHA})
	for _, a := range view["apps"].([]any) {
		if m := a.(map[string]any); m["name"] == "argocd/broken" {
			if p, _ := m["problem"].(string); !strings.Contains(p, "invalid literal source [redacted]") {
				t.Fatalf("broken app's problem %q, want kustomize's refusal with the literal redacted", p)
			}
			return
		}
	}
	t.Fatalf("the view has no broken app: %v", view["apps"])
}

// TestDescribeAppMasksTheSourcesSecrets: describe_app shows the Application's
// sources as a cluster diff of the Application shows them: a secret-looking Helm
// parameter's value, a secret-looking key of its valuesObject or values string,
// and a secret value of an inline kustomize patch are masked, the rest shown;
// and Argo CD's messages (a condition, the last sync's) quoting one of them are
// scrubbed of it (failed before: the sources were shown as the cluster has them,
// and the messages as Argo CD wrote them).
func TestDescribeAppMasksTheSourcesSecrets(t *testing.T) {
	e := newEnv(t)
	chart := application("chart", connectedRepo, "main", deployedSHA, false)
	chart.Status.SourceType = "Helm"
	chart.Spec.Source.Helm = &argocd.AppSourceHelm{
		Parameters:   []argocd.AppHelmParameter{{Name: "db.password", Value: plantedSecret}, {Name: "image.tag", Value: "1.2.3"}},
		ValuesObject: json.RawMessage(`{"replicaCount": 2, "auth": {"token": "` + plantedSecret + `"}}`),
	}
	chart.Status.Conditions = []argocd.AppCondition{{Type: "ComparisonError", Message: "failed parsing --set data: db.password=" + plantedSecret}}
	chart.Status.OperationState = &argocd.AppOperationState{Phase: "Failed", Message: "helm template: " + plantedSecret + " is not accepted"}
	kust := application("kust", connectedRepo, "main", deployedSHA, false)
	kust.Spec.Source.Kustomize = &argocd.AppSourceKustomize{Patches: []map[string]any{{
		"target": map[string]any{"kind": "Secret", "name": "db"},
		"patch":  "- op: replace\n  path: /stringData/password\n  value: " + plantedSecret + "\n"}}}
	e.cluster.apps = append(e.cluster.apps, chart, kust)
	cs := e.connect(t, e.read)
	got := mustOK(t, cs, mcp.ToolDescribeApp, map[string]any{"cluster": "prod", "namespace": "argocd", "name": "chart"})
	raw, _ := json.Marshal(got["sources"])
	if msgs, _ := json.Marshal([]any{got["errors"], got["operation"]}); !strings.Contains(string(msgs), "db.password=[redacted]") || !strings.Contains(string(msgs), "helm template: [redacted] is not accepted") {
		t.Errorf("chart's messages %s", msgs)
	}
	for _, want := range []string{`"name":"db.password","value":"[redacted]"`, `"name":"image.tag","value":"1.2.3"`, `"replicaCount":2`, `"token":"[redacted]"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("chart's sources %s lack %s", raw, want)
		}
	}
	got = mustOK(t, cs, mcp.ToolDescribeApp, map[string]any{"cluster": "prod", "namespace": "argocd", "name": "kust"})
	if raw, _ := json.Marshal(got["sources"]); !strings.Contains(string(raw), `path: /stringData/password\n  value: [redacted]`) {
		t.Errorf("kust's sources %s", raw)
	}
}
