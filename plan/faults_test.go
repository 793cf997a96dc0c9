package plan_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/internal/servicetest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// faultTimeout is the App's client timeout in these tests: a hung request fails after
// it, as one to github.com fails after the service's configured timeout. It applies
// to every request of the way, not only the hung one: with a second, a loaded
// machine timed out requests no fault touched, retrying the step once more than the
// fault did.
const faultTimeout = 5 * time.Second

const tarballRoute = "/repos/*/*/tarball/**"

// githubFaults are the ways GitHub fails that every step must survive. The rate
// limits name a time already reached so that the retry after the fault is removed
// does not wait (go-github's client remembers a limit and refuses requests until it
// passes); that the webhook inbox waits for the time GitHub names is tested in
// handler and store.
func githubFaults() map[string]func() githubtest.Fault {
	return map[string]func() githubtest.Fault{
		"502":                  func() githubtest.Fault { return githubtest.ServerError(http.StatusBadGateway) },
		"timeout":              func() githubtest.Fault { return githubtest.Fault{Hang: true} },
		"primary rate limit":   func() githubtest.Fault { return githubtest.PrimaryRateLimit(time.Now()) },
		"secondary rate limit": func() githubtest.Fault { return githubtest.SecondaryRateLimit(0) },
	}
}

// forEachDBAtOnce runs fn on SQLite and on PostgreSQL at the same time, each
// in a subtest named as storetest.ForEach names it. This package's tests give
// each database its own fake GitHub and pipeline, and most of their time is
// waiting (a pipeline's steps and polls, a hung request running out, retries, a
// claim's lifetime, a rate limit's window), which the two need not spend one
// after the other.
func forEachDBAtOnce(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, db := range []struct {
		dialect store.Dialect
		open    func(testing.TB) *store.DB
	}{{store.SQLite, storetest.SQLite}, {store.Postgres, storetest.Postgres}} {
		wg.Go(func() {
			t.Run(string(db.dialect), func(t *testing.T) { fn(t, db.open(t)) })
		})
	}
	wg.Wait()
}

func newFaultEnv(t *testing.T, db *store.DB) *env {
	return newEnv(t, db, func(c *github.Config) { c.Timeout = faultTimeout })
}

