package helmexec

import (
	"context"
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomizeFS is an in-memory file system holding one kustomization in /app.
func kustomizeFS(t *testing.T, files map[string]string) filesys.FileSystem {
	t.Helper()
	fsys := filesys.MakeFsInMemory()
	for name, body := range files {
		if err := fsys.WriteFile("/app/"+name, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	return fsys
}

var cmKustomization = map[string]string{
	"kustomization.yaml": "namePrefix: p-\nresources:\n- cm.yaml\n",
	"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  n: \"1\"\n  empty: \"\"\n  list: [a, 1, true, null]\n",
}

var kustomizeJob = KustomizeJob{Root: "/app", OutputLimit: 1 << 20}

// recordingFS records the calls a build makes.
type recordingFS struct {
	filesys.FileSystem
	mu    sync.Mutex
	calls []string
	// onRead, when set, is called at each ReadFile.
	onRead func(path string)
}

func (r *recordingFS) record(op, p string) {
	r.mu.Lock()
	r.calls = append(r.calls, op+" "+p)
	r.mu.Unlock()
}

func (r *recordingFS) ReadFile(p string) ([]byte, error) {
	r.record("ReadFile", p)
	if r.onRead != nil {
		r.onRead(p)
	}
	return r.FileSystem.ReadFile(p)
}
func (r *recordingFS) Exists(p string) bool { r.record("Exists", p); return r.FileSystem.Exists(p) }
func (r *recordingFS) IsDir(p string) bool  { r.record("IsDir", p); return r.FileSystem.IsDir(p) }
func (r *recordingFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	r.record("CleanedAbs", p)
	return r.FileSystem.CleanedAbs(p)
}

// TestKustomizeInAWorkerIsTheBuildInProcess: a build in a worker makes the same
// file system calls, in the same order, as the build in process, each answered
// by the parent's file system, and answers the same resources, values of every
// type kept; a second build reuses the worker.
func TestKustomizeInAWorkerIsTheBuildInProcess(t *testing.T) {
	p := New(Config{Workers: 1})
	defer p.Close()
	obs := observed(p)
	inWorker := &recordingFS{FileSystem: kustomizeFS(t, cmKustomization)}
	got, err := p.Kustomize(context.Background(), inWorker, kustomizeJob)
	if err != nil {
		t.Fatal(err)
	}
	inProcess := &recordingFS{FileSystem: kustomizeFS(t, cmKustomization)}
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(inProcess, "/app")
	if err != nil {
		t.Fatal(err)
	}
	var want []map[string]any
	for _, res := range resMap.Resources() {
		m, err := res.Map()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, m)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("in a worker:\n%#v\nin process:\n%#v", got, want)
	}
	if !reflect.DeepEqual(inWorker.calls, inProcess.calls) || len(inWorker.calls) == 0 {
		t.Fatalf("calls in a worker:\n%v\nin process:\n%v", inWorker.calls, inProcess.calls)
	}
	if _, err := p.Kustomize(context.Background(), kustomizeFS(t, cmKustomization), kustomizeJob); err != nil {
		t.Fatal(err)
	}
	wantStarted(t, p, 1)
	obs.want(t, 1, map[ExitCause]int{}, map[Outcome]int{OutcomeOK: 2})
}

// TestKustomizeErrorsAreKustomizes: kustomize's own error comes back as a
// *BuildError worded as in process, and a file system error keeps being
// fs.ErrNotExist in the worker (kustomize reads a missing file so).
func TestKustomizeErrorsAreKustomizes(t *testing.T) {
	p := New(Config{Workers: 1})
	defer p.Close()
	files := map[string]string{"kustomization.yaml": "resources:\n- missing.yaml\n"}
	_, err := p.Kustomize(context.Background(), kustomizeFS(t, files), kustomizeJob)
	_, want := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(kustomizeFS(t, files), "/app")
	var be *BuildError
	if !errors.As(err, &be) || want == nil || err.Error() != want.Error() {
		t.Fatalf("got %v, want the BuildError %v", err, want)
	}
	r := serveFS(kustomizeFS(t, nil), &fsCall{Op: opReadFile, Path: "/app/missing.yaml"})
	if !r.NotExist || r.Err == "" {
		t.Fatalf("reply %+v, want not exist", r)
	}
	if e := (&remoteError{msg: r.Err, notExist: r.NotExist}); !errors.Is(e, fs.ErrNotExist) || e.Error() != r.Err {
		t.Fatalf("remote error %v is not fs.ErrNotExist", e)
	}
}

// TestKustomizeWorkerKilledMidBuild: a worker that ends during a build (a crash,
// the kernel's out-of-memory killer) fails that build with the reason, and the
// next build gets a new worker.
func TestKustomizeWorkerKilledMidBuild(t *testing.T) {
	p := New(Config{Workers: 1})
	defer p.Close()
	obs := observed(p)
	var pid int
	p.sent = func(n int) { pid = n }
	fsys := &recordingFS{FileSystem: kustomizeFS(t, cmKustomization)}
	fsys.onRead = func(string) { _ = syscall.Kill(pid, syscall.SIGKILL) }
	_, err := p.Kustomize(context.Background(), fsys, kustomizeJob)
	var be *BuildError
	if err == nil || errors.As(err, &be) || !strings.Contains(err.Error(), "kustomize worker ended (signal: killed)") {
		t.Fatalf("got %v, want the worker's end", err)
	}
	if _, err := p.Kustomize(context.Background(), kustomizeFS(t, cmKustomization), kustomizeJob); err != nil {
		t.Fatal(err)
	}
	wantStarted(t, p, 2)
	obs.want(t, 2, map[ExitCause]int{ExitCrash: 1}, map[Outcome]int{OutcomeFailed: 1, OutcomeOK: 1})
}

// TestKustomizeCancelledKillsItsWorker: a build whose context ends while it runs
// has its worker killed at once.
func TestKustomizeCancelledKillsItsWorker(t *testing.T) {
	p := New(Config{Workers: 1})
	defer p.Close()
	obs := observed(p)
	var pid int
	p.sent = func(n int) { pid = n }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fsys := &recordingFS{FileSystem: kustomizeFS(t, cmKustomization)}
	fsys.onRead = func(string) { cancel() }
	if _, err := p.Kustomize(ctx, fsys, kustomizeJob); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want the build cancelled", err)
	}
	if alive(pid) {
		t.Fatalf("worker %d still runs after its build was cancelled", pid)
	}
	if st := p.Stats(); st.Running != 0 {
		t.Fatalf("stats %+v, want no worker running", st)
	}
	obs.want(t, 1, map[ExitCause]int{ExitCancelled: 1}, map[Outcome]int{OutcomeCancelled: 1})
}

// TestKustomizeOutputLimit: resources past the job's output limit are refused
// as such, and the worker is kept.
func TestKustomizeOutputLimit(t *testing.T) {
	p := New(Config{Workers: 1})
	defer p.Close()
	files := map[string]string{
		"kustomization.yaml": "resources:\n- cm.yaml\n",
		"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  k: " + strings.Repeat("x", 4096) + "\n",
	}
	job := kustomizeJob
	job.OutputLimit = 1024
	if _, err := p.Kustomize(context.Background(), kustomizeFS(t, files), job); !errors.Is(err, ErrOutputTooLarge) {
		t.Fatalf("got %v, want ErrOutputTooLarge", err)
	}
	if _, err := p.Kustomize(context.Background(), kustomizeFS(t, cmKustomization), kustomizeJob); err != nil {
		t.Fatal(err)
	}
	wantStarted(t, p, 1)
}
