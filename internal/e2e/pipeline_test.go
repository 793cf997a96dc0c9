package e2e_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

var installationToken = regexp.MustCompile(`ghs_[A-Za-z0-9_]{8,}`)

// Acceptance 1, 7 and 8: a replicas change on a Directory app becomes a one-line PR
// with a successful check run; the merge (through the fake, which fires the webhook)
// moves the plan to merged; a syncer standing in for Argo CD applies the merged
// render and the plan reaches deployed. A rollback goes through the same pipeline to
// rolled_back. Nothing captured on the way carries a secret, and the service writes
// only its own branches and merges nothing.
func TestDirectoryScaleMergedDeployedRolledBack(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployWeb("main")
		s.gh.RecordRequests()

		var c change
		s.mustJSON("POST", "/api/v1/changes", s.scale(4, "chat-1"), http.StatusAccepted, &c)
		c = s.waitStatus(c.Code, "pr_open")

		if c.CheckRun == nil || c.CheckRun.Conclusion != "success" {
			t.Fatalf("check run %+v, want success", c.CheckRun)
		}
		if c.ClusterCheck != "passed" {
			t.Errorf("cluster check %q, want passed (server-side dry-run against envtest)", c.ClusterCheck)
		}
		removed, added := diffLines(c.GitDiff)
		if len(removed) != 1 || len(added) != 1 || strings.TrimSpace(added[0]) != "replicas: 4" {
			t.Fatalf("git diff is not a one-line change:\n%s", c.GitDiff)
		}
		got, _ := s.gh.FileAt(t, s.repo, c.Branch, "apps/web/deployment.yaml")
		want := strings.Replace(repoFiles(t)["apps/web/deployment.yaml"], "replicas: 2", "replicas: 4", 1)
		if got != want {
			t.Fatalf("branch file:\n%s\nwant:\n%s", got, want)
		}
		prs := s.gh.PullRequests(t, s.repo)
		if len(prs) != 1 || !strings.Contains(prs[0].GetTitle(), "kukie: scale Deployment/web ("+c.Code+")") ||
			!strings.Contains(prs[0].GetBody(), github.PlanMarker(c.Code)) {
			t.Fatalf("pull requests: %d %q", len(prs), prs[0].GetTitle())
		}

		merge := s.gh.Merge(t, s.repo, int(c.PullRequest.Number), githubtest.MergeCommit)
		s.waitFor(c.Code, "merged or later", func(c change) bool { return c.MergeSHA == merge })
		s.syncLikeArgo("web", "apps/web", "Directory", merge)
		c = s.waitStatus(c.Code, "deployed")
		if c.Deployment == nil || c.Deployment.State != "succeeded" {
			t.Fatalf("deployment %+v", c.Deployment)
		}
		if n := s.liveReplicas(); n != 4 {
			t.Fatalf("live replicas %d after deploy", n)
		}
		s.waitFor(c.Code, "without its branch after the merge", func(change) bool { return s.gh.Head(t, s.repo, c.Branch) == "" })

		var rb change
		s.mustJSON("POST", "/api/v1/changes/"+c.Code+"/rollback", map[string]any{"reason": "error rate up"}, http.StatusAccepted, &rb)
		rb = s.waitStatus(rb.Code, "pr_open")
		if got, _ := s.gh.FileAt(t, s.repo, rb.Branch, "apps/web/deployment.yaml"); got != repoFiles(t)["apps/web/deployment.yaml"] {
			t.Fatalf("revert branch file:\n%s", got)
		}
		revert := s.gh.Merge(t, s.repo, int(rb.PullRequest.Number), githubtest.MergeCommit)
		s.waitFor(rb.Code, "merged", func(c change) bool { return c.MergeSHA == revert })
		s.syncLikeArgo("web", "apps/web", "Directory", revert)
		s.waitStatus(rb.Code, "deployed")
		s.waitStatus(c.Code, "rolled_back")
		if n := s.liveReplicas(); n != 2 {
			t.Fatalf("live replicas %d after rollback", n)
		}

		// The branches written are the service's own, the merges the person's.
		if n := checkWritesOnlyOwnBranches(t, s.gh.Requests()); n < 2 {
			t.Errorf("%d ref writes recorded, want the change's and the revert's branches", n)
		}

		// Acceptance 8: no token, key or credential anywhere people or logs can see.
		var everything strings.Builder
		everything.WriteString(s.logs.String())
		everything.WriteString(s.answers.String())
		for _, pr := range s.gh.PullRequests(t, s.repo) {
			everything.WriteString(pr.GetTitle() + pr.GetBody())
			for _, sha := range []string{pr.GetHead().GetSHA()} {
				for _, run := range s.gh.CheckRuns(t, s.repo, sha) {
					out := run.GetOutput()
					everything.WriteString(out.GetTitle() + out.GetSummary() + out.GetText())
				}
			}
		}
		if seen := s.secretsSeen(everything.String()); len(seen) > 0 {
			t.Errorf("secrets in captured output: %v", seen)
		}
		if m := installationToken.FindString(everything.String()); m != "" {
			t.Errorf("an installation token appears in captured output")
		}
		// The scanner itself must see each secret where it is.
		planted := s.token.Reveal() + s.gh.WebhookSecret().Reveal() + s.gh.PrivateKeyPEM().Reveal() + string(s.kubeconfig)
		if seen := s.secretsSeen(planted); len(seen) < 4 {
			t.Fatalf("the secret scanner finds only %v in text holding every secret", seen)
		}
		if len(s.logs.String()) == 0 {
			t.Fatal("no log output was captured; the scan proved nothing")
		}
		if len(s.gh.ArchiveTokens()) == 0 {
			t.Fatal("no archive was downloaded; the scan for its link's token proved nothing")
		}
	})
}

