package main

import (
	"os/exec"
	"strings"
	"testing"
)

// programDeps lists every package the service binary links.
func programDeps(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps listed %d packages: %s", len(deps), out)
	}
	return deps
}

// TestServiceBinaryHasNoStandIns: the service binary links none of the fakes and
// test harnesses (the fake GitHub, envtest's wrapper, the service test helpers) nor
// the demo that runs the fake GitHub; they stay in tests and hack/demo.
func TestServiceBinaryHasNoStandIns(t *testing.T) {
	const module = "github.com/kukie/kukie-gitops/"
	for _, dep := range programDeps(t) {
		switch strings.TrimPrefix(dep, module) {
		case "internal/githubtest", "kube/kubetest", "internal/servicetest", "hack/demo":
			t.Errorf("the service binary links %s", dep)
		}
	}
}

// TestProgramDoesNotLinkHelmsClusterSide keeps out of the binary the packages
// that only Helm's install, upgrade and release storage need: every process of
// the program initialises each package it links before main runs, and these
// (Kubernetes API schemes, kubectl's commands, Helm's lint and storage
// drivers) cost every start about 8 ms of CPU and 33 MB of binary for code no
// command runs. Charts render through render/helmtemplate instead.
func TestProgramDoesNotLinkHelmsClusterSide(t *testing.T) {
	for _, pkg := range programDeps(t) {
		for _, tree := range []string{"helm.sh/helm/v4/pkg/action", "helm.sh/helm/v4/pkg/kube", "helm.sh/helm/v4/pkg/storage", "k8s.io/kubectl"} {
			if pkg == tree || strings.HasPrefix(pkg, tree+"/") {
				t.Errorf("the program links %s", pkg)
			}
		}
	}
}
