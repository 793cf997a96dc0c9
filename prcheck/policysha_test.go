package prcheck_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/prcheck"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// compareRoute is the fake's route of GitHub's comparison of two commits.
const compareRoute = "GET /repos/{owner}/{repo}/compare/{basehead...}"

// TestPolicyChangeTheCheckReadIsNoMoveWhenLaterPushesJudgeIt: main changes
// .kukie.yml after the pull request's base and before its check reads the policy,
// so the check reads the new rules, and its judgement at completion fails, owed.
// The next push to main judges it from the commit the policy was read from: the
// policy run is not marked, and a later push that does not list its files, which
// GitHub compares from that commit too, does not mark it either (its render run it
// marks, as any unlisted push does).
func TestPolicyChangeTheCheckReadIsNoMoveWhenLaterPushesJudgeIt(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		r.gh.PushCommit(t, repo, "main", map[string]string{".kukie.yml": policyFile}, githubtest.DefaultAuthor)
		head, number := r.openPull(t)
		h := r.head(t, number, head)
		read := r.move(t, map[string]string{".kukie.yml": "rules:\n  image_digest: {level: error}\n"}, false)
		remove := r.gh.InjectFault(githubtest.ServerError(http.StatusUnprocessableEntity).On(http.MethodGet, "/repos/*/*/compare/*..."+read))
		if err := r.b.Check(ctx, h); err != nil {
			t.Fatal(err)
		}
		remove()
		if c := r.onlyCheck(t, number); !c.MovesPending || c.PolicySHA != read {
			t.Fatalf("stored check %+v, want its judgement owed, its policy read from %s", c, read)
		}
		assertPolicyUnmarked := func(when string) {
			t.Helper()
			pol := r.policyRun(t, head)
			if pol.GetConclusion() != github.ConclusionFailure || strings.HasPrefix(pol.GetOutput().GetTitle(), "Base branch moved") {
				t.Errorf("policy run %s, %s %q, want judged by the rules it read, not marked", when, pol.GetConclusion(), pol.GetOutput().GetTitle())
			}
			if c := r.onlyCheck(t, number); c.PolicyMovedSHA != "" {
				t.Errorf("stored check %s %+v, its policy marked moved", when, c)
			}
		}
		r.move(t, map[string]string{"docs/README.md": "how we deploy\n"}, false)
		if c := r.onlyCheck(t, number); c.MovesPending {
			t.Fatalf("stored check %+v, still owed after the next push", c)
		}
		assertPolicyUnmarked("after the push that judged what it owed")
		unlisted := r.move(t, map[string]string{"docs/README.md": "how we deploy, again\n"}, true)
		if got := r.renderRun(t, head).GetOutput().GetTitle(); !strings.HasPrefix(got, "Base branch moved: ") {
			t.Errorf("render run %q after a push to %s that does not list its files, want it marked", got, unlisted[:7])
		}
		assertPolicyUnmarked("after a push that does not list its files")
	})
}

// newReleasePull opens a pull request into release, cut from main, whose
// .kukie.yml is the policy, and returns its head for the check.
func (r *replicas) newReleasePull(t *testing.T) (prcheck.Head, int) {
	t.Helper()
	r.gh.PushCommit(t, repo, "main", map[string]string{".kukie.yml": policyFile}, githubtest.DefaultAuthor)
	r.gh.CreateBranch(t, repo, "release", "main")
	r.gh.CreateBranch(t, repo, "hotfix", "release")
	head := r.gh.PushCommit(t, repo, "hotfix", image("1.1"), githubtest.DefaultAuthor)
	number := r.gh.OpenPullRequest(t, repo, "hotfix", "release", "Hotfix", githubtest.DefaultAuthor)
	h := r.head(t, number, head)
	h.BaseBranch, h.BaseSHA = "release", r.gh.Head(t, repo, "release")
	return h, number
}

