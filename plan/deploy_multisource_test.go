package plan_test

import (
	"context"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// syncSources plays Argo CD syncing a multi-source Application: a chart from a Helm
// repository at chartVersion and the repository's own folder at revision. Argo CD
// then leaves the single revision empty and reports one revision per source.
func (c *fakeCluster) syncSources(chartVersion, revision string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	own := *c.app.Spec.Source
	c.app.Spec.Source = nil
	c.app.Spec.Sources = []argocd.AppSource{
		{RepoURL: "https://charts.example.com/stable", Chart: "web", TargetRevision: chartVersion},
		own,
	}
	revisions := []string{chartVersion, revision}
	c.app.Status.Sync = argocd.AppSyncStatus{Status: "Synced", Revisions: revisions}
	c.app.Status.OperationState = &argocd.AppOperationState{Phase: argocd.PhaseSucceeded, Message: "sync Succeeded",
		FinishedAt: syncFinishedAt, SyncResult: &argocd.AppSyncResult{Revisions: revisions}}
}

// TestPipelineFollowsAMultiSourceApplication: the merge commit of a change to one
// source of a multi-source Application is deployed once Argo CD reports it among
// the Application's revisions, at that source's place; the chart version of the
// other source is never taken for a commit.
func TestPipelineFollowsAMultiSourceApplication(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.pipeline(plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, "multi-source"))
		mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), githubtest.MergeCommit)
		e.cluster.syncSources("1.4.0", mergeSHA)
		e.pullMerged(ctx, p, pl, mergeSHA)
		pl = e.waitFor(pl.Code, "deployed", func(cur store.Plan) bool {
			if cur.Status == string(plan.StatusDeployFailed) {
				pay, _ := plan.PayloadOf(cur)
				t.Fatalf("plan deploy_failed: %+v", pay.Deployment)
			}
			return cur.Status == string(plan.StatusDeployed)
		})
		pay, err := plan.PayloadOf(pl)
		if err != nil {
			t.Fatal(err)
		}
		if pay.Deployment == nil || pay.Deployment.SyncRevision != mergeSHA {
			t.Fatalf("deployment %+v, want the merge commit %s as the synced revision", pay.Deployment, mergeSHA)
		}
	})
}