// TestPipelineStepsUnderGitHubFaults fails each GitHub call of the way to an open pull
// request in each way GitHub fails. Until the fault is gone no check run concludes
// success; afterwards the plan (retried when it failed) ends with exactly one branch
// commit, one pull request and one successful check run on its head.
func TestPipelineStepsUnderGitHubFaults(t *testing.T) {
	t.Parallel()
	steps := []struct {
		name, method, path string
		// retriedAlone: the plan stays open and the pipeline tries again by itself
		// (the pull request exists; only its check run is missing).
		retriedAlone bool
	}{
		{name: "prepare tarball", method: http.MethodGet, path: tarballRoute},
		{name: "blobs", method: http.MethodPost, path: "/repos/*/*/git/blobs"},
		{name: "tree", method: http.MethodPost, path: "/repos/*/*/git/trees"},
		{name: "commit", method: http.MethodPost, path: "/repos/*/*/git/commits"},
		{name: "ref", method: http.MethodPost, path: "/repos/*/*/git/refs"},
		{name: "pull request", method: http.MethodPost, path: "/repos/*/*/pulls"},
		{name: "check run", method: http.MethodPost, path: "/repos/*/*/check-runs", retriedAlone: true},
	}
	for _, step := range steps {
		for faultName, fault := range githubFaults() {
			t.Run(step.name+"/"+faultName, func(t *testing.T) {
				t.Parallel() // each case has its own GitHub and databases; most of it is waiting
				forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
					e := newFaultEnv(t, db)
					ctx := context.Background()
					p := e.startedPipeline(ctx, plan.Hooks{})
					remove := e.gh.InjectFault(fault().On(step.method, step.path))
					pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(4, ""))
					if err != nil {
						t.Fatal(err)
					}
					rateLimited := strings.HasSuffix(faultName, "rate limit")
					switch {
					case step.retriedAlone:
						// Two attempts at least: the resume loop came back after the first.
						pl = e.waitFor(pl.Code, "retried", func(store.Plan) bool { return e.gh.FaultHits(step.method, step.path) >= 3 })
						if plan.Status(pl.Status) != plan.StatusPROpen || pl.CheckRunID != 0 {
							t.Fatalf("plan is %s with check run %d while GitHub fails, want pr_open with none recorded", pl.Status, pl.CheckRunID)
						}
					case rateLimited:
						// A rate limit is waited for, not failed on: the plan says so in
						// its history and goes on by itself once GitHub allows it.
						pl = e.waitFor(pl.Code, "waiting for the rate limit", func(p store.Plan) bool {
							return e.gh.FaultHits(step.method, step.path) >= 3 && waitsForRateLimit(t, db, p.Code)
						})
						if plan.Status(pl.Status) == plan.StatusFailed {
							t.Fatalf("plan failed on GitHub's rate limit: %s", pl.StatusReason)
						}
					default:
						// A 5xx or no answer is taken again a few times, each recorded,
						// before the plan fails and waits for an operator.
						pl = e.waitFor(pl.Code, "failed", func(p store.Plan) bool { return p.Status == string(plan.StatusFailed) })
						if pl.ErrorCode != plan.CodeRemoteError || pl.StatusReason == "" {
							t.Fatalf("failed with %q (%s), want a remote error with its reason", pl.ErrorCode, pl.StatusReason)
						}
						if n := transientRetries(t, db, pl.Code); n != plan.DefaultTransientRetries {
							t.Fatalf("%d retries recorded before the plan failed, want %d", n, plan.DefaultTransientRetries)
						}
						if hits := e.gh.FaultHits(step.method, step.path); hits < plan.DefaultTransientRetries+1 {
							t.Fatalf("GitHub was asked %d times, want the first try and %d retries", hits, plan.DefaultTransientRetries)
						}
					}
					noSuccessOn(t, e, pl.HeadSHA, pl.CommitSHA, e.gh.Head(t, repoName, "kukie/"+pl.Code))
					remove()
					if plan.Status(pl.Status) == plan.StatusFailed {
						if _, err := p.Retry(ctx, e.team.ID, pl.Code); err != nil {
							t.Fatal(err)
						}
					}
					pl = e.waitStatus(pl.Code, plan.StatusPROpen)
					wantOneOfEach(t, e, pl, "success")
				})
			})
		}
	}
}

// transientRetries counts the plan's history entries saying a step GitHub failed
// transiently is taken again.
func transientRetries(t *testing.T, db *store.DB, code string) int {
	t.Helper()
	return countEvents(t, db, code, func(ev store.PlanEvent) bool {
		return strings.HasPrefix(ev.Message, "GitHub failed transiently; trying again at ")
	})
}

// TestTransientFailureThatPassesIsRetriedAlone: GitHub fails a step twice with a 502
// and then answers; the plan takes the step again by itself, records both retries,
// and opens its pull request with no operator retry.
func TestTransientFailureThatPassesIsRetriedAlone(t *testing.T) {
	t.Parallel()
	for _, step := range []struct{ method, path string }{
		{http.MethodPost, "/repos/*/*/git/refs"},
		{http.MethodPost, "/repos/*/*/pulls"},
	} {
		t.Run(step.path, func(t *testing.T) {
			forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
				e := newFaultEnv(t, db)
				ctx := context.Background()
				p := e.startedPipeline(ctx, plan.Hooks{})
				fault := githubtest.ServerError(http.StatusBadGateway)
				fault.Times = 2
				e.gh.InjectFault(fault.On(step.method, step.path))
				pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(4, ""))
				if err != nil {
					t.Fatal(err)
				}
				pl = e.waitStatus(pl.Code, plan.StatusPROpen)
				if n := transientRetries(t, db, pl.Code); n != 2 {
					t.Errorf("%d retries recorded, want 2", n)
				}
				wantOneOfEach(t, e, pl, "success")
			})
		})
	}
}

// waitsForRateLimit reports whether the plan's history holds exactly one entry saying
// it waits for GitHub's rate limit (a wait that goes on is recorded once).
func waitsForRateLimit(t *testing.T, db *store.DB, code string) bool {
	t.Helper()
	n := countEvents(t, db, code, func(ev store.PlanEvent) bool {
		return strings.HasPrefix(ev.Message, "waiting for GitHub's rate limit until ")
	})
	if n > 1 {
		t.Fatalf("%d history entries for one rate limit wait, want 1", n)
	}
	return n == 1
}

