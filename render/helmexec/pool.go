package helmexec

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// responseSlack is what an answer may hold besides the manifests: Helm's error
// text and the frame's encoding.
const responseSlack = 1 << 20

// Pool runs renders in worker processes, at most Config.Workers at once, and
// keeps the workers that finished a render for the next. Its methods may be
// called from any goroutine.
type Pool struct {
	cfg   Config
	slots chan struct{}
	// starts counts the workers started, for tests; running those not yet
	// ended, waiting the renders waiting for a slot, for Stats.
	starts  atomic.Int64
	running atomic.Int64
	waiting atomic.Int64
	obs     atomic.Pointer[observerBox]

	mu     sync.Mutex
	idle   []*worker
	closed bool

	// sent, when set (by tests), is told the pid of a worker once a request is
	// written to it.
	sent func(pid int)
	// exe, when set (by tests), is the program a worker runs instead of this
	// executable.
	exe string
}

// New returns a pool of cfg's size; workers start when renders need them.
func New(cfg Config) *Pool {
	cfg = cfg.withDefaults()
	return &Pool{cfg: cfg, slots: make(chan struct{}, cfg.Workers)}
}

// Config returns the pool's settings, defaults applied.
func (p *Pool) Config() Config { return p.cfg }

// Started reports how many worker processes the pool has started.
func (p *Pool) Started() int64 { return p.starts.Load() }

// SetObserver makes o the observer of the pool's workers and renders from now
// on; nil stops observing.
func (p *Pool) SetObserver(o Observer) {
	if o == nil {
		p.obs.Store(nil)
		return
	}
	p.obs.Store(&observerBox{o})
}

func (p *Pool) observer() Observer {
	if b := p.obs.Load(); b != nil {
		return b.Observer
	}
	return nopObserver{}
}

// Stats reports the pool's workers and renders now.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	idle := len(p.idle)
	p.mu.Unlock()
	return Stats{Workers: p.cfg.Workers, Running: p.running.Load(), Idle: idle, Waiting: p.waiting.Load()}
}

// Close ends the idle workers; a render under way ends its worker when it
// finishes, and so does a render after Close: a closed pool keeps no worker.
func (p *Pool) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, w := range idle {
		p.retire(w, ExitNormal)
	}
}

// Render runs "helm template" for ch with vals in a worker. The error is a
// *TemplateError for the chart's own failures (as Helm words them), a
// *LimitError when the templates took more than a worker allows,
// ErrOutputTooLarge, ctx's error when it ended first (the worker killed), or a
// failure to run a worker. ch is not changed.
func (p *Pool) Render(ctx context.Context, ch *chart.Chart, vals map[string]any, opts Options) (string, error) {
	var ev RenderEvent
	out, err := p.render(ctx, ch, vals, opts, &ev)
	ev.Outcome = outcomeOf(err)
	p.observer().Rendered(ev)
	return out, err
}

// render is Render, telling ev how long it waited and ran.
func (p *Pool) render(ctx context.Context, ch *chart.Chart, vals map[string]any, opts Options, ev *RenderEvent) (string, error) {
	req := request{Chart: toWire(ch), Values: vals, Options: opts}
	resp, err := p.run(ctx, job{tool: toolHelm, req: req, limit: int64(opts.OutputLimit) + responseSlack}, ev)
	if err != nil {
		return "", err
	}
	switch {
	case resp.Panic != "":
		return "", fmt.Errorf("helm failed: %s", resp.Panic)
	case resp.TooLarge:
		return "", ErrOutputTooLarge
	case resp.Err != "":
		return "", &TemplateError{Message: resp.Err}
	}
	return resp.Manifest, nil
}

// tool names the program a job runs, in errors and logs.
type tool string

const (
	toolHelm      tool = "Helm"
	toolKustomize tool = "kustomize"
)

// job is one request to a worker and how to carry it out.
type job struct {
	tool tool
	req  request
	// limit bounds each frame the worker answers.
	limit int64
	// serve, when set, answers the file system calls the worker makes before
	// its answer.
	serve func(*fsCall) fsReply
	// started, when set, is called once the job has a slot.
	started func()
	// prepare, when set, completes the request once the job has its worker:
	// work for the request that a job which never gets one should not do.
	prepare func(*request)
}