// Acceptance 6: a resource Argo CD does not track is refused as not_gitops_managed
// with the direct-path details; an Application on a tag is refused as
// revision_not_a_branch.
func TestRefusedChanges(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployWeb("v1.0.0")
		s.gh.CreateTag(t, s.repo, "v1.0.0", "main")
		ctx := context.Background()
		adhoc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "adhoc", "namespace": s.shopNS},
			"data": map[string]any{"mode": "fast"},
		}}
		s.kube.Create(t, adhoc)

		req := s.scale(3, "")
		req["target"] = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": s.shopNS, "name": "adhoc"}
		req["change"] = map[string]any{"env": map[string]any{"container": "x", "set": map[string]any{"A": "b"}}}
		var refused struct {
			Error   string         `json:"error"`
			Reason  string         `json:"reason"`
			Details map[string]any `json:"details"`
			Plan    *change        `json:"plan"`
		}
		s.mustJSON("POST", "/api/v1/changes", req, http.StatusUnprocessableEntity, &refused)
		if refused.Error != "not_gitops_managed" || refused.Details["decision"] == nil || refused.Plan == nil || refused.Plan.Path != "direct" {
			t.Fatalf("unmanaged resource answer: %+v", refused)
		}

		var c change
		s.mustJSON("POST", "/api/v1/changes", s.scale(3, ""), http.StatusAccepted, &c)
		c = s.waitStatus(c.Code, "refused")
		if c.Problem == nil || c.Problem.Error != "revision_not_a_branch" || !strings.Contains(c.Problem.Reason, "v1.0.0") {
			t.Fatalf("tag revision refused with %+v", c.Problem)
		}
		if n := len(s.gh.PullRequests(t, s.repo)); n != 0 {
			t.Fatalf("%d pull requests for refused changes", n)
		}
		if _, err := s.kube.Dynamic.Resource(deployGVR).Namespace(s.shopNS).Get(ctx, "web", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

// Acceptance 3 (first half) through the API: 50 concurrent identical requests make
// one plan and one pull request.
func TestConcurrentIdenticalRequests(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployWeb("main")
		var wg sync.WaitGroup
		codes := make(chan string, 50)
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, body := s.do("POST", "/api/v1/changes", s.scale(5, "same-key"))
				if status != http.StatusAccepted && status != http.StatusOK {
					t.Errorf("POST = %d %s", status, body)
					return
				}
				m := regexp.MustCompile(`"code":"([a-z0-9]+)"`).FindSubmatch(body)
				if m != nil {
					codes <- string(m[1])
				}
			}()
		}
		wg.Wait()
		close(codes)
		seen := map[string]bool{}
		for c := range codes {
			seen[c] = true
		}
		if len(seen) != 1 {
			t.Fatalf("50 identical requests made %d changes", len(seen))
		}
		for code := range seen {
			s.waitStatus(code, "pr_open")
		}
		if n := len(s.gh.PullRequests(t, s.repo)); n != 1 {
			t.Fatalf("%d pull requests, want 1", n)
		}
	})
}

func diffLines(diff string) (removed, added []string) {
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		case strings.HasPrefix(l, "+"):
			added = append(added, l[1:])
		case strings.HasPrefix(l, "-"):
			removed = append(removed, l[1:])
		}
	}
	return removed, added
}

