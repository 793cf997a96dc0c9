package render

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

const envBaseDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
        - name: api
          image: ghcr.io/example/api:5.1.0
          env:
            - name: DB_HOST
              value: postgres.internal
            - name: REGION
              value: eu-west-1
            - name: LOG_LEVEL
              value: info
  selector: {matchLabels: {app: api}}
`

// TestEnvJSONPatchRefusesAReorderedBase: the JSON 6902 patch that changes an env
// entry by index stops the build when the base later moves its entries, instead of
// overwriting whichever variable now sits at that index.
func TestEnvJSONPatchRefusesAReorderedBase(t *testing.T) {
	repo := testtree.Write(t, map[string]string{
		"base/kustomization.yaml":          "resources:\n  - api.yaml\n",
		"base/api.yaml":                    envBaseDeployment,
		"overlays/prod/kustomization.yaml": "resources:\n  - ../../base\n",
	})
	app := Application{Name: "api-prod", Path: "overlays/prod", SourceType: SourceKustomize, Namespace: "api-prod"}
	res, err := Plan(context.Background(), Request{RepoDir: repo, Apps: []Application{app},
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "api"},
		Change: Change{Env: &Env{Container: "api", Set: map[string]string{"LOG_LEVEL": "debug"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Strategy != strategyNewJSONPatch {
		t.Fatalf("strategy %s, want %s", res.Strategy, strategyNewJSONPatch)
	}
	for _, e := range res.Edits {
		if err := os.WriteFile(filepath.Join(repo, e.Path), e.New, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Render(context.Background(), repo, app); err != nil {
		t.Fatalf("render with the patch: %v", err)
	}
	// The base swaps REGION and LOG_LEVEL: index 2 is now REGION.
	swapped := strings.Replace(envBaseDeployment,
		"            - name: REGION\n              value: eu-west-1\n            - name: LOG_LEVEL\n              value: info\n",
		"            - name: LOG_LEVEL\n              value: info\n            - name: REGION\n              value: eu-west-1\n", 1)
	if swapped == envBaseDeployment {
		t.Fatal("fixture: swap did not apply")
	}
	if err := os.WriteFile(filepath.Join(repo, "base/api.yaml"), []byte(swapped), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := Render(context.Background(), repo, app)
	if err == nil {
		t.Fatalf("render after the base moved LOG_LEVEL succeeded, want the patch's test to fail: %+v", objs)
	}
	if !strings.Contains(err.Error(), "test") {
		t.Errorf("error does not say the patch's test failed: %v", err)
	}
}
