package cmd

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/internal/testtree"
)

// overlay30 writes the 30-object overlay of the render benchmarks (a base of ten
// Deployments, Services and ConfigMaps, an overlay setting a namespace and an
// image tag) and returns the repository and the overlay's path in it.
func overlay30(tb testing.TB) (repo, app string) {
	tb.Helper()
	files := map[string]string{}
	var resources []string
	for i := range 30 {
		name := fmt.Sprintf("svc%02d", i/3)
		var f, body string
		switch i % 3 {
		case 0:
			f = "deployment-" + name + ".yaml"
			body = fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: %[1]s\n  labels:\n    app: %[1]s\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: %[1]s\n  template:\n    metadata:\n      labels:\n        app: %[1]s\n    spec:\n      containers:\n        - name: %[1]s\n          image: ghcr.io/example/%[1]s:1.0.0\n          resources:\n            requests:\n              cpu: 100m\n", name)
		case 1:
			f = "service-" + name + ".yaml"
			body = fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: %[1]s\nspec:\n  selector:\n    app: %[1]s\n  ports:\n    - port: 80\n", name)
		default:
			f = "configmap-" + name + ".yaml"
			body = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  MODE: fast\n", name)
		}
		files["base/"+f] = body
		resources = append(resources, "  - "+f)
	}
	files["base/kustomization.yaml"] = "resources:\n" + strings.Join(resources, "\n") + "\n"
	app = "overlay"
	files[app+"/kustomization.yaml"] = "namespace: shop\nresources:\n  - ../base\nimages:\n  - name: ghcr.io/example/svc00\n    newTag: \"1.0.1\"\n"
	repo = testtree.Write(tb, files)
	return repo, app
}

// buildProgram builds kukie-gitops as it ships (not the test binary, which
// links the tests' packages too) and returns its path.
func buildProgram(b *testing.B) string {
	b.Helper()
	return buildPackage(b, "github.com/kukie/kukie-gitops")
}

// buildPackage builds the main package pkg and returns the binary's path.
func buildPackage(b *testing.B, pkg string) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), path.Base(pkg))
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		b.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// runProcess runs one process to its end and returns its CPU time (user and
// system), which a loaded machine inflates less than the wall time.
func runProcess(b *testing.B, name string, args ...string) time.Duration {
	b.Helper()
	c := exec.Command(name, args...)
	out, err := c.CombinedOutput()
	if err != nil {
		b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return c.ProcessState.UserTime() + c.ProcessState.SystemTime()
}

// BenchmarkPlanProcess runs whole "kukie-gitops plan" processes (start-up,
// flags, the plan: locate, edit, render before and after, verify, print) of a
// replicas change on the 30-object overlay, and "kukie-gitops version" for the
// cost of start-up alone. "floor" runs hack/kustomizebuilds, a process linking
// only kustomize that makes the plan's two builds of the overlay and nothing
// else: what no plan process can go below. With KUKIE_KUSTOMIZE_BIN pointing at
// a kustomize CLI (hack/kustomize-cli.sh builds one) the plan and the floor are
// also reported against two "kustomize build" runs of the overlay: what a person
// checking by hand does, in wall time (plan/2-cli-builds) and in CPU time
// (plan-cpu/2-cli-builds, floor-cpu/2-cli-builds).
func BenchmarkPlanProcess(b *testing.B) {
	bin := buildProgram(b)
	floor := buildPackage(b, "github.com/kukie/kukie-gitops/hack/kustomizebuilds")
	repo, app := overlay30(b)
	plan := []string{"plan", "--repo", repo, "--app", app, "--type", "Kustomize", "--namespace", "shop", "scale", "deploy/svc03", "--replicas", "5"}
	kustomize := os.Getenv("KUKIE_KUSTOMIZE_BIN")
	// measure returns the CPU time of one process.
	measure := func(b *testing.B, name string, args []string) time.Duration {
		var cpu time.Duration
		for b.Loop() {
			cpu += runProcess(b, name, args...)
		}
		b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/op")
		return cpu / time.Duration(b.N)
	}
	// cliBuilds runs two "kustomize build" processes of the overlay a few
	// times and returns their wall and CPU time. b.Loop stopped the timer:
	// they are not counted in ns/op.
	cliBuilds := func(b *testing.B) (wall, cpu time.Duration) {
		const rounds = 5
		start := time.Now()
		for range rounds * 2 {
			cpu += runProcess(b, kustomize, "build", filepath.Join(repo, app))
		}
		return time.Since(start) / rounds, cpu / rounds
	}
	b.Run("start", func(b *testing.B) { measure(b, bin, []string{"version"}) })
	var floorCPU time.Duration
	b.Run("floor", func(b *testing.B) {
		floorCPU = measure(b, floor, []string{repo, app})
		if kustomize == "" {
			return
		}
		_, cpu := cliBuilds(b)
		b.ReportMetric(float64(floorCPU)/float64(cpu), "floor-cpu/2-cli-builds")
	})
	b.Run("plan", func(b *testing.B) {
		planCPU := measure(b, bin, plan)
		perOp := float64(b.Elapsed()) / float64(b.N)
		if floorCPU > 0 {
			b.ReportMetric(float64(planCPU)/float64(floorCPU), "plan-cpu/floor-cpu")
		}
		if kustomize == "" {
			return
		}
		twoBuilds, cpu := cliBuilds(b)
		b.ReportMetric(perOp/float64(twoBuilds), "plan/2-cli-builds")
		b.ReportMetric(float64(twoBuilds)/1e6, "ms/2-cli-builds")
		b.ReportMetric(float64(cpu)/1e6, "cpu-ms/2-cli-builds")
		// The same ratio in CPU time, which other work on a shared machine
		// distorts far less than the wall time.
		b.ReportMetric(float64(planCPU)/float64(cpu), "plan-cpu/2-cli-builds")
	})
}
