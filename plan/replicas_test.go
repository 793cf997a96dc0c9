package plan_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// stepWrites names the GitHub write of each step that changes a repository, by the
// fake GitHub's route.
var stepWrites = map[string]string{
	"commit":       "POST /repos/{owner}/{repo}/git/commits",
	"branch":       "POST /repos/{owner}/{repo}/git/refs",
	"pull_request": "POST /repos/{owner}/{repo}/pulls",
	"check_run":    "POST /repos/{owner}/{repo}/check-runs",
}

// recordedSteps are the steps a plan records on its way to an open pull request
// with its check run, each exactly once.
var recordedSteps = []string{"decide", "prepare", "commit", "branch", "pull_request", "check_run"}

const replicaClaimTTL = time.Second

// holdClaimTTL is the claim lifetime of the replicas while GitHub holds a write:
// long enough that a renewal on a loaded machine (the race detector, every package
// testing at once) still arrives before its deadline, as it does with the minutes
// of production. With replicaClaimTTL a renewal slowed past its third of a second
// counted the claim as lost, as it must, and the other replica then made the
// write again: what that case checks is a write outliving the claim, not a lost one.
const holdClaimTTL = 3 * time.Second

func sortedSteps() []string {
	var out []string
	for s := range stepWrites {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// worker builds a pipeline named id, as one replica of the service.
func (e *env) worker(id string, hooks plan.Hooks) *plan.Pipeline {
	return e.workerClaiming(id, hooks, replicaClaimTTL)
}

// workerClaiming is worker with claims lasting ttl.
func (e *env) workerClaiming(id string, hooks plan.Hooks, ttl time.Duration) *plan.Pipeline {
	p := plan.New(plan.Deps{Store: e.db, Clusters: e.cluster, Renderer: e.render, Repos: e.repos, Connections: e.conns, Hooks: hooks}, plan.Config{
		WorkerID: id, ClaimTTL: ttl, DeployPoll: 20 * time.Millisecond, DeployTimeout: 10 * time.Second,
		PublicURL: "https://kukie.example", BotLogin: e.gh.BotLogin(),
	})
	e.t.Cleanup(p.Close)
	return p
}

// cancelAtEnd closes the plan when the test ends: the cases share a database and the
// repository path, and an open plan would hold the next case's file lock.
func (e *env) cancelAtEnd(code *string) {
	e.t.Cleanup(func() {
		p := plan.New(plan.Deps{Store: e.db, Clusters: e.cluster, Renderer: e.render, Repos: e.repos, Connections: e.conns}, plan.Config{})
		defer p.Close()
		if _, err := p.Cancel(context.Background(), e.team.ID, *code, ""); err != nil {
			e.t.Errorf("cancel plan %s: %v", *code, err)
		}
	})
}

// holdFirst makes the first request to endpoint wait in the fake GitHub until the
// returned release is called (or the test ends), and closes reached when it arrives.
func (e *env) holdFirst(endpoint string) (reached <-chan struct{}, release func()) {
	arrived := make(chan struct{})
	proceed := make(chan struct{})
	var first, done sync.Once
	release = func() { done.Do(func() { close(proceed) }) }
	e.t.Cleanup(release)
	e.gh.OnRequest(endpoint, func() {
		held := false
		first.Do(func() { held = true })
		if held {
			close(arrived)
			<-proceed
		}
	})
	return arrived, release
}

// assertOneOfEach checks that the plan, open with its check run, has exactly one
// branch, one commit on it, one pull request and one successful check run, and
// that each step was recorded once.
func (e *env) assertOneOfEach(pl store.Plan) []store.PlanEvent {
	t := e.t
	t.Helper()
	prs := e.gh.PullRequests(t, repoName)
	if len(prs) != 1 || prs[0].GetHead().GetRef() != pl.Branch || int64(prs[0].GetNumber()) != pl.PRNumber {
		t.Errorf("%d pull requests, want exactly one for %s (#%d)", len(prs), pl.Branch, pl.PRNumber)
	}
	if branches := gitLines(t, e.gh.GitDir(t, repoName), "for-each-ref", "--format=%(refname)", "refs/heads/kukie/"); len(branches) != 1 || branches[0] != "refs/heads/"+pl.Branch {
		t.Errorf("kukie branches %v, want only %s", branches, pl.Branch)
	}
	if commits := gitLines(t, e.gh.GitDir(t, repoName), "rev-list", pl.BaseSHA+".."+pl.Branch); len(commits) != 1 || commits[0] != pl.HeadSHA {
		t.Errorf("commits on %s over the base: %v, want only %s", pl.Branch, commits, pl.HeadSHA)
	}
	runs := e.gh.CheckRuns(t, repoName, pl.HeadSHA)
	if len(runs) != 1 || runs[0].GetID() != pl.CheckRunID || runs[0].GetConclusion() != "success" {
		t.Errorf("%d check runs on the head, want exactly one successful run %d", len(runs), pl.CheckRunID)
	}
	events, err := e.db.PlanEvents(context.Background(), pl.Code)
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string][]string{}
	for _, ev := range events {
		recorded[ev.Step] = append(recorded[ev.Step], ev.Worker)
	}
	for _, step := range recordedSteps {
		if len(recorded[step]) != 1 {
			t.Errorf("step %s recorded %d times (by %v), want once", step, len(recorded[step]), recorded[step])
		}
	}
	return events
}

// TestReplicasHoldWritesLongerThanTheClaim runs two pipelines on one database while
// GitHub holds a step's write for three claim lifetimes: the worker in the write
// keeps its claim alive, so the other never takes the plan over, and each effect
// happens once.
func TestReplicasHoldWritesLongerThanTheClaim(t *testing.T) {
	t.Parallel()
	// Each case waits out three claim lifetimes: they run at once, each on
	// databases of its own.
	for _, step := range sortedSteps() {
		endpoint := stepWrites[step]
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
				e := newEnv(t, db)
				ctx := context.Background()
				var code string
				e.cancelAtEnd(&code)
				e.gh.OnRequest(endpoint, holdOnce(3*holdClaimTTL))
				a := e.workerClaiming("replica-a", plan.Hooks{}, holdClaimTTL)
				b := e.workerClaiming("replica-b", plan.Hooks{}, holdClaimTTL)
				for _, p := range []*plan.Pipeline{a, b} {
					if err := p.Start(ctx); err != nil {
						t.Fatal(err)
					}
				}
				pl, _, err := a.Submit(ctx, e.team.ID, "team:shop", scale(4, "hold-"+step))
				if err != nil {
					t.Fatal(err)
				}
				code = pl.Code
				pl = e.waitStatus(pl.Code, plan.StatusPROpen)
				a.Close()
				b.Close()

				for s, ep := range stepWrites {
					if n := e.gh.RequestCount(ep); n != 1 {
						t.Errorf("%s: %d requests to %s, want 1", s, n, ep)
					}
				}
				events := e.assertOneOfEach(pl)
				// Work may pass from one worker to the other between steps (after a
				// claim is released), never back and forth.
				var workers []string
				for _, ev := range events {
					if ev.Worker != "" && (len(workers) == 0 || workers[len(workers)-1] != ev.Worker) {
						workers = append(workers, ev.Worker)
					}
				}
				if len(workers) > 2 {
					t.Errorf("steps recorded by workers in turn %v", workers)
				}
			})
		})
	}
}

