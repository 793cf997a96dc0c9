package plan_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// TestPipelineDeploysOnlyOnceTheRolloutEnds: after Argo CD synced the merge commit the
// plan stays deploying through every moment of the Deployment's rollout, each shown in
// its deployment message: the controller not yet at the new generation, fewer
// replicas updated than desired, new pods not available, an old pod still
// terminating. None of them reports a False condition, so only a rollout-aware
// reading keeps the plan from being deployed early. It is deployed once the rollout
// ends.
func TestPipelineDeploysOnlyOnceTheRolloutEnds(t *testing.T) {
	t.Parallel()
	steps := []struct {
		name   string
		status map[string]any
		want   string // in the deployment message
	}{
		{"generation not observed", rolloutStatus(1, 4, 4, 4), "Deployment/web is rolling out: Deployment generation is 2, but latest observed generation is 1"},
		{"updated fewer than desired", rolloutStatus(2, 4, 1, 3), "Deployment/web is rolling out: Updated: 1/4"},
		{"new pods not available", rolloutStatus(2, 4, 4, 2), "Deployment/web is rolling out: Available: 2/4"},
		{"old pod terminating", rolloutStatus(2, 5, 4, 5), "Deployment/web is rolling out: Pending termination: 1"},
	}
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, "rollout"))
		mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), githubtest.MergeCommit)
		e.cluster.setTargetStatus(steps[0].status)
		e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
		e.pullMerged(ctx, p, pl, mergeSHA)
		for _, step := range steps {
			e.cluster.setTargetStatus(step.status)
			cur := e.waitFor(pl.Code, "deploying with "+step.want, func(cur store.Plan) bool {
				if cur.Status == string(plan.StatusDeployed) || cur.Status == string(plan.StatusDeployFailed) {
					return true
				}
				pay, err := plan.PayloadOf(cur)
				return err == nil && pay.Deployment != nil && pay.Deployment.Message == step.want
			})
			pay, _ := plan.PayloadOf(cur)
			if cur.Status != string(plan.StatusDeploying) || pay.Deployment.State != plan.DeployInProgress {
				t.Fatalf("%s: plan is %s (deployment %+v), want deploying and in progress", step.name, cur.Status, pay.Deployment)
			}
		}
		e.cluster.setTargetStatus(nil)
		done := e.waitStatus(pl.Code, plan.StatusDeployed)
		if pay, _ := plan.PayloadOf(done); pay.Deployment == nil || pay.Deployment.State != plan.DeploySucceeded || pay.Deployment.Message != "synced and running" {
			t.Fatalf("deployed with deployment %+v, want succeeded, synced and running", pay.Deployment)
		}
	})
}

// TestPipelineDeploymentJudgedByTargetAndApplication: a rollout past its progress
// deadline and an Application Argo CD finds Degraded end deploy_failed with the
// reason; an Application still Progressing, or whose health Argo CD has not assessed
// since the sync, keeps the plan deploying until Argo CD finds it healthy.
func TestPipelineDeploymentJudgedByTargetAndApplication(t *testing.T) {
	t.Parallel()
	healthy := argocd.AppHealth{Status: argocd.HealthHealthy}
	tests := map[string]struct {
		setup   func(c *fakeCluster) // before Argo CD syncs the merge commit
		waiting string               // the plan is first seen deploying with this message ("": none)
		then    func(c *fakeCluster) // after that
		want    plan.Status
		message string // the final deployment message
	}{
		"progress deadline exceeded": {
			setup: func(c *fakeCluster) {
				st := rolloutStatus(2, 5, 1, 4)
				st["conditions"].([]any)[0] = map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
					"message": `ReplicaSet "web-7d9c" has timed out progressing.`}
				c.setTargetStatus(st)
			},
			want:    plan.StatusDeployFailed,
			message: `Deployment/web failed: Progress deadline exceeded: ReplicaSet "web-7d9c" has timed out progressing.`,
		},
		"application degraded": {
			setup: func(c *fakeCluster) {
				c.assess(argocd.AppHealth{Status: argocd.HealthDegraded}, true,
					argocd.AppResourceStatus{Group: "apps", Kind: "Deployment", Namespace: "shop", Name: "web", Health: &healthy},
					argocd.AppResourceStatus{Group: "batch", Kind: "Job", Namespace: "shop", Name: "migrate",
						Health: &argocd.AppHealth{Status: argocd.HealthDegraded, Message: "Job has reached the specified backoff limit"}})
			},
			want:    plan.StatusDeployFailed,
			message: "Argo CD reports the Application Degraded; Degraded: Job shop/migrate (Job has reached the specified backoff limit)",
		},
		"application progressing, then healthy": {
			setup: func(c *fakeCluster) {
				c.assess(argocd.AppHealth{Status: argocd.HealthProgressing, Message: "waiting for the canary"}, true)
			},
			waiting: "Deployment/web has rolled out; Argo CD reports the Application Progressing: waiting for the canary",
			then:    func(c *fakeCluster) { c.assess(healthy, true) },
			want:    plan.StatusDeployed,
			message: "synced and running",
		},
		"health from before the sync": {
			setup:   func(c *fakeCluster) { c.assess(argocd.AppHealth{Status: argocd.HealthDegraded}, false) },
			waiting: "Deployment/web has rolled out; waiting for Argo CD to assess the Application's health after the sync",
			then:    func(c *fakeCluster) { c.assess(healthy, true) },
			want:    plan.StatusDeployed,
			message: "synced and running",
		},
	}
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		for name, tc := range tests {
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, db)
				ctx := context.Background()
				p := e.pipeline(plan.Hooks{})
				pl := e.submitOpen(ctx, p, scale(4, "judged-"+strings.ReplaceAll(name, " ", "-")))
				mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), githubtest.MergeCommit)
				tc.setup(e.cluster)
				e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
				e.pullMerged(ctx, p, pl, mergeSHA)
				if tc.waiting != "" {
					cur := e.waitFor(pl.Code, "deploying with "+tc.waiting, func(cur store.Plan) bool {
						pay, err := plan.PayloadOf(cur)
						return cur.Status != string(plan.StatusDeploying) && cur.Status != string(plan.StatusMerged) ||
							err == nil && pay.Deployment != nil && pay.Deployment.Message == tc.waiting
					})
					if cur.Status != string(plan.StatusDeploying) {
						t.Fatalf("plan is %s (%s), want deploying with %q", cur.Status, cur.StatusReason, tc.waiting)
					}
					tc.then(e.cluster)
				}
				done := e.waitStatus(pl.Code, tc.want)
				pay, _ := plan.PayloadOf(done)
				wantState := plan.DeploySucceeded
				if tc.want == plan.StatusDeployFailed {
					wantState = plan.DeployFailed
				}
				if pay.Deployment == nil || pay.Deployment.State != wantState || pay.Deployment.Message != tc.message {
					t.Fatalf("deployment %+v, want %s with %q", pay.Deployment, wantState, tc.message)
				}
			})
		}
	})
}
