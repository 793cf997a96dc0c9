package plan_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

// manyApps is a cluster of n Applications, app-<i> deploying apps/app-<i> of the
// repository and managing the Deployment app-<i>.
type manyApps struct{ n int }

func (c manyApps) app(name string) argocd.Application {
	return argocd.Application{Name: name, Namespace: "argocd", Spec: argocd.AppSpec{
		Source:      &argocd.AppSource{RepoURL: repoURL, Path: "apps/" + name, TargetRevision: "main"},
		Destination: argocd.AppDestination{Namespace: "shop"},
		SyncPolicy:  &argocd.AppSyncPolicy{Automated: &argocd.AppSyncAutomated{}},
	}, Status: argocd.AppStatus{SourceType: "Directory"}}
}

func (c manyApps) Decide(_ context.Context, _ clusteraccess.Ref, t objref.Target) argocd.Decision {
	app := c.app(t.Name)
	ref := argocd.ResourceRef{Group: "apps", Version: "v1", Kind: t.Kind, Namespace: t.Namespace, Name: t.Name}
	own := argocd.Ownership{Managed: true, App: app.Key(), Application: &app, Level: argocd.LevelAuto, Reason: "tracked"}
	return argocd.Decision{Path: argocd.PathGit, Known: true, Level: argocd.LevelAuto, Reason: "managed by argocd/" + t.Name,
		Targets: []argocd.TargetDecision{{Ref: ref, Path: argocd.PathGit, Known: true, Ownership: own}}}
}

func (c manyApps) Applications(context.Context, clusteraccess.Ref) ([]argocd.Application, error) {
	apps := make([]argocd.Application, c.n)
	for i := range apps {
		apps[i] = c.app(fmt.Sprintf("app-%d", i))
	}
	return apps, nil
}

func (c manyApps) Capabilities(context.Context, clusteraccess.Ref) (kube.Capabilities, error) {
	return kube.Capabilities{}, nil
}

func (c manyApps) Clusters(context.Context, string) ([]string, error) { return []string{"prod"}, nil }

// ClusterByServer finds no cluster: the team registered none beside the plan's.
func (c manyApps) ClusterByServer(context.Context, string, string) (string, bool, error) {
	return "", false, nil
}

func (c manyApps) Application(_ context.Context, _ clusteraccess.Ref, _, name string) (argocd.Application, error) {
	return c.app(name), nil
}

func (c manyApps) Object(context.Context, clusteraccess.Ref, objref.Target) (map[string]any, error) {
	return nil, clusteraccess.ErrObjectNotFound
}

func (c manyApps) DryRun(context.Context, clusteraccess.Ref, []map[string]any) error { return nil }

// appFileRenderer sets the replicas of apps/<target>/deploy.yaml, so each target is
// a file of its own and plans do not wait on each other's locks.
type appFileRenderer struct{}

func (appFileRenderer) Plan(_ context.Context, _ cache.Commit, req render.Request) (*render.Result, error) {
	path := "apps/" + req.Target.Name + "/deploy.yaml"
	old, err := os.ReadFile(filepath.Join(req.RepoDir, path))
	if err != nil {
		return nil, &render.Refusal{Code: render.CodeTargetNotFound, Reason: err.Error()}
	}
	now := []byte(strings.Replace(string(old), "replicas: 1", fmt.Sprintf("replicas: %d", req.Change.Replicas.Count), 1))
	return &render.Result{App: req.App, Strategy: "in place", Edits: []render.FileEdit{{Path: path, Old: old, New: now}},
		Verification: render.Verification{Verified: true, Apps: []render.AppVerification{{App: req.App, Objects: 1, Changed: 1}}}}, nil
}

func (appFileRenderer) Revert(context.Context, cache.Commit, cache.Commit, render.RevertRequest) (*render.Result, error) {
	return nil, &render.Refusal{Code: render.CodeInvalidRequest, Reason: "no reverts in this test"}
}

func (appFileRenderer) Render(context.Context, cache.Commit, string, render.Application) ([]render.Object, error) {
	return nil, &render.Refusal{Code: render.CodeInvalidRequest, Reason: "no repository views in this test"}
}

// budgetEnv is a fake GitHub enforcing secondary limits and a pipeline over the
// cluster of n apps whose client keeps to limits.
func budgetEnv(t *testing.T, db *store.DB, n int, enforced githubtest.SecondaryLimits, limits github.Limits) (*env, *plan.Pipeline) {
	t.Helper()
	e := newEnv(t, db, func(c *github.Config) { c.Limits = limits })
	files := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("app-%d", i)
		files["apps/"+name+"/deploy.yaml"] = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\n  namespace: shop\nspec:\n  replicas: 1\n"
	}
	e.gh.PushCommit(t, repoName, "main", files, githubtest.DefaultAuthor)
	e.gh.EnforceSecondaryLimits(enforced)
	p := plan.New(plan.Deps{Store: e.db, Clusters: manyApps{n: n}, Renderer: appFileRenderer{}, Repos: e.repos, Connections: e.conns},
		plan.Config{ClaimTTL: 10 * time.Second, PublicURL: "https://kukie.example", BotLogin: e.gh.BotLogin()})
	t.Cleanup(p.Close)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e, p
}

func scaleApp(i int) plan.Request {
	name := fmt.Sprintf("app-%d", i)
	return plan.Request{Cluster: "prod", Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: name},
		Change: render.Change{Replicas: &render.Replicas{Count: 2}}, Reason: "more traffic", RequestedBy: "alice", IdempotencyKey: name}
}

