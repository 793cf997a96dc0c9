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
			if err := p.PullClosed(ctx, repoName, pl.Branch, pl.BaseBranch, pl.PRNumber, false, "", e.pullHead(pl.PRNumber)); err != nil {
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
				if err := p.PullClosed(ctx, repoName, head, "main", int64(n), true, sha, e.pullHead(int64(n))); err != nil {
					t.Fatal(err)
				}
				if !hasBranch(head) {
					t.Errorf("branch %s was deleted", head)
				}
			}
		})
	})
}

// keptMessage is the history's word for a plan's branch left in place since its
// head is a commit the plan did not make.
func keptMessage(branch, head string) string {
	return "branch " + branch + " kept: it holds commits kukie did not make (head " + head[:7] + ")"
}

// branchKept counts the plan's history entries saying its branch was kept at head.
func branchKept(t *testing.T, db *store.DB, code, branch, head string) int {
	t.Helper()
	return countEvents(t, db, code, func(ev store.PlanEvent) bool {
		return ev.Step == "branch" && ev.Message == keptMessage(branch, head)
	})
}

// TestPlanBranchKeptWhenItHoldsCommitsKukieDidNotMake: a person may push commits to
// a plan's branch (a fix on top of the edit, a note for the reviewer). Closing or
// cancelling the plan then deleted the branch all the same, and their commits
// survived only in GitHub's refs/pull/N/head (failed before: the branch was
// deleted). A branch is deleted only when its head is the commit the plan made or,
// after a merge, the head the pull request was merged with; otherwise it is kept
// and the history says why, once however often the closed event is delivered.
func TestPlanBranchKeptWhenItHoldsCommitsKukieDidNotMake(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		note := map[string]string{"docs/why.md": "scaled for the spring sale\n"}
		wantKept := func(t *testing.T, pl store.Plan, head string) {
			t.Helper()
			if got := e.gh.Head(t, repoName, pl.Branch); got != head {
				t.Errorf("branch %s is at %q, want it kept at the pushed %s", pl.Branch, got, head)
			}
			if n := branchKept(t, db, pl.Code, pl.Branch, head); n != 1 {
				t.Errorf("%d history entries %q, want 1", n, keptMessage(pl.Branch, head))
			}
			if n := branchDeletions(t, db, pl.Code); n != 0 {
				t.Errorf("%d branch deletion events, want none", n)
			}
		}

		t.Run("cancelled", func(t *testing.T) {
			pl := e.submitOpen(ctx, p, scale(5, "cancel-pushed"))
			head := e.gh.PushCommit(t, repoName, pl.Branch, note, githubtest.DefaultAuthor)
			if _, err := p.Cancel(ctx, e.team.ID, pl.Code, ""); err != nil {
				t.Fatal(err)
			}
			// The closed event, and its delivery again.
			for range 2 {
				if err := p.PullClosed(ctx, repoName, pl.Branch, pl.BaseBranch, pl.PRNumber, false, "", e.pullHead(pl.PRNumber)); err != nil {
					t.Fatal(err)
				}
			}
			wantKept(t, pl, head)
		})

		t.Run("closed by a person", func(t *testing.T) {
			pl := e.submitOpen(ctx, p, scale(6, "close-pushed"))
			head := e.gh.PushCommit(t, repoName, pl.Branch, note, githubtest.DefaultAuthor)
			e.gh.ClosePullRequest(t, repoName, int(pl.PRNumber))
			for range 2 {
				if err := p.PullClosed(ctx, repoName, pl.Branch, pl.BaseBranch, pl.PRNumber, false, "", e.pullHead(pl.PRNumber)); err != nil {
					t.Fatal(err)
				}
			}
			wantKept(t, pl, head)
		})

		t.Run("pushed to after the merge", func(t *testing.T) {
			pl := e.submitOpen(ctx, p, scale(7, "merged-then-pushed"))
			mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), githubtest.MergeCommit)
			head := e.gh.PushCommit(t, repoName, pl.Branch, note, githubtest.DefaultAuthor)
			e.pullMerged(ctx, p, pl, mergeSHA)
			e.pullMerged(ctx, p, pl, mergeSHA)
			wantKept(t, pl, head)
			e.waitFor(pl.Code, "deploying", func(p store.Plan) bool { return p.Status == string(plan.StatusDeploying) })
		})

		t.Run("merged with a person's commit", func(t *testing.T) {
			// What the pull request was merged with is in the base: nothing is lost.
			pl := e.submitOpen(ctx, p, scale(8, "pushed-then-merged"))
			e.gh.PushCommit(t, repoName, pl.Branch, note, githubtest.DefaultAuthor)
			mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), githubtest.MergeCommit)
			e.pullMerged(ctx, p, pl, mergeSHA)
			if got := e.gh.Head(t, repoName, pl.Branch); got != "" {
				t.Errorf("branch %s still at %s after its pull request was merged with it", pl.Branch, got)
			}
			if n := branchDeletions(t, db, pl.Code); n != 1 {
				t.Errorf("%d branch deletion events, want 1", n)
			}
			e.waitFor(pl.Code, "deploying", func(p store.Plan) bool { return p.Status == string(plan.StatusDeploying) })
		})
	})
}
