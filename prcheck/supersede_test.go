package prcheck_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/prcheck"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

const repo = "acme/deploy"

var files = map[string]string{
	"apps/web/kustomization.yaml": "resources:\n- deployment.yaml\n",
	"apps/web/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  template:\n    spec:\n" +
		"      containers:\n      - name: web\n        image: nginx:1.0\n",
}

type connections struct{}

func (connections) ConnectedClusters(context.Context, int64, string) (string, []string, error) {
	return "team", []string{"prod"}, nil
}

type applications struct{ apps []argocd.Application }

func (a applications) Applications(context.Context, string, string) ([]argocd.Application, error) {
	return a.apps, nil
}

// heldGitHub is a replica's GitHub that holds the comparison of one head: until
// release is closed, or, with release nil, until the check's context ends.
type heldGitHub struct {
	github.Repos
	head    string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *heldGitHub) Compare(ctx context.Context, inst int64, repo, base, head string) (github.Comparison, error) {
	if head == g.head {
		g.once.Do(func() { close(g.entered) })
		select {
		case <-g.release:
		case <-ctx.Done():
			return github.Comparison{}, ctx.Err()
		}
	}
	return g.Repos.Compare(ctx, inst, repo, base, head)
}

// replicas is one repository on the fake GitHub and two replicas of the checker
// sharing db, each with its own process state and caches.
type replicas struct {
	gh   *githubtest.Server
	inst int64
	db   *store.DB
	a, b *prcheck.Checker
	held *heldGitHub
}

// fakeRepo serves files as the repository acme/deploy of a fake GitHub the App
// is installed on, and returns readers of it (github.Repos), each with archive
// caches of its own, and its clone URL as Applications name it.
func fakeRepo(t *testing.T, files map[string]string) (s *githubtest.Server, inst int64, repos func() github.Repos, url string) {
	t.Helper()
	s = githubtest.New(t)
	s.CreateRepo(t, "acme", "deploy", files, "main")
	inst = s.CreateInstallation(t, "acme", "deploy")
	cc, err := github.NewClientCreator(github.Config{AppID: s.AppID(), PrivateKey: s.PrivateKeyPEM(), APIURL: s.APIURL(), WebURL: s.URL()}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	repos = func() github.Repos {
		archives, err := cache.NewArchives(t.TempDir(), 64<<20, cache.DefaultArchiveLimits)
		if err != nil {
			t.Fatal(err)
		}
		return github.Repos{Clients: cc, Archives: archives}
	}
	return s, inst, repos, "https://" + strings.TrimPrefix(s.URL(), "http://") + "/acme/deploy.git"
}

func newReplicas(t *testing.T, db *store.DB, poll time.Duration) *replicas {
	t.Helper()
	s, inst, repos, url := fakeRepo(t, files)
	apps := applications{[]argocd.Application{{Name: "web", Namespace: "argocd", Spec: argocd.AppSpec{
		Source:      &argocd.AppSource{RepoURL: url, Path: "apps/web", TargetRevision: "main"},
		Destination: argocd.AppDestination{Namespace: "web"}}, Status: argocd.AppStatus{SourceType: "Kustomize"}}}}
	replica := func(gh prcheck.GitHub) *prcheck.Checker {
		return &prcheck.Checker{GitHub: gh, Connections: connections{}, Applications: apps, Records: db,
			PublicURL: "https://kukie.example", SupersedePoll: poll}
	}
	held := &heldGitHub{Repos: repos(), entered: make(chan struct{})}
	return &replicas{gh: s, inst: inst, db: db, a: replica(held), b: replica(repos()), held: held}
}

func (r *replicas) head(t *testing.T, number int, sha string) prcheck.Head {
	t.Helper()
	rp, err := github.ParseRepoURL(r.gh.URL() + "/" + repo)
	if err != nil {
		t.Fatal(err)
	}
	return prcheck.Head{InstallationID: r.inst, Repo: repo, RepoURL: rp.URL(), BaseBranch: "main",
		BaseSHA: r.gh.Head(t, repo, "main"), HeadSHA: sha, Key: "pull/" + strconv.Itoa(number)}
}

func (r *replicas) runs(t *testing.T, sha string) []*gh.CheckRun {
	t.Helper()
	var out []*gh.CheckRun
	for _, run := range r.gh.CheckRuns(t, repo, sha) {
		if run.GetName() == github.CheckRunName {
			out = append(out, run)
		}
	}
	return out
}

func image(tag string) map[string]string {
	return map[string]string{"apps/web/deployment.yaml": strings.Replace(files["apps/web/deployment.yaml"], "nginx:1.0", "nginx:"+tag, 1)}
}

// TestNewerPushOnAnotherReplicaSupersedesTheRunningCheck: replica A checks the first
// head of a pull request; while it runs, the second push is checked to the end by
// replica B on the same database. A must not publish its result: its run on the
// old head ends cancelled, naming the newer head, and the new head carries only B's
// result. A learns it either from its poll while rendering (it would otherwise wait
// forever) or from the question it asks before it publishes.
func TestNewerPushOnAnotherReplicaSupersedesTheRunningCheck(t *testing.T) {
	for name, tc := range map[string]struct {
		poll time.Duration
		// hold until released after B is done (the check before publishing decides),
		// or until A's own context ends (only the poll can end it).
		releaseAfterB bool
	}{
		"asked before publishing": {poll: time.Hour, releaseAfterB: true},
		"noticed while rendering": {poll: 10 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			storetest.ForEach(t, func(t *testing.T, db *store.DB) {
				r := newReplicas(t, db, tc.poll)
				ctx := context.Background()
				old := r.gh.PushCommit(t, repo, "feature", image("1.1"), githubtest.DefaultAuthor)
				number := r.gh.OpenPullRequest(t, repo, "feature", "main", "Bump", githubtest.DefaultAuthor)
				r.held.head = old
				if tc.releaseAfterB {
					r.held.release = make(chan struct{})
				}
				aDone := make(chan error, 1)
				go func() { aDone <- r.a.Check(ctx, r.head(t, number, old)) }()
				<-r.held.entered

				newer := r.gh.PushCommit(t, repo, "feature", image("1.2"), githubtest.DefaultAuthor)
				if err := r.b.Check(ctx, r.head(t, number, newer)); err != nil {
					t.Fatalf("replica B: %v", err)
				}
				if tc.releaseAfterB {
					close(r.held.release)
				}
				select {
				case err := <-aDone:
					if err != nil {
						t.Fatalf("replica A, superseded: %v, want nil", err)
					}
				case <-time.After(time.Minute): // a bound on a hang, not a measurement
					t.Fatal("replica A was never stopped")
				}

				oldRuns, newRuns := r.runs(t, old), r.runs(t, newer)
				if len(oldRuns) != 1 || oldRuns[0].GetConclusion() != github.ConclusionCancelled ||
					!strings.Contains(oldRuns[0].GetOutput().GetSummary(), newer[:7]) {
					t.Fatalf("old head's runs %v, want one cancelled naming %s", oldRuns, newer[:7])
				}
				if len(newRuns) != 1 || newRuns[0].GetConclusion() != github.ConclusionSuccess ||
					!strings.Contains(newRuns[0].GetOutput().GetText(), "nginx:1.2") || strings.Contains(newRuns[0].GetOutput().GetText(), "nginx:1.1") {
					t.Fatalf("new head's runs %v, want one success with the new head's diff only", newRuns)
				}

				history, err := db.PullChecksOf(ctx, repo, "pull/"+strconv.Itoa(number))
				if err != nil {
					t.Fatal(err)
				}
				if len(history) != 2 || history[0].HeadSHA != newer || history[0].State != store.PullCheckCompleted ||
					history[1].HeadSHA != old || history[1].State != store.PullCheckSuperseded || history[1].Conclusion != github.ConclusionCancelled {
					t.Fatalf("history %+v, want the new head completed and the old superseded", history)
				}
				if want := prcheck.CheckURL("https://kukie.example", history[0].ID); newRuns[0].GetDetailsURL() != want {
					t.Errorf("details link %q, want the check's page %q", newRuns[0].GetDetailsURL(), want)
				}
				rec, res := storedCheck(t, db, history[0].ID)
				if rec.CheckRunID != newRuns[0].GetID() || res.Conclusion != github.ConclusionSuccess || len(res.Apps) != 1 ||
					len(res.Apps[0].Diffs) != 1 || !strings.Contains(res.Apps[0].Diffs[0].Diff, "nginx:1.2") {
					t.Errorf("stored check %+v, result %+v", rec, res)
				}
			})
		})
	}
}

