package render

import (
	"context"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
)

// widgetSchema describes one custom resource and no Kubernetes kind.
const widgetSchema = `{"definitions": {"com.example.v1.Widget": {"type": "object",
  "x-kubernetes-group-version-kind": [{"group": "example.com", "kind": "Widget", "version": "v1"}]}}}`

// sidecarPatch is a strategic-merge patch of the web container alone: with
// Kubernetes' schema it merges into the containers by name, with a schema
// that does not describe Deployments it replaces the list.
const sidecarPatch = "patches:\n- patch: |-\n    apiVersion: apps/v1\n    kind: Deployment\n    metadata:\n      name: web\n    spec:\n      template:\n        spec:\n          containers:\n          - name: web\n            env:\n            - {name: A, value: b}\n"

// TestCustomOpenAPISchemaIsOneBuildsOwn: a build whose kustomization names
// its own OpenAPI schema merges with that schema alone, as a kustomize
// process of its own (Argo CD's) does, whatever was built before it in the
// process or the worker, and the builds after it merge with Kubernetes'
// schema again: kustomize keeps the schema in globals, so a build after one
// that had parsed Kubernetes' schema merged the custom one's lists by name,
// and later builds kept the custom schema.
func TestCustomOpenAPISchemaIsOneBuildsOwn(t *testing.T) {
	plain := testtree.Write(t, map[string]string{
		"app/deploy.yaml":        twoContainerDeployment,
		"app/kustomization.yaml": "resources:\n- deploy.yaml\n" + sidecarPatch,
	})
	custom := testtree.Write(t, map[string]string{
		"app/deploy.yaml":        twoContainerDeployment,
		"app/schema.json":        widgetSchema,
		"app/kustomization.yaml": "resources:\n- deploy.yaml\nopenapi:\n  path: schema.json\n" + sidecarPatch,
	})
	containers := func(ctx context.Context, repo string) int {
		t.Helper()
		objs, err := Render(ctx, repo, kustomizeApp)
		if err != nil || len(objs) != 1 {
			t.Fatalf("render: %v, %v", objs, err)
		}
		list, _ := getPath(objs[0].Manifest, []string{"spec", "template", "spec", "containers"})
		l, _ := list.([]any)
		return len(l)
	}
	check := func(t *testing.T, ctx context.Context) {
		for i, step := range []struct {
			repo string
			want int
		}{{plain, 2}, {custom, 1}, {plain, 2}, {custom, 1}} {
			if got := containers(ctx, step.repo); got != step.want {
				t.Fatalf("build %d: %d containers, want %d", i, got, step.want)
			}
		}
	}
	t.Run("in process", func(t *testing.T) {
		SetKustomizeInProcess(true)
		defer SetKustomizeInProcess(false)
		check(t, context.Background())
	})
	t.Run("in a worker", func(t *testing.T) {
		_, ctx := kustomizePool(t, 0)
		check(t, ctx)
	})
}
