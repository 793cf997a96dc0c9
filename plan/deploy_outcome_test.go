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

// TestPipelineDeploymentFailsWithArgoCDsMessageOrTimeout follows merged plans whose
// deployment does not succeed: a failed sync ends deploy_failed with Argo CD's message,
// and a sync that never comes ends deploy_failed once the configured timeout passes;
// only the latter is reported to the observer as a deploy timeout.
func TestPipelineDeploymentFailsWithArgoCDsMessageOrTimeout(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		timeout  time.Duration
		argo     func(c *fakeCluster, mergeSHA string)
		want     string // in the deployment message
		timedOut bool   // observed as a deploy timeout
	}{
		"sync failed": {
			timeout: time.Minute,
			argo:    func(c *fakeCluster, mergeSHA string) { c.sync(mergeSHA, argocd.PhaseFailed) },
			want:    "Argo CD sync Failed: sync Failed",
		},
		"sync errored": {
			timeout: time.Minute,
			argo:    func(c *fakeCluster, mergeSHA string) { c.sync(mergeSHA, argocd.PhaseError) },
			want:    "Argo CD sync Error: sync Error",
		},
		"never synced within the timeout": {
			timeout:  300 * time.Millisecond,
			argo:     func(*fakeCluster, string) {},
			want:     "not deployed within 300ms: Argo CD has not synced the merge commit yet",
			timedOut: true,
		},
	}
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		for name, tc := range tests {
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, db)
				ctx := context.Background()
				rec := &recorder{}
				p := plan.New(plan.Deps{Store: db, Clusters: e.cluster, Renderer: e.render, Repos: e.repos, Connections: e.conns, Observer: rec}, plan.Config{
					ClaimTTL: testClaimTTL, DeployPoll: 20 * time.Millisecond, DeployTimeout: tc.timeout,
					PublicURL: "https://kukie.example", BotLogin: e.gh.BotLogin(),
				})
				t.Cleanup(p.Close)
				pl := e.submitOpen(ctx, p, scale(4, "deploy-"+name))
				mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), githubtest.MergeCommit)
				tc.argo(e.cluster, mergeSHA)
				e.pullMerged(ctx, p, pl, mergeSHA)
				pl = e.waitStatus(pl.Code, plan.StatusDeployFailed)
				pay, err := plan.PayloadOf(pl)
				if err != nil {
					t.Fatal(err)
				}
				if pay.Deployment == nil || pay.Deployment.State != plan.DeployFailed || pay.Deployment.Message != tc.want {
					t.Fatalf("deployment %+v, want failed with %q", pay.Deployment, tc.want)
				}
				if pay.RollbackReference != mergeSHA {
					t.Errorf("rollback reference %q, want the merge commit %s", pay.RollbackReference, mergeSHA)
				}
				events, err := db.PlanEvents(ctx, pl.Code)
				if err != nil {
					t.Fatal(err)
				}
				var moved *store.PlanEvent
				for i := range events {
					if events[i].FromStatus != events[i].ToStatus && events[i].ToStatus == string(plan.StatusDeployFailed) {
						moved = &events[i]
					}
				}
				if moved == nil || !strings.Contains(moved.Message, tc.want) {
					t.Errorf("no deploy_failed event carrying %q in %+v", tc.want, events)
				}
				p.Close() // the observer is told after the move is recorded
				rec.mu.Lock()
				defer rec.mu.Unlock()
				if want := map[bool]int{true: 1}[tc.timedOut]; rec.timeouts != want {
					t.Errorf("%d deploy timeouts observed, want %d", rec.timeouts, want)
				}
			})
		}
	})
}
