package prcheck_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// openPull pushes a first head and opens a pull request of it.
func (r *replicas) openPull(t *testing.T) (head string, number int) {
	t.Helper()
	head = r.gh.PushCommit(t, repo, "feature", image("1.1"), githubtest.DefaultAuthor)
	return head, r.gh.OpenPullRequest(t, repo, "feature", "main", "Bump", githubtest.DefaultAuthor)
}

// assertOnlyNewerChecked: the newer head carries one successful run, the old head
// none, and the store holds the newer head's check alone, completed.
func (r *replicas) assertOnlyNewerChecked(t *testing.T, number int, old, newer string) {
	t.Helper()
	if runs := r.runs(t, newer); len(runs) != 1 || runs[0].GetConclusion() != github.ConclusionSuccess {
		t.Fatalf("newer head's runs %v, want one success", runs)
	}
	if runs := r.gh.CheckRuns(t, repo, old); len(runs) != 0 {
		t.Fatalf("old head's runs %v, want none", runs)
	}
	history, err := r.db.PullChecksOf(context.Background(), repo, "pull/"+strconv.Itoa(number))
	if err != nil {
		t.Fatal(err)
	}
	if len(history) != 1 || history[0].HeadSHA != newer || history[0].State != store.PullCheckCompleted {
		t.Fatalf("history %+v, want the newer head's check alone, completed", history)
	}
}

// TestLateOlderPushAfterTheNewerCheckTakesNothing: the older head's synchronize is
// delivered again (an inbox retry, a redelivery) after the newer head was checked.
// It must not take the key: the newer head's run stays a success and the old head
// gets no run.
func TestLateOlderPushAfterTheNewerCheckTakesNothing(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		old, number := r.openPull(t)
		newer := r.gh.PushCommit(t, repo, "feature", image("1.2"), githubtest.DefaultAuthor)
		if err := r.b.Check(ctx, r.head(t, number, newer)); err != nil {
			t.Fatalf("newer head: %v", err)
		}
		if err := r.a.Check(ctx, r.head(t, number, old)); err != nil {
			t.Fatalf("late older head: %v, want nil", err)
		}
		r.assertOnlyNewerChecked(t, number, old, newer)
	})
}

// TestLateOlderPushWhileTheNewerCheckRunsTakesNothing: the older head's delivery
// arrives on another replica while the newer head's check renders. The newer check
// must go on to publish its result.
func TestLateOlderPushWhileTheNewerCheckRunsTakesNothing(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		old, number := r.openPull(t)
		newer := r.gh.PushCommit(t, repo, "feature", image("1.2"), githubtest.DefaultAuthor)
		r.held.head = newer
		r.held.release = make(chan struct{})
		aDone := make(chan error, 1)
		go func() { aDone <- r.a.Check(ctx, r.head(t, number, newer)) }()
		<-r.held.entered
		if err := r.b.Check(ctx, r.head(t, number, old)); err != nil {
			t.Fatalf("late older head: %v, want nil", err)
		}
		close(r.held.release)
		select {
		case err := <-aDone:
			if err != nil {
				t.Fatalf("newer head: %v", err)
			}
		case <-time.After(time.Minute): // a bound on a hang, not a measurement
			t.Fatal("the newer head's check never ended")
		}
		r.assertOnlyNewerChecked(t, number, old, newer)
	})
}

// TestClosedPullRequestHeadIsNotChecked: a delivery of a head whose pull request
// closed since checks nothing.
func TestClosedPullRequestHeadIsNotChecked(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		head, number := r.openPull(t)
		r.gh.ClosePullRequest(t, repo, number)
		if err := r.b.Check(ctx, r.head(t, number, head)); err != nil {
			t.Fatalf("closed pull request's head: %v, want nil", err)
		}
		if runs := r.gh.CheckRuns(t, repo, head); len(runs) != 0 {
			t.Fatalf("runs %v, want none", runs)
		}
	})
}

// TestPullRequestReadFailingForNowIsRetried: GitHub failing to answer whether the
// head is still the pull request's returns the error, for the delivery to be
// retried, and checks nothing; the retry checks the head.
func TestPullRequestReadFailingForNowIsRetried(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		head, number := r.openPull(t)
		remove := r.gh.InjectFault(githubtest.ServerError(http.StatusBadGateway).On(http.MethodGet, "/repos/*/*/pulls/*"))
		if err := r.b.Check(ctx, r.head(t, number, head)); err == nil || !github.Transient(err) {
			t.Fatalf("check while GitHub fails: %v, want a transient error", err)
		}
		if runs := r.gh.CheckRuns(t, repo, head); len(runs) != 0 {
			t.Fatalf("runs %v, want none", runs)
		}
		remove()
		if err := r.b.Check(ctx, r.head(t, number, head)); err != nil {
			t.Fatalf("retried check: %v", err)
		}
		if runs := r.runs(t, head); len(runs) != 1 || runs[0].GetConclusion() != github.ConclusionSuccess {
			t.Fatalf("runs %v, want one success", runs)
		}
	})
}
