package handler

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/prcheck"
)

const checkRepo = "acme/deploy"

// checkEnv is a connected repository of two apps sharing a base and one app of its
// own, deployed from main by cluster prod, on the fake GitHub.
type checkEnv struct {
	gh      *githubtest.Server
	inst    int64
	base    Base
	checker *prcheck.Checker
	api     *gh.Client
}

var checkFiles = map[string]string{
	"base/kustomization.yaml": "resources:\n- deployment.yaml\n",
	"base/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\nspec:\n  replicas: 1\n  template:\n    spec:\n" +
		"      containers:\n      - name: app\n        image: nginx:1.0\n",
	"apps/web/kustomization.yaml":  "namePrefix: web-\nresources:\n- ../../base\n",
	"apps/api/kustomization.yaml":  "namePrefix: api-\nresources:\n- ../../base\n",
	"apps/solo/kustomization.yaml": "resources:\n- cm.yaml\n",
	"apps/solo/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: solo\ndata:\n  a: \"1\"\n",
	"docs/README.md":               "how we deploy\n",
}

type fixedConnections struct{ clusters []string }

func (f fixedConnections) ConnectedClusters(context.Context, int64, string) (string, []string, error) {
	return "team", f.clusters, nil
}

type fixedApplications struct{ apps []argocd.Application }

func (f fixedApplications) Applications(context.Context, string, string) ([]argocd.Application, error) {
	return f.apps, nil
}

func newCheckEnv(t *testing.T) *checkEnv {
	t.Helper()
	return newCheckEnvOf(t, checkFiles, []string{"web", "api", "solo"})
}

