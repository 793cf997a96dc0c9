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

	type state struct {
		starts, idle, busy int
		exits              map[string]int
		renders            map[string]int
	}
	check := func(step string, want state) {
		t.Helper()
		var b strings.Builder
		b.WriteString("# HELP kukie_helm_worker_exits_total x\n# TYPE kukie_helm_worker_exits_total counter\n")
		for _, c := range helmexec.ExitCauses {
			fmt.Fprintf(&b, "kukie_helm_worker_exits_total{cause=%q} %d\n", c, want.exits[string(c)])
		}
		b.WriteString("# HELP kukie_helm_renders_total x\n# TYPE kukie_helm_renders_total counter\n")
		renders := 0
		for _, o := range helmexec.Outcomes {
			fmt.Fprintf(&b, "kukie_helm_renders_total{outcome=%q} %d\n", o, want.renders[string(o)])
			renders += want.renders[string(o)]
		}
		fmt.Fprintf(&b, "# HELP kukie_helm_worker_starts_total x\n# TYPE kukie_helm_worker_starts_total counter\nkukie_helm_worker_starts_total %d\n", want.starts)
		fmt.Fprintf(&b, "# HELP kukie_helm_workers x\n# TYPE kukie_helm_workers gauge\nkukie_helm_workers{state=\"busy\"} %d\nkukie_helm_workers{state=\"idle\"} %d\n", want.busy, want.idle)
		b.WriteString("# HELP kukie_helm_workers_max x\n# TYPE kukie_helm_workers_max gauge\nkukie_helm_workers_max 1\n")
		b.WriteString("# HELP kukie_helm_renders_waiting x\n# TYPE kukie_helm_renders_waiting gauge\nkukie_helm_renders_waiting 0\n")
		if err := compareIgnoringHelp(reg, b.String()); err != nil {
			t.Fatalf("after %s: %v", step, err)
		}
		// Every render reached a worker, so each has a duration and a wait.
		for _, name := range []string{"kukie_helm_render_duration_seconds", "kukie_helm_render_wait_seconds"} {
			if n := histogramCount(t, reg, name); n != uint64(renders) {
				t.Fatalf("after %s: %s counts %d renders, want %d", step, name, n, renders)
			}
		}
	}

	check("nothing", state{})
	if err := render(t.Context(), ok); err != nil {
		t.Fatal(err)
	}
	check("a render", state{starts: 1, idle: 1, renders: map[string]int{"ok": 1}})
	if err := render(t.Context(), `{{ fail "no" }}`); err == nil {
		t.Fatal("a failing template rendered")
	}
	check("a template error", state{starts: 1, idle: 1, renders: map[string]int{"ok": 1, "template_error": 1}})

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
	check("the memory limit", state{starts: 1, exits: map[string]int{"memory_limit": 1},
		renders: map[string]int{"ok": 1, "template_error": 1, "memory_limit": 1}})

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
	check("a cancelled render", state{starts: 2, exits: map[string]int{"memory_limit": 1, "cancelled": 1},
		renders: map[string]int{"ok": 2, "template_error": 1, "memory_limit": 1, "cancelled": 1}})

	if err := render(t.Context(), ok); err != nil {
		t.Fatal(err)
	}
	pool.Close()
	check("close", state{starts: 3, exits: map[string]int{"memory_limit": 1, "cancelled": 1, "normal": 1},
		renders: map[string]int{"ok": 3, "template_error": 1, "memory_limit": 1, "cancelled": 1}})
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
