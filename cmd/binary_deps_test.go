package cmd

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProgramDoesNotLinkHelmsClusterSide keeps out of the binary the packages
// that only Helm's install, upgrade and release storage need: every process of
// the program initialises each package it links before main runs, and these
// (Kubernetes API schemes, kubectl's commands, Helm's lint and storage
// drivers) cost every start about 8 ms of CPU and 33 MB of binary for code no
// command runs. Charts render through render/helmtemplate instead.
func TestProgramDoesNotLinkHelmsClusterSide(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/kukie/kukie-gitops").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var linked []string
	for _, pkg := range strings.Fields(string(out)) {
		for _, tree := range []string{"helm.sh/helm/v4/pkg/action", "helm.sh/helm/v4/pkg/kube", "helm.sh/helm/v4/pkg/storage", "k8s.io/kubectl"} {
			if pkg == tree || strings.HasPrefix(pkg, tree+"/") {
				linked = append(linked, pkg)
			}
		}
	}
	if len(linked) > 0 {
		t.Fatalf("the program links %s", strings.Join(linked, ", "))
	}
}
