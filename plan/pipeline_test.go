package plan_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

const (
	repoName = "acme/deploy"
	repoURL  = "https://github.com/acme/deploy.git"
	webFile  = "apps/web/deploy.yaml"
	webYAML  = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  # scaled by hand\n  replicas: 3\n"
)

// fakeCluster stands in for kube/argocd: the web Deployment is managed by the
// Application shop/web; anything else is not managed.
type fakeCluster struct {
	mu       sync.Mutex
	revision string // targetRevision of the Application
	app      argocd.Application
	dryRuns  int
	// targetStatus is the status of the live target, a Deployment of four replicas
	// at generation 2; nil is the status once its rollout has ended.
	targetStatus map[string]any
	// targetGone makes the live target missing (deleted, pruned).
	targetGone bool
	// unread makes the decision name the Application from the resource's tracking
	// id without reading it, as kube does before its cache holds a new Application.
	unread bool
	// dryRunErr is what the server-side dry-run answers (nil: accepted).
	dryRunErr error
	// others are the cluster's other Applications.
	others []argocd.Application
	// elsewhere are the Applications of the team's other clusters, by cluster
	// name, and unreadable the clusters whose Applications cannot be read.
	elsewhere  map[string][]argocd.Application
	unreadable map[string]error
	// caps are what the cluster tells Helm charts, capsReads how often they
	// were read; capsErr fails the read.
	caps      kube.Capabilities
	capsReads int
	capsErr   error
}

func newFakeCluster() *fakeCluster {
	c := &fakeCluster{revision: "main"}
	c.app = argocd.Application{Name: "web", Namespace: "argocd", Spec: argocd.AppSpec{
		Source:      &argocd.AppSource{RepoURL: repoURL, Path: "apps/web", TargetRevision: "main"},
		Destination: argocd.AppDestination{Namespace: "shop"},
		SyncPolicy:  &argocd.AppSyncPolicy{Automated: &argocd.AppSyncAutomated{SelfHeal: true}},
	}, Status: argocd.AppStatus{SourceType: "Directory"}}
	return c
}

func (c *fakeCluster) application() argocd.Application {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.app
	if a.Spec.Source != nil {
		src := *a.Spec.Source
		src.TargetRevision = c.revision
		a.Spec.Source = &src
	}
	return a
}

func (c *fakeCluster) Decide(_ context.Context, _ clusteraccess.Ref, t objref.Target) argocd.Decision {
	ref := argocd.ResourceRef{Group: "apps", Version: "v1", Kind: servedKind(t.Kind), Namespace: t.Namespace, Name: t.Name}
	if t.Name != "web" {
		return argocd.Decision{Path: argocd.PathDirect, Known: true, Reason: "not managed by Argo CD",
			Targets: []argocd.TargetDecision{{Ref: ref, Path: argocd.PathDirect, Known: true}}}
	}
	app := c.application()
	own := argocd.Ownership{Managed: true, App: app.Key(), Application: &app, Level: argocd.LevelSelfHeal, Reason: "tracked"}
	c.mu.Lock()
	if c.unread {
		own.Application = nil
	}
	c.mu.Unlock()
	return argocd.Decision{Path: argocd.PathGit, Known: true, Level: argocd.LevelSelfHeal, Reason: "managed by argocd/web",
		Targets: []argocd.TargetDecision{{Ref: ref, Path: argocd.PathGit, Known: true, Ownership: own}}}
}

// servedKind is kind as the fake cluster serves it: a target may name one in any
// case, and the decision reads it as kube does, in the served spelling.
func servedKind(kind string) string {
	for _, served := range []string{"Deployment", "StatefulSet", "ConfigMap", "Secret"} {
		if strings.EqualFold(served, kind) {
			return served
		}
	}
	return kind
}

func (c *fakeCluster) Applications(_ context.Context, ref clusteraccess.Ref) ([]argocd.Application, error) {
	app := c.application()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.unreadable[ref.Name]; err != nil {
		return nil, err
	}
	if apps, ok := c.elsewhere[ref.Name]; ok {
		return apps, nil
	}
	return append([]argocd.Application{app}, c.others...), nil
}

func (c *fakeCluster) Capabilities(context.Context, clusteraccess.Ref) (kube.Capabilities, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.capsReads++
	return c.caps, c.capsErr
}

// ClusterByServer finds no cluster: the team registered none beside the plan's.
func (c *fakeCluster) ClusterByServer(context.Context, string, string) (string, bool, error) {
	return "", false, nil
}

func (c *fakeCluster) Clusters(context.Context, string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := []string{"prod"}
	for n := range c.elsewhere {
		names = append(names, n)
	}
	for n := range c.unreadable {
		names = append(names, n)
	}
	return names, nil
}

