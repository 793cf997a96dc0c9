package deploy_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/config"
)

// TestChartDefaultsHoldTheServiceAndItsWorkers checks that the container's memory
// limit of the chart's defaults holds what may run in it at once: the service up to
// its GOMEMLIMIT and every Helm and kustomize worker up to its memory (README,
// "worker processes"). Worker counts left at one per core cannot be sized for, as
// the node's core count is unknown, so the chart must set them.
func TestChartDefaultsHoldTheServiceAndItsWorkers(t *testing.T) {
	r := mustRender(t, "kukie-gitops", "kukie", nil)
	var dep appsv1.Deployment
	if !typed(t, r, "Deployment", &dep) {
		t.Fatalf("no Deployment in %v", r.kinds())
	}
	c := dep.Spec.Template.Spec.Containers[0]
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatal("the container has no memory limit")
	}
	var goLimit int64
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			if e.ValueFrom != nil {
				t.Fatalf("GOMEMLIMIT comes from %+v: the service would take the whole container's limit, the workers' share too", e.ValueFrom)
			}
			var err error
			if goLimit, err = parseGoMemLimit(e.Value); err != nil {
				t.Fatal(err)
			}
		}
	}
	if goLimit == 0 {
		t.Fatal("no GOMEMLIMIT: the service's heap is unbounded within the container")
	}
	var cm corev1.ConfigMap
	if !typed(t, r, "ConfigMap", &cm) {
		t.Fatal("no ConfigMap")
	}
	var cfg struct {
		Render config.Render `json:"render"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["config.yml"]), &cfg); err != nil {
		t.Fatalf("read the chart's config.yml: %v", err)
	}
	rc := cfg.Render
	if rc.HelmWorkers <= 0 || rc.KustomizeWorkers <= 0 {
		t.Fatalf("render workers %+v: one per core of an unknown node cannot be sized for", rc)
	}
	if rc.HelmWorkerMemory <= 0 || rc.KustomizeWorkerMemory <= 0 {
		t.Fatalf("render worker memory %+v is left to the defaults the limit is not computed from", rc)
	}
	need := goLimit + rc.HelmWorkers*rc.HelmWorkerMemory + rc.KustomizeWorkers*rc.KustomizeWorkerMemory
	if limit.Value() < need {
		t.Errorf("memory limit %s (%d bytes) is below what runs in the container at once: GOMEMLIMIT %d + %d Helm workers × %d + %d kustomize workers × %d = %d",
			limit.String(), limit.Value(), goLimit, rc.HelmWorkers, rc.HelmWorkerMemory, rc.KustomizeWorkers, rc.KustomizeWorkerMemory, need)
	}
}

// parseGoMemLimit reads GOMEMLIMIT as the Go runtime does: a number of bytes with
// an optional B, KiB, MiB, GiB or TiB suffix.
func parseGoMemLimit(v string) (int64, error) {
	for i, unit := range []string{"TiB", "GiB", "MiB", "KiB", "B"} {
		if n, ok := strings.CutSuffix(v, unit); ok {
			b, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("GOMEMLIMIT %q: %w", v, err)
			}
			return b << (10 * (4 - i)), nil
		}
	}
	b, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("GOMEMLIMIT %q: %w", v, err)
	}
	return b, nil
}
