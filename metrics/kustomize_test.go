package metrics_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kukie/kukie-gitops/metrics"
	"github.com/kukie/kukie-gitops/render/helmexec"
)

// TestKustomizeWorkerMetricsFollowRealWorkers builds in a pool of one real
// kustomize worker process, registered beside a Helm pool on one registry: a
// kustomization that builds, one kustomize refuses, one past the memory limit,
// then closes the pool, and reads the metrics after each.
func TestKustomizeWorkerMetricsFollowRealWorkers(t *testing.T) {
	pool := helmexec.New(helmexec.Config{Workers: 1, MemoryBytes: 128 << 20})
	defer pool.Close()
	reg := prometheus.NewPedanticRegistry()
	if _, err := metrics.NewHelmWorkers(reg, helmexec.New(helmexec.Config{Workers: 2})); err != nil {
		t.Fatal(err)
	}
	m, err := metrics.NewKustomizeWorkers(reg, pool)
	if err != nil {
		t.Fatal(err)
	}
	pool.SetObserver(m)
	build := func(kustomization string, files map[string]string) error {
		fsys := filesys.MakeFsInMemory()
		for name, body := range files {
			if err := fsys.WriteFile("/app/"+name, []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
		if err := fsys.WriteFile("/app/kustomization.yaml", []byte(kustomization)); err != nil {
			t.Fatal(err)
		}
		_, err := pool.Kustomize(t.Context(), fsys, helmexec.KustomizeJob{Root: "/app", OutputLimit: 1 << 20})
		return err
	}
	cm := map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n"}

	check := func(step string, want workerState) {
		t.Helper()
		checkWorkerMetrics(t, reg, kustomizeNames, step, want)
	}

	check("nothing", workerState{})
	if err := build("resources:\n- cm.yaml\n", cm); err != nil {
		t.Fatal(err)
	}
	check("a build", workerState{starts: 1, idle: 1, jobs: map[string]int{"ok": 1}})
	// The build was sent no file: every call was the parent's.
	if request, parent := fsCalls(t, reg); request != 0 || parent == 0 {
		t.Fatalf("file system calls answered by the request %v, by the parent %v; want all by the parent", request, parent)
	}
	if err := build("resources:\n- missing.yaml\n", nil); err == nil {
		t.Fatal("a kustomization of a missing file built")
	}
	check("a build error", workerState{starts: 1, idle: 1, jobs: map[string]int{"ok": 1, "build_error": 1}})

	// A JSON patch copying a 2 MiB value a thousand times.
	var patch strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&patch, "- op: copy\n  from: /data/k\n  path: /data/k%d\n", i)
	}
	big := map[string]string{
		"cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  k: " + strings.Repeat("x", 2<<20) + "\n",
		"copies.yaml": patch.String(),
	}
	if err := build("resources:\n- cm.yaml\npatches:\n- path: copies.yaml\n  target:\n    kind: ConfigMap\n", big); err == nil || !strings.Contains(err.Error(), "memory limit") {
		t.Fatalf("got %v, want the memory limit", err)
	}
	check("the memory limit", workerState{starts: 1, exits: map[string]int{"memory_limit": 1},
		jobs: map[string]int{"ok": 1, "build_error": 1, "memory_limit": 1}})

	if err := build("resources:\n- cm.yaml\n", cm); err != nil {
		t.Fatal(err)
	}
	pool.Close()
	check("close", workerState{starts: 2, exits: map[string]int{"memory_limit": 1, "normal": 1},
		jobs: map[string]int{"ok": 2, "build_error": 1, "memory_limit": 1}})
}

// fsCalls reads kukie_kustomize_worker_fs_calls_total from reg.
func fsCalls(t *testing.T, reg *prometheus.Registry) (request, parent float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kukie_kustomize_worker_fs_calls_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			switch m.GetLabel()[0].GetValue() {
			case "request":
				request = m.GetCounter().GetValue()
			case "parent":
				parent = m.GetCounter().GetValue()
			}
		}
		return request, parent
	}
	t.Fatal("no kukie_kustomize_worker_fs_calls_total")
	return 0, 0
}
