package plan_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// benchDeployments and benchServices make the 30-object Kustomize app of the
// benchmark: one file per object, listed in one kustomization, so requests on
// different Deployments edit different files and never wait for each other.
const (
	benchDeployments = 20
	benchServices    = 10
	benchAppPath     = "apps/shop"
)

func benchRepo() map[string]string {
	files := map[string]string{}
	var resources []string
	for i := range benchDeployments {
		name := fmt.Sprintf("svc%02d", i)
		files[benchAppPath+"/"+name+"-deployment.yaml"] = fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 2
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      containers:
        - name: %[1]s
          image: registry.example/%[1]s:1.0.0
          env:
            - name: LOG_LEVEL
              value: info
`, name)
		resources = append(resources, name+"-deployment.yaml")
	}
	for i := range benchServices {
		name := fmt.Sprintf("svc%02d", i)
		files[benchAppPath+"/"+name+"-service.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: %[1]s\nspec:\n  selector:\n    app: %[1]s\n  ports:\n    - port: 80\n", name)
		resources = append(resources, name+"-service.yaml")
	}
	files[benchAppPath+"/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: shop\nresources:\n  - " + strings.Join(resources, "\n  - ") + "\n"
	return files
}

// benchCluster manages every target through the Kustomize Application argocd/shop.
type benchCluster struct{ app argocd.Application }

func newBenchCluster() *benchCluster {
	return &benchCluster{app: argocd.Application{Name: "shop", Namespace: "argocd", Spec: argocd.AppSpec{
		Source:      &argocd.AppSource{RepoURL: repoURL, Path: benchAppPath, TargetRevision: "main"},
		Destination: argocd.AppDestination{Namespace: "shop"},
	}, Status: argocd.AppStatus{SourceType: "Kustomize"}}}
}

func (c *benchCluster) Decide(_ context.Context, _ clusteraccess.Ref, t objref.Target) argocd.Decision {
	app := c.app
	ref := argocd.ResourceRef{Group: "apps", Version: "v1", Kind: t.Kind, Namespace: t.Namespace, Name: t.Name}
	own := argocd.Ownership{Managed: true, App: app.Key(), Application: &app, Level: argocd.LevelManual, Reason: "tracked"}
	return argocd.Decision{Path: argocd.PathGit, Known: true, Level: argocd.LevelManual, Reason: "managed",
		Targets: []argocd.TargetDecision{{Ref: ref, Path: argocd.PathGit, Known: true, Ownership: own}}}
}

func (c *benchCluster) Applications(context.Context, clusteraccess.Ref) ([]argocd.Application, error) {
	return []argocd.Application{c.app}, nil
}

func (c *benchCluster) Capabilities(context.Context, clusteraccess.Ref) (kube.Capabilities, error) {
	return kube.Capabilities{}, nil
}

// ClusterByServer finds no cluster: the team registered none beside the plan's.
func (c *benchCluster) ClusterByServer(context.Context, string, string) (string, bool, error) {
	return "", false, nil
}

func (c *benchCluster) Clusters(context.Context, string) ([]string, error) {
	return []string{"prod"}, nil
}

func (c *benchCluster) Application(context.Context, clusteraccess.Ref, string, string) (argocd.Application, error) {
	return c.app, nil
}

func (c *benchCluster) Object(context.Context, clusteraccess.Ref, objref.Target) (map[string]any, error) {
	return nil, clusteraccess.ErrObjectNotFound
}

func (c *benchCluster) DryRun(context.Context, clusteraccess.Ref, []map[string]any) error { return nil }

// timed adds up the wall time spent in render and in GitHub calls.
type timed struct {
	render, github atomic.Int64
}

func (t *timed) since(into *atomic.Int64, start time.Time) { into.Add(int64(time.Since(start))) }

type timedRenderer struct {
	cache.RenderEngine
	t *timed
}

func (r timedRenderer) Plan(ctx context.Context, at cache.Commit, req render.Request) (*render.Result, error) {
	defer r.t.since(&r.t.render, time.Now())
	return r.RenderEngine.Plan(ctx, at, req)
}

type timedRepos struct {
	plan.Repos
	t *timed
}

func (r timedRepos) ResolveRevision(ctx context.Context, inst int64, repo, rev string) (github.Branch, error) {
	defer r.t.since(&r.t.github, time.Now())
	return r.Repos.ResolveRevision(ctx, inst, repo, rev)
}

func (r timedRepos) Snapshot(ctx context.Context, inst int64, repo, sha string) (*cache.Snapshot, error) {
	defer r.t.since(&r.t.github, time.Now())
	return r.Repos.Snapshot(ctx, inst, repo, sha)
}

func (r timedRepos) GetCommit(ctx context.Context, inst int64, repo, sha string) (github.CommitInfo, error) {
	defer r.t.since(&r.t.github, time.Now())
	return r.Repos.GetCommit(ctx, inst, repo, sha)
}

func (r timedRepos) CreateCommit(ctx context.Context, inst int64, repo, base, msg string, files []github.FileChange) (github.CommitInfo, error) {
	defer r.t.since(&r.t.github, time.Now())
	return r.Repos.CreateCommit(ctx, inst, repo, base, msg, files)
}

func (r timedRepos) BranchHead(ctx context.Context, inst int64, repo, branch string) (string, bool, error) {
	defer r.t.since(&r.t.github, time.Now())
	return r.Repos.BranchHead(ctx, inst, repo, branch)
}

func (r timedRepos) SetBranch(ctx context.Context, inst int64, repo, branch, sha string) error {
	defer r.t.since(&r.t.github, time.Now())
	return r.Repos.SetBranch(ctx, inst, repo, branch, sha)
}

func (r timedRepos) OpenPull(ctx context.Context, inst int64, repo string, np github.NewPull) (github.PullRequest, error) {
	defer r.t.since(&r.t.github, time.Now())
	return r.Repos.OpenPull(ctx, inst, repo, np)
}

func (r timedRepos) PublishCheckRun(ctx context.Context, inst int64, repo, sha string, id int64, rep github.CheckReport) (github.CheckRunRef, error) {
	defer r.t.since(&r.t.github, time.Now())
	return r.Repos.PublishCheckRun(ctx, inst, repo, sha, id, rep)
}

func (r timedRepos) ClosePull(ctx context.Context, inst int64, repo string, number int64) error {
	defer r.t.since(&r.t.github, time.Now())
	return r.Repos.ClosePull(ctx, inst, repo, number)
}

// BenchmarkRequestToPR measures request → pull request opened (the check run
// published) for a replicas change on a 30-object Kustomize app against the fake
// GitHub, 100 requests one after the other and 20 at once, and splits the time into
// render/verify, GitHub calls, and the rest (database and scheduling).
func BenchmarkRequestToPR(b *testing.B) {
	for _, db := range []struct {
		name string
		open func(testing.TB) *store.DB
	}{{"sqlite", storetest.SQLite}, {"postgres", storetest.Postgres}} {
		if db.name == "postgres" && os.Getenv(storetest.PostgresURLEnv) == "" {
			b.Logf("PostgreSQL benchmark skipped: %s is not set", storetest.PostgresURLEnv)
			continue
		}
		for _, mode := range []struct {
			name        string
			requests    int
			concurrency int
		}{{"sequential-100", 100, 1}, {"concurrent-20", 20, 20}} {
			b.Run(db.name+"/"+mode.name, func(b *testing.B) {
				for range b.N {
					runRequestToPR(b, db.open(b), mode.requests, mode.concurrency)
				}
			})
		}
	}
}

func runRequestToPR(b *testing.B, db *store.DB, requests, concurrency int) {
	b.StopTimer()
	ctx := context.Background()
	s := githubtest.New(b)
	s.CreateRepo(b, "acme", "deploy", benchRepo(), "main")
	inst := s.CreateInstallation(b, "acme", "deploy")
	cc, err := github.NewClientCreator(github.Config{AppID: s.AppID(), PrivateKey: s.PrivateKeyPEM(), APIURL: s.APIURL(), WebURL: s.URL()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	archives, err := cache.NewArchives(b.TempDir(), 256<<20, cache.DefaultArchiveLimits)
	if err != nil {
		b.Fatal(err)
	}
	team, err := db.EnsureTeam(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	tm := &timed{}
	p := plan.New(plan.Deps{Store: db, Clusters: newBenchCluster(), Renderer: timedRenderer{t: tm},
		Repos: timedRepos{Repos: github.Repos{Clients: cc, Archives: archives}, t: tm}, Connections: &connections{inst: inst, connected: true}},
		plan.Config{ClaimTTL: time.Minute})
	defer p.Close()

	latencies := make([]time.Duration, 0, requests)
	var mu sync.Mutex
	one := func(i int) {
		name := fmt.Sprintf("svc%02d", i%benchDeployments)
		req := plan.Request{Cluster: "prod", Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: name},
			Change: render.Change{Replicas: &render.Replicas{Count: int64(3 + i%5)}}, Reason: "load", RequestedBy: "bench"}
		start := time.Now()
		pl, _, err := p.Submit(ctx, team.ID, "bench", req)
		if err != nil {
			b.Error(err)
			return
		}
		for {
			cur, err := db.PlanByCode(ctx, pl.Code)
			if err != nil {
				b.Error(err)
				return
			}
			if cur.Status == string(plan.StatusPROpen) && cur.CheckRunID != 0 {
				mu.Lock()
				latencies = append(latencies, time.Since(start))
				mu.Unlock()
				// Close it so the next request on this Deployment does not wait.
				if _, err := p.Cancel(ctx, team.ID, pl.Code, ""); err != nil {
					b.Error(err)
				}
				return
			}
			if plan.Status(cur.Status).Terminal() || cur.Status == string(plan.StatusFailed) {
				b.Errorf("plan %s ended %s: %s", cur.Code, cur.Status, cur.StatusReason)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	b.StartTimer()
	began := time.Now()
	if concurrency == 1 {
		for i := range requests {
			one(i)
		}
	} else {
		var wg sync.WaitGroup
		for i := range requests {
			wg.Add(1)
			go func() { defer wg.Done(); one(i) }()
		}
		wg.Wait()
	}
	wall := time.Since(began)
	b.StopTimer()
	if len(latencies) == 0 {
		b.Fatal("no request reached a pull request")
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(q float64) time.Duration { return latencies[min(len(latencies)-1, int(q*float64(len(latencies))))] }
	var sum time.Duration
	for _, l := range latencies {
		sum += l
	}
	n := float64(len(latencies))
	renderMS := float64(tm.render.Load()) / 1e6 / n
	githubMS := float64(tm.github.Load()) / 1e6 / n
	meanMS := float64(sum) / 1e6 / n
	b.ReportMetric(float64(pct(0.50))/1e6, "p50-ms")
	b.ReportMetric(float64(pct(0.99))/1e6, "p99-ms")
	b.ReportMetric(renderMS, "render-ms/req")
	b.ReportMetric(githubMS, "github-ms/req")
	b.ReportMetric(meanMS-renderMS-githubMS, "db+other-ms/req")
	b.ReportMetric(float64(wall)/1e6, "wall-ms")
	b.ReportMetric(float64(s.TarballDownloads("acme/deploy")), "tarballs")
}