// TestLateDeliveredPolicyPushTheCheckReadIsNoMove: main changes .kukie.yml, and
// the check of a pull request into release reads the new rules before that push
// is delivered. Neither branch moved while it ran, so it compares nothing; the
// push, delivered after it completed, listing its files or not, is no move of the
// policy the check was judged by: the policy run stays as the check published it.
func TestLateDeliveredPolicyPushTheCheckReadIsNoMove(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		h, number := r.newReleasePull(t)
		before := r.gh.Head(t, repo, "main")
		read := r.gh.PushCommit(t, repo, "main", map[string]string{".kukie.yml": "rules:\n  image_digest: {level: error}\n"}, githubtest.DefaultAuthor)
		r.gh.ResetRequestCounts()
		if err := r.b.Check(ctx, h); err != nil {
			t.Fatal(err)
		}
		if n := r.gh.RequestCount(compareRoute); n != 1 {
			t.Errorf("the check asked GitHub for %d comparisons, want only its own (nothing moved while it ran)", n)
		}
		if c := r.onlyCheck(t, number); c.PolicySHA != read || c.MovesPending {
			t.Fatalf("stored check %+v, want its policy read from %s, nothing owed", c, read)
		}
		for _, unlisted := range []bool{false, true} {
			m := prcheck.BaseMove{InstallationID: r.inst, Repo: repo, RepoURL: h.RepoURL, Branch: "main", SHA: read, Before: before, Default: true}
			if !unlisted {
				m.Files = []string{".kukie.yml"}
			}
			if err := r.b.BaseMoved(ctx, m); err != nil {
				t.Fatal(err)
			}
			pol := r.policyRun(t, h.HeadSHA)
			if strings.HasPrefix(pol.GetOutput().GetTitle(), "Base branch moved") {
				t.Errorf("policy run after the late push (files unlisted: %v): %q, want it as the check published it, not marked",
					unlisted, pol.GetOutput().GetTitle())
			}
			if c := r.onlyCheck(t, number); c.PolicyMovedSHA != "" {
				t.Errorf("stored check after the late push (files unlisted: %v) %+v, its policy marked moved", unlisted, c)
			}
		}
	})
}

// policyReadAfterHook runs after once, when the check has read the repository's
// policy and before its record exists.
type policyReadAfterHook struct {
	github.Repos
	after func()
	once  sync.Once
}

func (g *policyReadAfterHook) DefaultBranchFile(ctx context.Context, inst int64, repo, name string, maxBytes int) ([]byte, string, bool, error) {
	data, branch, found, err := g.Repos.DefaultBranchFile(ctx, inst, repo, name, maxBytes)
	g.once.Do(g.after)
	return data, branch, found, err
}

// TestPolicyPushBeforeACheckIntoAnotherBranchIsRecordedMarksItWhenItCompletes:
// main changes .kukie.yml after the check of a pull request into release read its
// policy and before the check's record exists, so the push finds no check to
// tell. Once it published its result, the check finds main past the commit it
// read its policy from, changing .kukie.yml, and marks its kukie/policy run,
// saying the policy changed while it ran; its kukie/render run stays.
func TestPolicyPushBeforeACheckIntoAnotherBranchIsRecordedMarksItWhenItCompletes(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r, ctx := newReplicas(t, db, time.Hour), context.Background()
		h, number := r.newReleasePull(t)
		var moved string
		hooked := &policyReadAfterHook{Repos: r.held.Repos, after: func() {
			moved = r.moveDefault(t, map[string]string{".kukie.yml": "rules:\n  image_digest: {level: error}\n"}, false)
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
			t.Fatal("the check was not started with the push after its policy read")
		}
		out := r.policyRun(t, h.HeadSHA).GetOutput()
		if !strings.HasPrefix(out.GetTitle(), "Base branch moved: ") {
			t.Fatalf("policy run %q, want it marked\n%s", out.GetTitle(), out.GetSummary())
		}
		for _, want := range []string{"**main moved to " + moved[:7] + " while this check ran, changing `.kukie.yml`**",
			"the policy is read from main, the repository's default branch"} {
			if !strings.Contains(out.GetSummary(), want) {
				t.Errorf("policy summary lacks %q:\n%s", want, out.GetSummary())
			}
		}
		if got := r.renderRun(t, h.HeadSHA).GetOutput().GetTitle(); strings.HasPrefix(got, "Base branch moved") {
			t.Errorf("render run %q marked by a move of another branch than its base", got)
		}
		if c := r.onlyCheck(t, number); c.PolicyMovedSHA != moved || c.MovesPending {
			t.Fatalf("stored check %+v, want its policy marked moved to %s, nothing owed", c, moved)
		}
	})
}