func (c *fakeCluster) Application(_ context.Context, _ clusteraccess.Ref, ns, name string) (argocd.Application, error) {
	if ns != "argocd" || name != "web" {
		return argocd.Application{}, clusteraccess.ErrObjectNotFound
	}
	return c.application(), nil
}

// sync plays Argo CD: the Application reports revision as synced and operated.
func (c *fakeCluster) sync(revision, phase string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.app.Status.Sync = argocd.AppSyncStatus{Status: "Synced", Revision: revision}
	c.app.Status.OperationState = &argocd.AppOperationState{Phase: phase, Message: "sync " + phase,
		FinishedAt: syncFinishedAt, SyncResult: &argocd.AppSyncResult{Revision: revision}}
}

// syncFinishedAt is when every sync of the fake ends.
const syncFinishedAt = "2026-11-30T10:00:05Z"

// assess plays Argo CD's health assessment of the Application: health, with the
// resources' own, compared after the sync ended or (afterSync false) before it.
func (c *fakeCluster) assess(health argocd.AppHealth, afterSync bool, resources ...argocd.AppResourceStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.app.Status.Health, c.app.Status.Resources = health, resources
	c.app.Status.ReconciledAt = "2026-11-30T10:00:04Z"
	if afterSync {
		c.app.Status.ReconciledAt = "2026-11-30T10:00:06Z"
	}
}

func (c *fakeCluster) Object(context.Context, clusteraccess.Ref, objref.Target) (map[string]any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.targetGone {
		return nil, clusteraccess.ErrObjectNotFound
	}
	status := c.targetStatus
	if status == nil {
		status = rolloutStatus(2, 4, 4, 4)
	}
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "generation": int64(2)},
		"spec":     map[string]any{"replicas": int64(4), "progressDeadlineSeconds": int64(600)},
		"status":   runtime.DeepCopyJSON(status)}, nil
}

// setTargetStatus plays the Deployment controller and the kubelets: the live target
// reports status (nil: rolled out).
func (c *fakeCluster) setTargetStatus(status map[string]any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.targetStatus = status
}

