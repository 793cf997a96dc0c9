package helmexec

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"reflect"
	"slices"
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

// cmExpected are the paths of cmKustomization's build: its directory, the
// names of its kustomization file and its resource.
var cmExpected = []string{"/app", "/app/kustomization.yaml", "/app/kustomization.yml", "/app/Kustomization", "/app/cm.yaml"}

// forwardedCalls is a file system that records the calls made on it after
// start.
type forwardedCalls struct {
	*recordingFS
	from int
}

func (f *forwardedCalls) start()          { f.from = len(f.calls) }
func (f *forwardedCalls) since() []string { return f.calls[f.from:] }

// TestKustomizeOfExpectedPathsForwardsNoCall: a build whose every file system
// call the request answered (its directory, the names of its kustomization
// file, its files) forwards none to this process, reads each file once, and
// answers what the build that forwards every call does.
func TestKustomizeOfExpectedPathsForwardsNoCall(t *testing.T) {
	p := New(Config{Workers: 1})
	defer p.Close()
	obs := observed(p)
	want, err := p.Kustomize(context.Background(), kustomizeFS(t, cmKustomization), kustomizeJob)
	if err != nil {
		t.Fatal(err)
	}
	if ev := obs.lastRender(); ev.Forwarded == 0 || ev.Answered != 0 {
		t.Fatalf("without expected paths: %d calls forwarded, %d answered; want all forwarded", ev.Forwarded, ev.Answered)
	}
	fsys := &recordingFS{FileSystem: kustomizeFS(t, cmKustomization)}
	var unread []string
	job := kustomizeJob
	job.Expected, job.Unread = cmExpected, func(p string) { unread = append(unread, p) }
	got, err := p.Kustomize(context.Background(), fsys, job)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("with expected paths:\n%#v\nwithout:\n%#v", got, want)
	}
	ev := obs.lastRender()
	if ev.Forwarded != 0 || ev.Answered == 0 || len(unread) != 0 {
		t.Fatalf("%d calls forwarded, %d answered, unread %v; want none forwarded, every file read", ev.Forwarded, ev.Answered, unread)
	}
	reads := 0
	for _, c := range fsys.calls {
		if strings.HasPrefix(c, "ReadFile ") {
			reads++
		}
	}
	if reads != 2 {
		t.Fatalf("calls on the file system: %v; want each of the 2 files read once", fsys.calls)
	}
}

