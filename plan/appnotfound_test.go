package plan_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// TestUnreadApplicationIsRefusedAccuratelyAndARetryWorks: a resource whose tracking id
// names an Application the cluster's Argo CD did not answer with (a typo, or one
// created moments ago) is refused with app_not_found naming that Application and
// saying what to do; once the Application is read, submitting again opens the PR.
func TestUnreadApplicationIsRefusedAccuratelyAndARetryWorks(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.pipeline(plan.Hooks{})
		e.cluster.mu.Lock()
		e.cluster.unread = true
		e.cluster.mu.Unlock()

		refused, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(4, "new-app-1"))
		if err != nil {
			t.Fatal(err)
		}
		if refused.Status != string(plan.StatusRefused) || refused.ErrorCode != plan.CodeAppNotFound {
			t.Fatalf("plan %s (%s), want refused with %s", refused.Status, refused.ErrorCode, plan.CodeAppNotFound)
		}
		for _, want := range []string{"argocd/web", "tracking id", "not found in the Argo CD of cluster prod", "name and namespace", "again"} {
			if !strings.Contains(refused.StatusReason, want) {
				t.Errorf("reason lacks %q: %s", want, refused.StatusReason)
			}
		}
		if strings.Contains(refused.StatusReason, "register the cluster") {
			t.Errorf("reason sends people to register a cluster: %s", refused.StatusReason)
		}

		// The service's view of the cluster caught up: the retry goes through.
		e.cluster.mu.Lock()
		e.cluster.unread = false
		e.cluster.mu.Unlock()
		retried, created, err := p.Submit(ctx, e.team.ID, "team:shop", scale(4, "new-app-2"))
		if err != nil || !created {
			t.Fatalf("retry: %v created=%v", err, created)
		}
		e.waitStatus(retried.Code, plan.StatusPROpen)
	})
}