// noSuccessOn checks that none of the commits carries a successful run.
func noSuccessOn(t *testing.T, e *env, shas ...string) {
	t.Helper()
	for _, sha := range shas {
		if sha == "" {
			continue
		}
		for _, r := range e.gh.CheckRuns(t, repoName, sha) {
			if r.GetConclusion() == "success" {
				t.Fatalf("check run %d on %s concluded success while GitHub was failing", r.GetID(), sha)
			}
		}
	}
}

// concluded reports whether a run on sha has a conclusion.
func concluded(t *testing.T, e *env, sha string) bool {
	for _, r := range e.gh.CheckRuns(t, repoName, sha) {
		if r.GetConclusion() != "" {
			return true
		}
	}
	return false
}

// wantOneOfEach checks the plan's effects on GitHub happened once: one commit on its
// branch over the base, one pull request, one check run on the head with conclusion.
func wantOneOfEach(t *testing.T, e *env, pl store.Plan, conclusion string) {
	t.Helper()
	if prs := e.gh.PullRequests(t, repoName); len(prs) != 1 || int64(prs[0].GetNumber()) != pl.PRNumber {
		t.Fatalf("%d pull requests, want the plan's one (#%d)", len(prs), pl.PRNumber)
	}
	if commits := gitLines(t, e.gh.GitDir(t, repoName), "rev-list", pl.BaseSHA+".."+pl.Branch); len(commits) != 1 || commits[0] != pl.HeadSHA {
		t.Fatalf("commits on %s over the base: %v, want only %s", pl.Branch, commits, pl.HeadSHA)
	}
	runs := e.gh.CheckRuns(t, repoName, pl.HeadSHA)
	if len(runs) != 1 || runs[0].GetID() != pl.CheckRunID || runs[0].GetConclusion() != conclusion {
		t.Fatalf("%d check runs on the head (%v), want exactly one concluding %s, run %d", len(runs), runs, conclusion, pl.CheckRunID)
	}
}

// pushedByOthers pushes to the plan's branch as a person and tells the pipeline, as
// the pull_request synchronize webhook does. The inbox delivers again until the
// handler succeeds, and so does this.
func pushedByOthers(t *testing.T, e *env, p *plan.Pipeline, pl store.Plan, files map[string]string) string {
	t.Helper()
	sha := e.gh.PushCommit(t, repoName, pl.Branch, files, githubtest.DefaultAuthor)
	var err error
	for range 10 {
		if err = p.HeadPushed(context.Background(), repoName, pl.Branch, sha, githubtest.DefaultAuthor.Login); err == nil {
			return sha
		}
	}
	t.Fatalf("head pushed: %v", err)
	return ""
}

// TestForeignPushReverifiedDuringTarballOutage is the reported case: someone pushes to
// the kukie branch, and the archive of the new head cannot be downloaded. The head is
// never called verified: it carries an in-progress run saying why until the archive
// can be read, and then the verdict of the real comparison (here: failure, because the
// push added a file).
func TestForeignPushReverifiedDuringTarballOutage(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newFaultEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, ""))

		remove := e.gh.InjectFault(githubtest.ServerError(http.StatusBadGateway).On(http.MethodGet, tarballRoute))
		pushed := pushedByOthers(t, e, p, pl, map[string]string{"apps/web/extra.yaml": "kind: ConfigMap\n"})
		// The resume loop comes back to the plan (more attempts than the first), or a
		// run on the pushed head says something.
		e.waitFor(pl.Code, "retried", func(store.Plan) bool {
			return e.gh.FaultHits(http.MethodGet, tarballRoute) >= 3 || concluded(t, e, pushed)
		})
		noSuccessOn(t, e, pushed)
		runs := e.gh.CheckRuns(t, repoName, pushed)
		if len(runs) != 1 || runs[0].GetStatus() != "in_progress" || runs[0].GetConclusion() != "" ||
			!strings.Contains(runs[0].GetOutput().GetSummary(), "has not been verified") {
			t.Fatalf("runs on the unverified head %s: %v, want one in progress saying it is not verified", pushed, runs)
		}
		cur, err := db.PlanByCode(ctx, pl.Code)
		if err != nil {
			t.Fatal(err)
		}
		if cur.HeadSHA != pushed || cur.CheckRunID != 0 || cur.Status != string(plan.StatusPROpen) {
			t.Fatalf("plan at %s with run %d (%s), want the pushed head without a recorded run", cur.HeadSHA, cur.CheckRunID, cur.Status)
		}

		remove()
		pl = e.waitStatus(pl.Code, plan.StatusPROpen)
		runs = e.gh.CheckRuns(t, repoName, pushed)
		if len(runs) != 1 || runs[0].GetID() != pl.CheckRunID || runs[0].GetConclusion() != "failure" ||
			!strings.Contains(runs[0].GetOutput().GetSummary(), "apps/web/extra.yaml was added") {
			t.Fatalf("runs on the pushed head after the outage: %v, want the one run concluding failure", runs)
		}
	})
}