// run waits for a slot and a worker, sends j's request and returns the
// worker's answer. The error is ctx's when it ended first (the worker killed),
// a *LimitError when the worker passed a limit, or a failure to run a worker;
// the answer's own fields say how the job itself ended.
func (p *Pool) run(ctx context.Context, j job, ev *RenderEvent) (response, error) {
	if d, ok := ctx.Deadline(); ok {
		j.req.Deadline = d
	}
	began := time.Now()
	p.waiting.Add(1)
	select {
	case p.slots <- struct{}{}:
		p.waiting.Add(-1)
	case <-ctx.Done():
		p.waiting.Add(-1)
		ev.Wait = time.Since(began)
		return response{}, ctx.Err()
	}
	defer func() { <-p.slots }()
	if j.started != nil {
		j.started()
	}
	w, err := p.take(ctx)
	ev.Wait = time.Since(began)
	if err != nil {
		return response{}, err
	}
	if j.prepare != nil {
		j.prepare(&j.req)
	}
	frame, err := encodeFrame(j.req)
	if err != nil {
		p.put(w)
		return response{}, fmt.Errorf("encode %s request: %w", j.tool, err)
	}
	sent := time.Now()
	resp, err := w.do(ctx, frame, j.limit, p.sent, j.serve)
	ev.Run, ev.Ran = time.Since(sent), true
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			p.retire(w, exitCauseOf(ctxErr))
			return response{}, ctxErr
		}
		w.stop()
		err = p.explain(w, j.tool, err)
		p.retire(w, exitCauseOf(err))
		var limit *LimitError
		if !errors.As(err, &limit) {
			zerolog.Ctx(ctx).Warn().Err(err).Int("pid", w.cmd.Process.Pid).Msgf("%s worker ended without an answer", j.tool)
		}
		return response{}, err
	}
	p.put(w)
	return resp, nil
}

// take returns an idle worker that is still running, else starts one.
func (p *Pool) take(ctx context.Context) (*worker, error) {
	p.mu.Lock()
	for len(p.idle) > 0 {
		w := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if !w.ended() {
			p.mu.Unlock()
			return w, nil
		}
		// Ended while idle (killed from outside): reaped, and replaced below.
		p.retire(w, ExitCrash)
	}
	p.mu.Unlock()
	return p.start(ctx)
}

func (p *Pool) put(w *worker) {
	p.mu.Lock()
	if !p.closed {
		p.idle = append(p.idle, w)
		w = nil
	}
	p.mu.Unlock()
	if w != nil {
		p.retire(w, ExitNormal)
	}
}

// retire stops w, which the pool started, and tells the observer why it ended.
// Each worker is retired once.
func (p *Pool) retire(w *worker, cause ExitCause) {
	w.stop()
	p.running.Add(-1)
	p.observer().WorkerExited(cause)
}

// explain turns the end of a worker that was not killed for its context into
// the error of the render: a limit it passed, as its runtime reported it, or
// what else ended it.
func (p *Pool) explain(w *worker, t tool, err error) error {
	tail := w.stderr.String()
	switch {
	case strings.Contains(tail, "goroutine stack exceeds"):
		return &LimitError{Tool: string(t), Stack: true, Bytes: p.cfg.maxStack()}
	case strings.Contains(tail, "out of memory"),
		strings.Contains(tail, "cannot allocate memory"),
		// The race detector's own allocator, in race builds; its heap mapping
		// at a chosen address fails the same way at the limit.
		strings.Contains(tail, "ThreadSanitizer failed to allocate"),
		strings.Contains(tail, "too many address space collisions"),
		strings.Contains(tail, "pthread_create failed"),
		strings.Contains(tail, "failed to create new OS thread"):
		return &LimitError{Tool: string(t), Bytes: p.cfg.MemoryBytes}
	}
	name := "worker"
	if t != "" {
		name = string(t) + " worker"
	}
	if w.waitErr != nil {
		return fmt.Errorf("%s ended (%v): %w: %s", name, w.waitErr, err, firstLine(tail))
	}
	return fmt.Errorf("%s: %w", name, err)
}

// firstLine is the first line of a worker's stderr: the reason the runtime
// gives when it stops the process.
func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// worker is one worker process.
type worker struct {
	cmd        *exec.Cmd
	stdin      *os.File
	stdout     *bufio.Reader
	stdoutFile *os.File
	stderr     *stderrBuffer
	// exited is closed once the process is reaped (waitErr set) and its stderr
	// read to the end.
	exited  chan struct{}
	waitErr error
}

