package plan_test

import (
	"context"
	"testing"

	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestRerenderPublishesACleanCheckRun: re-rendering an unchanged head publishes a
// new kukie/render run carrying the annotations once, instead of updating the old
// run, to which GitHub would append the same annotations again.
func TestRerenderPublishesACleanCheckRun(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.pipeline(plan.Hooks{})
		pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(4, "rerender"))
		if err != nil {
			t.Fatal(err)
		}
		pl = e.waitStatus(pl.Code, plan.StatusPROpen)
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
		}
		pl, err = db.PlanByCode(ctx, pl.Code)
		if err != nil {
			t.Fatal(err)
		}
		runs := e.gh.CheckRuns(t, repoName, pl.HeadSHA)
		var current int
		for _, r := range runs {
			if got := r.GetOutput().GetAnnotationsCount(); got != want {
				t.Errorf("check run %d carries %d annotations, want %d", r.GetID(), got, want)
			}
			if r.GetID() == pl.CheckRunID {
				current++
				if r.GetConclusion() != "success" {
					t.Errorf("current run concluded %q", r.GetConclusion())
				}
			}
			if r.GetID() > pl.CheckRunID {
				t.Errorf("run %d is newer than the plan's run %d", r.GetID(), pl.CheckRunID)
			}
		}
		if current != 1 || len(runs) != 3 {
			t.Fatalf("%d runs on the head (plan's run %d found %d times), want 3 with the plan on the newest", len(runs), pl.CheckRunID, current)
		}
	})
}
