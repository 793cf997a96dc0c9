package plan_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// TestPullRequestMergedIntoAnotherBranchIsNotMerged: a person who retargets a
// change's pull request at another branch and merges it there has not merged the
// change into the branch its Application deploys, so the plan is closed saying so
// (its files let go, nothing to follow or revert) instead of being merged and
// followed until its deploy timeout for a commit Argo CD never syncs.
func TestPullRequestMergedIntoAnotherBranchIsNotMerged(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(6, "retargeted"))
		release := e.gh.CreateBranch(t, repoName, "release", "main")
		if err := p.PullClosed(ctx, repoName, pl.Branch, "release", pl.PRNumber, true, release, e.pullHead(pl.PRNumber)); err != nil {
			t.Fatal(err)
		}
		got := e.waitStatus(pl.Code, plan.StatusClosed)
		if got.MergeSHA != "" {
			t.Errorf("merge SHA %s recorded for a merge into another branch", got.MergeSHA)
		}
		for _, want := range []string{"release", "main", "argocd/web"} {
			if !strings.Contains(got.StatusReason, want) {
				t.Errorf("reason %q does not name %s", got.StatusReason, want)
			}
		}
		// Its file is free: the next change to it opens its pull request at once.
		e.submitOpen(ctx, p, scale(7, "after-retargeted"))
	})
}
