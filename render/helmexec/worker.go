package helmexec

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	release "helm.sh/helm/v4/pkg/release/v1"

	"github.com/kukie/kukie-gitops/render/helmtemplate"
)

// The environment of a worker: the marker that makes the executable serve as one
// (its value the protocol, so a worker of another build is not mistaken for one)
// and its memory limit in bytes.
const (
	workerEnv       = "KUKIE_HELM_WORKER"
	workerProtocol  = "helmexec/1"
	workerMemoryEnv = "KUKIE_HELM_WORKER_MEMORY"
)

// Exit codes of a worker that ends itself.
const (
	exitBadStart = 3
	// exitDeadline: the job's deadline passed by deadlineGrace and nobody killed
	// the worker, so its parent is gone.
	exitDeadline = 4
)

const deadlineGrace = 10 * time.Second

// maxRequestBytes bounds a request a worker reads; render's bounds keep a chart
// and its values far below it.
const maxRequestBytes = 1 << 30

// init turns the process into a worker when it was started as one, before main
// or TestMain runs. A hook called from main and from every TestMain would have
// to be added to each test binary that renders a chart; one missing would run
// that package's tests again in every worker it starts. Here the package that
// starts workers is the one that serves them, so any binary that can start a
// worker is one.
func init() {
	registerValueTypes()
	if os.Getenv(workerEnv) != workerProtocol {
		return
	}
	os.Exit(serveWorker())
}

// serveWorker limits the process, says it is ready, and answers requests on
// stdin until it is closed.
func serveWorker() int {
	memory, err := strconv.ParseInt(os.Getenv(workerMemoryEnv), 10, 64)
	if err != nil || memory <= 0 {
		fmt.Fprintf(os.Stderr, "helm worker: %s=%q is not a memory limit in bytes\n", workerMemoryEnv, os.Getenv(workerMemoryEnv))
		return exitBadStart
	}
	cfg := Config{Workers: 1, MemoryBytes: memory}
	// Helm logs what it warns about through slog; render reports what matters.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	// Template execution is one goroutine; fewer threads take less of the limit.
	runtime.GOMAXPROCS(min(runtime.GOMAXPROCS(0), 2))
	// Go's own limit makes the collector work before the hard limit is near, so a
	// render that fits is not ended by garbage it could have collected.
	debug.SetMemoryLimit(memory - memory/4)
	debug.SetMaxStack(int(cfg.maxStack()))
	if err := limitAddressSpace(memory); err != nil {
		fmt.Fprintln(os.Stderr, "helm worker: limit memory:", err)
		return exitBadStart
	}
	// Not fatal, and not written to stderr, where the pool reads why a worker
	// ended: the address-space limit still bounds the worker; only the OOM
	// killer's choice in a full container is lost.
	_ = preferOOMKill()
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	if err := writeValue(out, hello{Protocol: workerProtocol}); err != nil {
		return exitBadStart
	}
	for {
		var req request
		if err := readFrame(in, maxRequestBytes, &req); err != nil {
			if err == io.EOF {
				return 0
			}
			fmt.Fprintln(os.Stderr, "helm worker: read request:", err)
			return exitBadStart
		}
		var watchdog *time.Timer
		if !req.Deadline.IsZero() {
			watchdog = time.AfterFunc(time.Until(req.Deadline)+deadlineGrace, func() {
				fmt.Fprintln(os.Stderr, "helm worker: deadline passed and no one stopped the render")
				os.Exit(exitDeadline)
			})
		}
		resp := execute(req, in, out)
		if watchdog != nil {
			watchdog.Stop()
		}
		frame, err := encodeFrame(resp)
		if err == nil && req.Kustomize != nil && len(frame)-frameHeader > req.Kustomize.OutputLimit {
			frame, err = encodeFrame(response{TooLarge: true})
		}
		if err != nil {
			// What the tool made cannot be carried (a value gob does not know):
			// the job's failure, told to the parent, not the worker's.
			frame, err = encodeFrame(response{Panic: fmt.Sprintf("encode the answer: %v", err)})
		}
		if err == nil {
			_, err = out.Write(frame)
		}
		if err == nil {
			err = out.Flush()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "helm worker: write response:", err)
			return exitBadStart
		}
	}
}