// settle waits until every plan is out of the pipeline's hands: a pull request with
// its check run, or stopped. It returns the plans. A busy machine makes the plans
// slow, not wrong, so it waits as long as some plan gets further (a step recorded)
// within settleStall; a plan asleep on a rate limit wakes well within it.
func settle(t *testing.T, db *store.DB, codes []string) []store.Plan {
	t.Helper()
	ctx := context.Background()
	done := map[string]store.Plan{}
	progress := map[string]int64{} // the stored version of each plan not settled yet
	lastProgress := time.Now()
	for {
		for _, code := range codes {
			if _, ok := done[code]; ok {
				continue
			}
			pl, err := db.PlanByCode(ctx, code)
			if err != nil {
				t.Fatal(err)
			}
			switch s := plan.Status(pl.Status); {
			case s == plan.StatusPROpen && pl.CheckRunID != 0, s == plan.StatusFailed, s == plan.StatusRefused:
				done[code] = pl
				lastProgress = time.Now()
				continue
			}
			if pl.Version != progress[code] {
				progress[code] = pl.Version
				lastProgress = time.Now()
			}
		}
		if len(done) == len(codes) {
			out := make([]store.Plan, len(codes))
			for i, code := range codes {
				out[i] = done[code]
			}
			return out
		}
		if time.Since(lastProgress) > settleStall {
			var stuck []string
			for _, code := range codes {
				if _, ok := done[code]; !ok {
					stuck = append(stuck, stuckPlan(t, db, code))
				}
			}
			t.Fatalf("%d of %d plans settled; no plan got further for %s:\n%s", len(done), len(codes), settleStall, strings.Join(stuck, "\n"))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// settleStall is how long settle waits for some plan to get further.
const settleStall = 2 * time.Minute

// stuckPlan describes a plan that did not settle: its state and latest history entry.
func stuckPlan(t *testing.T, db *store.DB, code string) string {
	t.Helper()
	pl, err := db.PlanByCode(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	events, err := db.PlanEvents(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	last := "no history"
	if len(events) > 0 {
		ev := events[len(events)-1]
		last = ev.Step + ": " + ev.Message
	}
	return fmt.Sprintf("%s %s (check run %d): %s", code, pl.Status, pl.CheckRunID, last)
}

// TestPipelineKeepsWithinGitHubSecondaryLimits submits 40 changes at once against a
// GitHub that refuses what goes over its secondary limits (scaled to a window of a
// second): every change gets its pull request and check run, and GitHub never had to
// refuse a request. Forty plans at once are five times the requests GitHub lets be
// in flight, and their first writes alone more than its content window takes (40
// to 24 a second, as a hundred were to 60): a client that does not keep to the
// limits goes over them.
func TestPipelineKeepsWithinGitHubSecondaryLimits(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		const n = 40
		enforced := githubtest.SecondaryLimits{Concurrent: 8, Content: 24, Per: time.Second}
		e, p := budgetEnv(t, db, n, enforced, github.Limits{
			Concurrent: 8, Content: []github.Window{{Requests: 24, Per: time.Second}},
			// Turns further away than this are waited for by the plan.
			MaxWait: 500 * time.Millisecond,
		})
		ctx := context.Background()
		codes := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", scaleApp(i))
				if err != nil {
					t.Error(err)
					return
				}
				codes[i] = pl.Code
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		for _, pl := range settle(t, db, codes) {
			if pl.Status != string(plan.StatusPROpen) {
				t.Errorf("plan %s is %s: %s %s", pl.Code, pl.Status, pl.ErrorCode, pl.StatusReason)
			}
		}
		if prs := e.gh.PullRequests(t, repoName); len(prs) != n {
			t.Errorf("%d pull requests, want %d", len(prs), n)
		}
		if v := e.gh.LimitViolations(); v != 0 {
			t.Errorf("%d requests went over GitHub's secondary limits", v)
		}
	})
}

// TestPipelineWaitsOutPrimaryRateLimit: GitHub's primary limit is used up when the
// plan opens its pull request, until a reset further away than a request may wait
// in the client. The plan records that it waits, and opens the pull request after
// the reset instead of failing.
func TestPipelineWaitsOutPrimaryRateLimit(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e, p := budgetEnv(t, db, 1, githubtest.SecondaryLimits{}, github.Limits{MaxWait: 100 * time.Millisecond})
		reset := time.Now().Add(2 * time.Second)
		limited := githubtest.PrimaryRateLimit(reset).On("POST", "/repos/acme/deploy/pulls")
		limited.Times = 1
		e.gh.InjectFault(limited)
		pl, _, err := p.Submit(context.Background(), e.team.ID, "team:shop", scaleApp(0))
		if err != nil {
			t.Fatal(err)
		}
		got := settle(t, db, []string{pl.Code})[0]
		if got.Status != string(plan.StatusPROpen) {
			t.Fatalf("plan is %s: %s %s", got.Status, got.ErrorCode, got.StatusReason)
		}
		events, err := db.PlanEvents(context.Background(), pl.Code)
		if err != nil {
			t.Fatal(err)
		}
		var steps []string
		for _, ev := range events {
			if strings.HasPrefix(ev.Message, "waiting for GitHub's rate limit until ") {
				steps = append(steps, ev.Step+" in "+ev.ToStatus)
			}
		}
		if strings.Join(steps, ",") != "pull_request in committing" {
			t.Errorf("rate limit waits recorded: %v, want one at the pull request", steps)
		}
	})
}
