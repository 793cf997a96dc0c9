package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServiceBinaryHasNoStandIns: the service binary links none of the fakes and
// test harnesses (the fake GitHub, envtest's wrapper, the service test helpers) nor
// the demo that runs the fake GitHub; they stay in tests and hack/demo.
func TestServiceBinaryHasNoStandIns(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps listed %d packages: %s", len(deps), out)
	}
	const module = "github.com/kukie/kukie-gitops/"
	for _, dep := range deps {
		switch strings.TrimPrefix(dep, module) {
		case "internal/githubtest", "kube/kubetest", "internal/servicetest", "hack/demo":
			t.Errorf("the service binary links %s", dep)
		}
	}
}
