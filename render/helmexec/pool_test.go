package helmexec

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// The workers of these tests are this test binary, started again by the pool.

// testChart is a chart named web whose templates are the given files.
func testChart(t testing.TB, templates map[string]string) *chart.Chart {
	t.Helper()
	files := []*archive.BufferedFile{{Name: "Chart.yaml", Data: []byte("apiVersion: v2\nname: web\nversion: 0.1.0\n")}}
	for name, body := range templates {
		files = append(files, &archive.BufferedFile{Name: "templates/" + name, Data: []byte(body)})
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

var testOptions = Options{ReleaseName: "web", Namespace: "web", IncludeCRDs: true, OutputLimit: 1 << 20, ListLimit: 100_000}

const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  kind: {{ kindOf .Values.n }}\n  n: {{ .Values.n | quote }}\n"

// render renders the ConfigMap chart in p and checks the output.
func renderConfigMap(t *testing.T, p *Pool) {
	t.Helper()
	out, err := p.Render(context.Background(), testChart(t, map[string]string{"cm.yaml": configMap}), map[string]any{"n": int64(1000000)}, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	// An int64 stays one: JSON would have made it a float64 printed as 1e+06.
	want := "---\n# Source: web/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  kind: int64\n  n: \"1000000\"\n"
	if out != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
}

func wantStarted(t *testing.T, p *Pool, want int64) {
	t.Helper()
	if n := p.Started(); n != want {
		t.Fatalf("%d workers started, want %d", n, want)
	}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// recorder is an Observer that counts what it is told.
type recorder struct {
	mu       sync.Mutex
	started  int
	exits    map[ExitCause]int
	outcomes map[Outcome]int
	ran      int
	// last is the last render told.
	last RenderEvent
}

// lastRender is the last render r was told of.
func (r *recorder) lastRender() RenderEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

func observed(p *Pool) *recorder {
	r := &recorder{exits: map[ExitCause]int{}, outcomes: map[Outcome]int{}}
	p.SetObserver(r)
	return r
}

func (r *recorder) WorkerStarted() { r.mu.Lock(); r.started++; r.mu.Unlock() }
func (r *recorder) WorkerExited(c ExitCause) {
	r.mu.Lock()
	r.exits[c]++
	r.mu.Unlock()
}
func (r *recorder) Rendered(ev RenderEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes[ev.Outcome]++
	r.last = ev
	if ev.Ran {
		r.ran++
	}
}

// want checks what r was told: workers started, exits by cause and renders by
// outcome, every one of them in a worker.
func (r *recorder) want(t *testing.T, started int, exits map[ExitCause]int, outcomes map[Outcome]int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	renders := 0
	for _, n := range outcomes {
		renders += n
	}
	if r.started != started || !maps.Equal(r.exits, exits) || !maps.Equal(r.outcomes, outcomes) || r.ran != renders {
		t.Errorf("observed %d starts, exits %v, renders %v (%d in a worker); want %d, %v, %v (%d)",
			r.started, r.exits, r.outcomes, r.ran, started, exits, outcomes, renders)
	}
}

// wantStats checks the pool's running and idle workers.
func wantStats(t *testing.T, p *Pool, running int64, idle int) {
	t.Helper()
	if st := p.Stats(); st.Running != running || st.Idle != idle || st.Waiting != 0 || st.Workers != p.cfg.Workers {
		t.Errorf("stats %+v, want %d running, %d idle, none waiting", st, running, idle)
	}
}

// TestRenderReusesItsWorker: renders one after the other share one process, and
// the chart's own errors and an output over its limit leave it in use.
func TestRenderReusesItsWorker(t *testing.T) {
	p := New(Config{Workers: 1})
	defer p.Close()
	obs := observed(p)
	renderConfigMap(t, p)
	wantStats(t, p, 1, 1)
	_, err := p.Render(context.Background(), testChart(t, map[string]string{"bad.yaml": `{{ fail "no" }}`}), nil, testOptions)
	var te *TemplateError
	if !errors.As(err, &te) || !strings.Contains(te.Message, "no") {
		t.Fatalf("got %v, want Helm's error for the chart", err)
	}
	_, err = p.Render(context.Background(), testChart(t, map[string]string{"big.yaml": `# {{ range until 3 }}{{ repeat 500000 "x" }}{{ end }}`}), nil, testOptions)
	if !errors.Is(err, ErrOutputTooLarge) {
		t.Fatalf("got %v, want ErrOutputTooLarge", err)
	}
	renderConfigMap(t, p)
	wantStarted(t, p, 1)
	p.Close()
	wantStats(t, p, 0, 0)
	obs.want(t, 1, map[ExitCause]int{ExitNormal: 1}, map[Outcome]int{OutcomeOK: 2, OutcomeTemplateError: 1, OutcomeTooLarge: 1})
}

// TestCancelledRenderKillsItsWorker: a render whose context ends while the
// templates run (a loop of 10^15 steps) returns the context's error with its
// worker gone; the next render gets a new one.
func TestCancelledRenderKillsItsWorker(t *testing.T) {
	p := New(Config{Workers: 1})
	defer p.Close()
	obs := observed(p)
	ctx, cancel := context.WithCancel(context.Background())
	var pid int
	p.sent = func(n int) {
		pid = n
		cancel()
	}
	_, err := p.Render(ctx, spinChart(t), nil, testOptions)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if pid == 0 || alive(pid) {
		t.Fatalf("worker %d still runs after its render was cancelled", pid)
	}
	p.sent = nil
	renderConfigMap(t, p)
	wantStarted(t, p, 2)
	obs.want(t, 2, map[ExitCause]int{ExitCancelled: 1}, map[Outcome]int{OutcomeCancelled: 1, OutcomeOK: 1})
}

// TestRenderPastItsDeadlineKillsItsWorker: the worker of a render whose
// deadline passed while its templates ran is killed, and said to be.
func TestRenderPastItsDeadlineKillsItsWorker(t *testing.T) {
	p := New(Config{Workers: 1})
	defer p.Close()
	obs := observed(p)
	ctx := &passedDeadline{Context: context.Background(), done: make(chan struct{})}
	p.sent = func(int) { close(ctx.done) }
	_, err := p.Render(ctx, spinChart(t), nil, testOptions)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
	wantStats(t, p, 0, 0)
	obs.want(t, 1, map[ExitCause]int{ExitDeadline: 1}, map[Outcome]int{OutcomeDeadline: 1})
}

// passedDeadline is a context whose deadline passes when done is closed, so a
// test decides when without a clock.
type passedDeadline struct {
	context.Context
	done chan struct{}
}

func (c *passedDeadline) Done() <-chan struct{} { return c.done }

func (c *passedDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// spinChart loops 10^15 times.
func spinChart(t *testing.T) *chart.Chart {
	return testChart(t, map[string]string{"spin.yaml": `{{ range until 100000 }}{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}{{ end }}`})
}

// TestWorkerLimits: templates that take more memory, or nest deeper, than a
// worker allows end it with a LimitError naming the limit, and the next render
// gets a new worker.
func TestWorkerLimits(t *testing.T) {
	var chain strings.Builder
	chain.WriteString(`{{ define "c0" }}` + strings.Repeat("x", 64<<10) + `{{ end }}`)
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&chain, `{{ define "c%d" }}{{ include "c%d" . }}{{ include "c%d" . }}{{ end }}`, i, i-1, i-1)
	}
	// A ring of 200 names computed at render time: Helm's limit of 1000 nested
	// includes of each name allows 200,000 nested calls.
	var ring strings.Builder
	for i := range 200 {
		fmt.Fprintf(&ring, `{{ define "r%d" }}{{ include (printf "r%%d" (mod (add1 .) 200)) (add1 .) }}{{ end }}`, i)
	}
	cases := map[string]struct {
		templates map[string]string
		memory    int64
		want      LimitError
		message   string
		exit      ExitCause
		outcome   Outcome
	}{
		"memory": {
			templates: map[string]string{"_chain.tpl": chain.String(), "c.yaml": `# {{ include "c20" . }}`},
			memory:    128 << 20,
			want:      LimitError{Tool: "Helm", Bytes: 128 << 20},
			message:   "chart templates exceeded the 128 MiB memory limit of a Helm render",
			exit:      ExitMemoryLimit,
			outcome:   OutcomeMemoryLimit,
		},
		"stack": {
			templates: map[string]string{"_ring.tpl": ring.String(), "r.yaml": `# {{ include "r0" 0 }}`},
			memory:    256 << 20,
			want:      LimitError{Tool: "Helm", Stack: true, Bytes: 32 << 20},
			message:   "chart templates nested deeper than the 32 MiB stack limit of a Helm render allows",
			exit:      ExitStackLimit,
			outcome:   OutcomeStackLimit,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := New(Config{Workers: 1, MemoryBytes: tc.memory})
			defer p.Close()
			obs := observed(p)
			_, err := p.Render(context.Background(), testChart(t, tc.templates), nil, testOptions)
			var le *LimitError
			if !errors.As(err, &le) || *le != tc.want || err.Error() != tc.message {
				t.Fatalf("got %v, want %s", err, tc.message)
			}
			renderConfigMap(t, p)
			wantStarted(t, p, 2)
			wantStats(t, p, 1, 1)
			obs.want(t, 2, map[ExitCause]int{tc.exit: 1}, map[Outcome]int{tc.outcome: 1, OutcomeOK: 1})
		})
	}
}

// TestWorkerKilledWhileIdleIsReplaced: a worker that ended between renders (an
// out-of-memory killer, an operator) is not handed a render.
func TestWorkerKilledWhileIdleIsReplaced(t *testing.T) {
	p := New(Config{Workers: 1})
	defer p.Close()
	obs := observed(p)
	var pid int
	p.sent = func(n int) { pid = n }
	renderConfigMap(t, p)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	w := p.idle[0]
	p.mu.Unlock()
	<-w.exited
	renderConfigMap(t, p)
	wantStarted(t, p, 2)
	obs.want(t, 2, map[ExitCause]int{ExitCrash: 1}, map[Outcome]int{OutcomeOK: 2})
}

// TestConcurrentRenders: more renders than workers wait for one, and each gets
// its own chart's output.
func TestConcurrentRenders(t *testing.T) {
	p := New(Config{Workers: 2})
	defer p.Close()
	errs := make(chan error, 6)
	for i := range 6 {
		go func() {
			name := fmt.Sprintf("cm%d", i)
			ch := testChart(t, map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"})
			out, err := p.Render(context.Background(), ch, nil, testOptions)
			if err == nil && !strings.Contains(out, "name: "+name+"\n") {
				err = fmt.Errorf("render of %s gave\n%s", name, out)
			}
			errs <- err
		}()
	}
	for range 6 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := p.Started(); n > 2 {
		t.Fatalf("%d workers started, want at most 2", n)
	}
}

// TestRenderWaitingForAWorkerIsCounted: while the one worker renders, a second
// render waits for it, and Stats says so.
func TestRenderWaitingForAWorkerIsCounted(t *testing.T) {
	p := New(Config{Workers: 1})
	defer p.Close()
	obs := observed(p)
	rendering, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	p.sent = func(int) {
		once.Do(func() { close(rendering) })
		<-release
	}
	cm := testChart(t, map[string]string{"cm.yaml": configMap})
	errs := make(chan error, 2)
	render := func() {
		_, err := p.Render(context.Background(), cm, map[string]any{"n": 1}, testOptions)
		errs <- err
	}
	go render()
	<-rendering
	wantStats(t, p, 1, 0)
	go render()
	for p.Stats().Waiting != 1 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	wantStats(t, p, 1, 1)
	obs.want(t, 1, map[ExitCause]int{}, map[Outcome]int{OutcomeOK: 2})
}

// TestWorkerEndingBeforeItIsReadyFailsTheRender: a worker that ends before it
// says it is ready (killed while it starts, or a program that is no worker)
// fails its render with the reason and frees the slot; the render waited for
// ever before.
func TestWorkerEndingBeforeItIsReadyFailsTheRender(t *testing.T) {
	p := New(Config{Workers: 1})
	defer p.Close()
	obs := observed(p)
	p.exe = "/bin/true"
	_, err := p.Render(context.Background(), testChart(t, map[string]string{"cm.yaml": configMap}), nil, testOptions)
	if err == nil || !strings.Contains(err.Error(), "start worker /bin/true") || !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("got %v, want the worker's start failed", err)
	}
	p.exe = ""
	renderConfigMap(t, p)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.started != 2 || !maps.Equal(obs.exits, map[ExitCause]int{ExitCrash: 1}) || !maps.Equal(obs.outcomes, map[Outcome]int{OutcomeFailed: 1, OutcomeOK: 1}) {
		t.Fatalf("observed %d starts, exits %v, renders %v", obs.started, obs.exits, obs.outcomes)
	}
}
