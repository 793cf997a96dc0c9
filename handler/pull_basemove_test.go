package handler

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// updateRunEndpoint is the fake's route a check run's update takes.
const updateRunEndpoint = "PATCH /repos/{owner}/{repo}/check-runs/{id}"

// TestBaseMoveMarksTheChecksItMakesStale: a push to main that changes a file the
// Applications of a pull request's check read marks that check's kukie/render run
// stale, keeping its conclusion, table and diffs, and says which of its apps the
// push reaches; a pull request whose apps the push does not reach keeps its run,
// and the same push delivered again, or a later one, marks nothing twice. A push
// no check is on asks GitHub nothing.
func TestBaseMoveMarksTheChecksItMakesStale(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newCheckEnv(t)
		e.checker.Records = db
		push := &Push{Base: e.base, Pipeline: &trackingPipeline{}, Checks: e.checker}

		// A push to main while no pull request is checked costs no request.
		e.gh.PushCommit(t, checkRepo, "main", map[string]string{"docs/README.md": "how we deploy, again\n"}, githubtest.DefaultAuthor)
		e.gh.ResetRequestCounts()
		e.deliver(t, push, "push", "")
		if n := e.gh.TotalRequests(); n != 0 {
			t.Fatalf("a push with no check on its branch made %d requests to GitHub: %v", n, e.gh.RequestCounts())
		}

		shared := e.gh.PushCommit(t, checkRepo, "bump", map[string]string{
			"base/deployment.yaml": strings.Replace(checkFiles["base/deployment.yaml"], "nginx:1.0", "nginx:1.1", 1)}, githubtest.DefaultAuthor)
		e.gh.OpenPullRequest(t, checkRepo, "bump", "main", "Bump nginx", githubtest.DefaultAuthor)
		e.deliver(t, e.pullHandler(), "pull_request", "opened")
		solo := e.gh.PushCommit(t, checkRepo, "solo", map[string]string{
			"apps/solo/cm.yaml": strings.Replace(checkFiles["apps/solo/cm.yaml"], `a: "1"`, `a: "2"`, 1)}, githubtest.DefaultAuthor)
		e.gh.OpenPullRequest(t, checkRepo, "solo", "main", "Tune solo", githubtest.DefaultAuthor)
		e.deliver(t, e.pullHandler(), "pull_request", "opened")
		before := e.run(t, shared)
		soloBefore := e.run(t, solo)
		if before.GetConclusion() != github.ConclusionSuccess || soloBefore.GetConclusion() != github.ConclusionSuccess {
			t.Fatalf("runs before the push: %s, %s", before.GetConclusion(), soloBefore.GetConclusion())
		}

		// Someone merges a change of the shared base into main. GitHub fails the
		// first update of the run: the delivery is retried, and marks it then.
		moved := e.gh.PushCommit(t, checkRepo, "main", map[string]string{
			"base/deployment.yaml": strings.Replace(checkFiles["base/deployment.yaml"], "replicas: 1", "replicas: 2", 1)}, githubtest.DefaultAuthor)
		e.gh.InjectFault(githubtest.Fault{Method: "PATCH", Path: "/repos/*/*/check-runs/*", Times: 1, Status: 502})
		ds := e.gh.DeliveriesOf("push", "")
		if err := push.Handle(context.Background(), "push", ds[len(ds)-1].ID, ds[len(ds)-1].Payload); err == nil {
			t.Fatal("the push was handled while GitHub failed the run's update; want an error for the delivery to be retried")
		}
		e.deliver(t, push, "push", "")

		after := e.run(t, shared)
		out := after.GetOutput()
		if after.GetID() != before.GetID() || after.GetConclusion() != github.ConclusionSuccess ||
			!strings.HasPrefix(out.GetTitle(), "Base branch moved: ") || !strings.Contains(out.GetTitle(), before.GetOutput().GetTitle()) {
			t.Fatalf("the run after main moved: %d %s %q, want run %d still success, its title marked", after.GetID(), after.GetConclusion(), out.GetTitle(), before.GetID())
		}
		for _, want := range []string{"**main moved to " + moved[:7] + " after this check**", "argocd/web (cluster prod), argocd/api (cluster prod) read", "(`base/deployment.yaml`)",
			"Update the branch", before.GetOutput().GetSummary()} {
			if !strings.Contains(out.GetSummary(), want) {
				t.Errorf("summary lacks %q:\n%s", want, out.GetSummary())
			}
		}
		if out.GetText() != before.GetOutput().GetText() {
			t.Errorf("the diffs changed:\n%s\nwant\n%s", out.GetText(), before.GetOutput().GetText())
		}
		if got := e.run(t, solo).GetOutput(); got.GetTitle() != soloBefore.GetOutput().GetTitle() || got.GetSummary() != soloBefore.GetOutput().GetSummary() {
			t.Errorf("the run of the pull request the push does not reach changed: %q\n%s", got.GetTitle(), got.GetSummary())
		}
		checks, err := db.PullChecksOf(context.Background(), checkRepo, "pull/1")
		if err != nil || len(checks) != 1 || checks[0].BaseMovedSHA != moved {
			t.Fatalf("stored checks %+v (%v), want the one marked moved to %s", checks, err, moved)
		}

		// The same delivery again, then another push: the mark is made once.
		e.gh.ResetRequestCounts()
		e.deliver(t, push, "push", "")
		e.gh.PushCommit(t, checkRepo, "main", map[string]string{
			"base/deployment.yaml": strings.Replace(checkFiles["base/deployment.yaml"], "replicas: 1", "replicas: 3", 1)}, githubtest.DefaultAuthor)
		e.deliver(t, push, "push", "")
		if n := e.gh.RequestCount(updateRunEndpoint); n != 0 {
			t.Errorf("%d more updates of check runs, want none", n)
		}
		if got := e.run(t, shared).GetOutput().GetSummary(); strings.Count(got, "after this check") != 1 || !strings.Contains(got, moved[:7]) {
			t.Errorf("summary after the later pushes:\n%s", got)
		}

		// A new head is checked afresh, and its own base move marks it again.
		e.gh.PushCommit(t, checkRepo, "bump", map[string]string{"base/deployment.yaml": strings.Replace(checkFiles["base/deployment.yaml"], "nginx:1.0", "nginx:1.2", 1)}, githubtest.DefaultAuthor)
		e.deliver(t, e.pullHandler(), "pull_request", "synchronize")
		head := e.gh.PushCommit(t, checkRepo, "bump", map[string]string{"docs/README.md": "bumped\n"}, githubtest.DefaultAuthor)
		e.deliver(t, e.pullHandler(), "pull_request", "synchronize")
		if got := e.run(t, head).GetOutput().GetTitle(); strings.HasPrefix(got, "Base branch moved") {
			t.Fatalf("the new head's run %q is marked before main moved", got)
		}
		e.gh.PushCommit(t, checkRepo, "main", map[string]string{"apps/web/kustomization.yaml": "namePrefix: web2-\nresources:\n- ../../base\n"}, githubtest.DefaultAuthor)
		e.deliver(t, push, "push", "")
		if got := e.run(t, head).GetOutput(); !strings.HasPrefix(got.GetTitle(), "Base branch moved: ") || !strings.Contains(got.GetSummary(), "changing files that argocd/web (cluster prod) read (`apps/web/kustomization.yaml`)") {
			t.Errorf("the new head's run after main moved again: %q\n%s", got.GetTitle(), got.GetSummary())
		}
	})
}