// Acceptance 5, through GitHub's webhooks: someone else pushes to the kukie branch →
// re-verified (the check fails); the base branch moves under the plan, changing the
// same file → the plan's branch is rebuilt on the new base and verified; the
// repository is disconnected mid-flight → the plan is refused with the reason.
func TestWebhookDrivenReverification(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployWeb("main")
		var c change
		s.mustJSON("POST", "/api/v1/changes", s.scale(4, ""), http.StatusAccepted, &c)
		c = s.waitStatus(c.Code, "pr_open")

		pushed := s.gh.PushCommit(t, s.repo, c.Branch, map[string]string{"apps/web/debug.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: debug\n"}, githubtest.DefaultAuthor)
		s.waitFor(c.Code, "re-verified after a foreign push", func(c change) bool {
			return c.HeadSHA == pushed && c.CheckRun != nil && c.CheckRun.Conclusion == "failure"
		})
		runs := s.runsNamed(pushed, github.CheckRunName)
		if len(runs) != 1 || !strings.Contains(runs[0].GetOutput().GetSummary(), "apps/web/debug.yaml was added") {
			t.Fatalf("check run on the foreign push: %v", runs)
		}

		// The base moves: a person edits the same file on main (a comment line).
		original := repoFiles(t)["apps/web/deployment.yaml"]
		moved := strings.Replace(original, "tuned by the on-call team", "tuned by the on-call team (see runbook)", 1)
		after := s.gh.PushCommit(t, s.repo, "main", map[string]string{"apps/web/deployment.yaml": moved}, githubtest.DefaultAuthor)
		c = s.waitFor(c.Code, "rebased", func(c change) bool {
			return c.BaseSHA == after && c.CheckRun != nil && c.CheckRun.Conclusion == "success"
		})
		got, _ := s.gh.FileAt(t, s.repo, c.Branch, "apps/web/deployment.yaml")
		if want := strings.Replace(moved, "replicas: 2", "replicas: 4", 1); got != want {
			t.Fatalf("rebased branch file:\n%s\nwant:\n%s", got, want)
		}
		if head := s.gh.Head(t, s.repo, "main"); head != after {
			t.Fatalf("main moved to %s; the service must never push to a base branch", head)
		}
		if n := len(s.gh.PullRequests(t, s.repo)); n != 1 {
			t.Fatalf("%d pull requests, want 1", n)
		}

		// The App loses access to the repository: the plan is refused with the reason.
		s.gh.RemoveInstallationRepos(t, s.gh.InstallationID(t, "acme"), "deploy")
		c = s.waitStatus(c.Code, "refused")
		if c.Problem == nil || c.Problem.Error != "repo_not_connected" {
			t.Fatalf("after losing access: %+v", c.Problem)
		}
	})
}

