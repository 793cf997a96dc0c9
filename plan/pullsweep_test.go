package plan_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// getPullRoute is the fake GitHub's route of the read of one pull request.
const getPullRoute = "GET /repos/{owner}/{repo}/pulls/{number}"

// sweepFound is what the history says of a plan the sweep moved.
const sweepFound = "found by the periodic check of open pull requests: its pull_request event never reached the service"

// sweep runs one sweep of p's open pull requests as at now.
func (e *env) sweep(ctx context.Context, p *plan.Pipeline, now time.Time) plan.PullSweep {
	e.t.Helper()
	res, err := p.SweepPulls(ctx, now)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// sweptEvent is the plan's history entry of the pull request's close, which must
// say that the sweep found it.
func (e *env) sweptEvent(code string) store.PlanEvent {
	e.t.Helper()
	events, err := e.db.PlanEvents(context.Background(), code)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, ev := range events {
		if ev.Step == "pull_request" && ev.FromStatus == string(plan.StatusPROpen) {
			if !strings.Contains(ev.Message, sweepFound) {
				e.t.Fatalf("history of the close says %q, want it to say %q", ev.Message, sweepFound)
			}
			return ev
		}
	}
	e.t.Fatalf("plan %s recorded no close of its pull request: %+v", code, events)
	return store.PlanEvent{}
}

// TestPullSweepClosesAPlanWhoseClosedEventWasMissed: a person closed the pull
// request and its pull_request event never reached the service. The plan stayed
// pr_open for ever, holding its file, so the next change to it waited for ever.
// One sweep reads the pull request, closes the plan as the event would have, says
// why in its history, deletes its branch and lets the waiting change go on.
func TestPullSweepClosesAPlanWhoseClosedEventWasMissed(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, "closed"))
		next, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(6, "next"))
		if err != nil {
			t.Fatal(err)
		}
		e.waitStatus(next.Code, plan.StatusWaiting)
		e.gh.ClosePullRequest(t, repoName, int(pl.PRNumber))

		if res := e.sweep(ctx, p, time.Now()); res.Found != 1 {
			t.Fatalf("sweep %+v, want one plan found", res)
		}
		got, err := db.PlanByCode(ctx, pl.Code)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != string(plan.StatusClosed) {
			t.Fatalf("plan whose closed event was missed is %s after a sweep, want closed", got.Status)
		}
		if ev := e.sweptEvent(pl.Code); ev.ToStatus != string(plan.StatusClosed) {
			t.Fatalf("close recorded as a move to %s, want closed", ev.ToStatus)
		}
		if refs := gitLines(t, e.gh.GitDir(t, repoName), "for-each-ref", "refs/heads/"+pl.Branch); len(refs) != 0 {
			t.Errorf("branch %s still there after the close: %v", pl.Branch, refs)
		}
		e.waitStatus(next.Code, plan.StatusPROpen)
	})
}

// TestPullSweepFollowsAMergeWhoseEventWasMissed: a person merged the pull request
// and neither its event nor a later push reached the service. One sweep moves the
// plan to merged at the merge commit, and the deployment is followed until it runs.
func TestPullSweepFollowsAMergeWhoseEventWasMissed(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, "merged"))
		mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), githubtest.MergeCommit)
		e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)

		if res := e.sweep(ctx, p, time.Now()); res.Found != 1 {
			t.Fatalf("sweep %+v, want one plan found", res)
		}
		if ev := e.sweptEvent(pl.Code); ev.ToStatus != string(plan.StatusMerged) {
			t.Fatalf("merge recorded as a move to %s, want merged", ev.ToStatus)
		}
		got := e.waitStatus(pl.Code, plan.StatusDeployed)
		if got.MergeSHA != mergeSHA {
			t.Fatalf("deployed plan merged at %q, want %s", got.MergeSHA, mergeSHA)
		}
	})
}

