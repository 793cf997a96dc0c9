package plan_test

import (
	"context"
	"strings"
	"testing"

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
