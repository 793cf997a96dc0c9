package plan_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestBasePushOfUnknownFilesReverifiesOpenPlans moves the base under an open plan
// with a commit that leaves the plan's files alone. Told which files changed, the
// pipeline leaves the plan as it is; told the files are unknown (a push of commits
// GitHub listed no files for), it must assume the plan's files changed and verify
// the plan again on the new base.
func TestBasePushOfUnknownFilesReverifiesOpenPlans(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, ""))

		after := e.gh.PushCommit(t, repoName, "main", map[string]string{"README.md": "manifests of the shop\n"}, githubtest.DefaultAuthor)
		if err := p.BasePushed(ctx, repoName, "main", after, []string{"README.md"}); err != nil {
			t.Fatal(err)
		}
		if n := rebases(t, db, pl.Code, after); n != 0 {
			t.Fatalf("a push of another file verified the plan again (%d times)", n)
		}

		if err := p.BasePushed(ctx, repoName, "main", after, nil); err != nil {
			t.Fatal(err)
		}
		if n := rebases(t, db, pl.Code, after); n != 1 {
			t.Fatalf("a push of unknown files verified the plan on the new base %d times, want once", n)
		}
		pl = e.waitStatus(pl.Code, plan.StatusPROpen)
		if runs := e.gh.CheckRuns(t, repoName, pl.HeadSHA); len(runs) != 1 || runs[0].GetConclusion() != "success" {
			t.Fatalf("check runs on the head verified on the new base: %v", runs)
		}
	})
}

// TestBasePushLeavesAPlanAnotherWorkerHoldsForItsRetry moves the base under an open
// plan while another worker holds the plan's claim: the push writes nothing to
// GitHub and records nothing, and fails so that the delivery is retried; once the
// claim is free, the retry verifies the plan on the new base.
func TestBasePushLeavesAPlanAnotherWorkerHoldsForItsRetry(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, ""))
		pl = e.waitFor(pl.Code, "unclaimed", func(p store.Plan) bool { return p.ClaimedBy == "" })

		other, ok, err := db.ClaimPlan(ctx, pl.Code, "other-replica", time.Hour)
		if err != nil || !ok {
			t.Fatalf("claim as another worker: %v %v", ok, err)
		}
		moved := strings.Replace(webYAML, "# scaled by hand", "# scaled by the on-call", 1)
		after := e.gh.PushCommit(t, repoName, "main", map[string]string{webFile: moved}, githubtest.DefaultAuthor)
		e.gh.ResetRequestCounts()
		if err := p.BasePushed(ctx, repoName, "main", after, []string{webFile}); err == nil {
			t.Fatal("a base push for a plan another worker holds succeeded, want an error so it is retried")
		}
		for endpoint, n := range e.gh.RequestCounts() {
			if !strings.HasPrefix(endpoint, "GET ") && n > 0 {
				t.Errorf("%d requests to %s while another worker held the plan", n, endpoint)
			}
		}
		if n := rebases(t, db, pl.Code, after); n != 0 {
			t.Fatalf("the plan was rebased %d times while another worker held it", n)
		}

		if err := db.ReleasePlanClaim(ctx, other); err != nil {
			t.Fatal(err)
		}
		if err := p.BasePushed(ctx, repoName, "main", after, []string{webFile}); err != nil {
			t.Fatal(err)
		}
		pl = e.waitFor(pl.Code, "verified on the new base", func(p store.Plan) bool {
			return p.BaseSHA == after && p.Status == string(plan.StatusPROpen) && p.CheckRunID != 0
		})
		if got, _ := e.gh.FileAt(t, repoName, pl.Branch, webFile); got != strings.Replace(moved, "replicas: 3", "replicas: 4", 1) {
			t.Fatalf("rebased branch file:\n%s", got)
		}
	})
}

// rebases counts the plan's records of being verified again on base.
func rebases(t *testing.T, db *store.DB, code, base string) int {
	t.Helper()
	events, err := db.PlanEvents(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range events {
		if ev.Step == "rebase" && strings.Contains(ev.Message, base) {
			n++
		}
	}
	return n
}
