package plan_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/kukie/kukie-gitops/internal/githubtest"
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

// TestCancelWhileThePullRequestIsOpenedClosesIt: a cancel recorded while the plan's
// run is opening its pull request finds no pull request to close. The run, finding
// the plan cancelled when it records the pull request, closes it and deletes its
// branch (failed before: the pull request stayed open, mergeable, for a plan closed
// and followed by nothing, and a person merging it deployed a change nobody tracked).
func TestCancelWhileThePullRequestIsOpenedClosesIt(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		var p *plan.Pipeline
		var once sync.Once
		var cancelErr error
		p = e.startedPipeline(ctx, plan.Hooks{BeforeStep: func(code, step string) error {
			if step == "record_pull_request" {
				once.Do(func() {
					_, cancelErr = p.Cancel(plan.WithActor(ctx, "team:shop"), e.team.ID, code, "scaled by hand instead")
				})
			}
			return nil
		}})
		pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(4, "cancel-midway"))
		if err != nil {
			t.Fatal(err)
		}
		e.waitFor(pl.Code, "the pull request closed", func(cur store.Plan) bool {
			for _, pr := range e.gh.PullRequests(t, repoName) {
				if pr.GetState() == "open" {
					return false
				}
			}
			return len(e.gh.PullRequests(t, repoName)) == 1
		})
		if cancelErr != nil {
			t.Fatal(cancelErr)
		}
		got, err := db.PlanByCode(ctx, pl.Code)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != string(plan.StatusClosed) {
			t.Errorf("plan is %s, want closed", got.Status)
		}
		e.waitFor(pl.Code, "without its branch", func(cur store.Plan) bool { return e.gh.Head(t, repoName, cur.Branch) == "" })
	})
}

// TestCancelWhileThePullRequestIsOpenedKeepsAPersonsCommits: the pull request a
// run opens for a plan cancelled meanwhile is closed, but its branch, which a
// person pushed a commit to in the same moment, is kept and the history says so
// (failed before: the branch was deleted with the person's commit).
func TestCancelWhileThePullRequestIsOpenedKeepsAPersonsCommits(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		var p *plan.Pipeline
		var once sync.Once
		var cancelErr error
		var pushed string
		p = e.startedPipeline(ctx, plan.Hooks{BeforeStep: func(code, step string) error {
			if step == "record_pull_request" {
				once.Do(func() {
					pushed = e.gh.PushCommit(t, repoName, "kukie/"+code, map[string]string{"docs/why.md": "scaled for the spring sale\n"}, githubtest.DefaultAuthor)
					_, cancelErr = p.Cancel(plan.WithActor(ctx, "team:shop"), e.team.ID, code, "scaled by hand instead")
				})
			}
			return nil
		}})
		pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(4, "cancel-midway-pushed"))
		if err != nil {
			t.Fatal(err)
		}
		e.waitFor(pl.Code, "the pull request closed", func(cur store.Plan) bool {
			return countEvents(t, db, cur.Code, func(ev store.PlanEvent) bool {
				return ev.Step == "pull_request" && strings.Contains(ev.Message, "closed")
			}) == 1
		})
		if cancelErr != nil {
			t.Fatal(cancelErr)
		}
		prs := e.gh.PullRequests(t, repoName)
		if len(prs) != 1 || prs[0].GetState() != "closed" {
			t.Fatalf("%d pull requests, the first %v; want one, closed", len(prs), prs)
		}
		branch := "kukie/" + pl.Code
		if got := e.gh.Head(t, repoName, branch); got != pushed {
			t.Errorf("branch %s is at %q, want it kept at the pushed %s", branch, got, pushed)
		}
		want := fmt.Sprintf("pull request #%d, opened as the plan was cancelled, closed; %s", prs[0].GetNumber(), keptMessage(branch, pushed))
		if n := countEvents(t, db, pl.Code, func(ev store.PlanEvent) bool { return ev.Message == want }); n != 1 {
			t.Errorf("%d history entries %q, want 1", n, want)
		}
	})
}
