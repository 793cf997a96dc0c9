package plan_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// TestPlanHistoryHasOneEventPerStep: a normal plan records one event per real step
// from the request to its pull request, and the push GitHub sends for the merge of
// that pull request (before the pull_request "closed" event) re-verifies nothing: the
// new base already holds the plan's own change, which is not "nothing to change".
func TestPlanHistoryHasOneEventPerStep(t *testing.T) {
	t.Parallel()
	const wantToPR = "request decide prepare commit branch pull_request check_run"
	tests := map[string]githubtest.MergeMethod{
		"merge commit": githubtest.MergeCommit,
		"squash":       githubtest.Squash,
	}
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		for name, method := range tests {
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, db)
				ctx := context.Background()
				p := e.pipeline(plan.Hooks{})
				pl := e.submitOpen(ctx, p, scale(4, "history-"+name))
				if got := steps(t, db, pl.Code); got != wantToPR {
					t.Fatalf("steps up to the pull request:\n  %s\nwant\n  %s", got, wantToPR)
				}

				mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), method)
				// GitHub's order: the push to the base first, then the closed event.
				if err := e.basePushed(ctx, p, mergeSHA, []string{webFile}); err != nil {
					t.Fatal(err)
				}
				if got := steps(t, db, pl.Code); got != wantToPR {
					t.Errorf("the merge's push recorded steps:\n  %s\nwant still\n  %s", got, wantToPR)
				}
				events, err := db.PlanEvents(ctx, pl.Code)
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range events {
					if strings.Contains(ev.Message, "nothing to change") {
						t.Errorf("event %s: %q", ev.Step, ev.Message)
					}
				}
				if runs := e.gh.CheckRuns(t, repoName, pl.HeadSHA); len(runs) != 1 || runs[0].GetConclusion() != "success" {
					t.Errorf("check runs of the merged head: %d, first %v; want the one success", len(runs), runs)
				}
				e.pullMerged(ctx, p, pl, mergeSHA)
				e.waitFor(pl.Code, "merged", func(cur store.Plan) bool { return cur.MergeSHA == mergeSHA })
			})
		}
	})
}

// steps lists the steps of a plan's recorded events, oldest first.
func steps(t *testing.T, db *store.DB, code string) string {
	t.Helper()
	events, err := db.PlanEvents(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = ev.Step
	}
	return strings.Join(out, " ")
}