// newCheckEnvOf is a checkEnv of files, with one Kustomize Application at apps/<name>
// for each of names.
func newCheckEnvOf(t testing.TB, files map[string]string, names []string) *checkEnv {
	t.Helper()
	s := githubtest.New(t)
	s.CreateRepo(t, "acme", "deploy", files, "main")
	inst := s.CreateInstallation(t, "acme", "deploy")
	cc, err := github.NewClientCreator(github.Config{AppID: s.AppID(), PrivateKey: s.PrivateKeyPEM(), APIURL: s.APIURL(), WebURL: s.URL()}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	archives, err := cache.NewArchives(t.TempDir(), 64<<20, cache.DefaultArchiveLimits)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(s.URL(), "http://")
	var apps []argocd.Application
	for _, name := range names {
		apps = append(apps, argocd.Application{Name: name, Namespace: "argocd", Spec: argocd.AppSpec{
			Source:      &argocd.AppSource{RepoURL: "https://" + host + "/acme/deploy.git", Path: "apps/" + name, TargetRevision: "main"},
			Destination: argocd.AppDestination{Namespace: name}}, Status: argocd.AppStatus{SourceType: "Kustomize"}})
	}
	api, err := gh.NewClient(s.Client()).WithAuthToken(s.InstallationToken(t, inst, nil, nil).Reveal()).WithEnterpriseURLs(s.URL(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	return &checkEnv{gh: s, inst: inst, api: api,
		base: Base{ClientCreator: cc, App: github.App{ID: s.AppID(), Slug: s.AppSlug()}, WebHost: host},
		checker: &prcheck.Checker{GitHub: github.Repos{Clients: cc, Archives: archives}, Connections: fixedConnections{[]string{"prod"}},
			Applications: fixedApplications{apps}}}
}

// deliver hands the last delivery of event/action to h, as the inbox would.
func (e *checkEnv) deliver(t testing.TB, h interface {
	Handle(context.Context, string, string, []byte) error
}, event, action string) {
	t.Helper()
	ds := e.gh.DeliveriesOf(event, action)
	if len(ds) == 0 {
		t.Fatalf("no %s %s delivery", event, action)
	}
	d := ds[len(ds)-1]
	if err := h.Handle(context.Background(), event, d.ID, d.Payload); err != nil {
		t.Fatalf("%s %s: %v", event, action, err)
	}
}

// run is the one kukie/render run on sha.
func (e *checkEnv) run(t testing.TB, sha string) *gh.CheckRun {
	t.Helper()
	return e.runNamed(t, sha, github.CheckRunName)
}

// runNamed is the one run of name on sha.
func (e *checkEnv) runNamed(t testing.TB, sha, name string) *gh.CheckRun {
	t.Helper()
	var found []*gh.CheckRun
	for _, r := range e.gh.CheckRuns(t, checkRepo, sha) {
		if r.GetName() == name {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s runs on %s, want 1", len(found), name, sha)
	}
	return found[0]
}

func (e *checkEnv) annotations(t *testing.T, id int64) []*gh.CheckRunAnnotation {
	t.Helper()
	out, _, err := e.api.Checks.ListCheckRunAnnotations(context.Background(), "acme", "deploy", id, &gh.ListOptions{PerPage: 100})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *checkEnv) pullHandler() *PullRequest {
	return &PullRequest{Base: e.base, Pipeline: &trackingPipeline{}, Checks: e.checker}
}

func TestPullCheckRendersTheAppsTheChangeReaches(t *testing.T) {
	e := newCheckEnv(t)
	head := e.gh.PushCommit(t, checkRepo, "bump", map[string]string{
		"base/deployment.yaml": strings.Replace(checkFiles["base/deployment.yaml"], "nginx:1.0", "nginx:1.1", 1)}, githubtest.DefaultAuthor)
	e.gh.OpenPullRequest(t, checkRepo, "bump", "main", "Bump nginx", githubtest.DefaultAuthor)
	e.deliver(t, e.pullHandler(), "pull_request", "opened")

	run := e.run(t, head)
	if run.GetStatus() != "completed" || run.GetConclusion() != github.ConclusionSuccess {
		t.Fatalf("run %s/%s, want completed/success: %s", run.GetStatus(), run.GetConclusion(), run.GetOutput().GetSummary())
	}
	sum, text := run.GetOutput().GetSummary(), run.GetOutput().GetText()
	for _, want := range []string{"| argocd/web (cluster prod) | prod | manual | 0 | 1 | 0 |", "| argocd/api (cluster prod) | prod | manual | 0 | 1 | 0 |", "reaches 2 of the 3"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	if strings.Contains(sum, "solo") {
		t.Errorf("summary names the app the change does not reach:\n%s", sum)
	}
	if !strings.Contains(text, "```diff") || !strings.Contains(text, "+      - image: nginx:1.1") || !strings.Contains(text, "-      - image: nginx:1.0") {
		t.Errorf("text lacks the fenced cluster diff:\n%s", text)
	}
	anns := e.annotations(t, run.GetID())
	if len(anns) != 1 || anns[0].GetPath() != "base/deployment.yaml" || anns[0].GetStartLine() != 11 || anns[0].GetAnnotationLevel() != "notice" ||
		!strings.Contains(anns[0].GetMessage(), "argocd/web (cluster prod)") {
		t.Fatalf("annotations %v, want one notice on base/deployment.yaml line 11 naming the apps", anns)
	}
}

func TestPullCheckOutcomes(t *testing.T) {
	cases := map[string]struct {
		files      map[string]string
		conclusion string
		summary    string
		annotation string // level of the one annotation, "" for none
	}{
		"a file no app reads is neutral": {files: map[string]string{"docs/README.md": "how we really deploy\n"},
			conclusion: github.ConclusionNeutral, summary: "none of them reads a file this change touches"},
		"an app that no longer renders fails": {files: map[string]string{"apps/solo/kustomization.yaml": "resources:\n- cm.yaml\n- missing.yaml\n"},
			conclusion: github.ConclusionFailure, summary: "### No longer render\n- **argocd/solo (cluster prod)**", annotation: "failure"},
		"a new file an app reads through its kustomization": {files: map[string]string{
			"apps/solo/kustomization.yaml": "resources:\n- cm.yaml\n- cm2.yaml\n",
			"apps/solo/cm2.yaml":           "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: two\n"},
			conclusion: github.ConclusionSuccess, summary: "| argocd/solo (cluster prod) | prod | manual | 1 | 0 | 0 |", annotation: "notice"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newCheckEnv(t)
			head := e.gh.PushCommit(t, checkRepo, "change", tc.files, githubtest.DefaultAuthor)
			e.gh.OpenPullRequest(t, checkRepo, "change", "main", "Change", githubtest.DefaultAuthor)
			e.deliver(t, e.pullHandler(), "pull_request", "opened")
			run := e.run(t, head)
			if run.GetConclusion() != tc.conclusion || !strings.Contains(run.GetOutput().GetSummary(), tc.summary) {
				t.Fatalf("conclusion %s, summary:\n%s\nwant %s with %q", run.GetConclusion(), run.GetOutput().GetSummary(), tc.conclusion, tc.summary)
			}
			anns := e.annotations(t, run.GetID())
			switch {
			case tc.annotation == "" && len(anns) != 0:
				t.Errorf("annotations %+v, want none", anns)
			case tc.annotation != "" && (len(anns) == 0 || anns[0].GetAnnotationLevel() != tc.annotation || anns[0].GetPath() != "apps/solo/kustomization.yaml"):
				t.Errorf("annotations %+v, want a %s on apps/solo/kustomization.yaml", anns, tc.annotation)
			}
		})
	}
}

// TestPullCheckEvents: every event that brings a new head, or asks for the check
// again, publishes the run on the head; the service's own pull requests keep the
// pipeline's check.
func TestPullCheckEvents(t *testing.T) {
	change := map[string]string{"apps/solo/cm.yaml": strings.Replace(checkFiles["apps/solo/cm.yaml"], `"1"`, `"2"`, 1)}
	t.Run("synchronize", func(t *testing.T) {
		e := newCheckEnv(t)
		e.gh.PushCommit(t, checkRepo, "change", change, githubtest.DefaultAuthor)
		e.gh.OpenPullRequest(t, checkRepo, "change", "main", "Change", githubtest.DefaultAuthor)
		head := e.gh.PushCommit(t, checkRepo, "change", map[string]string{"docs/README.md": "more\n"}, githubtest.DefaultAuthor)
		e.deliver(t, e.pullHandler(), "pull_request", "synchronize")
		if run := e.run(t, head); run.GetConclusion() != github.ConclusionSuccess {
			t.Fatalf("run on the pushed head: %s", run.GetConclusion())
		}
	})
	t.Run("reopened", func(t *testing.T) {
		e := newCheckEnv(t)
		head := e.gh.PushCommit(t, checkRepo, "change", change, githubtest.DefaultAuthor)
		n := e.gh.OpenPullRequest(t, checkRepo, "change", "main", "Change", githubtest.DefaultAuthor)
		e.gh.ClosePullRequest(t, checkRepo, n)
		e.gh.ReopenPullRequest(t, checkRepo, n)
		e.deliver(t, e.pullHandler(), "pull_request", "reopened")
		if run := e.run(t, head); run.GetConclusion() != github.ConclusionSuccess {
			t.Fatalf("run: %s", run.GetConclusion())
		}
	})
	t.Run("draft, then ready_for_review updates the one run", func(t *testing.T) {
		e := newCheckEnv(t)
		head := e.gh.PushCommit(t, checkRepo, "change", change, githubtest.DefaultAuthor)
		n := e.gh.OpenDraftPullRequest(t, checkRepo, "change", "main", "Change", githubtest.DefaultAuthor)
		e.deliver(t, e.pullHandler(), "pull_request", "opened")
		first := e.run(t, head)
		e.gh.MarkReadyForReview(t, checkRepo, n)
		e.deliver(t, e.pullHandler(), "pull_request", "ready_for_review")
		if run := e.run(t, head); run.GetID() != first.GetID() || run.GetConclusion() != github.ConclusionSuccess {
			t.Fatalf("run %d %s after ready_for_review, want run %d success", run.GetID(), run.GetConclusion(), first.GetID())
		}
	})
	t.Run("bot pull requests are checked", func(t *testing.T) {
		e := newCheckEnv(t)
		bot := githubtest.Author{Name: "dependabot[bot]", Email: "bot@example.com", Login: "dependabot[bot]"}
		head := e.gh.PushCommit(t, checkRepo, "dependabot/nginx", change, bot)
		e.gh.OpenPullRequest(t, checkRepo, "dependabot/nginx", "main", "Bump", bot)
		e.deliver(t, e.pullHandler(), "pull_request", "opened")
		if run := e.run(t, head); run.GetConclusion() != github.ConclusionSuccess {
			t.Fatalf("run: %s", run.GetConclusion())
		}
	})
	t.Run("the service's own pull request keeps the pipeline's check", func(t *testing.T) {
		e := newCheckEnv(t)
		head := e.gh.PushCommit(t, checkRepo, "kukie/abc123", change, githubtest.DefaultAuthor)
		e.gh.OpenPullRequest(t, checkRepo, "kukie/abc123", "main", "kukie: change", githubtest.DefaultAuthor)
		e.deliver(t, e.pullHandler(), "pull_request", "opened")
		if runs := e.gh.CheckRuns(t, checkRepo, head); len(runs) != 0 {
			t.Fatalf("%d check runs on the service's own head, want none from the pull request check", len(runs))
		}
	})
	t.Run("check_run rerequested", func(t *testing.T) {
		e := newCheckEnv(t)
		head := e.gh.PushCommit(t, checkRepo, "change", change, githubtest.DefaultAuthor)
		e.gh.OpenPullRequest(t, checkRepo, "change", "main", "Change", githubtest.DefaultAuthor)
		e.deliver(t, e.pullHandler(), "pull_request", "opened")
		first := e.run(t, head)
		e.gh.ResetRequestCounts()
		e.gh.RerequestCheckRun(t, checkRepo, first.GetID())
		e.deliver(t, &CheckRun{Base: e.base, Pipeline: &trackingPipeline{}, Checks: e.checker}, "check_run", "rerequested")
		if n := e.gh.RequestCount("GET /repos/{owner}/{repo}/compare/{basehead...}"); n != 1 {
			t.Fatalf("%d comparisons after the re-run, want 1", n)
		}
		if run := e.run(t, head); run.GetID() != first.GetID() || run.GetConclusion() != github.ConclusionSuccess {
			t.Fatalf("run %d %s, want run %d success", run.GetID(), run.GetConclusion(), first.GetID())
		}
	})
	t.Run("check_suite rerequested", func(t *testing.T) {
		e := newCheckEnv(t)
		head := e.gh.PushCommit(t, checkRepo, "change", change, githubtest.DefaultAuthor)
		e.gh.OpenPullRequest(t, checkRepo, "change", "main", "Change", githubtest.DefaultAuthor)
		e.gh.RerequestCheckSuite(t, checkRepo, head)
		e.deliver(t, &CheckSuite{Base: e.base, Pipeline: &trackingPipeline{}, Checks: e.checker}, "check_suite", "rerequested")
		if run := e.run(t, head); run.GetConclusion() != github.ConclusionSuccess {
			t.Fatalf("run: %s", run.GetConclusion())
		}
	})
	t.Run("fork", func(t *testing.T) {
		e := newCheckEnv(t)
		e.gh.OpenForkPullRequest(t, checkRepo, "mallory", "patch-1", "main", "From a fork", change)
		e.deliver(t, e.pullHandler(), "pull_request", "opened")
		head := e.gh.PullRequests(t, checkRepo)[0].GetHead().GetSHA()
		run := e.run(t, head)
		if run.GetConclusion() != github.ConclusionSuccess || !strings.Contains(run.GetOutput().GetText(), `+  a: "2"`) {
			t.Fatalf("fork run %s:\n%s", run.GetConclusion(), run.GetOutput().GetText())
		}
	})
	t.Run("merge_group checks_requested", func(t *testing.T) {
		e := newCheckEnv(t)
		e.gh.PushCommit(t, checkRepo, "change", change, githubtest.DefaultAuthor)
		n := e.gh.OpenPullRequest(t, checkRepo, "change", "main", "Change", githubtest.DefaultAuthor)
		head, _ := e.gh.QueueMergeGroup(t, checkRepo, n)
		e.deliver(t, &MergeGroup{Base: e.base, Checks: e.checker}, "merge_group", "checks_requested")
		run := e.run(t, head)
		if run.GetConclusion() != github.ConclusionSuccess || !strings.HasPrefix(run.GetExternalID(), "merge_group/refs/heads/gh-readonly-queue/main/pr-") {
			t.Fatalf("group run %s %q", run.GetConclusion(), run.GetExternalID())
		}
	})
}

// TestPullCheckNewerPushSupersedesARunningCheck holds the first head's check at its
// comparison while a second head arrives: the first stops and says so on its own
// head, the second is published on the new head, and nothing of the first reaches
// the new head.
func TestPullCheckNewerPushSupersedesARunningCheck(t *testing.T) {
	e := newCheckEnv(t)
	first := e.gh.PushCommit(t, checkRepo, "change", map[string]string{"apps/solo/cm.yaml": "broken: [\n"}, githubtest.DefaultAuthor)
	n := e.gh.OpenPullRequest(t, checkRepo, "change", "main", "Change", githubtest.DefaultAuthor)

	held, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	e.gh.OnRequest("GET /repos/{owner}/{repo}/compare/{basehead...}", func() {
		if calls.Add(1) == 1 {
			close(held)
			<-release
		}
	})
	defer close(release)
	headOf := func(sha string) prcheck.Head {
		return prcheck.Head{InstallationID: e.inst, Repo: checkRepo, RepoURL: "https://" + e.base.WebHost + "/acme/deploy",
			BaseBranch: "main", BaseSHA: e.gh.Head(t, checkRepo, "main"), HeadSHA: sha, Key: pullKey(int64(n))}
	}
	done := make(chan error, 1)
	go func() { done <- e.checker.Check(context.Background(), headOf(first)) }()
	<-held
	// Pushed once the first head's check runs: a head that is no longer the pull
	// request's is not checked at all.
	second := e.gh.PushCommit(t, checkRepo, "change", map[string]string{"apps/solo/cm.yaml": checkFiles["apps/solo/cm.yaml"] + "  b: \"3\"\n"}, githubtest.DefaultAuthor)
	if err := e.checker.Check(context.Background(), headOf(second)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("superseded check: %v", err)
	}
	old := e.run(t, first)
	if old.GetConclusion() != github.ConclusionCancelled || !strings.Contains(old.GetOutput().GetSummary(), second[:7]) {
		t.Fatalf("first head's run %s %q, want cancelled naming %s", old.GetConclusion(), old.GetOutput().GetSummary(), second[:7])
	}
	if run := e.run(t, second); run.GetConclusion() != github.ConclusionSuccess {
		t.Fatalf("second head's run %s, want success", run.GetConclusion())
	}
}

// TestPullCheckHeadTree: a small change's head is the base's tree with the changed
// blobs written over it (no download of the head), a large one's the head's
// archive; both render the same.
func TestPullCheckHeadTree(t *testing.T) {
	for _, n := range []int{1, 21} {
		t.Run(fmt.Sprintf("%d files", n), func(t *testing.T) {
			e := newCheckEnv(t)
			files := map[string]string{"apps/solo/cm.yaml": strings.Replace(checkFiles["apps/solo/cm.yaml"], `"1"`, `"2"`, 1)}
			for i := 1; i < n; i++ {
				files[fmt.Sprintf("docs/page-%d.md", i)] = "more\n"
			}
			head := e.gh.PushCommit(t, checkRepo, "change", files, githubtest.DefaultAuthor)
			e.gh.OpenPullRequest(t, checkRepo, "change", "main", "Change", githubtest.DefaultAuthor)
			before := e.gh.TarballDownloads(checkRepo)
			e.deliver(t, e.pullHandler(), "pull_request", "opened")
			run := e.run(t, head)
			if run.GetConclusion() != github.ConclusionSuccess || !strings.Contains(run.GetOutput().GetText(), `+  a: "2"`) {
				t.Fatalf("run %s:\n%s", run.GetConclusion(), run.GetOutput().GetText())
			}
			want := 1 // the base
			if n > 20 {
				want = 2
			}
			if got := e.gh.TarballDownloads(checkRepo) - before; got != want {
				t.Fatalf("%d archive downloads, want %d", got, want)
			}
		})
	}
}
