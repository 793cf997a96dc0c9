package prcheck_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/prcheck"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// updateRun is the fake's route a check run's update takes.
const updateRun = "PATCH /repos/{owner}/{repo}/check-runs/{id}"

// policyRun is the one kukie/policy run on sha.
func (r *replicas) policyRun(t *testing.T, sha string) *gh.CheckRun {
	t.Helper()
	var out []*gh.CheckRun
	for _, run := range r.gh.CheckRuns(t, repo, sha) {
		if run.GetName() == github.PolicyCheckRunName {
			out = append(out, run)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d kukie/policy runs on %s, want one", len(out), sha)
	}
	return out[0]
}

// renderRun is the one kukie/render run on sha.
func (r *replicas) renderRun(t *testing.T, sha string) *gh.CheckRun {
	t.Helper()
	runs := r.runs(t, sha)
	if len(runs) != 1 {
		t.Fatalf("%d kukie/render runs on %s, want one", len(runs), sha)
	}
	return runs[0]
}

// onlyCheck is the one check of the pull request number.
func (r *replicas) onlyCheck(t *testing.T, number int) store.PullCheck {
	t.Helper()
	history, err := r.db.PullChecksOf(context.Background(), repo, "pull/"+strconv.Itoa(number))
	if err != nil || len(history) != 1 {
		t.Fatalf("history %+v (%v), want one check", history, err)
	}
	return history[0]
}

// move pushes files to main and tells the checker b of the push, listing files
// unless unlisted; it returns the new commit.
func (r *replicas) move(t *testing.T, files map[string]string, unlisted bool) string {
	t.Helper()
	sha := r.gh.PushCommit(t, repo, "main", files, githubtest.DefaultAuthor)
	m := prcheck.BaseMove{InstallationID: r.inst, Repo: repo, RepoURL: r.head(t, 1, sha).RepoURL, Branch: "main", SHA: sha}
	if !unlisted {
		m.Files = []string{}
		for f := range files {
			m.Files = append(m.Files, f)
		}
	}
	if err := r.b.BaseMoved(context.Background(), m); err != nil {
		t.Fatalf("base moved to %s: %v", sha, err)
	}
	return sha
}

const policyFile = "rules:\n  image_digest: {level: warning}\n"

// TestBaseMoveThatChangesThePolicyMarksThePolicyRun: a push to main that changes
// .kukie.yml, which the pull request's kukie/policy run was judged by, marks that
// run stale, keeping its conclusion and findings, and leaves the kukie/render run
// alone when it reaches none of its Applications; once, whatever the later pushes.
// A push that does not list its files is compared by GitHub: the policy run is
// marked when .kukie.yml is among the files between the check's base and the new
// one, and not otherwise.
func TestBaseMoveThatChangesThePolicyMarksThePolicyRun(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		r.gh.PushCommit(t, repo, "main", map[string]string{".kukie.yml": policyFile}, githubtest.DefaultAuthor)
		head, number := r.openPull(t)
		if err := r.b.Check(ctx, r.head(t, number, head)); err != nil {
			t.Fatal(err)
		}
		render, before := r.renderRun(t, head), r.policyRun(t, head)
		if before.GetConclusion() != github.ConclusionSuccess || !strings.Contains(before.GetOutput().GetTitle(), "1 warnings") {
			t.Fatalf("policy run before the move: %s %q", before.GetConclusion(), before.GetOutput().GetTitle())
		}

		// A push that changes neither the policy nor a file the app reads marks nothing.
		r.gh.ResetRequestCounts()
		r.move(t, map[string]string{"docs/README.md": "how we deploy\n"}, false)
		if n := r.gh.RequestCount(updateRun); n != 0 {
			t.Fatalf("a push that changes nothing the check read updated %d runs", n)
		}

		moved := r.move(t, map[string]string{".kukie.yml": "rules:\n  image_digest: {level: error}\n"}, false)
		after := r.policyRun(t, head)
		out := after.GetOutput()
		if after.GetID() != before.GetID() || after.GetConclusion() != github.ConclusionSuccess || out.GetTitle() != "Base branch moved: "+before.GetOutput().GetTitle() {
			t.Fatalf("policy run after the move: %d %s %q, want run %d still success, its title marked", after.GetID(), after.GetConclusion(), out.GetTitle(), before.GetID())
		}
		for _, want := range []string{"**main moved to " + moved[:7] + " after this check, changing `.kukie.yml`**",
			"judged the pull request by the rules main had before", "Re-run", before.GetOutput().GetSummary()} {
			if !strings.Contains(out.GetSummary(), want) {
				t.Errorf("policy summary lacks %q:\n%s", want, out.GetSummary())
			}
		}
		if got := r.renderRun(t, head); got.GetOutput().GetTitle() != render.GetOutput().GetTitle() || got.GetOutput().GetSummary() != render.GetOutput().GetSummary() {
			t.Errorf("the render run changed though the push reaches none of its apps: %q\n%s", got.GetOutput().GetTitle(), got.GetOutput().GetSummary())
		}
		if c := r.onlyCheck(t, number); c.PolicyMovedSHA != moved || c.BaseMovedSHA != "" {
			t.Fatalf("stored check %+v, want its policy marked moved to %s and its render not", c, moved)
		}

		// Later pushes changing the policy again mark it no more; one that reaches
		// the app marks the render run, once.
		r.gh.ResetRequestCounts()
		r.move(t, map[string]string{".kukie.yml": policyFile}, false)
		if n := r.gh.RequestCount(updateRun); n != 0 {
			t.Errorf("%d more updates after the policy run was marked, want none", n)
		}
		reached := r.move(t, map[string]string{"apps/web/deployment.yaml": strings.Replace(files["apps/web/deployment.yaml"], "replicas: 1", "replicas: 2", 1)}, false)
		if n := r.gh.RequestCount(updateRun); n != 1 {
			t.Errorf("%d updates for the push reaching the app, want the render run's alone: %v", n, r.gh.RequestCounts())
		}
		if got := r.renderRun(t, head).GetOutput().GetTitle(); !strings.HasPrefix(got, "Base branch moved: ") {
			t.Errorf("render run after a push reaching its app: %q", got)
		}
		if got := r.policyRun(t, head).GetOutput().GetSummary(); strings.Count(got, "moved to") != 1 {
			t.Errorf("policy summary after the later pushes:\n%s", got)
		}
		if c := r.onlyCheck(t, number); c.PolicyMovedSHA != moved || c.BaseMovedSHA != reached {
			t.Fatalf("stored check %+v, want its policy marked at %s and its render at %s", c, moved, reached)
		}

		// A new head, checked afresh; pushes that do not list their files.
		head = r.gh.PushCommit(t, repo, "feature", image("1.2"), githubtest.DefaultAuthor)
		if err := r.b.Check(ctx, r.head(t, number, head)); err != nil {
			t.Fatal(err)
		}
		unchanged := r.policyRun(t, head).GetOutput().GetTitle()
		r.move(t, map[string]string{"docs/README.md": "how we deploy, again\n"}, true)
		if got := r.policyRun(t, head).GetOutput().GetTitle(); got != unchanged {
			t.Errorf("policy run after an unlisted push that left .kukie.yml alone: %q, want %q", got, unchanged)
		}
		moved = r.move(t, map[string]string{".kukie.yml": "rules:\n  image_digest: {level: notice}\n"}, true)
		if got := r.policyRun(t, head).GetOutput(); got.GetTitle() != "Base branch moved: "+unchanged ||
			!strings.Contains(got.GetSummary(), "**main moved to "+moved[:7]+" after this check, changing `.kukie.yml`**") {
			t.Errorf("policy run after an unlisted push that changed .kukie.yml: %q\n%s", got.GetTitle(), got.GetSummary())
		}
	})
}

