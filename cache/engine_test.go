package cache_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render"
)

// kustomizeTree is an overlay that the Application changes at render time.
var kustomizeTree = map[string]string{
	"apps/api/base/kustomization.yaml": "resources:\n  - deployment.yaml\n",
	"apps/api/base/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\nspec:\n  replicas: 1\n" +
		"  selector:\n    matchLabels: {app: api}\n  template:\n    metadata:\n      labels: {app: api}\n" +
		"    spec:\n      containers:\n        - name: api\n          image: registry.example/api:1.0.0\n          args: []\n",
	"apps/api/prod/kustomization.yaml": "resources:\n  - ../base\n",
	"apps/web/web.yaml":                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  mode: slow\n",
}

func TestRenderEngineReusesBeforeRendersByCommit(t *testing.T) {
	dir := testtree.Write(t, kustomizeTree)
	renders, err := cache.NewRenders(t.TempDir(), 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	apps := []render.Application{
		{Name: "argocd/api", Path: "apps/api/prod", SourceType: render.SourceKustomize, Namespace: "shop",
			Kustomize: render.KustomizeOptions{NamePrefix: "prod-"}},
		{Name: "argocd/web", Path: "apps/web", SourceType: render.SourceDirectory, Namespace: "shop"},
	}
	req := render.Request{RepoDir: dir, Apps: apps, App: "argocd/api",
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "prod-api"},
		Change: render.Change{Replicas: &render.Replicas{Count: 3}}}
	at := cache.Commit{Repo: "acme/deploy", SHA: strings.Repeat("a", 40)}
	ctx := context.Background()

	fresh, err := cache.RenderEngine{}.Plan(ctx, at, req)
	if err != nil {
		t.Fatal(err)
	}
	cached := cache.RenderEngine{Renders: renders}
	first, err := cached.Plan(ctx, at, req)
	if err != nil {
		t.Fatal(err)
	}
	if st := renders.Stats(); st.Hits != 0 || st.Misses == 0 {
		t.Fatalf("first plan: %+v, want only misses", st)
	}
	misses := renders.Stats().Misses
	second, err := cached.Plan(ctx, at, req)
	if err != nil {
		t.Fatal(err)
	}
	if st := renders.Stats(); st.Hits != misses || st.Misses != misses {
		t.Fatalf("second plan on the same commit: %+v, want %d hits and no new miss", st, misses)
	}
	for name, got := range map[string]*render.Result{"first": first, "second (from cache)": second} {
		if !reflect.DeepEqual(got, fresh) {
			t.Fatalf("%s plan differs from an uncached one:\n%+v\n%+v", name, got, fresh)
		}
	}

	// Another commit, or other options for the same path, are other renders.
	other := at
	other.SHA = strings.Repeat("b", 40)
	if _, err := cached.Plan(ctx, other, req); err != nil {
		t.Fatal(err)
	}
	req.Apps[0].Kustomize.NamePrefix = "eu-"
	req.Target.Name = "eu-api"
	if _, err := cached.Plan(ctx, at, req); err != nil {
		t.Fatal(err)
	}
	if st := renders.Stats(); st.Hits != misses || st.Misses != misses+2 {
		t.Fatalf("after another commit and other options: %+v, want two more misses and no hit", st)
	}
}

func TestRenderEngineRendersAgainWhenTheCacheIsCorrupt(t *testing.T) {
	dir := testtree.Write(t, kustomizeTree)
	renders, err := cache.NewRenders(t.TempDir(), 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	app := render.Application{Name: "argocd/web", Path: "apps/web", SourceType: render.SourceDirectory, Namespace: "shop"}
	at := cache.Commit{Repo: "acme/deploy", SHA: strings.Repeat("c", 40)}
	if err := renders.Store(cache.RenderKey(at.Repo, at.SHA, app.Path, app.SourceID()), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	req := render.Request{RepoDir: dir, Apps: []render.Application{app},
		Target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "web"},
		Change: render.Change{NewResource: &render.NewResource{Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\n"}}}
	res, err := cache.RenderEngine{Renders: renders}.Plan(context.Background(), at, req)
	if err != nil {
		t.Fatalf("a corrupt cache entry failed the plan: %v", err)
	}
	if !res.Verification.Verified || len(res.Changed) != 1 {
		t.Fatalf("result %+v", res)
	}
}

// BenchmarkRenderEngine plans a replicas change on a Kustomize overlay with and
// without the before-render cache (warm: every iteration is a plan on the same
// commit).
func BenchmarkRenderEngine(b *testing.B) {
	files := map[string]string{"apps/api/prod/kustomization.yaml": "resources:\n  - ../base\n"}
	base := "resources:\n"
	for i := range 30 {
		name := fmt.Sprintf("svc%02d", i)
		base += "  - " + name + ".yaml\n"
		files["apps/api/base/"+name+".yaml"] = strings.NewReplacer("name: api", "name: "+name, "app: api", "app: "+name, "/api:", "/"+name+":").
			Replace(kustomizeTree["apps/api/base/deployment.yaml"])
	}
	files["apps/api/base/kustomization.yaml"] = base
	dir := testtree.Write(b, files)
	req := render.Request{RepoDir: dir, Apps: []render.Application{{Name: "api", Path: "apps/api/prod", SourceType: render.SourceKustomize, Namespace: "shop"}},
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "svc07"},
		Change: render.Change{Replicas: &render.Replicas{Count: 3}}}
	at := cache.Commit{Repo: "acme/deploy", SHA: strings.Repeat("d", 40)}
	renders, err := cache.NewRenders(b.TempDir(), 64<<20)
	if err != nil {
		b.Fatal(err)
	}
	for name, engine := range map[string]cache.RenderEngine{"fresh": {}, "cached": {Renders: renders}} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := engine.Plan(context.Background(), at, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
