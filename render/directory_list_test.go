package render

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

// listRepo is a Directory app whose objects are the items of a List document.
var listRepo = map[string]string{
	"apps/web/all.yaml": `apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: web-settings}
    data: {MODE: fast}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web}
    spec:
      replicas: 2
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          containers:
            - {name: web, image: ghcr.io/example/web:1.0.0}
---
apiVersion: v1
kind: ConfigMapList
items: null
`,
}

// TestDirectoryListItems: a Directory app deploys the items of a List (and nothing
// for a List whose items are null), as Argo CD's repo server does, and an item is
// edited in place inside the List, also when the before-render comes back from its
// stored form.
func TestDirectoryListItems(t *testing.T) {
	repo := testtree.Write(t, listRepo)
	app := Application{Name: "web", Path: "apps/web", SourceType: SourceDirectory, Namespace: "web"}
	objs, err := Render(context.Background(), repo, app)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.Manifest["kind"].(string))
	}
	if strings.Join(kinds, ",") != "ConfigMap,Deployment" {
		t.Fatalf("rendered kinds %v, want the List's items ConfigMap,Deployment", kinds)
	}
	if objs[1].File != "apps/web/all.yaml" || objs[1].Doc != 0 || objs[1].ListItem != 2 {
		t.Fatalf("Deployment located at %s doc %d item %d, want apps/web/all.yaml doc 0 item 2", objs[1].File, objs[1].Doc, objs[1].ListItem)
	}

	req := Request{RepoDir: repo, Apps: []Application{app},
		Target:       objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "web", Name: "web"},
		Change:       Change{Replicas: &Replicas{Count: 3}},
		BeforeRender: func(ctx context.Context, app Application) ([]Object, error) { return renderStored(ctx, repo, app) }}
	res, err := Plan(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Edits) != 1 || res.Edits[0].Path != "apps/web/all.yaml" {
		t.Fatalf("edits %+v, want one of apps/web/all.yaml", res.Edits)
	}
	if got := string(res.Edits[0].New); !strings.Contains(got, "      replicas: 3\n") || strings.Count(got, "replicas:") != 1 {
		t.Fatalf("the Deployment's replicas not edited in place inside the List:\n%s", got)
	}
}