// rolloutStatus is a Deployment status with the generation observed, the total,
// updated and available replica counts, and the conditions the Deployment controller
// sets for them: Progressing with NewReplicaSetAvailable only once every replica is
// updated and available.
func rolloutStatus(observed, replicas, updated, available int64) map[string]any {
	progressing := map[string]any{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": `ReplicaSet "web-7d9c" is progressing.`}
	if updated == 4 && available == 4 && replicas == 4 {
		progressing["reason"], progressing["message"] = "NewReplicaSetAvailable", `ReplicaSet "web-7d9c" has successfully progressed.`
	}
	return map[string]any{
		"observedGeneration": observed, "replicas": replicas, "updatedReplicas": updated,
		"readyReplicas": available, "availableReplicas": available, "unavailableReplicas": max(0, replicas-available),
		"conditions": []any{progressing,
			map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."}},
	}
}

func (c *fakeCluster) DryRun(context.Context, clusteraccess.Ref, []map[string]any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dryRuns++
	return c.dryRunErr
}

// lineRenderer edits "replicas: N" in the target's file: enough of render's contract
// to drive the pipeline against real repository content. Reverts are render's own
// (render.Revert), so a rollback is rendered and verified for real.
type lineRenderer struct {
	mu      sync.Mutex
	renders int
	reverts int
}

func (r *lineRenderer) Render(ctx context.Context, at cache.Commit, dir string, app render.Application) ([]render.Object, error) {
	return render.Render(ctx, dir, app)
}

func (r *lineRenderer) Revert(ctx context.Context, at, original cache.Commit, req render.RevertRequest) (*render.Result, error) {
	r.mu.Lock()
	r.reverts++
	r.mu.Unlock()
	return cache.RenderEngine{}.Revert(ctx, at, original, req)
}

var replicasLine = regexp.MustCompile(`(?m)^  replicas: \d+$`)

func (r *lineRenderer) Plan(_ context.Context, _ cache.Commit, req render.Request) (*render.Result, error) {
	r.mu.Lock()
	r.renders++
	r.mu.Unlock()
	old, err := os.ReadFile(filepath.Join(req.RepoDir, webFile))
	if err != nil {
		return nil, &render.Refusal{Code: render.CodeTargetNotFound, Reason: err.Error()}
	}
	if req.Change.Replicas == nil {
		return nil, &render.Refusal{Code: render.CodeInvalidRequest, Reason: "only replicas in this test"}
	}
	now := replicasLine.ReplaceAll(old, []byte(fmt.Sprintf("  replicas: %d", req.Change.Replicas.Count)))
	if string(now) == string(old) {
		// As render refuses an edit that changes nothing.
		return nil, &render.Refusal{Code: render.CodeNoChange, Reason: req.Target.Name + " already renders that way: there is nothing to change"}
	}
	return &render.Result{App: req.App, Strategy: "in place",
		Edits:   []render.FileEdit{{Path: webFile, Old: old, New: now}},
		GitDiff: "--- a/" + webFile + "\n+++ b/" + webFile + "\n@@ -8 +8 @@\n-  replicas: 3\n+  replicas: 4\n",
		ClusterDiff: []render.ObjectDiff{{App: req.App, APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web",
			Action: "modified", Changes: []render.FieldChange{{Path: "spec.replicas", Before: "3", After: "4"}}}},
		Verification: render.Verification{Verified: true, Apps: []render.AppVerification{{App: req.App, Objects: 1, Changed: 1}}},
		Changed:      []render.ChangedObject{{App: req.App, Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"}}},
	}, nil
}

type connections struct {
	mu        sync.Mutex
	inst      int64
	connected bool
}

func (c *connections) RepoInstallation(_ context.Context, _, _, url string) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.connected {
		return 0, clusteraccess.ErrRepoNotConnected
	}
	return c.inst, nil
}

type env struct {
	t       *testing.T
	gh      *githubtest.Server
	db      *store.DB
	team    store.Team
	cluster *fakeCluster
	render  *lineRenderer
	// engine, when set, renders instead of render.
	engine plan.Renderer
	conns  *connections
	repos  github.Repos
	// observer, when set, is the pipeline's.
	observer plan.Observer
	// policy, when set, is the pipeline's.
	policy plan.Policy
}

// newEnv builds a fake GitHub with the repository installed, a team and a pipeline's
// dependencies; opts adjust the App's client configuration (e.g. its timeout).
func newEnv(t *testing.T, db *store.DB, opts ...func(*github.Config)) *env {
	t.Helper()
	s := githubtest.New(t)
	s.CreateRepo(t, "acme", "deploy", map[string]string{webFile: webYAML, "README.md": "manifests\n"}, "main")
	inst := s.CreateInstallation(t, "acme", "deploy")
	cfg := github.Config{AppID: s.AppID(), PrivateKey: s.PrivateKeyPEM(), APIURL: s.APIURL(), WebURL: s.URL(),
		// Fault tests retry writes faster than GitHub's 80 a minute would allow; the
		// budget has tests of its own.
		Limits: github.Limits{Content: []github.Window{{Requests: 1 << 20, Per: time.Minute}}}}
	for _, o := range opts {
		o(&cfg)
	}
	cc, err := github.NewClientCreator(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	archives, err := cache.NewArchives(t.TempDir(), 64<<20, cache.DefaultArchiveLimits)
	if err != nil {
		t.Fatal(err)
	}
	team, err := db.EnsureTeam(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, gh: s, db: db, team: team, cluster: newFakeCluster(), render: &lineRenderer{},
		conns: &connections{inst: inst, connected: true}, repos: github.Repos{Clients: cc, Archives: archives}}
}

// testClaimTTL is the claim lifetime of the tests' pipelines: short, so that a
// test of a dead process's plan waits little for its claim to run out, and
// long enough that the renewals of a working pipeline arrive in time on a
// loaded machine. An unstarted pipeline has no periodic resume, so a claim
// lost there (1 s was, under load) left a plan unfinished for good.
const testClaimTTL = 3 * time.Second

func (e *env) pipeline(hooks plan.Hooks) *plan.Pipeline {
	var r plan.Renderer = e.render
	if e.engine != nil {
		r = e.engine
	}
	p := plan.New(plan.Deps{Store: e.db, Clusters: e.cluster, Renderer: r, Repos: e.repos, Connections: e.conns, Observer: e.observer, Policy: e.policy, Hooks: hooks}, plan.Config{
		ClaimTTL: testClaimTTL, DeployPoll: 20 * time.Millisecond, DeployTimeout: 10 * time.Second,
		PublicURL: "https://kukie.example", BotLogin: e.gh.BotLogin(), TransientBackoff: 10 * time.Millisecond,
	})
	e.t.Cleanup(p.Close)
	return p
}

// startedPipeline builds a pipeline with hooks and starts it.
func (e *env) startedPipeline(ctx context.Context, hooks plan.Hooks) *plan.Pipeline {
	e.t.Helper()
	p := e.pipeline(hooks)
	if err := p.Start(ctx); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// submitOpen submits req as team shop and waits until its pull request is open
// with its check run.
func (e *env) submitOpen(ctx context.Context, p *plan.Pipeline, req plan.Request) store.Plan {
	e.t.Helper()
	pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", req)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.waitStatus(pl.Code, plan.StatusPROpen)
}

// pullMerged tells the pipeline that the pull request of pl was merged as mergeSHA.
func (e *env) pullMerged(ctx context.Context, p *plan.Pipeline, pl store.Plan, mergeSHA string) {
	e.t.Helper()
	if err := p.PullClosed(ctx, repoName, pl.Branch, pl.BaseBranch, pl.PRNumber, true, mergeSHA, e.pullHead(pl.PRNumber)); err != nil {
		e.t.Fatal(err)
	}
}

// pullHead is the head of pull request number as GitHub reports it, which its
// pull_request event carries as pull_request.head.sha.
func (e *env) pullHead(number int64) string {
	e.t.Helper()
	for _, pr := range e.gh.PullRequests(e.t, repoName) {
		if int64(pr.GetNumber()) == number {
			return pr.GetHead().GetSHA()
		}
	}
	e.t.Fatalf("no pull request #%d", number)
	return ""
}

// mergeWakes merges the pull request of holder and checks that the plan waiting
// on it is prepared again on the merge and opens its pull request with replicas.
func (e *env) mergeWakes(ctx context.Context, p *plan.Pipeline, holder store.Plan, waiting string, replicas int) store.Plan {
	e.t.Helper()
	mergeSHA := e.gh.Merge(e.t, repoName, int(holder.PRNumber), githubtest.MergeCommit)
	e.pullMerged(ctx, p, holder, mergeSHA)
	woken := e.waitStatus(waiting, plan.StatusPROpen)
	if woken.BaseSHA != mergeSHA {
		e.t.Fatalf("plan %s based on %s, want the merge %s", waiting, woken.BaseSHA, mergeSHA)
	}
	if got, _ := e.gh.FileAt(e.t, repoName, woken.Branch, webFile); !strings.Contains(got, fmt.Sprintf("replicas: %d", replicas)) {
		e.t.Fatalf("branch file of plan %s:\n%s", waiting, got)
	}
	return woken
}

func scale(n int64, key string) plan.Request {
	return plan.Request{Cluster: "prod", Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
		Change: render.Change{Replicas: &render.Replicas{Count: n}}, Reason: "more traffic", RequestedBy: "alice", IdempotencyKey: key}
}

// eventually bounds the wait for something the pipeline gets to by itself: far more
// than it takes on an idle machine, so that a loaded one (CI, the race detector)
// makes a test slower, not failed.
const eventually = 2 * time.Minute

// basePushed hands a push to main to the pipeline and, as the inbox does with a
// delivery that failed, tries again while the push found a plan whose own run
// still held its claim.
func (e *env) basePushed(ctx context.Context, p *plan.Pipeline, after string, files []string) error {
	e.t.Helper()
	deadline := time.Now().Add(eventually)
	for {
		err := p.BasePushed(ctx, repoName, "main", after, files)
		if !errors.Is(err, plan.ErrPlanBusy) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor polls the plan until cond holds.
func (e *env) waitFor(code string, what string, cond func(store.Plan) bool) store.Plan {
	e.t.Helper()
	deadline := time.Now().Add(eventually)
	for {
		pl, err := e.db.PlanByCode(context.Background(), code)
		if err != nil {
			e.t.Fatal(err)
		}
		if cond(pl) {
			return pl
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("plan %s never became %s; it is %s (%s: %s)", code, what, pl.Status, pl.ErrorCode, pl.StatusReason)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) waitStatus(code string, s plan.Status) store.Plan {
	e.t.Helper()
	return e.waitFor(code, string(s), func(p store.Plan) bool {
		return plan.Status(p.Status) == s && (s != plan.StatusPROpen || p.CheckRunID != 0)
	})
}

func TestPipelineScaleToDeployedAndRollback(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl, created, err := p.Submit(ctx, e.team.ID, "team:shop", scale(4, "k1"))
		if err != nil || !created {
			t.Fatalf("submit: %v created=%v", err, created)
		}
		pl = e.waitStatus(pl.Code, plan.StatusPROpen)

		prs := e.gh.PullRequests(t, repoName)
		if len(prs) != 1 {
			t.Fatalf("%d pull requests, want 1", len(prs))
		}
		pr := prs[0]
		if want := "kukie: scale Deployment/web (" + pl.Code + ")"; pr.GetTitle() != want {
			t.Errorf("title %q, want %q", pr.GetTitle(), want)
		}
		for _, want := range []string{github.PlanMarker(pl.Code), "more traffic", "alice", "argocd/web", "self-heal", "replicas: 4"} {
			if !strings.Contains(pr.GetBody(), want) {
				t.Errorf("PR body lacks %q:\n%s", want, pr.GetBody())
			}
		}
		if got, _ := e.gh.FileAt(t, repoName, pl.Branch, webFile); got != strings.Replace(webYAML, "replicas: 3", "replicas: 4", 1) {
			t.Errorf("branch file:\n%s", got)
		}
		runs := e.gh.CheckRuns(t, repoName, pl.HeadSHA)
		if len(runs) != 1 || runs[0].GetConclusion() != "success" || runs[0].GetName() != "kukie/render" {
			t.Fatalf("check runs on head: %d %v", len(runs), runs)
		}
		if !strings.HasSuffix(runs[0].GetDetailsURL(), "/changes/"+pl.Code) || strings.Contains(runs[0].GetDetailsURL(), "/api/") {
			t.Errorf("details url %q", runs[0].GetDetailsURL())
		}

		mergeSHA := e.gh.Merge(t, repoName, pr.GetNumber(), githubtest.MergeCommit)
		if err := p.PullClosed(ctx, repoName, pl.Branch, pl.BaseBranch, int64(pr.GetNumber()), true, mergeSHA, e.pullHead(int64(pr.GetNumber()))); err != nil {
			t.Fatal(err)
		}
		e.waitFor(pl.Code, "deploying", func(p store.Plan) bool { return p.Status == string(plan.StatusDeploying) })
		e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
		pl = e.waitStatus(pl.Code, plan.StatusDeployed)
		if locks, _ := db.FileLocks(ctx, pl.Code); len(locks) != 0 {
			t.Errorf("merged plan still holds %d locks", len(locks))
		}

		rb, err := p.Rollback(plan.WithActor(ctx, "team:shop"), e.team.ID, pl.Code, "bob", "error rate up")
		if err != nil {
			t.Fatal(err)
		}
		rb = e.waitStatus(rb.Code, plan.StatusPROpen)
		if got, _ := e.gh.FileAt(t, repoName, rb.Branch, webFile); got != webYAML {
			t.Errorf("revert branch file:\n%s", got)
		}
		rbPR := e.gh.PullRequests(t, repoName)
		var revert int
		for _, pr := range rbPR {
			if pr.GetHead().GetRef() == rb.Branch {
				revert = pr.GetNumber()
			}
		}
		revertSHA := e.gh.Merge(t, repoName, revert, githubtest.MergeCommit)
		if err := p.PullClosed(ctx, repoName, rb.Branch, rb.BaseBranch, int64(revert), true, revertSHA, e.pullHead(int64(revert))); err != nil {
			t.Fatal(err)
		}
		e.cluster.sync(revertSHA, argocd.PhaseSucceeded)
		e.waitStatus(rb.Code, plan.StatusDeployed)
		e.waitStatus(pl.Code, plan.StatusRolledBack)

		events, err := db.PlanEvents(ctx, pl.Code)
		if err != nil {
			t.Fatal(err)
		}
		var path []string
		for _, ev := range events {
			if ev.FromStatus != ev.ToStatus {
				path = append(path, ev.ToStatus)
			}
		}
		want := "deciding preparing committing pr_open merged deploying deployed rolled_back"
		if strings.Join(path, " ") != want {
			t.Errorf("transitions %v, want %s", path, want)
		}
	})
}

func TestPipelineIdempotentAndLocks(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		var wg sync.WaitGroup
		codes := make(chan string, 50)
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(4, "same-key"))
				if err != nil {
					t.Error(err)
					return
				}
				codes <- pl.Code
			}()
		}
		wg.Wait()
		close(codes)
		seen := map[string]bool{}
		for c := range codes {
			seen[c] = true
		}
		if len(seen) != 1 {
			t.Fatalf("50 identical requests made %d plans", len(seen))
		}
		var first string
		for c := range seen {
			first = c
		}
		firstPlan := e.waitStatus(first, plan.StatusPROpen)

		second, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(6, "other-key"))
		if err != nil {
			t.Fatal(err)
		}
		second = e.waitFor(second.Code, "waiting", func(p store.Plan) bool { return p.Status == string(plan.StatusWaiting) })
		if second.WaitingOn != first {
			t.Fatalf("second waits on %q, want %q", second.WaitingOn, first)
		}
		if n := len(e.gh.PullRequests(t, repoName)); n != 1 {
			t.Fatalf("%d pull requests while the second plan waits, want 1", n)
		}
		e.mergeWakes(ctx, p, firstPlan, second.Code, 6)
		if n := len(e.gh.PullRequests(t, repoName)); n != 2 {
			t.Fatalf("%d pull requests, want 2", n)
		}
	})
}

var errCrash = errors.New("simulated crash")

// TestPipelineResumesAfterCrashAtEveryBoundary kills the first process at each step
// boundary, including the windows where GitHub already holds a write the store has
// not recorded, and checks that a new process ends with exactly one branch, one commit
// on it, one pull request and one check run.
func TestPipelineResumesAfterCrashAtEveryBoundary(t *testing.T) {
	t.Parallel()
	boundaries := map[string]struct {
		// commitWrites is how many commits the fake sees created: a crash after the
		// commit was made but before it was recorded leaves one unreachable commit
		// behind (GitHub collects it), never a second one on the branch.
		commitWrites int
	}{
		"decide":              {commitWrites: 1},
		"prepare":             {commitWrites: 1},
		"record_prepare":      {commitWrites: 1},
		"commit":              {commitWrites: 1},
		"record_commit":       {commitWrites: 2},
		"branch":              {commitWrites: 1},
		"record_branch":       {commitWrites: 1},
		"pull_request":        {commitWrites: 1},
		"record_pull_request": {commitWrites: 1},
		"check_run":           {commitWrites: 1},
		"record_check_run":    {commitWrites: 1},
	}
	// Each case waits out a dead process's claim: they run at once, each on
	// databases of its own.
	for boundary, tc := range boundaries {
		t.Run(boundary, func(t *testing.T) {
			t.Parallel()
			forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
				e := newEnv(t, db)
				ctx := context.Background()
				crashed := make(chan struct{})
				var once sync.Once
				// The first process dies at the boundary: every later call fails too,
				// so nothing after it runs in that process.
				first := e.pipeline(plan.Hooks{BeforeStep: func(code, step string) error {
					if step == boundary {
						once.Do(func() { close(crashed) })
						return errCrash
					}
					return nil
				}})
				pl, _, err := first.Submit(ctx, e.team.ID, "team:shop", scale(4, "crash-"+boundary))
				if err != nil {
					t.Fatal(err)
				}
				select {
				case <-crashed:
				case <-time.After(eventually):
					t.Fatalf("the pipeline never reached %s", boundary)
				}
				first.Close()
				// The dead process's claim expires; a new process resumes the plan.
				time.Sleep(testClaimTTL + 100*time.Millisecond)
				second := e.pipeline(plan.Hooks{})
				if err := second.Start(ctx); err != nil {
					t.Fatal(err)
				}
				pl = e.waitStatus(pl.Code, plan.StatusPROpen)
				second.Close()

				e.assertOneOfEach(pl)
				if n := e.gh.RequestCount("POST /repos/{owner}/{repo}/git/commits"); n != tc.commitWrites {
					t.Fatalf("%d commits created, want %d", n, tc.commitWrites)
				}
				if head := e.gh.Head(t, repoName, "main"); head != pl.BaseSHA {
					t.Fatalf("base branch moved to %s", head)
				}
			})
		})
	}
}