// TestForeignPushReverifiedUnderEachFault: a push by someone else that keeps the
// verified content is verified only once its comparison completes, whichever way
// GitHub fails meanwhile.
func TestForeignPushReverifiedUnderEachFault(t *testing.T) {
	t.Parallel()
	for faultName, fault := range githubFaults() {
		underFault(t, faultName, func(t *testing.T, e *env, p *plan.Pipeline, pl store.Plan) {
			content, _ := e.gh.FileAt(t, repoName, pl.Branch, webFile)

			remove := e.gh.InjectFault(fault().On(http.MethodGet, tarballRoute))
			pushed := pushedByOthers(t, e, p, pl, map[string]string{webFile: content})
			e.waitFor(pl.Code, "retried", func(store.Plan) bool {
				return e.gh.FaultHits(http.MethodGet, tarballRoute) >= 2 || concluded(t, e, pushed)
			})
			noSuccessOn(t, e, pushed)

			remove()
			pl = e.waitStatus(pl.Code, plan.StatusPROpen)
			if pl.HeadSHA != pushed {
				t.Fatalf("plan head %s, want the pushed %s", pl.HeadSHA, pushed)
			}
			runs := e.gh.CheckRuns(t, repoName, pushed)
			if len(runs) != 1 || runs[0].GetID() != pl.CheckRunID || runs[0].GetConclusion() != "success" {
				t.Fatalf("runs on the pushed head: %v, want one success once compared", runs)
			}
		})
	}
}

// TestCheckRunRefusedMarksActionRequired: GitHub refuses the check run for a reason
// that does not pass (422). The head gets an action_required run with the reason, the
// plan fails, and a retry publishes the verdict on that same run.
func TestCheckRunRefusedMarksActionRequired(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		refused := githubtest.Fault{Status: http.StatusUnprocessableEntity, Times: 1}.On(http.MethodPost, "/repos/*/*/check-runs")
		e.gh.InjectFault(refused)
		pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(4, ""))
		if err != nil {
			t.Fatal(err)
		}
		pl = e.waitFor(pl.Code, "failed", func(p store.Plan) bool { return p.Status == string(plan.StatusFailed) })
		runs := e.gh.CheckRuns(t, repoName, pl.HeadSHA)
		if len(runs) != 1 || runs[0].GetConclusion() != "action_required" || !strings.Contains(runs[0].GetOutput().GetSummary(), "422") {
			t.Fatalf("runs after a refused check run: %v, want one action_required with the reason", runs)
		}
		if _, err := p.Retry(ctx, e.team.ID, pl.Code); err != nil {
			t.Fatal(err)
		}
		pl = e.waitStatus(pl.Code, plan.StatusPROpen)
		wantOneOfEach(t, e, pl, "success")
		if pl.CheckRunID != runs[0].GetID() {
			t.Errorf("the retry published run %d, want the marked run %d reused", pl.CheckRunID, runs[0].GetID())
		}
	})
}