// TestBaseMoveWhileTheCheckRunsMarksItWhenItCompletes: main moves, changing the
// file the pull request's app reads, while its check renders. The push publishes
// nothing on the run in progress; the check publishes its own result, then marks
// it stale (its conclusion and diffs kept), saying the base moved while it ran.
func TestBaseMoveWhileTheCheckRunsMarksItWhenItCompletes(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		head, number := r.openPull(t)
		r.held.head, r.held.release = head, make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- r.a.Check(ctx, r.head(t, number, head)) }()
		<-r.held.entered

		r.gh.ResetRequestCounts()
		moved := r.move(t, map[string]string{"apps/web/deployment.yaml": strings.Replace(files["apps/web/deployment.yaml"], "replicas: 1", "replicas: 2", 1)}, false)
		if n := r.gh.RequestCount(updateRun); n != 0 {
			t.Fatalf("the push updated %d runs of a check in progress", n)
		}
		if c := r.onlyCheck(t, number); c.State != store.PullCheckRunning || c.MovedWhileRunningSHA != moved || c.BaseMovedSHA != "" {
			t.Fatalf("stored check %+v, want running, told of %s", c, moved)
		}
		close(r.held.release)
		awaitCheck(t, done)
		run := r.renderRun(t, head)
		out := run.GetOutput()
		if run.GetConclusion() != github.ConclusionSuccess || !strings.HasPrefix(out.GetTitle(), "Base branch moved: ") {
			t.Fatalf("render run: %s %q, want success, marked", run.GetConclusion(), out.GetTitle())
		}
		for _, want := range []string{"**main moved to " + moved[:7] + " while this check ran**", "argocd/web (cluster prod) read (`apps/web/deployment.yaml`)", "Update the branch"} {
			if !strings.Contains(out.GetSummary(), want) {
				t.Errorf("summary lacks %q:\n%s", want, out.GetSummary())
			}
		}
		if !strings.Contains(out.GetText(), "nginx:1.1") {
			t.Errorf("the run lost its diff:\n%s", out.GetText())
		}
		if c := r.onlyCheck(t, number); c.State != store.PullCheckCompleted || c.BaseMovedSHA != moved {
			t.Fatalf("stored check %+v, want completed, marked moved to %s", c, moved)
		}
	})
}