// start starts a worker and waits for it to say it runs under its limits.
func (p *Pool) start(ctx context.Context) (*worker, error) {
	exe, err := p.exe, error(nil)
	if exe == "" {
		exe, err = executable()
	}
	if err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("start worker: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("start worker: %w", err)
	}
	cmd := exec.Command(exe)
	// Only the marker: the worker runs untrusted templates and needs none of the
	// service's environment (credentials among it).
	cmd.Env = []string{workerEnv + "=" + workerProtocol, workerMemoryEnv + "=" + strconv.FormatInt(p.cfg.MemoryBytes, 10)}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = processGroup()
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("start worker %s: %w", exe, err)
	}
	p.starts.Add(1)
	p.running.Add(1)
	p.observer().WorkerStarted()
	w := &worker{cmd: cmd, stdin: inW, stdoutFile: outR, stdout: bufio.NewReader(outR), stderr: &stderrBuffer{limit: 8 << 10}, exited: make(chan struct{})}
	go func() {
		_, _ = io.Copy(w.stderr, errR)
		errR.Close()
		w.waitErr = cmd.Wait()
		close(w.exited)
	}()
	ready := make(chan error, 1)
	go func() {
		var h hello
		err := readFrame(w.stdout, 1<<10, &h)
		if err == nil && h.Protocol != workerProtocol {
			err = fmt.Errorf("answered protocol %q, not %q", h.Protocol, workerProtocol)
		}
		ready <- err
	}()
	select {
	case err = <-ready:
	case <-ctx.Done():
		w.stop()
		<-ready
		err = ctx.Err()
	}
	if err != nil {
		w.stop()
		if ctxErr := ctx.Err(); ctxErr != nil {
			p.retire(w, exitCauseOf(ctxErr))
			return nil, ctxErr
		}
		err = fmt.Errorf("start worker %s: %w", exe, p.explain(w, "", err))
		p.retire(w, exitCauseOf(err))
		return nil, err
	}
	return w, nil
}

// do sends one request and reads its answer, answering with serve the file
// system calls the worker makes before it, and killing the worker when ctx ends
// first. An error means the worker cannot be used again.
func (w *worker) do(ctx context.Context, frame []byte, limit int64, sent func(int), serve func(*fsCall) fsReply) (response, error) {
	done := make(chan answer, 1)
	go func() {
		w.stderr.reset()
		done <- w.exchange(frame, limit, sent, serve)
	}()
	select {
	case a := <-done:
		return a.resp, a.err
	case <-ctx.Done():
		w.stop()
		<-done
		return response{}, ctx.Err()
	}
}

// answer is a worker's answer to one request, or why there is none.
type answer struct {
	resp response
	err  error
}

// exchange writes frame and reads frames until the worker's answer.
func (w *worker) exchange(frame []byte, limit int64, sent func(int), serve func(*fsCall) fsReply) (a answer) {
	if _, err := w.stdin.Write(frame); err != nil {
		a.err = fmt.Errorf("write request: %w", err)
		return a
	}
	if sent != nil {
		sent(w.cmd.Process.Pid)
	}
	for {
		var resp response
		if err := readFrame(w.stdout, limit, &resp); err != nil {
			a.err = fmt.Errorf("read answer: %w", err)
			return a
		}
		if resp.Call == nil {
			a.resp = resp
			return a
		}
		if serve == nil {
			a.err = fmt.Errorf("the worker asked for %s %s, which this job does not answer", resp.Call.Op, resp.Call.Path)
			return a
		}
		reply, err := encodeFrame(serve(resp.Call))
		if err != nil {
			a.err = fmt.Errorf("encode the answer to %s %s: %w", resp.Call.Op, resp.Call.Path, err)
			return a
		}
		if _, err := w.stdin.Write(reply); err != nil {
			a.err = fmt.Errorf("write the answer to %s %s: %w", resp.Call.Op, resp.Call.Path, err)
			return a
		}
	}
}

func (w *worker) ended() bool {
	select {
	case <-w.exited:
		return true
	default:
		return false
	}
}

// stop kills the worker and waits until it is reaped.
func (w *worker) stop() {
	_ = w.cmd.Process.Kill()
	<-w.exited
	w.stdin.Close()
	w.stdoutFile.Close()
}

// executable is what a worker runs: the running binary, by /proc/self/exe on
// Linux, which names it even after a new version replaced its file.
func executable() (string, error) {
	if runtime.GOOS == "linux" {
		if _, err := os.Stat("/proc/self/exe"); err == nil {
			return "/proc/self/exe", nil
		}
	}
	return os.Executable()
}

// stderrBuffer keeps the first bytes a worker wrote to stderr since its last
// request: when the runtime stops the process, it says why first ("fatal
// error: out of memory"), then prints stacks.
type stderrBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

func (b *stderrBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.limit - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *stderrBuffer) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = b.buf[:0]
}

func (b *stderrBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
