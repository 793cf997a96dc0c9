package main

import (
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
)

// TestBuildsTwice: both builds read the repository (the overlay's base too)
// and make the overlay's objects; a path without a kustomization fails naming
// it.
func TestBuildsTwice(t *testing.T) {
	repo := testtree.Write(t, map[string]string{
		"base/kustomization.yaml":    "resources:\n  - cm.yaml\n  - svc.yaml\n",
		"base/cm.yaml":               "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
		"base/svc.yaml":              "apiVersion: v1\nkind: Service\nmetadata:\n  name: b\n",
		"overlay/kustomization.yaml": "namespace: shop\nresources:\n  - ../base\n",
	})
	var out strings.Builder
	if err := run(&out, repo, "overlay"); err != nil {
		t.Fatal(err)
	}
	if out.String() != "2\n2\n" {
		t.Fatalf("printed %q, want two builds of 2 objects", out.String())
	}
	if err := run(&out, repo, "missing"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a path without a kustomization: %v, want an error naming it", err)
	}
}