// TestBaseMoveWhileTheCheckRunsThatReachesNothingLeavesItCurrent: a move under a
// running check that reaches none of its apps leaves the run as the check
// published it, and a later push that does reach it marks it.
func TestBaseMoveWhileTheCheckRunsThatReachesNothingLeavesItCurrent(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		head, number := r.openPull(t)
		r.held.head, r.held.release = head, make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- r.a.Check(ctx, r.head(t, number, head)) }()
		<-r.held.entered
		r.move(t, map[string]string{"docs/README.md": "how we deploy\n"}, false)
		close(r.held.release)
		awaitCheck(t, done)
		if got := r.renderRun(t, head).GetOutput().GetTitle(); strings.HasPrefix(got, "Base branch moved") {
			t.Fatalf("render run %q marked by a move that reaches none of its apps", got)
		}
		if c := r.onlyCheck(t, number); c.BaseMovedSHA != "" {
			t.Fatalf("stored check %+v, want it not marked", c)
		}
		moved := r.move(t, map[string]string{"apps/web/deployment.yaml": strings.Replace(files["apps/web/deployment.yaml"], "replicas: 1", "replicas: 3", 1)}, false)
		if got := r.renderRun(t, head).GetOutput(); !strings.HasPrefix(got.GetTitle(), "Base branch moved: ") ||
			!strings.Contains(got.GetSummary(), "**main moved to "+moved[:7]+" after this check**") {
			t.Errorf("render run after a push reaching its app: %q\n%s", got.GetTitle(), got.GetSummary())
		}
	})
}

// hookedGitHub runs before once, just before the check publishes its own result on
// its kukie/render run.
type hookedGitHub struct {
	github.Repos
	before func()
	once   sync.Once
}

func (g *hookedGitHub) PublishCheckRun(ctx context.Context, inst int64, repo, headSHA string, id int64, r github.CheckReport) (github.CheckRunRef, error) {
	if r.Name == "" && r.Conclusion != "" && !strings.HasPrefix(r.Title, "Base branch moved") {
		g.once.Do(g.before)
	}
	return g.Repos.PublishCheckRun(ctx, inst, repo, headSHA, id, r)
}

// TestBaseMoveBetweenACheckRecordAndItsPublishStaysMarked: main moves after the
// check recorded its result and before it published it. The push marks the run as
// a completed check's, then the check publishes its own result over that mark; it
// publishes the run marked again.
func TestBaseMoveBetweenACheckRecordAndItsPublishStaysMarked(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		head, number := r.openPull(t)
		var moved string
		hooked := &hookedGitHub{Repos: r.held.Repos, before: func() {
			moved = r.move(t, map[string]string{"apps/web/deployment.yaml": strings.Replace(files["apps/web/deployment.yaml"], "replicas: 1", "replicas: 2", 1)}, false)
			if c := r.onlyCheck(t, number); c.State != store.PullCheckCompleted || c.BaseMovedSHA != moved {
				t.Fatalf("stored check %+v, want completed and marked by the push", c)
			}
		}}
		c := &prcheck.Checker{GitHub: hooked, Connections: r.b.Connections, Applications: r.b.Applications, Records: db,
			PublicURL: r.b.PublicURL, SupersedePoll: time.Hour}
		if err := c.Check(ctx, r.head(t, number, head)); err != nil {
			t.Fatal(err)
		}
		if moved == "" {
			t.Fatal("the check published its result without the push between")
		}
		out := r.renderRun(t, head).GetOutput()
		if !strings.HasPrefix(out.GetTitle(), "Base branch moved: ") || !strings.Contains(out.GetSummary(), "**main moved to "+moved[:7]+" after this check**") {
			t.Errorf("render run after its publish: %q\n%s", out.GetTitle(), out.GetSummary())
		}
	})
}

