package plan_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// flakyCommits fails commits while fail is set, as a GitHub outage would.
type flakyCommits struct {
	github.Repos
	fail atomic.Bool
}

func (f *flakyCommits) CreateCommit(ctx context.Context, inst int64, repo, baseSHA, message string, files []github.FileChange) (github.CommitInfo, error) {
	if f.fail.Load() {
		return github.CommitInfo{}, errors.New("POST git/commits: 503 Service Unavailable")
	}
	return f.Repos.CreateCommit(ctx, inst, repo, baseSHA, message, files)
}

// deployScale takes scale(4) through merge to deployed and returns the plan.
func (e *env) deployScale(ctx context.Context, p *plan.Pipeline) store.Plan {
	e.t.Helper()
	pl := e.submitOpen(ctx, p, scale(4, "to-roll-back"))
	mergeSHA := e.gh.Merge(e.t, repoName, int(pl.PRNumber), githubtest.MergeCommit)
	e.pullMerged(ctx, p, pl, mergeSHA)
	e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
	return e.waitStatus(pl.Code, plan.StatusDeployed)
}

// TestRollbackIsRenderedVerifiedAndDryRun: a revert goes through the same steps as
// any change. The base moved since the merge (a field added below the changed
// line): the revert keeps that, renders the result, proves that only spec.replicas
// goes back, dry-runs it against the cluster and says so in its check run. When the
// base moves again under the open revert, it is rebuilt as a revert.
func TestRollbackIsRenderedVerifiedAndDryRun(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.deployScale(ctx, p)

		scaled, _ := e.gh.FileAt(t, repoName, "main", webFile)
		e.gh.PushCommit(t, repoName, "main", map[string]string{webFile: scaled + "  minReadySeconds: 10\n"}, githubtest.DefaultAuthor)
		dryRuns := e.cluster.dryRuns

		rb, err := p.Rollback(plan.WithActor(ctx, "team:shop"), e.team.ID, pl.Code, "bob", "error rate up")
		if err != nil {
			t.Fatal(err)
		}
		rb = e.waitStatus(rb.Code, plan.StatusPROpen)
		if got, _ := e.gh.FileAt(t, repoName, rb.Branch, webFile); got != webYAML+"  minReadySeconds: 10\n" {
			t.Errorf("revert branch file:\n%s\nwant the replicas back and the later field kept", got)
		}
		if e.render.reverts != 1 {
			t.Errorf("%d reverts rendered, want 1", e.render.reverts)
		}
		if e.cluster.dryRuns != dryRuns+1 {
			t.Errorf("%d dry-runs for the revert, want 1", e.cluster.dryRuns-dryRuns)
		}
		pay, err := plan.PayloadOf(rb)
		if err != nil {
			t.Fatal(err)
		}
		if pay.ClusterCheck != plan.ClusterCheckPassed {
			t.Errorf("cluster check %q (%s), want passed", pay.ClusterCheck, pay.ClusterCheckNote)
		}
		if len(pay.ClusterDiff) != 1 || len(pay.ClusterDiff[0].Changes) != 1 || pay.ClusterDiff[0].Changes[0].Path != "spec.replicas" ||
			pay.ClusterDiff[0].Changes[0].Before != "4" || pay.ClusterDiff[0].Changes[0].After != "3" {
			t.Errorf("revert cluster diff %+v, want spec.replicas 4 → 3", pay.ClusterDiff)
		}
		if pay.Verification == nil || !pay.Verification.Verified || !strings.HasPrefix(pay.VerificationResult, "revert of plan "+pl.Code+" verified") {
			t.Errorf("verification %+v: %s", pay.Verification, pay.VerificationResult)
		}
		if !strings.Contains(pay.GitDiff, "-  replicas: 4\n+  replicas: 3\n") {
			t.Errorf("revert git diff:\n%s", pay.GitDiff)
		}
		runs := e.gh.CheckRuns(t, repoName, rb.HeadSHA)
		if len(runs) != 1 || runs[0].GetConclusion() != "success" {
			t.Fatalf("check runs on the revert head: %v", runs)
		}
		if text := runs[0].GetOutput().GetText(); !strings.Contains(text, "-  replicas: 4") || !strings.Contains(text, "+  replicas: 3") {
			t.Errorf("check run does not show the revert's own diff:\n%s", text)
		}

		// The base moves under the open revert: it is rebuilt as a revert again.
		moved, _ := e.gh.FileAt(t, repoName, "main", webFile)
		after := e.gh.PushCommit(t, repoName, "main", map[string]string{webFile: strings.Replace(moved, "minReadySeconds: 10", "minReadySeconds: 20", 1)}, githubtest.DefaultAuthor)
		if err := e.basePushed(ctx, p, after, []string{webFile}); err != nil {
			t.Fatal(err)
		}
		// The plan's own run publishes the check run of the rebuilt head.
		rb = e.waitFor(rb.Code, "rebuilt and checked", func(p store.Plan) bool { return p.BaseSHA == after && p.CheckRunID != 0 })
		if got, _ := e.gh.FileAt(t, repoName, rb.Branch, webFile); rb.BaseSHA != after || got != webYAML+"  minReadySeconds: 20\n" {
			t.Errorf("revert rebuilt on %s (want %s) with:\n%s", rb.BaseSHA, after, got)
		}
		if runs := e.gh.CheckRuns(t, repoName, rb.HeadSHA); len(runs) != 1 || runs[0].GetConclusion() != "success" {
			t.Errorf("check runs on the rebuilt revert: %v", runs)
		}
	})
}