// TestClosedPullRequestStopsItsCheckOnAnotherReplica: the pull request closes while
// replica A checks it; the close reaches replica B, and A's run ends cancelled.
func TestClosedPullRequestStopsItsCheckOnAnotherReplica(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		r := newReplicas(t, db, 10*time.Millisecond)
		ctx := context.Background()
		head := r.gh.PushCommit(t, repo, "feature", image("1.1"), githubtest.DefaultAuthor)
		number := r.gh.OpenPullRequest(t, repo, "feature", "main", "Bump", githubtest.DefaultAuthor)
		r.held.head = head
		aDone := make(chan error, 1)
		go func() { aDone <- r.a.Check(ctx, r.head(t, number, head)) }()
		<-r.held.entered
		if err := r.b.Cancel(ctx, repo, "pull/"+strconv.Itoa(number)); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-aDone:
			if err != nil {
				t.Fatalf("replica A: %v", err)
			}
		case <-time.After(time.Minute): // a bound on a hang, not a measurement
			t.Fatal("replica A was never stopped")
		}
		runs := r.runs(t, head)
		if len(runs) != 1 || runs[0].GetConclusion() != github.ConclusionCancelled || !strings.Contains(runs[0].GetOutput().GetSummary(), "closed") {
			t.Fatalf("runs %v, want one cancelled saying the pull request closed", runs)
		}
	})
}

// storedCheck is the check id as the store keeps it, and its result.
func storedCheck(t *testing.T, db *store.DB, id string) (store.PullCheck, prcheck.Result) {
	t.Helper()
	rec, err := db.PullCheckByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var res prcheck.Result
	if err := json.Unmarshal(rec.Result, &res); err != nil {
		t.Fatal(err)
	}
	return rec, res
}