// moveDefault pushes files to main, the default branch, and tells the checker b of
// the push with the commit it moved from, listing files unless unlisted; it
// returns the new commit.
func (r *replicas) moveDefault(t *testing.T, files map[string]string, unlisted bool) string {
	t.Helper()
	before := r.gh.Head(t, repo, "main")
	sha := r.gh.PushCommit(t, repo, "main", files, githubtest.DefaultAuthor)
	m := prcheck.BaseMove{InstallationID: r.inst, Repo: repo, RepoURL: r.head(t, 1, sha).RepoURL, Branch: "main", SHA: sha, Before: before, Default: true}
	if !unlisted {
		for f := range files {
			m.Files = append(m.Files, f)
		}
	}
	if err := r.b.BaseMoved(context.Background(), m); err != nil {
		t.Fatalf("main moved to %s: %v", sha, err)
	}
	return sha
}

// TestPolicyMoveUnderARunningCheckIntoAnotherBranch: while the check of a pull
// request into release runs, main, whose .kukie.yml is its policy, moves in pushes
// that do not list their files. GitHub's comparison of each push's commits tells
// them apart: the one that leaves .kukie.yml tells the check nothing, the one that
// changes it tells the running check, which publishes its own result and then
// marks its kukie/policy run, saying the policy changed while it ran.
func TestPolicyMoveUnderARunningCheckIntoAnotherBranch(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		r.gh.PushCommit(t, repo, "main", map[string]string{".kukie.yml": policyFile}, githubtest.DefaultAuthor)
		r.gh.CreateBranch(t, repo, "release", "main")
		r.gh.CreateBranch(t, repo, "hotfix", "release")
		head := r.gh.PushCommit(t, repo, "hotfix", image("1.1"), githubtest.DefaultAuthor)
		number := r.gh.OpenPullRequest(t, repo, "hotfix", "release", "Hotfix", githubtest.DefaultAuthor)
		h := r.head(t, number, head)
		h.BaseBranch, h.BaseSHA = "release", r.gh.Head(t, repo, "release")

		r.held.head, r.held.release = head, make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- r.a.Check(ctx, h) }()
		<-r.held.entered
		r.moveDefault(t, map[string]string{"docs/README.md": "how we deploy\n"}, true)
		if c := r.onlyCheck(t, number); c.PolicyMovedSHA != "" {
			t.Fatalf("stored check %+v, told of a push that left .kukie.yml", c)
		}
		r.gh.ResetRequestCounts()
		moved := r.moveDefault(t, map[string]string{".kukie.yml": "rules:\n  image_digest: {level: error}\n"}, true)
		if n := r.gh.RequestCount(updateRun); n != 0 {
			t.Fatalf("the push updated %d runs of a check in progress", n)
		}
		if c := r.onlyCheck(t, number); c.State != store.PullCheckRunning || c.PolicyMovedSHA != moved {
			t.Fatalf("stored check %+v, want running, told the policy moved to %s", c, moved)
		}
		close(r.held.release)
		awaitCheck(t, done)
		out := r.policyRun(t, head).GetOutput()
		if !strings.HasPrefix(out.GetTitle(), "Base branch moved: ") {
			t.Fatalf("policy run %q, want it marked", out.GetTitle())
		}
		for _, want := range []string{"**main moved to " + moved[:7] + " while this check ran, changing `.kukie.yml`**",
			"the policy is read from main, the repository's default branch"} {
			if !strings.Contains(out.GetSummary(), want) {
				t.Errorf("policy summary lacks %q:\n%s", want, out.GetSummary())
			}
		}
		if got := r.renderRun(t, head).GetOutput().GetTitle(); strings.HasPrefix(got, "Base branch moved") {
			t.Errorf("render run %q marked by a move of another branch than its base", got)
		}
	})
}

// policyReadHook runs before once, when the check reads the repository's policy:
// after the check started, before its record exists.
type policyReadHook struct {
	github.Repos
	before func()
	once   sync.Once
}

