package render

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render/helmexec"
)

// The benchmarks generate repositories and time a full Plan (locate, edit, render
// before and after, verify). With KUKIE_KUSTOMIZE_BIN pointing at a kustomize CLI
// (hack/kustomize-cli.sh builds one) they also report the ratio of a plan to two
// "kustomize build" runs of the edited app: what a person checking by hand would do.

// genBase writes a base of n objects: deployments, services and config maps in turn.
func genBase(files map[string]string, dir string, n int) {
	var resources []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("svc%02d", i/3)
		var f, body string
		switch i % 3 {
		case 0:
			f = fmt.Sprintf("deployment-%s.yaml", name)
			body = fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels:
    app: %[1]s
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
          image: ghcr.io/example/%[1]s:1.0.0
          env:
            - name: LOG_LEVEL
              value: info
          resources:
            requests:
              cpu: 100m
              memory: 128Mi
`, name)
		case 1:
			f = fmt.Sprintf("service-%s.yaml", name)
			body = fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: %[1]s\nspec:\n  selector:\n    app: %[1]s\n  ports:\n    - port: 80\n      targetPort: 8080\n", name)
		default:
			f = fmt.Sprintf("configmap-%s.yaml", name)
			body = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %[1]s\ndata:\n  MODE: fast\n", name)
		}
		files[dir+"/"+f] = body
		resources = append(resources, "  - "+f)
	}
	files[dir+"/kustomization.yaml"] = "resources:\n" + strings.Join(resources, "\n") + "\n"
}

// genOverlay writes an overlay of base; an empty ns leaves the namespace to the
// Applications' destinations.
func genOverlay(files map[string]string, dir, base, ns string) {
	namespace := ""
	if ns != "" {
		namespace = "namespace: " + ns + "\n"
	}
	files[dir+"/kustomization.yaml"] = fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
%sresources:
  - %s
images:
  - name: ghcr.io/example/svc00
    newTag: "1.0.1"
`, namespace, base)
}

// monorepo generates bases × overlaysPerBase overlay apps (objects per base) and
// directoryApps plain apps of 3 objects each.
func monorepo(b *testing.B, bases, overlaysPerBase, objects, directoryApps int) (string, []Application) {
	files := map[string]string{}
	var apps []Application
	for i := 0; i < bases; i++ {
		genBase(files, fmt.Sprintf("bases/b%03d", i), objects)
		for j := 0; j < overlaysPerBase; j++ {
			dir := fmt.Sprintf("overlays/b%03d-o%02d", i, j)
			ns := fmt.Sprintf("ns-%03d-%02d", i, j)
			genOverlay(files, dir, fmt.Sprintf("../../bases/b%03d", i), ns)
			apps = append(apps, Application{Name: "app-" + ns, Path: dir, SourceType: SourceKustomize, Namespace: ns})
		}
	}
	for i := 0; i < directoryApps; i++ {
		dir := fmt.Sprintf("plain/p%03d", i)
		genBase(files, dir, 3)
		delete(files, dir+"/kustomization.yaml")
		apps = append(apps, Application{Name: fmt.Sprintf("plain-%03d", i), Path: dir, SourceType: SourceDirectory, Namespace: fmt.Sprintf("plain-%03d", i)})
	}
	return testtree.Write(b, files), apps
}

func benchPlan(b *testing.B, req Request, wantRefusal string) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_, err := Plan(context.Background(), req)
		var ref *Refusal
		switch {
		case wantRefusal == "" && err != nil:
			b.Fatalf("Plan: %v", err)
		case wantRefusal != "" && (!errors.As(err, &ref) || ref.Code != wantRefusal):
			b.Fatalf("want refusal %s, got %v", wantRefusal, err)
		}
	}
}

// reportCLIRatio times two "kustomize build" runs of dir and reports how a plan's
// time per op compares to them.
func reportCLIRatio(b *testing.B, dir string) {
	bin := os.Getenv("KUKIE_KUSTOMIZE_BIN")
	if bin == "" {
		return
	}
	b.StopTimer()
	const rounds = 5
	start := time.Now()
	for range rounds * 2 {
		out, err := exec.Command(bin, "build", dir).CombinedOutput()
		if err != nil {
			b.Fatalf("kustomize build %s: %v\n%s", dir, err, out)
		}
	}
	twoBuilds := time.Since(start) / rounds
	b.StartTimer()
	perOp := float64(b.Elapsed()) / float64(b.N)
	b.ReportMetric(perOp/float64(twoBuilds), "plan/2-cli-builds")
	b.ReportMetric(float64(twoBuilds.Nanoseconds()), "ns/2-cli-builds")
}

// BenchmarkPlanOverlay30 plans a replicas change in one overlay app of 30 objects.
func BenchmarkPlanOverlay30(b *testing.B) {
	repo, apps := monorepo(b, 1, 1, 30, 0)
	req := Request{RepoDir: repo, Apps: apps, App: apps[0].Name,
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "svc03"},
		Change: Change{Replicas: &Replicas{Count: 5}}}
	benchPlan(b, req, "")
	reportCLIRatio(b, filepath.Join(repo, apps[0].Path))
}