// TestPullSweepReadsAnUnchangedPullRequestConditionally: the read of a pull request
// nothing changed on sends the ETag of the last answer, and GitHub answers 304 Not
// Modified, which its rate limit does not count. The plan stays as it was, and
// the observer is told of each sweep.
func TestPullSweepReadsAnUnchangedPullRequestConditionally(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e, rec, p := observedPipeline(t, db)
		ctx := context.Background()
		pl := e.submitOpen(ctx, p, scale(4, "unchanged"))
		now := time.Now()
		if res := e.sweep(ctx, p, now); res != (plan.PullSweep{Open: 1}) {
			t.Fatalf("first sweep %+v, want one pull request read open", res)
		}
		requests, reads, notModified := e.gh.TotalRequests(), e.gh.RequestCount(getPullRoute), e.gh.NotModifiedCount()
		if res := e.sweep(ctx, p, now.Add(plan.DefaultPullSweepInterval)); res != (plan.PullSweep{Open: 1}) {
			t.Fatalf("second sweep %+v, want one pull request read open", res)
		}
		if n := e.gh.TotalRequests() - requests; n != 1 {
			t.Errorf("the second sweep made %d requests, want the one read", n)
		}
		if n := e.gh.RequestCount(getPullRoute) - reads; n != 1 {
			t.Errorf("the second sweep read the pull request %d times, want once", n)
		}
		if n := e.gh.NotModifiedCount() - notModified; n != 1 {
			t.Errorf("GitHub answered %d reads of the second sweep 304 Not Modified, want 1: the read was not conditional on the ETag", n)
		}
		got, err := db.PlanByCode(ctx, pl.Code)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != pl.Status || got.Version != pl.Version {
			t.Fatalf("plan of an unchanged pull request is %s at version %d after the sweeps, want %s at %d", got.Status, got.Version, pl.Status, pl.Version)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if want := []plan.PullSweep{{Open: 1}, {Open: 1}}; !slices.Equal(rec.sweeps, want) {
			t.Errorf("observer told of sweeps %+v, want %+v", rec.sweeps, want)
		}
	})
}

// TestPullSweepLeavesAFailedReadForTheNextSweep: a read GitHub fails (a 5xx) or
// rate limits changes nothing and fails nothing; the next sweep reads the pull
// request again and moves the plan.
func TestPullSweepLeavesAFailedReadForTheNextSweep(t *testing.T) {
	t.Parallel()
	faults := map[string]struct {
		fault func() githubtest.Fault
		want  plan.PullSweep
	}{
		"502":                  {func() githubtest.Fault { return githubtest.ServerError(http.StatusBadGateway) }, plan.PullSweep{Failed: 1}},
		"secondary rate limit": {func() githubtest.Fault { return githubtest.SecondaryRateLimit(0) }, plan.PullSweep{RateLimited: 1}},
		"primary rate limit":   {func() githubtest.Fault { return githubtest.PrimaryRateLimit(time.Now()) }, plan.PullSweep{RateLimited: 1}},
	}
	for name, tc := range faults {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
				e := newFaultEnv(t, db)
				ctx := context.Background()
				p := e.startedPipeline(ctx, plan.Hooks{})
				pl := e.submitOpen(ctx, p, scale(4, "fault"))
				mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), githubtest.MergeCommit)

				remove := e.gh.InjectFault(tc.fault().On(http.MethodGet, "/repos/*/*/pulls/*"))
				now := time.Now()
				if res := e.sweep(ctx, p, now); res != tc.want {
					t.Fatalf("sweep while GitHub fails %+v, want %+v", res, tc.want)
				}
				got, err := db.PlanByCode(ctx, pl.Code)
				if err != nil {
					t.Fatal(err)
				}
				if got.Status != pl.Status || got.Version != pl.Version {
					t.Fatalf("plan is %s at version %d after a failed read, want %s at %d", got.Status, got.Version, pl.Status, pl.Version)
				}
				remove()

				if res := e.sweep(ctx, p, now.Add(plan.DefaultPullSweepInterval)); res.Found != 1 {
					t.Fatalf("next sweep %+v, want the plan found", res)
				}
				if got = e.waitFor(pl.Code, "merged", func(cur store.Plan) bool { return cur.MergeSHA != "" }); got.MergeSHA != mergeSHA {
					t.Fatalf("plan merged at %q, want %s", got.MergeSHA, mergeSHA)
				}
			})
		})
	}
}

