package plan_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// countEvents counts the plan's history entries that match.
func countEvents(t *testing.T, db *store.DB, code string, match func(store.PlanEvent) bool) int {
	t.Helper()
	events, err := db.PlanEvents(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range events {
		if match(ev) {
			n++
		}
	}
	return n
}

// branchDeletions counts the plan's "branch deleted" events.
func branchDeletions(t *testing.T, db *store.DB, code string) int {
	t.Helper()
	return countEvents(t, db, code, func(ev store.PlanEvent) bool {
		return ev.Step == "branch" && strings.Contains(ev.Message, "deleted")
	})
}

func TestPlanBranchDeletedWhenPullRequestEnds(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		hasBranch := func(branch string) bool { return e.gh.Head(t, repoName, branch) != "" }

		t.Run("merged", func(t *testing.T) {
			pl := e.submitOpen(ctx, p, scale(4, "merge"))
			if !hasBranch(pl.Branch) {
				t.Fatalf("branch %s missing while the PR is open", pl.Branch)
			}
			mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), githubtest.Squash)
			e.pullMerged(ctx, p, pl, mergeSHA)
			if hasBranch(pl.Branch) {
				t.Errorf("branch %s still exists after the merge", pl.Branch)
			}
			// The same webhook again (a retry): nothing more to do, nothing recorded twice.
			e.pullMerged(ctx, p, pl, mergeSHA)
			if n := branchDeletions(t, db, pl.Code); n != 1 {
				t.Errorf("%d branch deletion events, want 1", n)
			}
			e.waitFor(pl.Code, "deploying", func(p store.Plan) bool { return p.Status == string(plan.StatusDeploying) })
		})

		t.Run("cancelled", func(t *testing.T) {
			pl := e.submitOpen(ctx, p, scale(5, "cancel"))
			if _, err := p.Cancel(ctx, e.team.ID, pl.Code, ""); err != nil {
				t.Fatal(err)
			}
			// The closed webhook arrives after the cancel moved the plan.
			if err := p.PullClosed(ctx, repoName, pl.Branch, pl.BaseBranch, pl.PRNumber, false, ""); err != nil {
				t.Fatal(err)
			}
			if hasBranch(pl.Branch) {
				t.Errorf("branch %s still exists after the cancel", pl.Branch)
			}
			if n := branchDeletions(t, db, pl.Code); n != 1 {
				t.Errorf("%d branch deletion events, want 1", n)
			}
		})

		t.Run("other heads are never deleted", func(t *testing.T) {
			// A person's branch, and a branch that only looks like ours.
			e.gh.PushCommit(t, repoName, "feature/readme", map[string]string{"docs/feature.md": "feature\n"}, githubtest.DefaultAuthor)
			e.gh.PushCommit(t, repoName, "kukie-notes", map[string]string{"docs/notes.md": "notes\n"}, githubtest.DefaultAuthor)
			for _, head := range []string{"feature/readme", "kukie-notes"} {
				n := e.gh.OpenPullRequest(t, repoName, head, "main", "by hand", githubtest.DefaultAuthor)
				sha := e.gh.Merge(t, repoName, n, githubtest.MergeCommit)
				if err := p.PullClosed(ctx, repoName, head, "main", int64(n), true, sha); err != nil {
					t.Fatal(err)
				}
				if !hasBranch(head) {
					t.Errorf("branch %s was deleted", head)
				}
			}
		})
	})
}
