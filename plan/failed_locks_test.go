package plan_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// gatedCommits fails the first commit after holding it until the test lets it go,
// the way a GitHub outage fails a plan that already holds its file.
type gatedCommits struct {
	github.Repos
	reached chan struct{} // closed when the first commit is attempted
	release chan struct{} // closed by the test to let that commit fail
	once    sync.Once
}

func (g *gatedCommits) CreateCommit(ctx context.Context, inst int64, repo, baseSHA, message string, files []github.FileChange) (github.CommitInfo, error) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.reached)
		<-g.release
		return github.CommitInfo{}, errors.New("POST git/commits: 502 Bad Gateway")
	}
	return g.Repos.CreateCommit(ctx, inst, repo, baseSHA, message, files)
}

// TestFailedPlanReleasesItsFilesToWaitingPlans: a plan that fails after taking its
// file lets it go in the same move, and the plan waiting on that file is prepared
// again and opens its pull request. A retry of the failed plan then waits for the
// new holder instead of taking the file from under it, and goes on once that one is
// merged.
func TestFailedPlanReleasesItsFilesToWaitingPlans(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		repos := &gatedCommits{Repos: e.repos, reached: make(chan struct{}), release: make(chan struct{})}
		p := plan.New(plan.Deps{Store: e.db, Clusters: e.cluster, Renderer: e.render, Repos: repos, Connections: e.conns},
			plan.Config{ClaimTTL: 5 * time.Second, BotLogin: e.gh.BotLogin()})
		t.Cleanup(p.Close)
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}

		first, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(4, "first"))
		if err != nil {
			t.Fatal(err)
		}
		<-repos.reached
		if locks, _ := db.FileLocks(ctx, first.Code); len(locks) != 1 {
			t.Fatalf("the committing plan holds %d locks, want its file", len(locks))
		}
		second, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(6, "second"))
		if err != nil {
			t.Fatal(err)
		}
		second = e.waitFor(second.Code, "waiting", func(p store.Plan) bool { return p.Status == string(plan.StatusWaiting) })
		if second.WaitingOn != first.Code {
			t.Fatalf("second plan waits on %q, want %q", second.WaitingOn, first.Code)
		}

		close(repos.release)
		first = e.waitStatus(first.Code, plan.StatusFailed)
		if first.FailedStep != string(plan.StatusCommitting) || !strings.Contains(first.StatusReason, "502") {
			t.Fatalf("first plan failed at %q: %s", first.FailedStep, first.StatusReason)
		}
		if locks, _ := db.FileLocks(ctx, first.Code); len(locks) != 0 {
			t.Fatalf("failed plan still holds %+v", locks)
		}
		second = e.waitStatus(second.Code, plan.StatusPROpen)
		if got, _ := e.gh.FileAt(t, repoName, second.Branch, webFile); !strings.Contains(got, "replicas: 6") {
			t.Fatalf("second branch file:\n%s", got)
		}

		// The retry needs the file for its commit; the second plan has it now.
		retried, err := p.Retry(plan.WithActor(ctx, "team:shop"), e.team.ID, first.Code)
		if err != nil {
			t.Fatal(err)
		}
		if retried.Status != string(plan.StatusWaiting) || retried.WaitingOn != second.Code {
			t.Fatalf("retried plan is %s waiting on %q, want waiting on %s", retried.Status, retried.WaitingOn, second.Code)
		}
		if locks, _ := db.FileLocks(ctx, second.Code); len(locks) != 1 {
			t.Fatalf("the retry took the file from the open plan: it holds %d locks", len(locks))
		}
		e.mergeWakes(ctx, p, second, first.Code, 4)
	})
}