// hello is a worker's first frame: it is limited and reads requests.
type hello struct{ Protocol string }

func writeValue(w *bufio.Writer, v any) error {
	frame, err := encodeFrame(v)
	if err != nil {
		return err
	}
	if _, err := w.Write(frame); err != nil {
		return err
	}
	return w.Flush()
}

// execute runs req's job: a kustomize build, whose file system calls go to the
// parent over in and out, or "helm template"; a panic of the tool's is its
// answer too.
func execute(req request, in *bufio.Reader, out *bufio.Writer) (resp response) {
	defer func() {
		if r := recover(); r != nil {
			resp = response{Panic: fmt.Sprint(r)}
		}
	}()
	if req.Kustomize != nil {
		return runKustomize(req.Kustomize, &remoteFS{in: in, out: out})
	}
	manifest, err := runTemplate(req)
	switch {
	case err == ErrOutputTooLarge:
		return response{TooLarge: true}
	case err != nil:
		return response{Err: err.Error()}
	}
	return response{Manifest: manifest}
}

func runTemplate(req request) (string, error) {
	o := req.Options
	opts := helmtemplate.Options{
		ReleaseName:          o.ReleaseName,
		Namespace:            o.Namespace,
		IncludeCRDs:          o.IncludeCRDs,
		SkipSchemaValidation: o.SkipSchemaValidation,
		APIVersions:          common.VersionSet(o.APIVersions),
		TemplateFuncs:        boundedTemplateFuncs(o.OutputLimit, o.ListLimit),
	}
	if o.KubeVersion != "" {
		kv, err := common.ParseKubeVersion(o.KubeVersion)
		if err != nil {
			return "", fmt.Errorf("kube version %q: %w", o.KubeVersion, err)
		}
		opts.KubeVersion = kv
	}
	r, err := helmtemplate.Render(context.Background(), fromWire(req.Chart), req.Values, opts)
	if err != nil {
		return "", err
	}
	out := templateOutput(r, o.SkipTests)
	if o.OutputLimit > 0 && len(out) > o.OutputLimit {
		return "", ErrOutputTooLarge
	}
	return out, nil
}

// templateOutput is what "helm template" prints for a release: its manifest,
// then each hook (tests left out with skipTests).
func templateOutput(r *release.Release, skipTests bool) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(r.Manifest))
	b.WriteString("\n")
	for _, hook := range r.Hooks {
		if skipTests && slices.Contains(hook.Events, release.HookTest) {
			continue
		}
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", hook.Path, hook.Manifest)
	}
	return b.String()
}

// boundedTemplateFuncs replace the template functions that allocate what a value
// asks for in one call, so a chart cannot ask for gigabytes with one number and
// be refused by the memory limit, not by the reason.
func boundedTemplateFuncs(outputLimit, listLimit int) map[string]any {
	listOf := func(n int) error {
		if listLimit > 0 && (n > listLimit || n < -listLimit) {
			return fmt.Errorf("a list of %d elements is more than the %d render allows", n, listLimit)
		}
		return nil
	}
	untilStep := func(start, stop, step int) ([]int, error) {
		if step == 0 {
			return []int{}, nil
		}
		if err := listOf((stop - start) / step); err != nil {
			return nil, err
		}
		var out []int
		for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
			out = append(out, i)
		}
		if out == nil {
			out = []int{}
		}
		return out, nil
	}
	return map[string]any{
		"until": func(n int) ([]int, error) {
			step := 1
			if n < 0 {
				step = -1
			}
			return untilStep(0, n, step)
		},
		"untilStep": untilStep,
		"repeat": func(n int, s string) (string, error) {
			if outputLimit > 0 && n > 0 && len(s) > 0 && n > outputLimit/len(s) {
				return "", fmt.Errorf("repeat of %d times %d bytes is more than the %d bytes render allows", n, len(s), outputLimit)
			}
			return strings.Repeat(s, max(n, 0)), nil
		},
	}
}