// TestRebaseUnderGitHubFaults moves the base under an open plan so that its edit must
// be rebuilt, and fails each GitHub call of the rebuild in each way GitHub fails: the
// archive of the new base, the commit on it and the move of the plan's branch. The
// push is not handled while GitHub fails (its delivery is retried), no commit the
// rebuild made carries a successful run, and once the fault is gone the retried push
// leaves the plan pr_open on the new base with one commit, one pull request and one
// successful run on its head.
func TestRebaseUnderGitHubFaults(t *testing.T) {
	t.Parallel()
	steps := []struct {
		name, method, path string
		stored             int // commits the rebuild left on the new base before the fault
	}{
		{name: "new base tarball", method: http.MethodGet, path: tarballRoute},
		{name: "commit", method: http.MethodPost, path: "/repos/*/*/git/commits"},
		{name: "ref update", method: http.MethodPatch, path: "/repos/*/*/git/refs/**", stored: 1},
	}
	for _, step := range steps {
		for faultName, fault := range githubFaults() {
			underFault(t, step.name+"/"+faultName, func(t *testing.T, e *env, p *plan.Pipeline, pl store.Plan) {
				ctx := context.Background()
				db := e.db
				oldHead := pl.HeadSHA

				moved := strings.Replace(webYAML, "# scaled by hand", "# scaled by the on-call", 1)
				after := e.gh.PushCommit(t, repoName, "main", map[string]string{webFile: moved}, githubtest.DefaultAuthor)
				remove := e.gh.InjectFault(fault().On(step.method, step.path))
				// The plan's own run may still hold its claim just after its check run.
				if err := e.basePushed(ctx, p, after, []string{webFile}); err == nil {
					t.Fatal("the base push was handled while GitHub failed the rebase, want an error so it is retried")
				}
				if e.gh.FaultHits(step.method, step.path) == 0 {
					t.Fatalf("the rebase never called %s %s", step.method, step.path)
				}
				cur, err := db.PlanByCode(ctx, pl.Code)
				if err != nil {
					t.Fatal(err)
				}
				if cur.Status != string(plan.StatusPROpen) || cur.BaseSHA != pl.BaseSHA || cur.HeadSHA != oldHead {
					t.Fatalf("plan is %s on %s at %s while GitHub fails its rebase, want pr_open as it was", cur.Status, cur.BaseSHA, cur.HeadSHA)
				}
				if head := e.gh.Head(t, repoName, pl.Branch); head != oldHead {
					t.Fatalf("branch moved to %s while GitHub failed the rebase", head)
				}
				rebuilt := commitsOver(t, e, after)
				if len(rebuilt) != step.stored {
					t.Fatalf("%d commits on the new base before the fault ended (%v), want %d", len(rebuilt), rebuilt, step.stored)
				}
				noSuccessOn(t, e, rebuilt...)

				remove()
				retryBasePush(t, p, after)
				pl = e.waitFor(pl.Code, "verified on the new base", func(p store.Plan) bool {
					return p.BaseSHA == after && p.Status == string(plan.StatusPROpen) && p.CheckRunID != 0
				})
				wantOneOfEach(t, e, pl, "success")
				if got, _ := e.gh.FileAt(t, repoName, pl.Branch, webFile); got != strings.Replace(moved, "replicas: 3", "replicas: 4", 1) {
					t.Fatalf("rebased branch file:\n%s", got)
				}
			})
		}
	}
}

// commitsOver lists every commit of the repository whose parent is base, on a
// branch or not (a commit GitHub stored before the branch move failed).
func commitsOver(t *testing.T, e *env, base string) []string {
	t.Helper()
	dir := e.gh.GitDir(t, repoName)
	var out []string
	objects := gitLines(t, dir, "cat-file", "--batch-all-objects", "--batch-check=%(objectname):%(objecttype)")
	for _, o := range objects {
		sha, kind, _ := strings.Cut(o, ":")
		if kind != "commit" {
			continue
		}
		if parents := gitLines(t, dir, "show", "-s", "--format=%P", sha); len(parents) == 1 && parents[0] == base {
			out = append(out, sha)
		}
	}
	return out
}

// retryBasePush hands the push to the pipeline until it is handled, as the webhook
// inbox delivers it again; the plan's own run may hold the claim for a while.
func retryBasePush(t *testing.T, p *plan.Pipeline, after string) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(eventually); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err = p.BasePushed(context.Background(), repoName, "main", after, []string{webFile}); err == nil {
			return
		}
	}
	t.Fatalf("base push never handled: %v", err)
}