// BenchmarkPlanMonorepo plans an edit in one overlay of a monorepo of 500 overlays
// on 50 bases plus 500 plain apps (1,000 apps); the time must not grow with the
// number of unaffected apps: compare apps=10 (5 overlays on 1 base, 5 plain apps).
func BenchmarkPlanMonorepo(b *testing.B) {
	for _, size := range []struct{ bases, overlays, plain int }{{1, 5, 5}, {50, 10, 500}} {
		b.Run(fmt.Sprintf("apps=%d", size.bases*size.overlays+size.plain), func(b *testing.B) {
			repo, all := monorepo(b, size.bases, size.overlays, 12, size.plain)
			req := Request{RepoDir: repo, Apps: all, App: all[0].Name,
				Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "svc01"},
				Change: Change{Image: &Image{Container: "svc01", Tag: "2.0.0"}}}
			benchPlan(b, req, "")
			reportCLIRatio(b, filepath.Join(repo, all[0].Path))
		})
	}
}

// BenchmarkPlanMonorepoSameCommit is BenchmarkPlanMonorepo with the tree
// identified (Request.TreeID), as the pipeline plans on extracted commits: the
// steady state of repeated plans on one commit, each app's reach remembered.
func BenchmarkPlanMonorepoSameCommit(b *testing.B) {
	for _, size := range []struct{ bases, overlays, plain int }{{1, 5, 5}, {50, 10, 500}} {
		b.Run(fmt.Sprintf("apps=%d", size.bases*size.overlays+size.plain), func(b *testing.B) {
			repo, all := monorepo(b, size.bases, size.overlays, 12, size.plain)
			req := Request{RepoDir: repo, TreeID: "monorepo@" + b.Name(), Apps: all, App: all[0].Name,
				Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "svc01"},
				Change: Change{Image: &Image{Container: "svc01", Tag: "2.0.0"}}}
			if _, err := Plan(context.Background(), req); err != nil {
				b.Fatalf("Plan: %v", err)
			}
			benchPlan(b, req, "")
		})
	}
}

// BenchmarkPlanSharedFolder200 edits a folder that 200 Applications (different
// destinations) deploy: all 200 are rendered and verified, and the plan is refused
// because the change would reach the 199 other destinations.
func BenchmarkPlanSharedFolder200(b *testing.B) {
	files := map[string]string{}
	genBase(files, "bases/web", 30)
	genOverlay(files, "overlays/all", "../../bases/web", "")
	repo := testtree.Write(b, files)
	one := []Application{{Path: "overlays/all", SourceType: SourceKustomize}}
	var apps []Application
	for i := range 200 {
		a := one[0]
		a.Name = fmt.Sprintf("cluster-%03d", i)
		a.Namespace = fmt.Sprintf("ns-%03d", i)
		apps = append(apps, a)
	}
	// The overlay's images entry is shared by all 200: editing it reaches them all.
	req := Request{RepoDir: repo, Apps: apps, App: apps[0].Name,
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "svc00"},
		Change: Change{Image: &Image{Container: "svc00", Tag: "9.9.9"}}}
	benchPlan(b, req, CodeLeak)
	reportCLIRatio(b, filepath.Join(repo, apps[0].Path))
}

// BenchmarkVerify times one verification (render after, compare every object) of a
// 30-object overlay app; the before-render is cached, as within a plan.
func BenchmarkVerify(b *testing.B) {
	repo, apps := monorepo(b, 1, 1, 30, 0)
	p, err := newPlanner(context.Background(), Request{RepoDir: repo, Apps: apps, App: apps[0].Name,
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "svc03"},
		Change: Change{Replicas: &Replicas{Count: 5}}})
	if err != nil {
		b.Fatal(err)
	}
	objs, err := p.render(p.before, p.primary)
	if err != nil {
		b.Fatal(err)
	}
	target, err := p.findTarget(p.primary, objs)
	if err != nil {
		b.Fatal(err)
	}
	expected, err := expectedAfter(target, p.req.Change)
	if err != nil {
		b.Fatal(err)
	}
	exp := &changeExpectation{primary: p.primary.Name, target: target.key(p.primary.Namespace), expected: expected}
	builders, err := p.kustomizeBuilders(target, expected)
	if err != nil {
		b.Fatal(err)
	}
	c, err := builders[len(builders)-1].build()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p.r = newRenderer(context.Background()) // no cached after-render
		vr, err := p.verify(context.Background(), c, exp)
		if err != nil || !vr.ok {
			b.Fatalf("verify: %v %+v", err, vr)
		}
	}
}

// BenchmarkCompare times the field-by-field comparison alone.
func BenchmarkCompare(b *testing.B) {
	repo, apps := monorepo(b, 1, 1, 30, 0)
	p, err := newPlanner(context.Background(), Request{RepoDir: repo, Apps: apps, App: apps[0].Name, Target: objref.Target{APIVersion: "v1", Kind: "x", Name: "x"}, Change: Change{Replicas: &Replicas{Count: 1}}})
	if err != nil {
		b.Fatal(err)
	}
	objs, err := p.render(p.before, p.primary)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, o := range objs {
			var d []difference
			compareValues(nil, o.body, o.body, &d, maxReportedDifferences)
			if len(d) != 0 {
				b.Fatal("an object differs from itself")
			}
		}
	}
}

