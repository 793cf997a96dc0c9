package render

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render/helmexec"
)

// nameReferenceRepository is a kustomization within every bound render checks
// that makes kustomize's name reference pass quadratic: deployments Deployments
// each referencing 20 ConfigMaps of their own (envFrom), all under a name
// prefix, a namespace and common labels, about a thousand documents in one file.
func nameReferenceRepository(t *testing.T, deployments int) string {
	t.Helper()
	var docs strings.Builder
	for d := range deployments {
		fmt.Fprintf(&docs, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d%d\nspec:\n  selector:\n    matchLabels:\n      app: d%d\n  template:\n    metadata:\n      labels:\n        app: d%d\n    spec:\n      containers:\n      - name: c\n        image: nginx\n        envFrom:\n", d, d, d)
		for c := range 20 {
			fmt.Fprintf(&docs, "        - configMapRef:\n            name: cm%d-%d\n", d, c)
		}
		for c := range 20 {
			fmt.Fprintf(&docs, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm%d-%d\ndata:\n  k: v\n", d, c)
		}
	}
	return testtree.Write(t, map[string]string{
		"app/all.yaml":           docs.String(),
		"app/kustomization.yaml": "namePrefix: p-\nnamespace: web\ncommonLabels:\n  team: web\nresources:\n- all.yaml\n",
	})
}

// copyingPatchRepository is a kustomization of one ConfigMap with a value of
// size bytes and a JSON patch that copies the value copies times: a few
// kilobytes of patch within every bound render checks before the build, which
// make kustomize hold copies*size bytes.
func copyingPatchRepository(t *testing.T, size, copies int) string {
	t.Helper()
	var patch strings.Builder
	for i := range copies {
		fmt.Fprintf(&patch, "- op: copy\n  from: /data/k\n  path: /data/k%d\n", i)
	}
	return testtree.Write(t, map[string]string{
		"app/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  k: " + strings.Repeat("x", size) + "\n",
		"app/copies.yaml":        patch.String(),
		"app/kustomization.yaml": "resources:\n- cm.yaml\npatches:\n- path: copies.yaml\n  target:\n    kind: ConfigMap\n    name: big\n",
	})
}

// smallKustomization is a repository of one Deployment, which builds at once.
func smallKustomization(t *testing.T) string {
	return testtree.Write(t, map[string]string{"app/deploy.yaml": twoContainerDeployment, "app/kustomization.yaml": "resources:\n- deploy.yaml\n"})
}

// kustomizePool is a pool of one kustomize worker for the test, and a context
// whose builds use it.
func kustomizePool(t *testing.T, memory int64) (*helmexec.Pool, context.Context) {
	t.Helper()
	pool := helmexec.New(helmexec.Config{Workers: 1, MemoryBytes: memory})
	t.Cleanup(pool.Close)
	return pool, WithKustomizeWorkers(context.Background(), pool)
}

var kustomizeApp = Application{Name: "web", Path: "app", SourceType: SourceKustomize, Namespace: "web"}

// TestQuadraticKustomizeBuildIsStoppedAtItsDeadline: a build that stays within
// every bound render checks but takes kustomize's name reference pass tens of
// seconds is refused at the render's deadline, naming the app, and its worker
// is killed then: no build of it runs on, the process's kustomize slot and the
// pool's worker slot are free at once, and the next render gets a new worker.
func TestQuadraticKustomizeBuildIsStoppedAtItsDeadline(t *testing.T) {
	pool, ctx := kustomizePool(t, 0)
	saved := timeout.Load()
	t.Cleanup(func() { timeout.Store(saved) })
	timeout.Store(int64(500 * time.Millisecond))
	_, err := Render(ctx, nameReferenceRepository(t, 47), kustomizeApp)
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Code != CodeTimeout || ref.App != "web" || !strings.Contains(ref.Reason, "took longer than 500ms") {
		t.Fatalf("got %v (app %q), want a %s refusal of web naming its timeout", err, refApp(ref), CodeTimeout)
	}
	select {
	case kustomizeSlot <- struct{}{}:
		<-kustomizeSlot
	default:
		t.Fatal("the kustomize slot is still held after the render was refused")
	}
	if st := pool.Stats(); st.Running != 0 {
		t.Fatalf("%d workers still running after the refusal, want 0: the build's worker is killed", st.Running)
	}
	timeout.Store(int64(10 * time.Minute))
	objs, err := Render(ctx, smallKustomization(t), kustomizeApp)
	if err != nil || len(objs) != 1 {
		t.Fatalf("the render after: %d objects, %v", len(objs), err)
	}
	if n := pool.Started(); n != 2 {
		t.Fatalf("%d workers started, want 2", n)
	}
}

// TestQuadraticKustomizeBuildInAPlanNamesItsApp: a plan whose build is stopped
// at the deadline is refused naming the app and the kustomization whose build
// was stopped, as a render is: Plan returns at its deadline without waiting for
// the build to end, and said only that rendering took too long.
func TestQuadraticKustomizeBuildInAPlanNamesItsApp(t *testing.T) {
	pool, ctx := kustomizePool(t, 0)
	saved := timeout.Load()
	t.Cleanup(func() { timeout.Store(saved) })
	SetTimeout(500 * time.Millisecond)
	_, err := Plan(ctx, Request{
		RepoDir: nameReferenceRepository(t, 47), Apps: []Application{kustomizeApp},
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "web", Name: "p-d0"},
		Change: Change{Replicas: &Replicas{Count: 3}},
	})
	var ref *Refusal
	const want = "application web: kustomize build app: rendering took longer than 500ms"
	if !errors.As(err, &ref) || ref.Code != CodeTimeout || ref.App != "web" || !strings.HasPrefix(ref.Reason, want) {
		t.Fatalf("got %v (app %q), want a %s refusal: %s…", err, refApp(ref), CodeTimeout, want)
	}
	for st := pool.Stats(); st.Running != 0; st = pool.Stats() {
		// The worker is killed at the deadline; Plan does not wait for that.
		time.Sleep(10 * time.Millisecond)
	}
}

func refApp(ref *Refusal) string {
	if ref == nil {
		return ""
	}
	return ref.App
}

// TestKustomizeBuildPastItsMemoryLimitIsRefused: a patch of a few kilobytes
// that makes kustomize hold gigabytes ends its worker, not this process, and
// the render is refused naming the limit; the pool builds the next one.
func TestKustomizeBuildPastItsMemoryLimitIsRefused(t *testing.T) {
	pool, ctx := kustomizePool(t, 128<<20)
	// Time to reach the limit, however slow the machine (the race detector's
	// limit is several times the memory).
	saved := timeout.Load()
	t.Cleanup(func() { timeout.Store(saved) })
	timeout.Store(int64(10 * time.Minute))
	_, err := Render(ctx, copyingPatchRepository(t, 2<<20, 1000), kustomizeApp)
	var ref *Refusal
	const want = "application web: kustomization app: the kustomize build exceeded the 128 MiB memory limit of a kustomize worker"
	if !errors.As(err, &ref) || ref.Code != CodeTooLarge || ref.App != "web" || ref.Reason != want {
		t.Fatalf("got %v, want refused (%s): %s", err, CodeTooLarge, want)
	}
	objs, err := Render(ctx, smallKustomization(t), kustomizeApp)
	if err != nil || len(objs) != 1 {
		t.Fatalf("the render after: %d objects, %v", len(objs), err)
	}
	if n := pool.Started(); n != 2 {
		t.Fatalf("%d workers started, want 2", n)
	}
}

// TestKustomizeWorkerIsReused: builds one after another share one worker, and
// each reads its own repository.
func TestKustomizeWorkerIsReused(t *testing.T) {
	pool, ctx := kustomizePool(t, 0)
	for i := range 3 {
		repo := testtree.Write(t, map[string]string{
			"app/cm.yaml":            fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm%d\n", i),
			"app/kustomization.yaml": "resources:\n- cm.yaml\n",
		})
		objs, err := Render(ctx, repo, kustomizeApp)
		if err != nil || len(objs) != 1 || objs[0].Manifest["metadata"].(map[string]any)["name"] != fmt.Sprintf("cm%d", i) {
			t.Fatalf("build %d: %v, %v", i, objs, err)
		}
	}
	if n := pool.Started(); n != 1 {
		t.Fatalf("%d workers started, want 1", n)
	}
}

// TestKustomizeBuildsInWorkersAsInProcess: the objects of every render golden's
// repository, origins and all, are the same built in a worker as in process.
func TestKustomizeBuildsInWorkersAsInProcess(t *testing.T) {
	_, ctx := kustomizePool(t, 0)
	// An Argo CD edit of the kustomization and a symlinked base: the edit is
	// written into the build's view, the base read under its real path.
	repo := testtree.Write(t, map[string]string{
		"real/deploy.yaml":        twoContainerDeployment,
		"real/kustomization.yaml": "resources:\n- deploy.yaml\n",
		"app/kustomization.yaml":  "resources:\n- ../linked\n",
	})
	if err := os.Symlink("real", filepath.Join(repo, "linked")); err != nil {
		t.Fatal(err)
	}
	tr, err := openTree(repo)
	if err != nil {
		t.Fatal(err)
	}
	app := kustomizeApp
	app.Kustomize = KustomizeOptions{NamePrefix: "p-", CommonLabels: map[string]string{"team": "web"}}
	inWorker, err := renderApp(ctx, newView(tr, nil), app, true)
	if err != nil {
		t.Fatal(err)
	}
	SetKustomizeInProcess(true)
	inProcess, err := renderApp(context.Background(), newView(tr, nil), app, true)
	SetKustomizeInProcess(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(inWorker) != 1 || inWorker[0].origin != "real/deploy.yaml" || inWorker[0].name != "p-web" || !reflect.DeepEqual(inWorker, inProcess) {
		t.Fatalf("in a worker:\n%v\nin process:\n%v", inWorker, inProcess)
	}
}

// TestBuildThatWaitedForAKustomizeWorkerSaysSo: a render whose build waited for
// a worker, every one of them building, until its deadline is refused as a
// timeout that says its build never started.
func TestBuildThatWaitedForAKustomizeWorkerSaysSo(t *testing.T) {
	pool, ctx := kustomizePool(t, 0)
	saved := timeout.Load()
	t.Cleanup(func() { timeout.Store(saved) })
	timeout.Store(int64(10 * time.Minute))
	busy, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	repo := nameReferenceRepository(t, 47)
	go func() {
		_, err := Render(busy, repo, kustomizeApp)
		done <- err
	}()
	for st := pool.Stats(); st.Running != 1 || st.Idle != 0; st = pool.Stats() {
		select {
		case err := <-done:
			t.Fatalf("the long build ended: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	timeout.Store(int64(200 * time.Millisecond))
	_, err := Render(ctx, smallKustomization(t), kustomizeApp)
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Code != CodeTimeout || !strings.Contains(ref.Reason, "this render's build never started") {
		t.Fatalf("got %v, want a %s refusal saying the build never started", err, CodeTimeout)
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the long build: %v, want cancelled", err)
	}
}

// fsCalls counts the file system calls of the kustomize builds of a pool.
type fsCalls struct {
	mu                  sync.Mutex
	builds              int
	forwarded, answered int
}

func (c *fsCalls) WorkerStarted()                  {}
func (c *fsCalls) WorkerExited(helmexec.ExitCause) {}
func (c *fsCalls) Rendered(ev helmexec.RenderEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.builds++
	c.forwarded += ev.Forwarded
	c.answered += ev.Answered
}

func (c *fsCalls) counts() (builds, forwarded, answered int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.builds, c.forwarded, c.answered
}

// diamondRepository is an overlay of two bases that include one common base,
// each with a patch, a resource through a symlinked directory, and a
// ConfigMap generated from a file; and broken, a kustomization whose first
// resource kustomize refuses (it has no kind).
func diamondRepository(t *testing.T) string {
	t.Helper()
	repo := testtree.Write(t, map[string]string{
		"common/kustomization.yaml": "resources:\n- deploy.yaml\n",
		"common/deploy.yaml":        twoContainerDeployment,
		"a/kustomization.yaml":      "nameSuffix: -a\nresources:\n- ../common\npatches:\n- path: replicas.yaml\n",
		"a/replicas.yaml":           "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n",
		"b/kustomization.yaml":      "nameSuffix: -b\nresources:\n- ../common\n",
		"app/kustomization.yaml":    "resources:\n- ../a\n- ../b\n- linked/cm.yaml\nconfigMapGenerator:\n- name: settings\n  files:\n  - settings.conf\n",
		"app/real/cm.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  k: v\n",
		"app/settings.conf":         "mode=fast\n",
		"broken/kustomization.yaml": "resources:\n- nokind.yaml\n- cm.yaml\n",
		"broken/nokind.yaml":        "apiVersion: v1\nmetadata:\n  name: nokind\n",
		"broken/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  k: v\n",
	})
	if err := os.Symlink("real", filepath.Join(repo, "app", "linked")); err != nil {
		t.Fatal(err)
	}
	return repo
}

// TestKustomizeBuildInAWorkerForwardsNoCallItsGraphPredicts: a build of an
// overlay whose every file the kustomization graph names is sent with the
// request forwards no file system call, and renders what a build in process
// does.
func TestKustomizeBuildInAWorkerForwardsNoCallItsGraphPredicts(t *testing.T) {
	pool, ctx := kustomizePool(t, 0)
	calls := &fsCalls{}
	pool.SetObserver(calls)
	repo := testtree.Write(t, map[string]string{
		"base/kustomization.yaml": "resources:\n- deploy.yaml\n- cm.yaml\n",
		"base/deploy.yaml":        twoContainerDeployment,
		"base/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n",
		"app/kustomization.yaml":  "namespace: web\nresources:\n- ../base\nimages:\n- name: nginx\n  newTag: \"2\"\n",
	})
	inWorker, err := Render(ctx, repo, kustomizeApp)
	if err != nil {
		t.Fatal(err)
	}
	SetKustomizeInProcess(true)
	inProcess, err := Render(context.Background(), repo, kustomizeApp)
	SetKustomizeInProcess(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(inWorker) != 2 || !reflect.DeepEqual(inWorker, inProcess) {
		t.Fatalf("in a worker:\n%v\nin process:\n%v", inWorker, inProcess)
	}
	if builds, forwarded, answered := calls.counts(); builds != 1 || forwarded != 0 || answered == 0 {
		t.Fatalf("%d builds: %d calls forwarded, %d answered from the request; want 1 build, none forwarded", builds, forwarded, answered)
	}
}

// TestKustomizeBuildInAWorkerReadsWhatItDoesInProcess: a build whose files the
// graph does not predict as kustomize names them (a resource under a symlinked
// directory, a generator's file) reads them through this process, a base
// included twice is read twice, and the render's bounds count the same reads
// as a build in process: a file sent that a build did not read (one that
// failed before it) is given back.
func TestKustomizeBuildInAWorkerReadsWhatItDoesInProcess(t *testing.T) {
	pool, ctx := kustomizePool(t, 0)
	calls := &fsCalls{}
	pool.SetObserver(calls)
	repo := diamondRepository(t)
	for _, c := range []struct {
		path    string
		objects int
	}{{"app", 4}, {"broken", 0}} {
		app := kustomizeApp
		app.Path = c.path
		build := func(ctx context.Context) ([]*object, error, *view) {
			t.Helper()
			tr, err := openTree(repo)
			if err != nil {
				t.Fatal(err)
			}
			v := newView(tr, nil).metered(ctx)
			objs, err := renderKustomize(ctx, v, app, true)
			return objs, err, v
		}
		inWorker, werr, wv := build(ctx)
		SetKustomizeInProcess(true)
		inProcess, perr, pv := build(context.Background())
		SetKustomizeInProcess(false)
		if len(inWorker) != c.objects || !reflect.DeepEqual(inWorker, inProcess) || fmt.Sprint(werr) != fmt.Sprint(perr) || (c.objects == 0) != (werr != nil) {
			t.Fatalf("%s in a worker: %v\n%v\nin process: %v\n%v", c.path, werr, inWorker, perr, inProcess)
		}
		w, p := wv.budget, pv.budget
		if w.bytes != p.bytes || w.docs != p.docs || w.nodes != p.nodes || wv.t.renderedBytes != pv.t.renderedBytes || p.docs == 0 {
			t.Fatalf("%s: a build in a worker read %d bytes, %d documents, %d nodes (the plan %d bytes); in process %d, %d, %d (%d)",
				c.path, w.bytes, w.docs, w.nodes, wv.t.renderedBytes, p.bytes, p.docs, p.nodes, pv.t.renderedBytes)
		}
	}
	if _, forwarded, answered := calls.counts(); forwarded == 0 || answered == 0 {
		t.Fatalf("%d calls forwarded, %d answered; want the files not predicted forwarded", forwarded, answered)
	}
}

// openAPIPanicRepository is a kustomization that makes kustomize itself panic
// (an interface conversion of a nil value): its own OpenAPI schema (openapi:
// path) has a definition whose x-kubernetes-group-version-kind entry is empty,
// and a strategic-merge patch makes kustomize look the patched kind up in it.
func openAPIPanicRepository(t *testing.T) string {
	return testtree.Write(t, map[string]string{
		"app/deploy.yaml":        twoContainerDeployment,
		"app/schema.json":        `{"definitions": {"x": {"x-kubernetes-group-version-kind": [{}]}}}`,
		"app/kustomization.yaml": "resources:\n- deploy.yaml\nopenapi:\n  path: schema.json\npatches:\n- patch: |-\n    apiVersion: apps/v1\n    kind: Deployment\n    metadata:\n      name: web\n    spec:\n      replicas: 3\n",
	})
}

// TestKustomizePanicInAWorkerIsARefusalNamingTheApp: a kustomization that
// makes kustomize panic is refused render_failed naming the app, the
// kustomization and the panic, as in process; the worker answered, so its
// slot is free and it builds the next render.
func TestKustomizePanicInAWorkerIsARefusalNamingTheApp(t *testing.T) {
	pool, ctx := kustomizePool(t, 0)
	repo := openAPIPanicRepository(t)
	_, err := Render(ctx, repo, kustomizeApp)
	var ref *Refusal
	const want = "application web: kustomize build app: kustomize panicked: interface conversion: interface {} is nil, not string"
	if !errors.As(err, &ref) || ref.Code != CodeRenderFailed || ref.App != "web" || ref.Reason != want {
		t.Fatalf("got %v (app %q), want refused (%s): %s", err, refApp(ref), CodeRenderFailed, want)
	}
	SetKustomizeInProcess(true)
	_, inProcess := Render(context.Background(), repo, kustomizeApp)
	SetKustomizeInProcess(false)
	if fmt.Sprint(inProcess) != fmt.Sprint(err) {
		t.Fatalf("in process: %v\nin a worker: %v", inProcess, err)
	}
	if st := pool.Stats(); st.Running != 1 || st.Idle != 1 {
		t.Fatalf("after the panic %d workers running, %d idle; want the one worker idle", st.Running, st.Idle)
	}
	objs, err := Render(ctx, smallKustomization(t), kustomizeApp)
	if err != nil || len(objs) != 1 {
		t.Fatalf("the render after: %d objects, %v", len(objs), err)
	}
	if n := pool.Started(); n != 1 {
		t.Fatalf("%d workers started, want 1: the worker that recovered from the panic builds on", n)
	}
}
