package plan_test

import (
	"context"
	"testing"

	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// TestCancelKeepsItsReason: a cancel with a reason closes the pull request, keeps
// the reason in the plan's payload and says it in the history's cancel event, who
// cancelled beside it; one without a reason says only who.
func TestCancelKeepsItsReason(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		for _, reason := range []string{"the team scales it by hand this week", ""} {
			pl := e.submitOpen(ctx, p, scale(4, ""))
			cancelled, err := p.Cancel(plan.WithActor(ctx, "team:shop"), e.team.ID, pl.Code, reason)
			if err != nil {
				t.Fatal(err)
			}
			pay, err := plan.PayloadOf(cancelled)
			if err != nil {
				t.Fatal(err)
			}
			if cancelled.Status != string(plan.StatusClosed) || pay.CancelReason != reason {
				t.Errorf("cancelled plan is %s with reason %q, want closed with %q", cancelled.Status, pay.CancelReason, reason)
			}
			events, err := db.PlanEvents(ctx, pl.Code)
			if err != nil {
				t.Fatal(err)
			}
			want := "cancelled by team:shop"
			if reason != "" {
				want += ": " + reason
			}
			if last := events[len(events)-1]; last.Step != "cancel" || last.Message != want {
				t.Errorf("last event %s %q, want cancel %q", last.Step, last.Message, want)
			}
			for _, pr := range e.gh.PullRequests(t, repoName) {
				if pr.GetNumber() == int(pl.PRNumber) && pr.GetState() != "closed" {
					t.Errorf("pull request #%d is %s, want closed", pl.PRNumber, pr.GetState())
				}
			}
		}
	})
}