func (g *policyReadHook) DefaultBranchFile(ctx context.Context, inst int64, repo, name string, maxBytes int) ([]byte, string, bool, error) {
	g.once.Do(g.before)
	return g.Repos.DefaultBranchFile(ctx, inst, repo, name, maxBytes)
}

// TestBaseMoveBeforeACheckIsRecordedMarksItWhenItCompletes: main moves, changing
// the file the pull request's app reads, after the check started (its base is the
// commit before) and before its record exists, so the push finds no check to tell.
// Once it published its result, the check finds where main is now and marks its
// run stale, saying the base moved while it ran.
func TestBaseMoveBeforeACheckIsRecordedMarksItWhenItCompletes(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		head, number := r.openPull(t)
		h := r.head(t, number, head)
		var moved string
		hooked := &policyReadHook{Repos: r.held.Repos, before: func() {
			moved = r.move(t, map[string]string{"apps/web/deployment.yaml": strings.Replace(files["apps/web/deployment.yaml"], "replicas: 1", "replicas: 2", 1)}, false)
			if history, err := r.db.PullChecksOf(ctx, repo, h.Key); err != nil || len(history) != 0 {
				t.Errorf("checks %+v (%v) before the record, want none", history, err)
			}
		}}
		c := &prcheck.Checker{GitHub: hooked, Connections: r.b.Connections, Applications: r.b.Applications, Records: db,
			PublicURL: r.b.PublicURL, SupersedePoll: time.Hour}
		if err := c.Check(ctx, h); err != nil {
			t.Fatal(err)
		}
		if moved == "" {
			t.Fatal("the check was not started with the push before its record")
		}
		run := r.renderRun(t, head)
		out := run.GetOutput()
		if run.GetConclusion() != github.ConclusionSuccess || !strings.HasPrefix(out.GetTitle(), "Base branch moved: ") ||
			!strings.Contains(out.GetSummary(), "**main moved to "+moved[:7]+" since this check started**, changing files that argocd/web (cluster prod) read (`apps/web/deployment.yaml`)") {
			t.Fatalf("render run: %s %q\n%s", run.GetConclusion(), out.GetTitle(), out.GetSummary())
		}
		if c := r.onlyCheck(t, number); c.BaseSHA != h.BaseSHA || c.BaseMovedSHA != moved {
			t.Fatalf("stored check %+v, want its base %s, marked moved to %s", c, h.BaseSHA, moved)
		}
	})
}

// TestBaseMovesAChecksCompletionCouldNotJudgeAreJudgedAtTheNextPush: main moves
// under the app's file while the check runs, and GitHub fails the comparison the
// check asks for once it completed. The check's result stands; its run says that
// whether main moved under it could not be told yet, and the store that the
// judgement is owed. The next push to main, which alone reaches nothing, judges the
// check from its base: the run is marked stale for the file the first move
// changed, and nothing is owed any more.
func TestBaseMovesAChecksCompletionCouldNotJudgeAreJudgedAtTheNextPush(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		head, number := r.openPull(t)
		r.held.head, r.held.release = head, make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- r.a.Check(ctx, r.head(t, number, head)) }()
		<-r.held.entered
		moved := r.move(t, map[string]string{"apps/web/deployment.yaml": strings.Replace(files["apps/web/deployment.yaml"], "replicas: 1", "replicas: 2", 1)}, false)
		remove := r.gh.InjectFault(githubtest.ServerError(http.StatusUnprocessableEntity).On(http.MethodGet, "/repos/*/*/compare/*..."+moved))
		close(r.held.release)
		awaitCheck(t, done)
		run := r.renderRun(t, head)
		out := run.GetOutput()
		if run.GetConclusion() != github.ConclusionSuccess || !strings.HasPrefix(out.GetTitle(), "Base moves not judged yet: ") {
			t.Fatalf("render run: %s %q, want success, saying its base moves are not judged", run.GetConclusion(), out.GetTitle())
		}
		for _, want := range []string{"**Whether main moved under this check could not be told yet** (GitHub did not compare",
			"The next push to main tells it here", "Re-run"} {
			if !strings.Contains(out.GetSummary(), want) {
				t.Errorf("summary lacks %q:\n%s", want, out.GetSummary())
			}
		}
		if !strings.Contains(out.GetText(), "nginx:1.1") {
			t.Errorf("the run lost its diff:\n%s", out.GetText())
		}
		if c := r.onlyCheck(t, number); c.State != store.PullCheckCompleted || !c.MovesPending || c.BaseMovedSHA != "" {
			t.Fatalf("stored check %+v, want completed, its base moves owed", c)
		}

		remove()
		later := r.move(t, map[string]string{"docs/README.md": "how we deploy\n"}, false)
		out = r.renderRun(t, head).GetOutput()
		if !strings.HasPrefix(out.GetTitle(), "Base branch moved: ") || strings.Contains(out.GetTitle(), "not judged") ||
			!strings.Contains(out.GetSummary(), "**main moved to "+later[:7]+" since this check started**, changing files that argocd/web (cluster prod) read (`apps/web/deployment.yaml`)") ||
			strings.Contains(out.GetSummary(), "could not be told") {
			t.Errorf("render run after the next push: %q\n%s", out.GetTitle(), out.GetSummary())
		}
		if c := r.onlyCheck(t, number); c.MovesPending || c.BaseMovedSHA != later {
			t.Fatalf("stored check %+v, want nothing owed, marked moved to %s", c, later)
		}
	})
}

