package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/kukie/kukie-gitops/metrics"
	"github.com/kukie/kukie-gitops/render/helmexec"
)

// The workers of this test are this test binary, started again by the pool.

func helmChart(t *testing.T, template string) *chart.Chart {
	t.Helper()
	ch, err := loader.LoadFiles([]*archive.BufferedFile{
		{Name: "Chart.yaml", Data: []byte("apiVersion: v2\nname: web\nversion: 0.1.0\n")},
		{Name: "templates/t.yaml", Data: []byte(template)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestHelmWorkerMetricsFollowRealWorkers renders in a pool of one real worker
// process: a chart that renders, one that fails, one past the memory limit, one
// its caller gives up on, then closes the pool, and reads the metrics after each.
func TestHelmWorkerMetricsFollowRealWorkers(t *testing.T) {
	pool := helmexec.New(helmexec.Config{Workers: 1, MemoryBytes: 128 << 20})
	defer pool.Close()
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.NewHelmWorkers(reg, pool)
	if err != nil {
		t.Fatal(err)
	}
	pool.SetObserver(m)
	opts := helmexec.Options{ReleaseName: "web", Namespace: "web", OutputLimit: 1 << 20, ListLimit: 100_000}
	render := func(ctx context.Context, template string) error {
		_, err := pool.Render(ctx, helmChart(t, template), nil, opts)
		return err
	}
	ok := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"

	check := func(step string, want workerState) {
		t.Helper()
		checkWorkerMetrics(t, reg, helmNames, step, want)
	}

	check("nothing", workerState{})
	if err := render(t.Context(), ok); err != nil {
		t.Fatal(err)
	}
	check("a render", workerState{starts: 1, idle: 1, jobs: map[string]int{"ok": 1}})
	if err := render(t.Context(), `{{ fail "no" }}`); err == nil {
		t.Fatal("a failing template rendered")
	}
	check("a template error", workerState{starts: 1, idle: 1, jobs: map[string]int{"ok": 1, "template_error": 1}})

	// A doubling chain of templates: 2^20 copies of 64 KiB.
	var chain strings.Builder
	chain.WriteString(`{{ define "c0" }}` + strings.Repeat("x", 64<<10) + `{{ end }}`)
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&chain, `{{ define "c%d" }}{{ include "c%d" . }}{{ include "c%d" . }}{{ end }}`, i, i-1, i-1)
	}
	chain.WriteString(`# {{ include "c20" . }}`)
	if err := render(t.Context(), chain.String()); err == nil || !strings.Contains(err.Error(), "memory limit") {
		t.Fatalf("got %v, want the memory limit", err)
	}
	check("the memory limit", workerState{starts: 1, exits: map[string]int{"memory_limit": 1},
		jobs: map[string]int{"ok": 1, "template_error": 1, "memory_limit": 1}})

	// A warm worker takes the spinning render; its caller gives up once the render
	// holds the worker (none idle).
	if err := render(t.Context(), ok); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for pool.Stats().Idle != 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	spin := `{{ range until 100000 }}{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}{{ end }}`
	if err := render(ctx, spin); err != context.Canceled {
		t.Fatalf("got %v, want the render cancelled", err)
	}
	check("a cancelled render", workerState{starts: 2, exits: map[string]int{"memory_limit": 1, "cancelled": 1},
		jobs: map[string]int{"ok": 2, "template_error": 1, "memory_limit": 1, "cancelled": 1}})

	if err := render(t.Context(), ok); err != nil {
		t.Fatal(err)
	}
	pool.Close()
	check("close", workerState{starts: 3, exits: map[string]int{"memory_limit": 1, "cancelled": 1, "normal": 1},
		jobs: map[string]int{"ok": 3, "template_error": 1, "memory_limit": 1, "cancelled": 1}})
}

// workerNames are the metric names of one tool's pool.
type workerNames struct{ prefix, job, jobs string }

var (
	helmNames      = workerNames{prefix: "kukie_helm_", job: "render", jobs: "renders"}
	kustomizeNames = workerNames{prefix: "kukie_kustomize_", job: "build", jobs: "builds"}
)

// workerState is what a pool of one worker's metrics should say.
type workerState struct {
	starts, idle, busy int
	exits              map[string]int
	jobs               map[string]int
}

// checkWorkerMetrics compares the metrics of the pool named n on reg with want.
func checkWorkerMetrics(t *testing.T, reg *prometheus.Registry, n workerNames, step string, want workerState) {
	t.Helper()
	var b strings.Builder
	family := func(name, kind string) string {
		fmt.Fprintf(&b, "# HELP %s x\n# TYPE %s %s\n", name, name, kind)
		return name
	}
	name := family(n.prefix+"worker_exits_total", "counter")
	for _, c := range helmexec.ExitCauses {
		fmt.Fprintf(&b, "%s{cause=%q} %d\n", name, c, want.exits[string(c)])
	}
	name = family(n.prefix+n.jobs+"_total", "counter")
	jobs := 0
	for _, o := range helmexec.Outcomes {
		fmt.Fprintf(&b, "%s{outcome=%q} %d\n", name, o, want.jobs[string(o)])
		jobs += want.jobs[string(o)]
	}
	fmt.Fprintf(&b, "%s %d\n", family(n.prefix+"worker_starts_total", "counter"), want.starts)
	name = family(n.prefix+"workers", "gauge")
	fmt.Fprintf(&b, "%s{state=\"busy\"} %d\n%s{state=\"idle\"} %d\n", name, want.busy, name, want.idle)
	fmt.Fprintf(&b, "%s 1\n", family(n.prefix+"workers_max", "gauge"))
	fmt.Fprintf(&b, "%s 0\n", family(n.prefix+n.jobs+"_waiting", "gauge"))
	if err := compareIgnoringHelp(reg, b.String()); err != nil {
		t.Fatalf("after %s: %v", step, err)
	}
	// Every job reached a worker, so each has a duration and a wait.
	for _, name := range []string{n.prefix + n.job + "_duration_seconds", n.prefix + n.job + "_wait_seconds"} {
		if got := histogramCount(t, reg, name); got != uint64(jobs) {
			t.Fatalf("after %s: %s counts %d, want %d", step, name, got, jobs)
		}
	}
}

// compareIgnoringHelp compares the metrics of want's families, their help text
// aside (the help is for operators; the values are what the test is about).
func compareIgnoringHelp(reg *prometheus.Registry, want string) error {
	mfs, err := reg.Gather()
	if err != nil {
		return err
	}
	help := map[string]string{}
	for _, mf := range mfs {
		help[mf.GetName()] = mf.GetHelp()
	}
	var names []string
	lines := strings.Split(want, "\n")
	for i, l := range lines {
		if name, ok := strings.CutPrefix(l, "# HELP "); ok {
			name = strings.TrimSuffix(name, " x")
			names = append(names, name)
			lines[i] = "# HELP " + name + " " + help[name]
		}
	}
	return testutil.GatherAndCompare(reg, strings.NewReader(strings.Join(lines, "\n")), names...)
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no %s gathered", name)
	return 0
}