// gitLines runs git in a bare repository and returns the non-empty output lines.
func gitLines(t *testing.T, gitDir string, args ...string) []string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"--git-dir", gitDir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

func TestPipelineRefusals(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		tests := map[string]struct {
			setup    func(e *env)
			req      func() plan.Request
			wantCode string
		}{
			"not managed by Argo CD": {
				req: func() plan.Request {
					r := scale(2, "")
					r.Target.Name = "adhoc"
					return r
				},
				wantCode: plan.CodeNotGitOpsManaged,
			},
			"tag targetRevision": {
				setup: func(e *env) {
					e.gh.CreateTag(e.t, repoName, "v1.2.0", "main")
					e.cluster.revision = "v1.2.0"
				},
				req: func() plan.Request { return scale(2, "") }, wantCode: plan.CodeRevisionNotABranch,
			},
			"repository not connected": {
				setup:    func(e *env) { e.conns.connected = false },
				req:      func() plan.Request { return scale(2, "") },
				wantCode: plan.CodeRepoNotConnected,
			},
			"path differs from the caller's": {
				req: func() plan.Request {
					r := scale(2, "")
					r.ExpectedPath = "direct"
					return r
				},
				wantCode: plan.CodePathMismatch,
			},
			"kustomize replicas Argo CD cannot render": {
				setup: func(e *env) {
					e.engine = cache.RenderEngine{}
					e.cluster.app.Spec.Source.Kustomize = &argocd.AppSourceKustomize{
						Replicas: []argocd.AppKustomizeReplicas{{Name: "web", Count: intstr.FromString("many")}}}
				},
				req: func() plan.Request { return scale(2, "") }, wantCode: plan.CodeRefused,
			},
			"kustomize options render cannot apply": {
				setup: func(e *env) {
					e.engine = cache.RenderEngine{}
					e.cluster.app.Spec.Source.Kustomize = &argocd.AppSourceKustomize{Unsupported: []string{"patches"}}
				},
				req: func() plan.Request { return scale(2, "") }, wantCode: plan.CodeRefused,
			},
		}
		for name, tc := range tests {
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, db)
				if tc.setup != nil {
					tc.setup(e)
				}
				p := e.pipeline(plan.Hooks{})
				pl, _, err := p.Submit(ctx, e.team.ID, "team:x", tc.req())
				if err != nil {
					t.Fatal(err)
				}
				pl = e.waitFor(pl.Code, "refused", func(p store.Plan) bool { return p.Status == string(plan.StatusRefused) })
				if pl.ErrorCode != tc.wantCode || pl.StatusReason == "" {
					t.Fatalf("refused with %q (%s), want %q", pl.ErrorCode, pl.StatusReason, tc.wantCode)
				}
				if n := len(e.gh.PullRequests(t, repoName)); n != 0 {
					t.Fatalf("refused plan opened %d pull requests", n)
				}
			})
		}
	})
}

