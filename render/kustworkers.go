package render

import (
	"context"
	"sync/atomic"

	"github.com/kukie/kukie-gitops/render/helmexec"
)

// DefaultKustomizeWorkerMemory is the memory one kustomize worker may map
// beyond what it holds when it starts: a build within render's bounds (16 MiB
// of transformed bytes, 1000 documents) takes a fraction of it.
const DefaultKustomizeWorkerMemory = 1 << 30

type kustomizeWorkersKey struct{}

// WithKustomizeWorkers returns ctx carrying p: every kustomize build under ctx
// (Plan, Revert, Render) runs in p's worker processes instead of the process's
// pool (see SetKustomizeWorkers).
func WithKustomizeWorkers(ctx context.Context, p *helmexec.Pool) context.Context {
	return context.WithValue(ctx, kustomizeWorkersKey{}, p)
}

// kustomizeWorkers is the process's pool of kustomize workers, nil until
// SetKustomizeWorkers or the first build; like the Helm pool, one bounds every
// build of the process.
var kustomizeWorkers atomic.Pointer[helmexec.Pool]

// kustomizeInProcess makes the builds of the process run in it (see
// SetKustomizeInProcess).
var kustomizeInProcess atomic.Bool

// SetKustomizeWorkers makes p the pool of the process's kustomize builds, for
// those whose context carries none; a pool set before is closed (a build under
// way on it finishes). Without it, the first build makes a pool of helmexec's
// defaults and DefaultKustomizeWorkerMemory.
func SetKustomizeWorkers(p *helmexec.Pool) {
	if old := kustomizeWorkers.Swap(p); old != nil {
		old.Close()
	}
}

// SetKustomizeInProcess makes the process's kustomize builds run in it, one at a
// time in the kustomize slot, unless a context carries a pool
// (WithKustomizeWorkers). A build in process cannot be stopped at its render's
// deadline (it stops at its next read of the repository) and shares the
// process's memory: only for a process that builds the user's own repository
// on the user's machine (the offline plan command), where a worker's start
// would cost more than the build it isolates.
func SetKustomizeInProcess(on bool) { kustomizeInProcess.Store(on) }

// kustomizeWorkersOf is the pool that builds under ctx, or nil for a build in
// process.
func kustomizeWorkersOf(ctx context.Context) *helmexec.Pool {
	if p, _ := ctx.Value(kustomizeWorkersKey{}).(*helmexec.Pool); p != nil {
		return p
	}
	if kustomizeInProcess.Load() {
		return nil
	}
	if p := kustomizeWorkers.Load(); p != nil {
		return p
	}
	p := helmexec.New(helmexec.Config{MemoryBytes: DefaultKustomizeWorkerMemory})
	if !kustomizeWorkers.CompareAndSwap(nil, p) {
		return kustomizeWorkers.Load()
	}
	return p
}
