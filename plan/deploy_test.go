package plan_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// A Deployment's controller observes the new generation some time after Argo CD
// synced it; until then the plan is still deploying, not failed.
func TestPipelineWaitsForTheControllerToObserveTheSync(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, "lag"))
		pr := e.gh.PullRequests(t, repoName)[0]
		mergeSHA := e.gh.Merge(t, repoName, pr.GetNumber(), githubtest.MergeCommit)
		if err := p.PullClosed(ctx, repoName, pl.Branch, int64(pr.GetNumber()), true, mergeSHA); err != nil {
			t.Fatal(err)
		}
		e.cluster.setLagging(true)
		e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
		lagging := e.waitFor(pl.Code, "waiting for the controller", func(p store.Plan) bool {
			if p.Status == string(plan.StatusDeployFailed) {
				return true
			}
			pay, err := plan.PayloadOf(p)
			return err == nil && pay.Deployment != nil && strings.Contains(pay.Deployment.Message, "observe generation")
		})
		if lagging.Status != string(plan.StatusDeploying) {
			t.Fatalf("plan is %s (%s) while the controller catches up; want deploying", lagging.Status, lagging.StatusReason)
		}
		e.cluster.setLagging(false)
		e.waitStatus(pl.Code, plan.StatusDeployed)
	})
}