func TestPipelineTracksPushesAndDisconnects(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, ""))

		// Someone else pushes an extra file to the kukie branch: the check fails.
		pushed := e.gh.PushCommit(t, repoName, pl.Branch, map[string]string{"apps/web/extra.yaml": "kind: ConfigMap\n"}, githubtest.DefaultAuthor)
		if err := p.HeadPushed(ctx, repoName, pl.Branch, pushed, githubtest.DefaultAuthor.Login); err != nil {
			t.Fatal(err)
		}
		e.waitStatus(pl.Code, plan.StatusPROpen) // the plan's run compares the new head
		runs := e.gh.CheckRuns(t, repoName, pushed)
		if len(runs) != 1 || runs[0].GetConclusion() != "failure" || !strings.Contains(runs[0].GetOutput().GetSummary(), "apps/web/extra.yaml was added") {
			t.Fatalf("check run on a foreign push: %d runs %v", len(runs), runs)
		}
		// Our own bot's push is not re-verified.
		if err := p.HeadPushed(ctx, repoName, pl.Branch, "0000000000000000000000000000000000000001", e.gh.BotLogin()); err != nil {
			t.Fatal(err)
		}

		// The base branch moves under the plan, changing the same file: the plan is
		// rebuilt on the new base, still one pull request, verified again.
		moved := strings.Replace(webYAML, "# scaled by hand", "# scaled by the on-call", 1)
		after := e.gh.PushCommit(t, repoName, "main", map[string]string{webFile: moved}, githubtest.DefaultAuthor)
		if err := e.basePushed(ctx, p, after, []string{webFile}); err != nil {
			t.Fatal(err)
		}
		pl = e.waitStatus(pl.Code, plan.StatusPROpen)
		if pl.BaseSHA != after {
			t.Fatalf("plan base %s, want the new base %s", pl.BaseSHA, after)
		}
		got, _ := e.gh.FileAt(t, repoName, pl.Branch, webFile)
		if want := strings.Replace(moved, "replicas: 3", "replicas: 4", 1); got != want {
			t.Fatalf("rebased branch file:\n%s\nwant:\n%s", got, want)
		}
		if runs := e.gh.CheckRuns(t, repoName, pl.HeadSHA); len(runs) != 1 || runs[0].GetConclusion() != "success" {
			t.Fatalf("check run after rebase: %v", runs)
		}
		if n := len(e.gh.PullRequests(t, repoName)); n != 1 {
			t.Fatalf("%d pull requests after rebase, want 1", n)
		}
		if head := e.gh.Head(t, repoName, "main"); head != after {
			t.Fatalf("base branch moved by the service to %s", head)
		}

		// The repository is disconnected mid-flight: the plan is refused with a reason.
		cl, err := db.CreateCluster(ctx, store.Cluster{TeamID: e.team.ID, Name: "prod", Access: store.ClusterInCluster})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.ConnectionsRevoked(ctx, []store.RepoConnection{{ClusterID: cl.ID, Repo: "https://github.com/acme/deploy"}}, "the App lost access"); err != nil {
			t.Fatal(err)
		}
		pl = e.waitFor(pl.Code, "refused", func(p store.Plan) bool { return p.Status == string(plan.StatusRefused) })
		if pl.ErrorCode != plan.CodeRepoNotConnected || !strings.Contains(pl.StatusReason, "lost access") {
			t.Fatalf("refused with %s: %s", pl.ErrorCode, pl.StatusReason)
		}
		if locks, _ := db.FileLocks(ctx, pl.Code); len(locks) != 0 {
			t.Fatalf("refused plan holds %d locks", len(locks))
		}
	})
}

