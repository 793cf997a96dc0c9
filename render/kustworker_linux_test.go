package render

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// workerChildren are the pids of this process's children that are worker
// processes (their environment holds the worker marker).
func workerChildren(t *testing.T) map[int]bool {
	t.Helper()
	self := strconv.Itoa(os.Getpid())
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]bool{}
	for _, st := range stats {
		data, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces but ends at the last ")".
		fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(fields) < 2 || fields[1] != self {
			continue
		}
		env, err := os.ReadFile(filepath.Join(filepath.Dir(st), "environ"))
		if err != nil || !bytes.Contains(env, []byte("KUKIE_HELM_WORKER=")) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(st)))
		out[pid] = true
	}
	return out
}

// TestKustomizeWorkerCrashIsARefusal: a worker that ends in the middle of a
// build (a crash of kustomize, the kernel's out-of-memory killer) is a refusal
// of that render saying so, not a failure of the service, and the next render
// gets a new worker.
func TestKustomizeWorkerCrashIsARefusal(t *testing.T) {
	pool, ctx := kustomizePool(t, 0)
	saved := timeout.Load()
	t.Cleanup(func() { timeout.Store(saved) })
	timeout.Store(int64(10 * time.Minute))
	before := workerChildren(t)
	repo := nameReferenceRepository(t, 47)
	done := make(chan error, 1)
	go func() {
		_, err := Render(ctx, repo, kustomizeApp)
		done <- err
	}()
	killed := 0
	for killed == 0 {
		select {
		case err := <-done:
			t.Fatalf("the build ended before its worker was killed: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if st := pool.Stats(); st.Running != 1 || st.Idle != 0 {
			continue
		}
		for pid := range workerChildren(t) {
			if !before[pid] {
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = pid
			}
		}
	}
	err := <-done
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Code != CodeRenderFailed || !strings.HasPrefix(ref.Reason, "application web: kustomize build app: ") ||
		// Killed in its build, or while it started under a slow machine.
		!strings.Contains(ref.Reason, "worker ended (signal: killed)") {
		t.Fatalf("got %v, want a %s refusal saying the worker ended", err, CodeRenderFailed)
	}
	objs, err := Render(ctx, smallKustomization(t), kustomizeApp)
	if err != nil || len(objs) != 1 {
		t.Fatalf("the render after: %d objects, %v", len(objs), err)
	}
	if n := pool.Started(); n != 2 {
		t.Fatalf("%d workers started, want 2", n)
	}
}
