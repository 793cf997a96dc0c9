package e2e_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// rolloutStep is one status the test writes for the web Deployment, and what the
// plan's deployment message says while the Deployment is there.
type rolloutStep struct {
	name    string
	status  func(replicas int64) map[string]any
	message string
}

// TestDeployedOnlyOnceTheRolloutEnds: after the merge commit is synced, the test
// writes the web Deployment's status through the status subresource step by step, as
// the Deployment controller and the kubelets would; the plan, read back from the real
// API server, stays deploying at every step (the generation not yet observed, fewer
// replicas updated than desired, new pods not available) and is deployed only at the
// end. A second change whose new pods crash never becomes available and ends
// deploy_failed once the Deployment reports its progress deadline exceeded.
func TestDeployedOnlyOnceTheRolloutEnds(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployWeb("main")
		web := types.NamespacedName{Namespace: s.shopNS, Name: "web"}
		// Running before the change: its generation rolled out.
		s.playKubelet(web, func(replicas int64) map[string]any { return rolloutStatus(replicas, replicas, replicas) })

		rolled := s.shipRollout(s.submit("Deployment", "web", map[string]any{"replicas": map[string]any{"count": 4}}), web, []rolloutStep{
			{name: "generation not observed", message: "Deployment/web is rolling out: Deployment generation is 2, but latest observed generation is 1"},
			{name: "updated fewer than desired", status: func(r int64) map[string]any { return rolloutStatus(r, 1, 2) },
				message: "Deployment/web is rolling out: Updated: 1/4"},
			{name: "new pods not available", status: func(r int64) map[string]any { return rolloutStatus(r, r, 2) },
				message: "Deployment/web is rolling out: Available: 2/4"},
		})
		s.playKubelet(web, func(r int64) map[string]any { return rolloutStatus(r, r, r) })
		if c := s.waitStatus(rolled.Code, "deployed"); c.Deployment == nil || c.Deployment.State != "succeeded" {
			t.Fatalf("deployed with deployment %+v, want succeeded", c.Deployment)
		}

		crashing := s.shipRollout(s.submit("Deployment", "web", map[string]any{"image": map[string]any{"container": "web", "tag": "1.27.1"}}), web, []rolloutStep{
			{name: "new pod crashing", status: func(r int64) map[string]any { return rolloutStatus(r, 1, r-1) },
				message: "Deployment/web is rolling out: Updated: 1/4"},
		})
		s.playKubelet(web, func(r int64) map[string]any {
			st := rolloutStatus(r, 1, r-1)
			st["conditions"].([]any)[0] = map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
				"message": `ReplicaSet "web-6f7b" has timed out progressing.`}
			return st
		})
		c := s.waitStatus(crashing.Code, "deploy_failed")
		if want := `Deployment/web failed: Progress deadline exceeded: ReplicaSet "web-6f7b" has timed out progressing.`; c.Deployment == nil || c.Deployment.State != "failed" || c.Deployment.Message != want {
			t.Fatalf("deploy_failed with deployment %+v, want failed with %q", c.Deployment, want)
		}
	})
}

// shipRollout waits for the pull request of a submitted change to the web app, merges its pull request and syncs the
// merge commit like Argo CD without playing the kubelet; then, for each step, it
// writes the step's status (none for a step without one) and waits until the plan
// says the step's message, failing if the plan is anything but deploying there.
func (s *service) shipRollout(c change, web types.NamespacedName, steps []rolloutStep) change {
	s.t.Helper()
	c = s.waitStatus(c.Code, "pr_open")
	merge := s.gh.Merge(s.t, s.repo, int(c.PullRequest.Number), githubtest.MergeCommit)
	s.waitFor(c.Code, "merged", func(c change) bool { return c.MergeSHA == merge })
	s.applyLikeArgo("web", "apps/web", "Directory", merge)
	s.recordSync("web", merge)
	for _, step := range steps {
		if step.status != nil {
			s.playKubelet(web, step.status)
		}
		c = s.waitFor(c.Code, "deploying: "+step.message, func(c change) bool {
			return c.Status != "merged" && c.Status != "deploying" || c.Deployment != nil && c.Deployment.Message == step.message
		})
		if c.Status != "deploying" || c.Deployment.State != "in_progress" {
			s.t.Fatalf("%s: change is %s with deployment %+v, want deploying and in progress", step.name, c.Status, c.Deployment)
		}
	}
	return c
}

// TestDeployFollowedAgainAfterARestart: a change is deploying when its process stops,
// before Argo CD synced the merge commit. The next process, whose poll is an hour,
// watches its Application and its target again: the sync, a step of the rollout and
// its end, each written after the one before was seen, reach the plan, and it is
// deployed. Nothing but the watches can wake it within the hour.
func TestDeployFollowedAgainAfterARestart(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployWeb("main")
		web := types.NamespacedName{Namespace: s.shopNS, Name: "web"}
		s.playKubelet(web, func(replicas int64) map[string]any { return rolloutStatus(replicas, replicas, replicas) })
		c := s.waitStatus(s.submit("Deployment", "web", map[string]any{"replicas": map[string]any{"count": 4}}).Code, "pr_open")
		merge := s.gh.Merge(s.t, s.repo, int(c.PullRequest.Number), githubtest.MergeCommit)
		s.waitFor(c.Code, "deploying, the merge not synced", func(c change) bool {
			return c.MergeSHA == merge && c.Status == "deploying" && c.Deployment != nil && c.Deployment.Message == "Argo CD has not synced the merge commit yet"
		})
		s.stop()

		s.cfg.Pipeline.DeployPollInterval, s.cfg.Pipeline.DeployTimeout = time.Hour, 2*time.Hour
		s.start()
		s.applyLikeArgo("web", "apps/web", "Directory", merge)
		s.recordSync("web", merge)
		s.waitFor(c.Code, "the sync seen", func(c change) bool {
			return c.Deployment != nil && c.Deployment.Message == "Deployment/web is rolling out: Deployment generation is 2, but latest observed generation is 1"
		})
		s.playKubelet(web, func(r int64) map[string]any { return rolloutStatus(r, 1, 2) })
		s.waitFor(c.Code, "the rollout's step seen", func(c change) bool {
			return c.Deployment != nil && c.Deployment.Message == "Deployment/web is rolling out: Updated: 1/4"
		})
		s.playKubelet(web, func(r int64) map[string]any { return rolloutStatus(r, r, r) })
		if c := s.waitStatus(c.Code, "deployed"); c.Deployment == nil || c.Deployment.State != "succeeded" {
			t.Fatalf("deployed with deployment %+v, want succeeded", c.Deployment)
		}
	})
}
