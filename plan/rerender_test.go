package plan_test

import (
	"context"
	"testing"

	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// TestRerenderPublishesACleanCheckRun: re-rendering an unchanged head updates its one
// kukie/render run without sending its annotations again (GitHub appends those of
// every update), so the changed lines stay marked once.
func TestRerenderPublishesACleanCheckRun(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.pipeline(plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, "rerender"))
		first := e.gh.CheckRuns(t, repoName, pl.HeadSHA)
		if len(first) != 1 {
			t.Fatalf("%d check runs on the head, want 1", len(first))
		}
		want := first[0].GetOutput().GetAnnotationsCount()
		if want == 0 {
			t.Fatal("the first run has no annotations; the test needs some")
		}

		for range 2 {
			if err := p.Reverify(ctx, pl.Code); err != nil {
				t.Fatal(err)
			}
			pl = e.waitStatus(pl.Code, plan.StatusPROpen) // the plan's run publishes the verdict
		}
		runs := e.gh.CheckRuns(t, repoName, pl.HeadSHA)
		if len(runs) != 1 || runs[0].GetID() != first[0].GetID() || pl.CheckRunID != first[0].GetID() {
			t.Fatalf("%d runs on the head after re-rendering, want the one run %d kept (plan records %d)", len(runs), first[0].GetID(), pl.CheckRunID)
		}
		if got := runs[0].GetOutput().GetAnnotationsCount(); got != want {
			t.Errorf("the run carries %d annotations after two re-renders, want %d", got, want)
		}
		if runs[0].GetConclusion() != "success" {
			t.Errorf("re-rendered run concluded %q", runs[0].GetConclusion())
		}
	})
}