// newReleasePull is a checkEnv on db whose main holds a .kukie.yml, with an
// Application deploying from release too, and a checked pull request into release;
// it returns the push handler and the pull request's head.
func newReleasePull(t *testing.T, db *store.DB) (*checkEnv, *Push, string) {
	t.Helper()
	e := newCheckEnv(t)
	e.checker.Records = db
	apps := e.checker.Applications.(fixedApplications).apps
	release := apps[0]
	release.Name, release.Spec.Source = "web-release", &argocd.AppSource{RepoURL: apps[0].Spec.Source.RepoURL, Path: "apps/web", TargetRevision: "release"}
	e.checker.Applications = fixedApplications{append(apps, release)}
	push := &Push{Base: e.base, Pipeline: &trackingPipeline{}, Checks: e.checker}

	e.gh.PushCommit(t, checkRepo, "main", map[string]string{".kukie.yml": "rules:\n  image_digest: {level: warning}\n"}, githubtest.DefaultAuthor)
	e.deliver(t, push, "push", "")
	e.gh.CreateBranch(t, checkRepo, "release", "main")
	e.gh.CreateBranch(t, checkRepo, "hotfix", "release")
	head := e.gh.PushCommit(t, checkRepo, "hotfix", map[string]string{
		"base/deployment.yaml": strings.Replace(checkFiles["base/deployment.yaml"], "nginx:1.0", "nginx:1.1", 1)}, githubtest.DefaultAuthor)
	e.gh.OpenPullRequest(t, checkRepo, "hotfix", "release", "Hotfix nginx", githubtest.DefaultAuthor)
	e.deliver(t, e.pullHandler(), "pull_request", "opened")
	return e, push, head
}

// deliverUnlisted hands the last push delivery to push as GitHub sends a push
// whose commits it does not list.
func (e *checkEnv) deliverUnlisted(t *testing.T, push *Push) {
	t.Helper()
	ds := e.gh.DeliveriesOf("push", "")
	var payload map[string]any
	if err := json.Unmarshal(ds[len(ds)-1].Payload, &payload); err != nil {
		t.Fatal(err)
	}
	payload["commits"] = []any{}
	raw, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	if err := push.Handle(context.Background(), "push", ds[len(ds)-1].ID, raw); err != nil {
		t.Fatalf("push: %v", err)
	}
}