// Acceptance 2: an image change on a Kustomize overlay edits its images: entry; a new
// Deployment+Service becomes a new file plus a resources: entry. Both are merged,
// synced by the test's Argo CD stand-in and end deployed.
func TestKustomizeImageAndNewResource(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployAPI()
		const overlay = "apps/api/overlays/prod"

		var c change
		s.mustJSON("POST", "/api/v1/changes", map[string]any{
			"cluster": s.cluster,
			"target":  map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": s.shopNS, "name": "api"},
			"change":  map[string]any{"image": map[string]any{"container": "api", "tag": "1.5.0"}},
			"reason":  "ship the fix for the timeout", "requested_by": "bob",
		}, http.StatusAccepted, &c)
		c = s.waitStatus(c.Code, "pr_open")
		if c.CheckRun == nil || c.CheckRun.Conclusion != "success" || c.ClusterCheck != "passed" {
			t.Fatalf("check run %+v, cluster check %q (the overlay's after-render goes to a server-side dry-run)", c.CheckRun, c.ClusterCheck)
		}
		removed, added := diffLines(c.GitDiff)
		if len(removed) != 1 || len(added) != 1 || strings.TrimSpace(added[0]) != "newTag: 1.5.0" || !strings.Contains(c.GitDiff, overlay+"/kustomization.yaml") {
			t.Fatalf("image change is not the images: entry of the overlay:\n%s", c.GitDiff)
		}
		merge := s.gh.Merge(t, s.repo, int(c.PullRequest.Number), githubtest.Squash)
		s.waitFor(c.Code, "merged", func(c change) bool { return c.MergeSHA == merge })
		s.syncLikeArgo("api", overlay, "Kustomize", merge)
		s.waitStatus(c.Code, "deployed")
		if img := s.liveImage("api"); img != "registry.example/api:1.5.0" {
			t.Fatalf("live image %q", img)
		}

		manifest, err := os.ReadFile(filepath.Join("testdata", "worker.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var nr change
		s.mustJSON("POST", "/api/v1/changes", map[string]any{
			"cluster":     s.cluster,
			"target":      map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": s.shopNS, "name": "worker"},
			"change":      map[string]any{"new_resource": map[string]any{"manifest": string(manifest)}},
			"application": map[string]any{"namespace": s.appNS, "name": "api"},
			"reason":      "background jobs need their own worker", "requested_by": "carol",
		}, http.StatusAccepted, &nr)
		nr = s.waitStatus(nr.Code, "pr_open")
		if nr.ClusterCheck != "passed" {
			t.Errorf("new resources: cluster check %q, want passed", nr.ClusterCheck)
		}
		kust, _ := s.gh.FileAt(t, s.repo, nr.Branch, overlay+"/kustomization.yaml")
		var newFile string
		for _, l := range strings.Split(nr.GitDiff, "\n") {
			if strings.HasPrefix(l, "+++ b/") && !strings.HasSuffix(l, "kustomization.yaml") {
				newFile = strings.TrimPrefix(l, "+++ b/")
			}
		}
		if newFile == "" || !strings.Contains(kust, strings.TrimPrefix(newFile, overlay+"/")) {
			t.Fatalf("new resource: file %q not listed in resources:\n%s\ndiff:\n%s", newFile, kust, nr.GitDiff)
		}
		prs := s.gh.PullRequests(t, s.repo)
		body := prs[len(prs)-1].GetBody()
		if !strings.Contains(strings.Join(nr.Warnings, " "), "cluster-scoped") {
			t.Errorf("no deny-list warning for the ClusterRole: %q", nr.Warnings)
		}
		for _, w := range nr.Warnings {
			if !strings.Contains(body, w) {
				t.Errorf("warning %q is not shown in the PR body", w)
			}
		}
		merge = s.gh.Merge(t, s.repo, int(nr.PullRequest.Number), githubtest.MergeCommit)
		s.waitFor(nr.Code, "merged", func(c change) bool { return c.MergeSHA == merge })
		s.syncLikeArgo("api", overlay, "Kustomize", merge)
		s.waitStatus(nr.Code, "deployed")
		if img := s.liveImage("worker"); img != "registry.example/worker:2.0.0" {
			t.Fatalf("worker image %q", img)
		}
	})
}

// Acceptance 3 (second half): two different requests on the same file: the second
// waits, then gets its own pull request on the new base once the first is merged.
func TestSecondChangeOnTheSameFileWaits(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployWeb("main")
		var first, second change
		s.mustJSON("POST", "/api/v1/changes", s.scale(4, "first"), http.StatusAccepted, &first)
		first = s.waitStatus(first.Code, "pr_open")
		s.mustJSON("POST", "/api/v1/changes", s.scale(6, "second"), http.StatusAccepted, &second)
		second = s.waitStatus(second.Code, "waiting")
		if n := len(s.gh.PullRequests(t, s.repo)); n != 1 {
			t.Fatalf("%d pull requests while the second change waits", n)
		}
		merge := s.gh.Merge(t, s.repo, int(first.PullRequest.Number), githubtest.MergeCommit)
		second = s.waitStatus(second.Code, "pr_open")
		if second.BaseSHA != merge {
			t.Fatalf("second change based on %s, want the merge %s", second.BaseSHA, merge)
		}
		got, _ := s.gh.FileAt(t, s.repo, second.Branch, "apps/web/deployment.yaml")
		if !strings.Contains(got, "replicas: 6") {
			t.Fatalf("second branch:\n%s", got)
		}
		if removed, added := diffLines(second.GitDiff); len(removed) != 1 || len(added) != 1 || !strings.Contains(removed[0], "replicas: 4") {
			t.Fatalf("second diff is not 4 → 6 on the new base:\n%s", second.GitDiff)
		}
	})
}