func TestPipelinePatchOpensAVerifiedPullRequest(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.engine = cache.RenderEngine{}
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		req := scale(0, "patch")
		req.Change = render.Change{Patch: &render.Patch{Merge: map[string]any{
			"spec":     map[string]any{"minReadySeconds": 10},
			"metadata": map[string]any{"annotations": map[string]any{"example.com/owner": "shop"}},
		}}}
		pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", req)
		if err != nil {
			t.Fatal(err)
		}
		pl = e.waitStatus(pl.Code, plan.StatusPROpen)
		prs := e.gh.PullRequests(t, repoName)
		if len(prs) != 1 {
			t.Fatalf("%d pull requests, want 1", len(prs))
		}
		if want := "kukie: patch Deployment/web (" + pl.Code + ")"; prs[0].GetTitle() != want {
			t.Errorf("title %q, want %q", prs[0].GetTitle(), want)
		}
		want := strings.Replace(webYAML, "  namespace: shop\n", "  namespace: shop\n  annotations:\n    example.com/owner: shop\n", 1) + "  minReadySeconds: 10\n"
		if got, _ := e.gh.FileAt(t, repoName, pl.Branch, webFile); got != want {
			t.Errorf("branch file:\n%s\nwant:\n%s", got, want)
		}
	})
}

