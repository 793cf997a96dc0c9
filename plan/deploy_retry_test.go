package plan_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// retrying plays Argo CD between two attempts of a failed automated sync: the
// operation stays Running and its message carries the failed attempt.
func (c *fakeCluster) retrying(revision, message string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.app.Status.Sync = argocd.AppSyncStatus{Status: "OutOfSync", Revision: revision}
	c.app.Status.OperationState = &argocd.AppOperationState{Phase: argocd.PhaseRunning, Message: message,
		SyncResult: &argocd.AppSyncResult{Revision: revision}}
}

// TestPipelineShowsArgoCDsRetriesWhileDeploying: while Argo CD retries a failed sync
// the plan stays deploying, and its deployment message carries Argo CD's message of
// the failed attempt instead of a bare "Running"; the final phase then decides.
func TestPipelineShowsArgoCDsRetriesWhileDeploying(t *testing.T) {
	t.Parallel()
	const attempt = `one or more objects failed to apply, reason: admission webhook "replicas.policy" denied the request: web may run at most 3 replicas. Retrying attempt #2 at 3:04PM.`
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.pipeline(plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, "retrying"))
		mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), githubtest.MergeCommit)
		e.cluster.retrying(mergeSHA, attempt)
		e.pullMerged(ctx, p, pl, mergeSHA)
		pl = e.waitFor(pl.Code, "deploying with Argo CD's retry message", func(cur store.Plan) bool {
			pay, err := plan.PayloadOf(cur)
			return err == nil && pay.Deployment != nil && strings.Contains(pay.Deployment.Message, attempt)
		})
		if pl.Status != string(plan.StatusDeploying) {
			t.Fatalf("plan is %s while Argo CD still retries, want deploying", pl.Status)
		}
		pay, _ := plan.PayloadOf(pl)
		if want := "retrying after a failed attempt"; !strings.Contains(pay.Deployment.Message, want) || pay.Deployment.Phase != argocd.PhaseRunning {
			t.Errorf("deployment %+v, want phase Running and a message saying %q", pay.Deployment, want)
		}
		// Still deploying a while later: a retry is not the end.
		time.Sleep(100 * time.Millisecond)
		if cur, err := db.PlanByCode(ctx, pl.Code); err != nil || cur.Status != string(plan.StatusDeploying) {
			t.Fatalf("plan %s (%v) during retries, want deploying", cur.Status, err)
		}

		e.cluster.sync(mergeSHA, argocd.PhaseFailed)
		pl = e.waitStatus(pl.Code, plan.StatusDeployFailed)
		if pay, _ := plan.PayloadOf(pl); pay.Deployment == nil || pay.Deployment.Message != "Argo CD sync Failed: sync Failed" {
			t.Fatalf("final deployment %+v, want Argo CD's final message", pay.Deployment)
		}
	})
}
