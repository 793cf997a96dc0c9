// Package helmexec runs the tools that render untrusted repository content in
// worker processes of the running binary: Helm's template engine ("helm
// template") on a chart that is already loaded and bounded, and kustomize's
// build of a kustomization, so that chart templates and kustomizations cannot
// take the service's memory or outlive their render. (The name is the
// package's first tool's.)
//
// A worker runs under a hard address-space limit (RLIMIT_AS on Linux) with Go's
// own memory limit and a maximum goroutine stack below it: a job that asks for
// more memory or nests deeper ends the worker, not the service, and the render
// gets a [*LimitError] naming the limit. A worker is killed when its render's
// context is done: neither Helm's engine nor kustomize can be interrupted in
// process, but a process can. A [Pool] keeps a few workers running between jobs
// so a render does not pay a process start, replaces one that ended (a limit, a
// kill, a crash) at the next job, and lets only as many jobs run at once as it
// has workers; the service keeps one pool per tool. It tells an [Observer] (the
// service's metrics) of each worker's start and end, with the cause, and of
// each job's outcome and time; [Pool.Stats] counts its running, idle and
// waiting at any moment.
//
// A kustomize build in a worker reads nothing of the worker's own: every call
// it makes on its file system is answered by the parent from the file system
// it passed to [Pool.Kustomize] (render's view of the repository), so the build
// reads exactly what it would in process. The calls of the paths the parent
// expects the build to read (KustomizeJob.Expected: the files its
// kustomizations name) are made before the build and their answers sent with
// the request, which spares the build a round trip for each; any other call is
// sent to the parent when the build makes it.
//
// A worker is the running executable started again with an environment marker
// that this package's init function recognises (see init in worker.go), so every
// binary that links this package — the service, the offline plan command and the
// test binary of every package that renders — serves as its own worker without a
// hook of its own. Requests, file system calls and answers are length-prefixed
// gob frames over the worker's stdin and stdout; an answer is bounded by the
// job's output limit.
package helmexec

import (
	"errors"
	"fmt"
	"runtime"
)

// Defaults of a Pool's Config.
const (
	// DefaultMemoryBytes is the memory one worker may map beyond what it holds
	// when it starts: far above what a chart's manifests (at most 16 MiB by
	// render's bounds) take to render, far below what a service can lend.
	DefaultMemoryBytes = 512 << 20
	// MinMemoryBytes keeps a worker able to render a chart at all: Go maps its
	// heap 64 MiB at a time.
	MinMemoryBytes = 128 << 20
)

// DefaultWorkers is how many workers a Pool keeps without configuration: one per
// core, as template execution is CPU-bound.
func DefaultWorkers() int { return runtime.GOMAXPROCS(0) }

// Config sizes a Pool.
type Config struct {
	// Workers is how many charts render at once, each in a worker of its own kept
	// running between renders; 0 means DefaultWorkers.
	Workers int
	// MemoryBytes is the memory a worker may map beyond what it holds when it
	// starts; 0 means DefaultMemoryBytes. A goroutine stack may take an eighth of
	// it.
	MemoryBytes int64
}

func (c Config) withDefaults() Config {
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers()
	}
	if c.MemoryBytes <= 0 {
		c.MemoryBytes = DefaultMemoryBytes
	}
	c.MemoryBytes = max(c.MemoryBytes, MinMemoryBytes)
	return c
}

// maxStack is the largest goroutine stack a worker allows: a recursion of
// templates grows one stack, which Go lets reach 1 GB by default.
func (c Config) maxStack() int64 { return c.MemoryBytes / 8 }

// Options are the settings of "helm template" a render passes: the flags Argo
// CD sets, and the bounds of the output.
type Options struct {
	ReleaseName          string
	Namespace            string
	IncludeCRDs          bool
	SkipTests            bool
	SkipSchemaValidation bool
	// KubeVersion and APIVersions are .Capabilities; empty means Helm's defaults.
	KubeVersion string
	APIVersions []string
	// OutputLimit is how many bytes of manifests the chart may render; more is
	// ErrOutputTooLarge. It also bounds one call of repeat.
	OutputLimit int
	// ListLimit is how many elements one call of until or untilStep may make.
	ListLimit int
}

// LimitError is a job that took more than a worker allows: a render whose
// templates did, or a kustomize build; the worker ended and was replaced.
type LimitError struct {
	// Tool is the program the job ran: "Helm" or "kustomize".
	Tool string
	// Stack tells a goroutine stack that passed its limit from memory that did.
	Stack bool
	Bytes int64
}

func (e *LimitError) Error() string {
	if e.Tool == string(toolKustomize) {
		if e.Stack {
			return fmt.Sprintf("the kustomize build nested deeper than the %d MiB stack limit of a kustomize worker allows", e.Bytes>>20)
		}
		return fmt.Sprintf("the kustomize build exceeded the %d MiB memory limit of a kustomize worker", e.Bytes>>20)
	}
	if e.Stack {
		return fmt.Sprintf("chart templates nested deeper than the %d MiB stack limit of a Helm render allows", e.Bytes>>20)
	}
	return fmt.Sprintf("chart templates exceeded the %d MiB memory limit of a Helm render", e.Bytes>>20)
}

// ErrOutputTooLarge is a chart that renders more than its OutputLimit.
var ErrOutputTooLarge = errors.New("the chart renders more than the output limit")

// TemplateError is Helm's own error for the chart (a template that fails, a
// schema the values break, an unknown kube version): the chart's fault, told as
// Helm tells it.
type TemplateError struct{ Message string }

func (e *TemplateError) Error() string { return e.Message }