// TestPullSweepReadsEachPullRequestOnceAcrossReplicas: replicas sweeping on one
// database read each open pull request once an interval between them, and a
// replica started within the interval (a restart) reads none again.
func TestPullSweepReadsEachPullRequestOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		e.submitOpen(ctx, p, scale(4, "replicas"))
		replicas := []*plan.Pipeline{e.worker("replica-a", plan.Hooks{}), e.worker("replica-b", plan.Hooks{}), p}
		sweepAll := func(now time.Time) plan.PullSweep {
			t.Helper()
			var mu sync.Mutex
			var total plan.PullSweep
			var wg sync.WaitGroup
			for _, r := range replicas {
				wg.Go(func() {
					res, err := r.SweepPulls(ctx, now)
					if err != nil {
						t.Error(err)
					}
					mu.Lock()
					defer mu.Unlock()
					total.Open += res.Open
					total.Found += res.Found
					total.Failed += res.Failed
					total.RateLimited += res.RateLimited
				})
			}
			wg.Wait()
			return total
		}
		reads := e.gh.RequestCount(getPullRoute)
		now := time.Now()
		for i, at := range []time.Time{now, now.Add(plan.DefaultPullSweepInterval)} {
			if res := sweepAll(at); res != (plan.PullSweep{Open: 1}) {
				t.Fatalf("sweep %d of the replicas %+v, want one pull request read open", i+1, res)
			}
			if n := e.gh.RequestCount(getPullRoute) - reads; n != i+1 {
				t.Fatalf("after sweep %d the replicas read the pull request %d times, want %d", i+1, n, i+1)
			}
		}
		restarted := e.worker("replica-c", plan.Hooks{})
		if res, err := restarted.SweepPulls(ctx, now.Add(plan.DefaultPullSweepInterval+time.Minute)); err != nil || res != (plan.PullSweep{}) {
			t.Fatalf("sweep of a replica started within the interval %+v (%v), want nothing read", res, err)
		}
		if n := e.gh.RequestCount(getPullRoute) - reads; n != 2 {
			t.Fatalf("the replica started within the interval read the pull request: %d reads, want 2", n)
		}
	})
}

// TestPullSweepLeavesAPlanWhoseEventArrived: a plan its pull_request event moved
// is not read nor touched by the sweep.
func TestPullSweepLeavesAPlanWhoseEventArrived(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, "arrived"))
		mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), githubtest.MergeCommit)
		e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
		e.pullMerged(ctx, p, pl, mergeSHA)
		done := e.waitStatus(pl.Code, plan.StatusDeployed)
		before, err := db.PlanEvents(ctx, pl.Code)
		if err != nil {
			t.Fatal(err)
		}
		reads := e.gh.RequestCount(getPullRoute)

		if res := e.sweep(ctx, p, time.Now()); res != (plan.PullSweep{}) {
			t.Fatalf("sweep %+v, want nothing read", res)
		}
		if n := e.gh.RequestCount(getPullRoute) - reads; n != 0 {
			t.Errorf("the sweep read the pull request of a plan its event moved %d times", n)
		}
		after, err := db.PlanEvents(ctx, pl.Code)
		if err != nil {
			t.Fatal(err)
		}
		got, err := db.PlanByCode(ctx, pl.Code)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before) || got.Version != done.Version {
			t.Fatalf("the sweep touched a plan its event moved: %d history entries (was %d), version %d (was %d)", len(after), len(before), got.Version, done.Version)
		}
	})
}