// TestOwedBaseMovesThatReachNothingLeaveTheRunAsChecked: the judgement a check
// owes, once made at the next push, finds that neither move reaches its app: its
// run is published as the check's result again, without the word that it was owed.
func TestOwedBaseMovesThatReachNothingLeaveTheRunAsChecked(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		head, number := r.openPull(t)
		remove := r.gh.InjectFault(githubtest.ServerError(http.StatusUnprocessableEntity).On(http.MethodGet, "/repos/*/*/git/ref/heads/main"))
		if err := r.b.Check(ctx, r.head(t, number, head)); err != nil {
			t.Fatal(err)
		}
		checked := r.renderRun(t, head).GetOutput()
		if !strings.HasPrefix(checked.GetTitle(), "Base moves not judged yet: ") ||
			!strings.Contains(checked.GetSummary(), "(GitHub did not say where main is now)") {
			t.Fatalf("render run: %q\n%s", checked.GetTitle(), checked.GetSummary())
		}
		remove()
		r.move(t, map[string]string{"docs/README.md": "how we deploy\n"}, false)
		out := r.renderRun(t, head).GetOutput()
		if want := strings.TrimPrefix(checked.GetTitle(), "Base moves not judged yet: "); out.GetTitle() != want || strings.Contains(out.GetSummary(), "could not be told") {
			t.Errorf("render run after the next push: %q, want %q\n%s", out.GetTitle(), want, out.GetSummary())
		}
		if c := r.onlyCheck(t, number); c.MovesPending || c.BaseMovedSHA != "" {
			t.Fatalf("stored check %+v, want nothing owed, not marked", c)
		}
	})
}

// TestPolicyChangeBeforeTheCheckReadItIsNoMove: main changes .kukie.yml after the
// commit the pull request's check runs against and before the check starts, so
// the check reads the new rules. Once it completed it finds main moved past its
// base, and that move reaches neither its app nor the policy it was judged by:
// neither run is marked.
func TestPolicyChangeBeforeTheCheckReadItIsNoMove(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		r.gh.PushCommit(t, repo, "main", map[string]string{".kukie.yml": policyFile}, githubtest.DefaultAuthor)
		head, number := r.openPull(t)
		h := r.head(t, number, head)
		r.move(t, map[string]string{".kukie.yml": "rules:\n  image_digest: {level: error}\n"}, false)
		if err := r.b.Check(ctx, h); err != nil {
			t.Fatal(err)
		}
		pol := r.policyRun(t, head)
		if pol.GetConclusion() != github.ConclusionFailure || strings.HasPrefix(pol.GetOutput().GetTitle(), "Base branch moved") {
			t.Errorf("policy run %s %q, want judged by the new rules, not marked", pol.GetConclusion(), pol.GetOutput().GetTitle())
		}
		if got := r.renderRun(t, head).GetOutput().GetTitle(); strings.HasPrefix(got, "Base branch moved") {
			t.Errorf("render run %q marked by a move that reaches none of its apps", got)
		}
		if c := r.onlyCheck(t, number); c.PolicyMovedSHA != "" || c.BaseMovedSHA != "" || c.MovesPending {
			t.Fatalf("stored check %+v, want nothing marked or owed", c)
		}
	})
}

// awaitCheck waits for the check whose result done carries and fails the test
// if it failed or never ended.
func awaitCheck(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("check: %v", err)
		}
	case <-time.After(time.Minute): // a bound on a hang, not a measurement
		t.Fatal("the check never ended")
	}
}