// TestRollbackCanBeRequestedAgain: a revert that was refused, failed or closed
// gives way to a new one on the next request; while one is under way, a request
// returns it.
func TestRollbackCanBeRequestedAgain(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := plan.WithActor(context.Background(), "team:shop")
		repos := &flakyCommits{Repos: e.repos}
		p := plan.New(plan.Deps{Store: e.db, Clusters: e.cluster, Renderer: e.render, Repos: repos, Connections: e.conns}, plan.Config{BotLogin: e.gh.BotLogin()})
		t.Cleanup(p.Close)
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		pl := e.deployScale(ctx, p)
		rollback := func() store.Plan {
			t.Helper()
			rb, err := p.Rollback(ctx, e.team.ID, pl.Code, "bob", "error rate up")
			if err != nil {
				t.Fatal(err)
			}
			if rb.RollbackOf != pl.Code {
				t.Fatalf("rollback returned plan %s, a revert of %q", rb.Code, rb.RollbackOf)
			}
			return rb
		}
		seen := map[string]bool{}
		fresh := func(rb store.Plan) {
			t.Helper()
			if seen[rb.Code] {
				t.Fatalf("the request returned the ended revert %s again", rb.Code)
			}
			seen[rb.Code] = true
		}

		// Someone scaled by hand on the line the change wrote: refused.
		scaled, _ := e.gh.FileAt(t, repoName, "main", webFile)
		e.gh.PushCommit(t, repoName, "main", map[string]string{webFile: strings.Replace(scaled, "replicas: 4", "replicas: 6", 1)}, githubtest.DefaultAuthor)
		refused := rollback()
		fresh(refused)
		refused = e.waitStatus(refused.Code, plan.StatusRefused)
		if refused.ErrorCode != plan.CodeEditNoLongerApplies || !strings.Contains(refused.StatusReason, webFile) {
			t.Fatalf("refused with %s: %s", refused.ErrorCode, refused.StatusReason)
		}

		// Put back; GitHub fails the revert's commit.
		e.gh.PushCommit(t, repoName, "main", map[string]string{webFile: scaled}, githubtest.DefaultAuthor)
		repos.fail.Store(true)
		failed := rollback()
		fresh(failed)
		failed = e.waitStatus(failed.Code, plan.StatusFailed)

		// GitHub is back: a new revert, and the failed one is closed so that no
		// retry makes a second one.
		repos.fail.Store(false)
		open := rollback()
		fresh(open)
		if got, err := db.PlanByCode(ctx, failed.Code); err != nil || got.Status != string(plan.StatusClosed) {
			t.Fatalf("failed revert is %s (%v), want closed", got.Status, err)
		}
		open = e.waitStatus(open.Code, plan.StatusPROpen)
		if again := rollback(); again.Code != open.Code {
			t.Fatalf("a request while revert %s is open made %s", open.Code, again.Code)
		}

		// The revert's pull request is closed unmerged: the next request opens another.
		if _, err := p.Cancel(ctx, e.team.ID, open.Code, ""); err != nil {
			t.Fatal(err)
		}
		last := rollback()
		fresh(last)
		last = e.waitStatus(last.Code, plan.StatusPROpen)
		revertSHA := e.gh.Merge(t, repoName, int(last.PRNumber), githubtest.MergeCommit)
		e.pullMerged(ctx, p, last, revertSHA)
		e.cluster.sync(revertSHA, argocd.PhaseSucceeded)
		e.waitStatus(last.Code, plan.StatusDeployed)
		e.waitStatus(pl.Code, plan.StatusRolledBack)
		if got, _ := e.gh.FileAt(t, repoName, "main", webFile); got != webYAML {
			t.Errorf("main after the revert:\n%s", got)
		}
	})
}