// underFault runs a case in parallel on each database with a plan whose pull request
// is open and a GitHub whose hung requests fail after faultTimeout.
func underFault(t *testing.T, name string, run func(t *testing.T, e *env, p *plan.Pipeline, pl store.Plan)) {
	t.Run(name, func(t *testing.T) {
		t.Parallel() // each case has its own GitHub and databases; most of it is waiting
		forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
			e := newFaultEnv(t, db)
			ctx := context.Background()
			p := e.startedPipeline(ctx, plan.Hooks{})
			run(t, e, p, e.submitOpen(ctx, p, scale(4, "")))
		})
	})
}

// TestAFailedStepSaysWhatGitHubAnswered: a step GitHub failed past its retries, or
// at once with an answer no retry changes, left the client's error as the change's
// problem ("open pull request: POST http://127.0.0.1:41234/api/v3/repos/acme/deploy/pulls:
// 503 Service Unavailable []"), the API address and all, and so did its history and
// its check run, which get_change, the change API and the web page show. They now
// say which step failed and what GitHub answered in words; the error itself goes to
// the log.
func TestAFailedStepSaysWhatGitHubAnswered(t *testing.T) {
	t.Parallel()
	const refs = "/repos/*/*/git/refs"
	forbidden := `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest/git/refs#create-a-reference","status":"403"}`
	cases := map[string]struct {
		fault  githubtest.Fault
		pushed bool // the fault hits the comparison of a head a person pushed
		want   string
		run    string // what the check run on the pushed head says
	}{
		"503 on every try": {fault: githubtest.ServerError(http.StatusServiceUnavailable).On(http.MethodPost, "/repos/*/*/pulls"),
			want: "opening the pull request failed: GitHub answered 503 Service Unavailable on every try"},
		"no answer": {fault: githubtest.Fault{Hang: true}.On(http.MethodPost, "/repos/*/*/git/commits"),
			want: "committing the edit failed: GitHub did not answer in time on every try"},
		"refused": {fault: githubtest.Fault{Status: http.StatusForbidden, Body: forbidden}.On(http.MethodPost, refs),
			want: "pushing the change's branch failed: GitHub answered 403 Forbidden: Resource not accessible by integration"},
		"archive refused": {fault: githubtest.Fault{Status: http.StatusForbidden}.On(http.MethodGet, tarballRoute), pushed: true,
			want: "checking the pull request's head failed: GitHub answered 403 Forbidden", run: "did not finish: `GitHub answered 403 Forbidden`."},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
				e := newFaultEnv(t, db)
				logs := &servicetest.SyncBuffer{}
				ctx := zerolog.New(logs).WithContext(context.Background())
				p := e.startedPipeline(ctx, plan.Hooks{})
				var pl store.Plan
				if c.pushed {
					pl = e.submitOpen(ctx, p, scale(4, ""))
					e.gh.InjectFault(c.fault)
					pushedByOthers(t, e, p, pl, map[string]string{"docs/why.md": "scaled for the spring sale\n"})
				} else {
					e.gh.InjectFault(c.fault)
					var err error
					if pl, _, err = p.Submit(ctx, e.team.ID, "team:shop", scale(4, "")); err != nil {
						t.Fatal(err)
					}
				}
				pl = e.waitFor(pl.Code, "failed", func(p store.Plan) bool { return p.Status == string(plan.StatusFailed) })
				pay, err := plan.PayloadOf(pl)
				if err != nil {
					t.Fatal(err)
				}
				if pl.StatusReason != c.want || pay.Problem == nil || pay.Problem.Reason != c.want {
					t.Errorf("problem %q (payload %+v), want %q", pl.StatusReason, pay.Problem, c.want)
				}
				shown := []string{pl.StatusReason}
				events, err := db.PlanEvents(ctx, pl.Code)
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range events {
					shown = append(shown, ev.Message)
				}
				for _, sha := range []string{pl.CommitSHA, pl.HeadSHA} {
					for _, r := range e.gh.CheckRuns(t, repoName, sha) {
						shown = append(shown, r.GetOutput().GetSummary())
					}
				}
				if c.run != "" && !strings.Contains(strings.Join(shown, "\n"), c.run) {
					t.Errorf("no check run on the pushed head says %q", c.run)
				}
				for _, s := range shown {
					for _, raw := range []string{strings.TrimSuffix(e.gh.APIURL(), "/"), "/repos/", "[]"} {
						if strings.Contains(s, raw) {
							t.Errorf("%q, shown to people, holds %q of the client's error", s, raw)
						}
					}
				}
				if !loggedFailure(t, logs.String(), pl.Code, pl.StatusReason) {
					t.Errorf("the log holds no error of the failed step of plan %s:\n%s", pl.Code, logs.String())
				}
			})
		})
	}
}

