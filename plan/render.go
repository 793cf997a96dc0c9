package plan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kukie/kukie-gitops/render"
)

// RenderEngine implements Renderer with package render.
type RenderEngine struct{}

// Plan implements Renderer.
func (RenderEngine) Plan(ctx context.Context, req render.Request) (*render.Result, error) {
	return render.Plan(ctx, req)
}

// errNoAfterRender says why a plan's objects were not dry-run.
var errNoAfterRender = errors.New("the after-render of a kustomize app is not available for a dry-run yet")

// ChangedObjects implements Renderer. A Directory app renders its documents as they
// are written, so the changed objects are read from the edited files; other formats
// are not dry-run (the plan says so).
func (RenderEngine) ChangedObjects(_ context.Context, req render.Request, res *render.Result) ([]map[string]any, error) {
	var app *render.Application
	for i := range req.Apps {
		if req.Apps[i].Name == res.App {
			app = &req.Apps[i]
		}
	}
	if app == nil || app.SourceType != render.SourceDirectory {
		return nil, errNoAfterRender
	}
	type key struct{ apiVersion, kind, namespace, name string }
	want := map[key]bool{}
	for _, d := range res.ClusterDiff {
		if d.App == res.App && d.Action != "removed" {
			want[key{d.APIVersion, d.Kind, d.Namespace, d.Name}] = true
		}
	}
	var out []map[string]any
	for _, e := range res.Edits {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(e.New), 4096)
		for {
			var obj map[string]any
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", e.Path, err)
			}
			if obj == nil {
				continue
			}
			apiVersion, _ := obj["apiVersion"].(string)
			kind, _ := obj["kind"].(string)
			meta, _ := obj["metadata"].(map[string]any)
			name, _ := meta["name"].(string)
			ns, _ := meta["namespace"].(string)
			if want[key{apiVersion, kind, ns, name}] {
				out = append(out, obj)
				continue
			}
			if ns == "" && app.Namespace != "" && want[key{apiVersion, kind, app.Namespace, name}] {
				// Argo CD puts namespaced objects without a namespace into the
				// destination namespace; a cluster-scoped kind keeps none.
				meta["namespace"] = app.Namespace
				out = append(out, obj)
			}
		}
	}
	return out, nil
}