// TestUnlistedPolicyPushIsJudgedByWhatItChanged: pushes to main that do not list
// their files are judged, for the pull request into release, by GitHub's
// comparison of the commit each moved main from with the one it moved it to: the
// one that leaves .kukie.yml marks nothing, the one that changes it marks the
// kukie/policy run, saying it changed it.
func TestUnlistedPolicyPushIsJudgedByWhatItChanged(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e, push, head := newReleasePull(t, db)
		before := e.policyRun(t, head).GetOutput().GetTitle()
		e.gh.PushCommit(t, checkRepo, "main", map[string]string{"docs/README.md": "how we deploy, again\n"}, githubtest.DefaultAuthor)
		e.deliverUnlisted(t, push)
		if got := e.policyRun(t, head).GetOutput().GetTitle(); got != before {
			t.Fatalf("policy run after a push that left .kukie.yml: %q, want %q", got, before)
		}
		moved := e.gh.PushCommit(t, checkRepo, "main", map[string]string{".kukie.yml": "rules:\n  image_digest: {level: error}\n"}, githubtest.DefaultAuthor)
		e.deliverUnlisted(t, push)
		out := e.policyRun(t, head).GetOutput()
		if out.GetTitle() != "Base branch moved: "+before || !strings.Contains(out.GetSummary(), "**main moved to "+moved[:7]+" after this check, changing `.kukie.yml`**") {
			t.Errorf("policy run after a push that changed .kukie.yml: %q\n%s", out.GetTitle(), out.GetSummary())
		}
	})
}

// TestPolicyPushToTheDefaultBranchMarksPullRequestsIntoOtherBranches: the policy
// of a pull request into release is main's .kukie.yml, whatever its base. A push to
// main that changes it marks that pull request's kukie/policy run stale, saying
// where the policy is read from, and leaves its kukie/render run alone (main is
// not its base); a push to main that does not change it, or a push to release
// that changes release's .kukie.yml, which no check reads, marks nothing.
func TestPolicyPushToTheDefaultBranchMarksPullRequestsIntoOtherBranches(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e, push, head := newReleasePull(t, db)
		render, before := e.run(t, head), e.policyRun(t, head)
		if !strings.Contains(before.GetOutput().GetTitle(), "1 warnings") {
			t.Fatalf("policy run before the push: %s %q, want main's rule applied", before.GetConclusion(), before.GetOutput().GetTitle())
		}

		// Neither a push to main that leaves the policy, nor one to release that
		// changes a .kukie.yml nobody reads, marks a run.
		e.gh.ResetRequestCounts()
		e.gh.PushCommit(t, checkRepo, "main", map[string]string{"docs/README.md": "how we deploy, again\n"}, githubtest.DefaultAuthor)
		e.deliver(t, push, "push", "")
		e.gh.PushCommit(t, checkRepo, "release", map[string]string{".kukie.yml": "rules:\n  image_digest: {level: error}\n"}, githubtest.DefaultAuthor)
		e.deliver(t, push, "push", "")
		if n := e.gh.RequestCount(updateRunEndpoint); n != 0 {
			t.Fatalf("pushes that change no policy the check read updated %d runs", n)
		}

		moved := e.gh.PushCommit(t, checkRepo, "main", map[string]string{".kukie.yml": "rules:\n  image_digest: {level: error}\n"}, githubtest.DefaultAuthor)
		e.deliver(t, push, "push", "")
		after := e.policyRun(t, head)
		out := after.GetOutput()
		if after.GetID() != before.GetID() || after.GetConclusion() != before.GetConclusion() || out.GetTitle() != "Base branch moved: "+before.GetOutput().GetTitle() {
			t.Fatalf("policy run after main's policy changed: %d %s %q, want run %d, %s, its title marked",
				after.GetID(), after.GetConclusion(), out.GetTitle(), before.GetID(), before.GetConclusion())
		}
		for _, want := range []string{"**main moved to " + moved[:7] + " after this check, changing `.kukie.yml`**",
			"the policy is read from main, the repository's default branch", "Re-run", before.GetOutput().GetSummary()} {
			if !strings.Contains(out.GetSummary(), want) {
				t.Errorf("policy summary lacks %q:\n%s", want, out.GetSummary())
			}
		}
		if got := e.run(t, head).GetOutput(); got.GetTitle() != render.GetOutput().GetTitle() || got.GetSummary() != render.GetOutput().GetSummary() {
			t.Errorf("the render run changed on a push to another branch than its base: %q\n%s", got.GetTitle(), got.GetSummary())
		}
		checks, err := db.PullChecksOf(context.Background(), checkRepo, "pull/1")
		if err != nil || len(checks) != 1 || checks[0].PolicyMovedSHA != moved || checks[0].BaseMovedSHA != "" {
			t.Fatalf("stored checks %+v (%v), want the one with its policy marked moved to %s, its render not", checks, err, moved)
		}

		// Marked once.
		e.gh.ResetRequestCounts()
		e.deliver(t, push, "push", "")
		e.gh.PushCommit(t, checkRepo, "main", map[string]string{".kukie.yml": "rules:\n  image_digest: {level: notice}\n"}, githubtest.DefaultAuthor)
		e.deliver(t, push, "push", "")
		if n := e.gh.RequestCount(updateRunEndpoint); n != 0 {
			t.Errorf("%d more updates after the policy run was marked, want none", n)
		}
	})
}