// loggedFailure reports whether logs hold the error of a failed step of the plan,
// other words than the problem people read.
func loggedFailure(t *testing.T, logs, code, problem string) bool {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		var entry struct{ Message, Plan, Error string }
		if json.Unmarshal([]byte(line), &entry) != nil {
			continue
		}
		if entry.Message == "Plan step failed" && entry.Plan == code && entry.Error != "" && !strings.Contains(problem, entry.Error) {
			return true
		}
	}
	return false
}

// TestAFailedStepNamesNoAddressOfAnotherServer: a step that failed reading
// something else than GitHub (the cluster's Applications) keeps that error's words
// in its problem, but an address it names only by its scheme and host: a user and
// password, a path or a query there may hold a credential (failed before: the
// problem quoted the address whole).
func TestAFailedStepNamesNoAddressOfAnotherServer(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		e.cluster.mu.Lock()
		e.cluster.unreadable = map[string]error{"prod": errors.New(`Get "https://admin:s3cret@10.0.0.1:6443/apis/argoproj.io/v1alpha1/applications?token=abc": connection refused`)}
		e.cluster.mu.Unlock()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(4, ""))
		if err != nil {
			t.Fatal(err)
		}
		pl = e.waitFor(pl.Code, "failed", func(p store.Plan) bool { return p.Status == string(plan.StatusFailed) })
		want := `preparing the change failed: list Applications of prod: Get "https://10.0.0.1:6443": connection refused`
		if pl.StatusReason != want {
			t.Errorf("problem %q, want %q", pl.StatusReason, want)
		}
	})
}

// TestATransientFailureOfAClusterIsNotSaidToBeGitHubs: a cluster read that timed
// out is taken again as a transient failure of GitHub is, and each retry's history
// entry names the cluster's read, not GitHub (failed before: "GitHub failed
// transiently; trying again at ...: list Applications of prod: ...").
func TestATransientFailureOfAClusterIsNotSaidToBeGitHubs(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		e.cluster.mu.Lock()
		e.cluster.unreadable = map[string]error{"prod": &url.Error{Op: "Get", URL: "https://10.0.0.1:6443/apis/argoproj.io/v1alpha1/applications", Err: context.DeadlineExceeded}}
		e.cluster.mu.Unlock()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(4, ""))
		if err != nil {
			t.Fatal(err)
		}
		pl = e.waitFor(pl.Code, "failed", func(p store.Plan) bool { return p.Status == string(plan.StatusFailed) })
		events, err := db.PlanEvents(ctx, pl.Code)
		if err != nil {
			t.Fatal(err)
		}
		retries := 0
		for _, ev := range events {
			if !strings.Contains(ev.Message, "trying again at ") {
				continue
			}
			retries++
			if strings.Contains(ev.Message, "GitHub") {
				t.Errorf("history entry %q says GitHub failed, but the cluster's read did", ev.Message)
			}
			if !strings.HasPrefix(ev.Message, "preparing the change failed transiently; trying again at ") ||
				!strings.HasSuffix(ev.Message, `: list Applications of prod: Get "https://10.0.0.1:6443": context deadline exceeded`) {
				t.Errorf("history entry %q, want it to say the step failed transiently and name the cluster's read", ev.Message)
			}
		}
		if retries != plan.DefaultTransientRetries {
			t.Errorf("%d retries recorded, want %d", retries, plan.DefaultTransientRetries)
		}
		want := `preparing the change failed: list Applications of prod: Get "https://10.0.0.1:6443": context deadline exceeded`
		if pl.StatusReason != want {
			t.Errorf("problem %q, want %q", pl.StatusReason, want)
		}
	})
}