// Acceptance 4: the process dies between the commit and the pull request; a new
// process resumes the plan: exactly one branch commit, one pull request, one check run.
func TestRestartBetweenCommitAndPullRequest(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		died := make(chan struct{})
		var once sync.Once
		s := newServiceWithHooks(t, db, plan.Hooks{BeforeStep: func(code, step string) error {
			if step == "pull_request" {
				once.Do(func() { close(died) })
				return errors.New("process killed")
			}
			return nil
		}})
		s.deployWeb("main")
		var c change
		s.mustJSON("POST", "/api/v1/changes", s.scale(4, ""), http.StatusAccepted, &c)
		<-died
		s.stop()
		c = s.get(c.Code)
		if c.Status != "committing" || c.HeadSHA == "" || len(s.gh.PullRequests(t, s.repo)) != 0 {
			t.Fatalf("before restart: %s head %q, %d PRs", c.Status, c.HeadSHA, len(s.gh.PullRequests(t, s.repo)))
		}
		commits := s.gh.RequestCount("POST /repos/{owner}/{repo}/git/commits")

		s.start()
		c = s.waitStatus(c.Code, "pr_open")
		if n := len(s.gh.PullRequests(t, s.repo)); n != 1 {
			t.Fatalf("%d pull requests after restart", n)
		}
		if n := len(s.runsNamed(c.HeadSHA, github.CheckRunName)); n != 1 {
			t.Fatalf("%d check runs", n)
		}
		if n := s.gh.RequestCount("POST /repos/{owner}/{repo}/git/commits"); n != commits {
			t.Fatalf("the restart made %d more commits", n-commits)
		}
	})
}

// The check run's "Re-render" action, "Re-run" of the check suite and the /kukie
// commands on the pull request reach the plan through their webhooks.
func TestChecksAndCommands(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployWeb("main")
		var c change
		s.mustJSON("POST", "/api/v1/changes", s.scale(4, ""), http.StatusAccepted, &c)
		c = s.waitStatus(c.Code, "pr_open")

		reverified := func() int {
			var full struct {
				History []struct{ Step string } `json:"history"`
			}
			s.mustJSON("GET", "/api/v1/changes/"+c.Code, nil, http.StatusOK, &full)
			n := 0
			for _, h := range full.History {
				if h.Step == "reverify" {
					n++
				}
			}
			return n
		}
		// Each trigger must add a re-verification. (GitHub's own check_suite
		// "requested" for the new branch may add one more at any time, so counts
		// only grow.)
		for _, trigger := range []struct {
			what string
			fire func()
		}{
			{"the check run's Re-render action", func() { s.gh.RequestCheckRunAction(t, s.repo, c.CheckRun.ID, github.RerenderAction) }},
			{"a re-run of the check suite", func() { s.gh.RerequestCheckSuite(t, s.repo, c.HeadSHA) }},
			{"a /kukie rerender comment", func() {
				s.gh.CommentOnPullRequest(t, s.repo, int(c.PullRequest.Number), githubtest.DefaultAuthor, "/kukie rerender")
			}},
		} {
			before := reverified()
			trigger.fire()
			s.waitFor(c.Code, "re-verified after "+trigger.what, func(change) bool { return reverified() > before })
		}
		if runs := s.runsNamed(c.HeadSHA, github.CheckRunName); len(runs) != 1 || runs[0].GetConclusion() != "success" {
			t.Fatalf("re-verification left %d runs", len(runs))
		}

		reader := githubtest.Author{Name: "Mallory", Email: "mallory@example.com", Login: "mallory"}
		s.gh.SetPermission(t, s.repo, reader.Login, githubtest.RoleRead)
		s.gh.CommentOnPullRequest(t, s.repo, int(c.PullRequest.Number), reader, "/kukie cancel")
		deadline := time.Now().Add(eventually)
		for len(s.gh.IssueComments(t, s.repo, int(c.PullRequest.Number))) < 3 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		comments := s.gh.IssueComments(t, s.repo, int(c.PullRequest.Number))
		if last := comments[len(comments)-1].GetBody(); !strings.Contains(last, "needs write access") {
			t.Fatalf("no refusal reply to a read-only user's command; last comment %q", last)
		}
		if got := s.get(c.Code); got.Status != "pr_open" {
			t.Fatalf("a read-only user's /kukie cancel moved the plan to %s", got.Status)
		}
		s.gh.CommentOnPullRequest(t, s.repo, int(c.PullRequest.Number), githubtest.DefaultAuthor, "/kukie cancel")
		s.waitStatus(c.Code, "closed")
		if pr := s.gh.PullRequests(t, s.repo)[0]; pr.GetState() != "closed" || pr.GetMerged() {
			t.Fatalf("pull request %s merged=%v after cancel", pr.GetState(), pr.GetMerged())
		}
		s.waitFor(c.Code, "without its branch after the cancel", func(change) bool { return s.gh.Head(t, s.repo, c.Branch) == "" })
	})
}