// TestKustomizeForwardsWhatWasNotExpected: a build that reads a file its
// expected paths leave out (a resource the prediction missed) reads it through
// the parent and builds as without any; a file read ahead that the build does
// not read is told unread; a file whose read ahead fails is read when the build
// asks for it, failing as it would.
func TestKustomizeForwardsWhatWasNotExpected(t *testing.T) {
	p := New(Config{Workers: 1})
	defer p.Close()
	obs := observed(p)
	want, err := p.Kustomize(context.Background(), kustomizeFS(t, cmKustomization), kustomizeJob)
	if err != nil {
		t.Fatal(err)
	}
	files := maps.Clone(cmKustomization)
	files["other.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n"
	fsys := &forwardedCalls{recordingFS: &recordingFS{FileSystem: kustomizeFS(t, files)}}
	var unread []string
	job := kustomizeJob
	job.Expected = []string{"/app", "/app/kustomization.yaml", "/app/other.yaml"}
	job.Unread = func(p string) { unread = append(unread, p) }
	job.ReadAhead = func(p string) ([]byte, bool) {
		data, err := fsys.ReadFile(p)
		fsys.start() // other.yaml, read last: the calls after are the build's
		return data, err == nil
	}
	got, err := p.Kustomize(context.Background(), fsys, job)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("with a file not expected:\n%#v\nwith none:\n%#v", got, want)
	}
	ev := obs.lastRender()
	// The names of the kustomization file left out are looked up too.
	wantForwarded := []string{"CleanedAbs /app/kustomization.yml", "CleanedAbs /app/Kustomization", "CleanedAbs /app/cm.yaml", "ReadFile /app/cm.yaml"}
	if forwarded := fsys.since(); !slices.Equal(forwarded, wantForwarded) || ev.Forwarded != len(wantForwarded) || ev.Answered == 0 {
		t.Fatalf("calls forwarded %v (counted %d), %d answered; want %v", forwarded, ev.Forwarded, ev.Answered, wantForwarded)
	}
	if !slices.Equal(unread, []string{"/app/other.yaml"}) {
		t.Fatalf("unread %v, want the file read ahead the build did not read", unread)
	}

	// Reads ahead refused: the build reads the files itself, as without them.
	refused := &recordingFS{FileSystem: kustomizeFS(t, cmKustomization)}
	job = kustomizeJob
	job.Expected = cmExpected
	job.ReadAhead = func(string) ([]byte, bool) { return nil, false }
	if got, err := p.Kustomize(context.Background(), refused, job); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("with reads ahead refused: %v\n%#v\nwant:\n%#v", err, got, want)
	}
	var reads []string
	for _, c := range refused.calls {
		if strings.HasPrefix(c, "ReadFile ") {
			reads = append(reads, c)
		}
	}
	if want := []string{"ReadFile /app/kustomization.yaml", "ReadFile /app/cm.yaml"}; !slices.Equal(reads, want) {
		t.Fatalf("with reads ahead refused, the files read %v; want %v, by the build", reads, want)
	}

	// A missing file expected: the build fails as without expected paths.
	files = map[string]string{"kustomization.yaml": "resources:\n- missing.yaml\n"}
	_, wantErr := p.Kustomize(context.Background(), kustomizeFS(t, files), kustomizeJob)
	job = kustomizeJob
	job.Expected = []string{"/app", "/app/kustomization.yaml", "/app/missing.yaml"}
	_, err = p.Kustomize(context.Background(), kustomizeFS(t, files), job)
	var be *BuildError
	if !errors.As(err, &be) || wantErr == nil || err.Error() != wantErr.Error() {
		t.Fatalf("got %v, want %v", err, wantErr)
	}
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

// TestAnsweredFileSystemDropsItsAnswersAtAWrite: a build's file system answers
// a call from the request once per read, and after the build writes, which may
// change what a call answers, forwards every call, so a file written is read
// as written.
func TestAnsweredFileSystemDropsItsAnswersAtAWrite(t *testing.T) {
	parent := kustomizeFS(t, map[string]string{"a.yaml": "old", "b.yaml": "b"})
	toParent, fromWorker := io.Pipe()
	toWorker, fromParent := io.Pipe()
	defer fromWorker.Close()
	defer fromParent.Close()
	go func() {
		in := bufio.NewReader(toParent)
		out := bufio.NewWriter(fromParent)
		for {
			var resp response
			if err := readFrame(in, maxRequestBytes, &resp); err != nil || resp.Call == nil {
				return
			}
			if err := writeValue(out, serveFS(parent, resp.Call)); err != nil {
				return
			}
		}
	}()
	remote := &remoteFS{in: bufio.NewReader(toWorker), out: bufio.NewWriter(fromWorker)}
	f := newAnsweredFS(remote, answerExpected(parent, KustomizeJob{Expected: []string{"/app/a.yaml", "/app/b.yaml"}}))
	read := func(p, want string) {
		t.Helper()
		data, err := f.ReadFile(p)
		if err != nil || string(data) != want {
			t.Fatalf("read %s: %q, %v; want %q", p, data, err, want)
		}
	}
	read("/app/b.yaml", "b")
	read("/app/b.yaml", "b") // the second read is the parent's
	if f.answered != 1 || remote.calls != 1 {
		t.Fatalf("%d calls answered, %d forwarded; want 1 and 1", f.answered, remote.calls)
	}
	if err := f.WriteFile("/app/a.yaml", []byte("new")); err != nil {
		t.Fatal(err)
	}
	read("/app/a.yaml", "new")
	if dir, file, err := f.CleanedAbs("/app/a.yaml"); err != nil || dir != "/app" || file != "a.yaml" {
		t.Fatalf("CleanedAbs: %s, %s, %v", dir, file, err)
	}
	if f.answered != 1 || remote.calls != 4 {
		t.Fatalf("%d calls answered, %d forwarded; want none answered after the write", f.answered, remote.calls)
	}
}