// A deletion whose edit removes a whole file goes through the whole loop: the
// commit's tree drops the path (the fake GitHub builds it from real git), the pull
// request says so and warns that the app does not prune, the merge deploys (the
// target gone from the cluster, or left there unpruned, each said), and the
// rollback's pull request brings the file back as it was.
func TestPipelineDeleteRemovesAFileThroughThePullRequest(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		gone bool
		says string
	}{
		"pruned":        {gone: true, says: "Service/web is gone from the cluster"},
		"left in place": {gone: false, says: "Service/web is still in the cluster: Argo CD did not prune it"},
	} {
		t.Run(name, func(t *testing.T) { testDeleteThroughThePullRequest(t, tc.gone, tc.says) })
	}
}

func testDeleteThroughThePullRequest(t *testing.T, gone bool, says string) {
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.engine = cache.RenderEngine{}
		ctx := context.Background()
		const svcFile = "apps/web/service.yaml"
		const svcYAML = "# The web Service.\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  ports:\n    - port: 80\n"
		e.gh.PushCommit(t, repoName, "main", map[string]string{svcFile: svcYAML}, githubtest.DefaultAuthor)
		p := e.startedPipeline(ctx, plan.Hooks{})
		req := scale(0, "delete")
		req.Target = objref.Target{APIVersion: "v1", Kind: "Service", Namespace: "shop", Name: "web"}
		req.Change = render.Change{DeleteResource: &render.DeleteResource{}}
		pl := e.submitOpen(ctx, p, req)

		prs := e.gh.PullRequests(t, repoName)
		if len(prs) != 1 {
			t.Fatalf("%d pull requests, want 1", len(prs))
		}
		pr := prs[0]
		if want := "kukie: delete Service/web (" + pl.Code + ")"; pr.GetTitle() != want {
			t.Errorf("title %q, want %q", pr.GetTitle(), want)
		}
		for _, want := range []string{"deleted file mode", "-kind: Service", "does not prune automatically", "--prune"} {
			if !strings.Contains(pr.GetBody(), want) {
				t.Errorf("PR body lacks %q:\n%s", want, pr.GetBody())
			}
		}
		if got, ok := e.gh.FileAt(t, repoName, pl.Branch, svcFile); ok {
			t.Errorf("%s is still on the branch:\n%s", svcFile, got)
		}
		if got, _ := e.gh.FileAt(t, repoName, pl.Branch, webFile); got != webYAML {
			t.Errorf("the branch changed %s too:\n%s", webFile, got)
		}
		if got, _ := e.gh.FileAt(t, repoName, "main", svcFile); got != svcYAML {
			t.Errorf("main's %s changed before the merge:\n%s", svcFile, got)
		}
		runs := e.gh.CheckRuns(t, repoName, pl.HeadSHA)
		if len(runs) != 1 || runs[0].GetConclusion() != "success" {
			t.Fatalf("check runs on head: %d %v", len(runs), runs)
		}

		mergeSHA := e.gh.Merge(t, repoName, pr.GetNumber(), githubtest.MergeCommit)
		if err := p.PullClosed(ctx, repoName, pl.Branch, pl.BaseBranch, int64(pr.GetNumber()), true, mergeSHA, e.pullHead(int64(pr.GetNumber()))); err != nil {
			t.Fatal(err)
		}
		if _, ok := e.gh.FileAt(t, repoName, "main", svcFile); ok {
			t.Errorf("%s is still on main after the merge", svcFile)
		}
		e.waitFor(pl.Code, "deploying", func(p store.Plan) bool { return p.Status == string(plan.StatusDeploying) })
		e.cluster.mu.Lock()
		e.cluster.targetGone = gone
		e.cluster.mu.Unlock()
		e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
		pl = e.waitStatus(pl.Code, plan.StatusDeployed)
		if pay, err := plan.PayloadOf(pl); err != nil || pay.Deployment == nil || !strings.Contains(pay.Deployment.Message, says) {
			t.Errorf("deployment %+v (%v), want it to say %q", pay.Deployment, err, says)
		}
		e.cluster.mu.Lock()
		e.cluster.targetGone = false
		e.cluster.mu.Unlock()

		rb, err := p.Rollback(plan.WithActor(ctx, "team:shop"), e.team.ID, pl.Code, "bob", "still needed")
		if err != nil {
			t.Fatal(err)
		}
		rb = e.waitStatus(rb.Code, plan.StatusPROpen)
		if got, _ := e.gh.FileAt(t, repoName, rb.Branch, svcFile); got != svcYAML {
			t.Errorf("revert branch %s:\n%s", svcFile, got)
		}
	})
}
