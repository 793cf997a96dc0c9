package plan_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// TestBasePushOfUnknownFilesReverifiesOpenPlans moves the base under an open plan
// with a commit that leaves the plan's files alone. Told which files changed, the
// pipeline leaves the plan as it is; told the files are unknown (a push of commits
// GitHub listed no files for), it must assume the plan's files changed and verify
// the plan again on the new base.
func TestBasePushOfUnknownFilesReverifiesOpenPlans(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, ""))

		after := e.gh.PushCommit(t, repoName, "main", map[string]string{"README.md": "manifests of the shop\n"}, githubtest.DefaultAuthor)
		if err := e.basePushed(ctx, p, after, []string{"README.md"}); err != nil {
			t.Fatal(err)
		}
		if n := rebases(t, db, pl.Code, after); n != 0 {
			t.Fatalf("a push of another file verified the plan again (%d times)", n)
		}

		if err := e.basePushed(ctx, p, after, nil); err != nil {
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
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, ""))
		// The pipeline's own resume may claim the plan again between a look that
		// finds it unclaimed and the claim: the claim is tried until it is had.
		var other store.PlanClaim
		pl = e.waitFor(pl.Code, "claimed by another worker", func(p store.Plan) bool {
			if p.ClaimedBy != "" {
				return false
			}
			c, ok, err := db.ClaimPlan(ctx, pl.Code, "other-replica", time.Hour)
			if err != nil {
				t.Fatalf("claim as another worker: %v", err)
			}
			other = c
			return ok
		})
		moved := strings.Replace(webYAML, "# scaled by hand", "# scaled by the on-call", 1)
		after := e.gh.PushCommit(t, repoName, "main", map[string]string{webFile: moved}, githubtest.DefaultAuthor)
		e.gh.ResetRequestCounts()
		if err := p.BasePushed(ctx, repoName, "main", after, []string{webFile}); !errors.Is(err, plan.ErrPlanBusy) {
			t.Fatalf("a base push for a plan another worker holds returned %v, want %v so it is retried", err, plan.ErrPlanBusy)
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
		if err := e.basePushed(ctx, p, after, []string{webFile}); err != nil {
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
	return countEvents(t, db, code, func(ev store.PlanEvent) bool {
		return ev.Step == "rebase" && strings.Contains(ev.Message, base)
	})
}

// TestBasePushRefusedOnTheNewBase moves the base under an open plan to where the
// change has nothing left to do (someone scaled by hand to the same count). The head
// keeps one run, published by the plan's own run: action_required with the reason,
// never the earlier success; the plan stays pr_open on its base.
func TestBasePushRefusedOnTheNewBase(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, ""))
		published := pl.CheckRunID

		after := e.gh.PushCommit(t, repoName, "main", map[string]string{webFile: strings.Replace(webYAML, "replicas: 3", "replicas: 4", 1)}, githubtest.DefaultAuthor)
		if err := e.basePushed(ctx, p, after, []string{webFile}); err != nil {
			t.Fatal(err)
		}
		const reason = "web already renders that way: there is nothing to change"
		cur := e.waitFor(pl.Code, "checked as refused on the new base", func(p store.Plan) bool {
			pay, err := plan.PayloadOf(p)
			return p.CheckRunID != 0 && err == nil && pay.CheckConclusion == github.ConclusionActionRequired
		})
		if cur.Status != string(plan.StatusPROpen) || cur.BaseSHA != pl.BaseSHA || cur.HeadSHA != pl.HeadSHA {
			t.Fatalf("plan is %s on %s at %s, want pr_open as it was", cur.Status, cur.BaseSHA, cur.HeadSHA)
		}
		runs := e.gh.CheckRuns(t, repoName, cur.HeadSHA)
		if len(runs) != 1 || runs[0].GetID() != cur.CheckRunID || runs[0].GetID() != published ||
			runs[0].GetConclusion() != github.ConclusionActionRequired || !strings.Contains(runs[0].GetOutput().GetSummary(), after) ||
			!strings.Contains(runs[0].GetOutput().GetSummary(), reason) {
			t.Fatalf("runs on the head: %v, want the plan's one run asking for action on %s: %s", runs, after, reason)
		}
		if pay, _ := plan.PayloadOf(cur); !strings.Contains(pay.VerificationResult, reason) {
			t.Errorf("verification result %q, want the refusal on the new base", pay.VerificationResult)
		}
		// The plan's own run published it (its check run step records the conclusion).
		events, err := db.PlanEvents(ctx, pl.Code)
		if err != nil {
			t.Fatal(err)
		}
		if last := events[len(events)-1]; last.Message != "check run "+github.ConclusionActionRequired {
			t.Fatalf("last event %s: %s, want the plan's check run step", last.Step, last.Message)
		}
	})
}

// TestBasePushMovesAPlanWhosePullRequestEventWasMissed: GitHub does not deliver
// again a pull_request event the service missed (it was down, the network dropped
// it). A plan whose pull request was merged so stayed pr_open for ever, holding its
// file, so the next change to it waited for ever and the merge was never deployed
// nor revertible. The next push to the base that reaches the plan finds its pull
// request merged (or closed) on GitHub and moves it as the event would have, and
// the event, if it comes after all, finds nothing to do.
func TestBasePushMovesAPlanWhosePullRequestEventWasMissed(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		merged := e.submitOpen(ctx, p, scale(4, "merged"))
		// Merged on GitHub; its closed event (and its push) never reach the pipeline.
		mergeSHA := e.gh.Merge(t, repoName, int(merged.PRNumber), githubtest.MergeCommit)
		next, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(6, "next"))
		if err != nil {
			t.Fatal(err)
		}
		e.waitStatus(next.Code, plan.StatusWaiting)

		after := e.gh.PushCommit(t, repoName, "main", map[string]string{"README.md": "manifests of the shop\n"}, githubtest.DefaultAuthor)
		if err := e.basePushed(ctx, p, after, nil); err != nil {
			t.Fatal(err)
		}
		got := e.waitFor(merged.Code, "merged", func(p store.Plan) bool { return p.Status != string(plan.StatusPROpen) })
		if got.MergeSHA != mergeSHA || (got.Status != string(plan.StatusMerged) && got.Status != string(plan.StatusDeploying)) {
			t.Fatalf("plan whose merge event was missed = %s merge %q after a base push, want merged at %s", got.Status, got.MergeSHA, mergeSHA)
		}
		e.waitStatus(next.Code, plan.StatusPROpen)
		// The event delivered late after all changes nothing.
		e.pullMerged(ctx, p, merged, mergeSHA)
	})
}