// BenchmarkPlanMonorepoNewCommit is the first plan on each new commit of the
// monorepos of BenchmarkPlanMonorepo, each commit changing one overlay no plan
// edits (another app's image tag), as the pipeline plans on a branch that moves:
// index=full reads every app's reach again on each commit, index=incremental
// derives it from the previous commit's and the changed path (Request.Since).
// The time must not grow with the number of apps the commit leaves alone;
// cpu-ms/op, the process's CPU time per plan, is what a loaded machine distorts
// least.
func BenchmarkPlanMonorepoNewCommit(b *testing.B) {
	for _, size := range []struct{ bases, overlays, plain int }{{1, 5, 5}, {50, 10, 500}} {
		for _, incremental := range []bool{false, true} {
			index := map[bool]string{false: "full", true: "incremental"}[incremental]
			b.Run(fmt.Sprintf("apps=%d/index=%s", size.bases*size.overlays+size.plain, index), func(b *testing.B) {
				repo, all := monorepo(b, size.bases, size.overlays, 12, size.plain)
				// The last overlay app; the plan edits the first.
				moved := all[size.bases*size.overlays-1].Path + "/kustomization.yaml"
				base := filepath.Join(repo, filepath.FromSlash(moved))
				original, err := os.ReadFile(base)
				if err != nil {
					b.Fatal(err)
				}
				req := Request{RepoDir: repo, Apps: all, App: all[0].Name,
					Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "svc01"},
					Change: Change{Image: &Image{Container: "svc01", Tag: "2.0.0"}}}
				// The directory is new on each run: a tree id never names two contents.
				tree := func(i int) string { return fmt.Sprintf("%s@%d", repo, i) }
				req.TreeID = tree(0)
				if _, err := Plan(context.Background(), req); err != nil {
					b.Fatalf("Plan: %v", err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				var cpu time.Duration
				for i := 1; i <= b.N; i++ {
					b.StopTimer()
					tag := fmt.Sprintf("newTag: \"1.0.%d\"", i+1)
					if err := os.WriteFile(base, []byte(strings.Replace(string(original), `newTag: "1.0.1"`, tag, 1)), 0o644); err != nil {
						b.Fatal(err)
					}
					req.TreeID = tree(i)
					req.Since = nil
					if incremental {
						req.Since = &PriorTree{TreeID: tree(i - 1), Changed: []string{moved}}
					}
					b.StartTimer()
					began := processCPU()
					if _, err := Plan(context.Background(), req); err != nil {
						b.Fatalf("Plan: %v", err)
					}
					cpu += processCPU() - began
				}
				b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/op")
			})
		}
	}
}

// BenchmarkKustomizeBuild renders the overlay app of 30 objects of
// BenchmarkPlanOverlay30, its kustomize build in a warm worker and in process:
// the difference is what a worker adds (the file system calls over the pipe,
// the resources' encoding).
func BenchmarkKustomizeBuild(b *testing.B) {
	repo, apps := monorepo(b, 1, 1, 30, 0)
	tr, err := openTree(repo)
	if err != nil {
		b.Fatal(err)
	}
	pool := helmexec.New(helmexec.Config{Workers: 1})
	defer pool.Close()
	calls := &fsCallCounter{}
	pool.SetObserver(calls)
	for _, mode := range []string{"worker", "in-process"} {
		b.Run(mode, func(b *testing.B) {
			ctx := WithKustomizeWorkers(context.Background(), pool)
			if mode == "in-process" {
				SetKustomizeInProcess(true)
				defer SetKustomizeInProcess(false)
				ctx = context.Background()
			}
			calls.reset()
			for b.Loop() {
				if _, err := renderApp(ctx, newView(tr, nil), apps[0], true); err != nil {
					b.Fatal(err)
				}
			}
			if mode == "worker" {
				calls.report(b)
			}
		})
	}
}

// fsCallCounter counts the file system calls of kustomize builds in workers:
// those sent to this process and those answered from the request.
type fsCallCounter struct {
	builds, forwarded, answered atomic.Int64
}

func (c *fsCallCounter) WorkerStarted()                  {}
func (c *fsCallCounter) WorkerExited(helmexec.ExitCause) {}
func (c *fsCallCounter) Rendered(ev helmexec.RenderEvent) {
	c.builds.Add(1)
	c.forwarded.Add(int64(ev.Forwarded))
	c.answered.Add(int64(ev.Answered))
}

func (c *fsCallCounter) reset() {
	c.builds.Store(0)
	c.forwarded.Store(0)
	c.answered.Store(0)
}

// report reports the calls per build.
func (c *fsCallCounter) report(b *testing.B) {
	if n := c.builds.Load(); n > 0 {
		b.ReportMetric(float64(c.forwarded.Load())/float64(n), "forwarded/build")
		b.ReportMetric(float64(c.answered.Load())/float64(n), "answered/build")
	}
}