// holdOnce makes the first call wait for d: a GitHub write slower than the claim.
func holdOnce(d time.Duration) func() {
	var once sync.Once
	return func() { once.Do(func() { time.Sleep(d) }) }
}

// TestPipelineStopsOnALostClaim takes a worker's claim away while it is in a step's
// GitHub write, as happens when the worker stalls past the claim's lifetime and
// another replica takes the plan over. Whether the write then returns or hangs, the
// worker records nothing more and stops (a hanging write is abandoned once the
// claim cannot be renewed), and the next holder adopts what the write left on
// GitHub, so the plan still ends with exactly one of each effect.
func TestPipelineStopsOnALostClaim(t *testing.T) {
	t.Parallel()
	// A hanging write's case waits for its claim to run out: they run at once,
	// each on databases of its own.
	for _, step := range sortedSteps() {
		for _, hangs := range []bool{false, true} {
			name := step + "/write_returns"
			if hangs {
				name = step + "/write_hangs"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
					e := newEnv(t, db)
					ctx := context.Background()
					var code string
					e.cancelAtEnd(&code)

					// A first process dies before preparing, leaving the plan to the
					// worker under test.
					crashed := make(chan struct{})
					var once sync.Once
					dead := e.worker("dead", plan.Hooks{BeforeStep: func(_, s string) error {
						if s == "prepare" {
							once.Do(func() { close(crashed) })
							return errCrash
						}
						return nil
					}})
					pl, _, err := dead.Submit(ctx, e.team.ID, "team:shop", scale(4, "lost-"+name))
					if err != nil {
						t.Fatal(err)
					}
					code = pl.Code
					<-crashed
					dead.Close()
					storetest.ExpirePlanClaim(t, db, code)

					reached, release := e.holdFirst(stepWrites[step])
					a := e.worker("stalled", plan.Hooks{})
					ran := make(chan error, 1)
					go func() { ran <- a.Run(ctx, code) }()
					select {
					case <-reached:
					case err := <-ran:
						t.Fatalf("the worker stopped before the %s write: %v", step, err)
					}
					storetest.ExpirePlanClaim(t, db, code)
					intruder, ok, err := db.ClaimPlan(ctx, code, "intruder", time.Hour)
					if err != nil || !ok {
						t.Fatalf("take the plan over: %v %v", ok, err)
					}
					taken, err := db.PlanByCode(ctx, code)
					if err != nil {
						t.Fatal(err)
					}
					if !hangs {
						release()
					}
					// A hanging write stays held until the test ends: whatever GitHub
					// makes of an abandoned call, it is not part of this plan's record.
					select {
					case err = <-ran:
					case <-time.After(eventually):
						t.Fatalf("the worker kept working on the plan after losing its claim")
					}
					if !errors.Is(err, store.ErrClaimLost) {
						t.Fatalf("run ended with %v, want a lost claim", err)
					}
					if now, err := db.PlanByCode(ctx, code); err != nil || now.Version != taken.Version {
						t.Fatalf("the worker recorded after losing its claim: version %d, was %d (%v)", now.Version, taken.Version, err)
					}

					if err := db.ReleasePlanClaim(ctx, intruder); err != nil {
						t.Fatal(err)
					}
					next := e.worker("next", plan.Hooks{})
					if err := next.Run(ctx, code); err != nil {
						t.Fatal(err)
					}
					pl = e.waitStatus(code, plan.StatusPROpen)
					for _, ev := range e.assertOneOfEach(pl) {
						if ev.Seq > taken.Version && ev.Worker != "next" {
							t.Errorf("event %d (%s) after the takeover recorded by %q", ev.Seq, ev.Step, ev.Worker)
						}
					}
				})
			})
		}
	}
}