// TestRollbackDeploysOnlyOnceTheRevertRollsOut: a merged revert is judged like any
// change. While the target rolls the revert out the revert is deploying and the
// reverted plan stays deployed; a rollout past its progress deadline fails the
// revert with the Deployment's reason and leaves the plan deployed; an Application
// still Progressing waits, and only a Healthy one makes the plan rolled_back.
func TestRollbackDeploysOnlyOnceTheRevertRollsOut(t *testing.T) {
	t.Parallel()
	deadline := rolloutStatus(2, 5, 1, 4)
	deadline["conditions"].([]any)[0] = map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
		"message": `ReplicaSet "web-5f6b" has timed out progressing.`}
	tests := map[string]struct {
		then    func(c *fakeCluster) // once the revert is seen rolling out
		waiting string               // then the revert is seen deploying with this message ("": none)
		last    func(c *fakeCluster) // after that
		want    plan.Status          // of the revert
		message string               // the revert's final deployment message
	}{
		"revert rollout fails": {
			then:    func(c *fakeCluster) { c.setTargetStatus(deadline) },
			want:    plan.StatusDeployFailed,
			message: `Deployment/web failed: Progress deadline exceeded: ReplicaSet "web-5f6b" has timed out progressing.`,
		},
		"application progressing, then healthy": {
			then: func(c *fakeCluster) {
				c.setTargetStatus(nil)
				c.assess(argocd.AppHealth{Status: argocd.HealthProgressing, Message: "waiting for the canary"}, true)
			},
			waiting: "Deployment/web has rolled out; Argo CD reports the Application Progressing: waiting for the canary",
			last:    func(c *fakeCluster) { c.assess(argocd.AppHealth{Status: argocd.HealthHealthy}, true) },
			want:    plan.StatusDeployed,
			message: "synced and running",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
				e := newEnv(t, db)
				ctx := plan.WithActor(context.Background(), "team:shop")
				p := e.startedPipeline(ctx, plan.Hooks{})
				pl := e.deployScale(ctx, p)
				rb, err := p.Rollback(ctx, e.team.ID, pl.Code, "bob", "error rate up")
				if err != nil {
					t.Fatal(err)
				}
				rb = e.waitStatus(rb.Code, plan.StatusPROpen)
				revertSHA := e.gh.Merge(t, repoName, int(rb.PRNumber), githubtest.MergeCommit)
				e.cluster.setTargetStatus(rolloutStatus(2, 4, 1, 3))
				e.cluster.sync(revertSHA, argocd.PhaseSucceeded)
				e.pullMerged(ctx, p, rb, revertSHA)

				deploying := func(msg string) {
					t.Helper()
					cur := e.waitFor(rb.Code, "deploying with "+msg, func(cur store.Plan) bool {
						pay, err := plan.PayloadOf(cur)
						return cur.Status != string(plan.StatusDeploying) && cur.Status != string(plan.StatusMerged) ||
							err == nil && pay.Deployment != nil && pay.Deployment.Message == msg
					})
					if cur.Status != string(plan.StatusDeploying) {
						t.Fatalf("revert is %s (%s), want deploying with %q", cur.Status, cur.StatusReason, msg)
					}
					if orig, err := db.PlanByCode(ctx, pl.Code); err != nil || orig.Status != string(plan.StatusDeployed) {
						t.Fatalf("reverted plan is %s (%v) while its revert is deploying, want deployed", orig.Status, err)
					}
				}
				deploying("Deployment/web is rolling out: Updated: 1/4")
				tc.then(e.cluster)
				if tc.waiting != "" {
					deploying(tc.waiting)
					tc.last(e.cluster)
				}

				done := e.waitStatus(rb.Code, tc.want)
				wantState, wantOrig := plan.DeploySucceeded, plan.StatusRolledBack
				if tc.want == plan.StatusDeployFailed {
					wantState, wantOrig = plan.DeployFailed, plan.StatusDeployed
				}
				if pay, _ := plan.PayloadOf(done); pay.Deployment == nil || pay.Deployment.State != wantState || pay.Deployment.Message != tc.message {
					t.Fatalf("revert deployment %+v, want %s with %q", pay.Deployment, wantState, tc.message)
				}
				if orig := e.waitStatus(pl.Code, wantOrig); orig.RolledBackBy != rb.Code {
					t.Errorf("reverted plan names revert %q, want %s", orig.RolledBackBy, rb.Code)
				}
			})
		})
	}
}
