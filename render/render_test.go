package render

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

// overlayRepo is a Kustomize overlay (with a Secret and fields of every value
// type) and a Directory app beside it.
var overlayRepo = map[string]string{
	"apps/api/base/kustomization.yaml": "resources:\n  - deployment.yaml\n  - secret.yaml\n",
	"apps/api/base/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  replicas: 1
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels: {app: api}
    spec:
      terminationGracePeriodSeconds: 30
      containers:
        - name: api
          image: registry.example/api:1.0.0
          args: []
          resources:
            requests: {cpu: 1.0}
          env:
            - name: EMPTY
              value: null
      volumes:
        - name: scratch
          emptyDir: {}
`,
	"apps/api/base/secret.yaml":           "apiVersion: v1\nkind: Secret\nmetadata:\n  name: api-db\nstringData:\n  password: hunter2-very-secret\n",
	"apps/api/overlay/kustomization.yaml": "resources:\n  - ../base\nimages:\n  - name: registry.example/api\n    newTag: 1.4.0\n",
	"apps/web/deployment.yaml":            twoContainerDeployment,
}

var (
	overlayApp = Application{Name: "api", Path: "apps/api/overlay", SourceType: SourceKustomize, Namespace: "shop",
		Kustomize: KustomizeOptions{NamePrefix: "prod-", Images: []string{"registry.example/api:1.4.2"}}}
	webApp = Application{Name: "web", Path: "apps/web", SourceType: SourceDirectory, Namespace: "shop"}
)

func TestRenderMatchesPlansBeforeRenderAndSurvivesEncoding(t *testing.T) {
	repo := testtree.Write(t, overlayRepo)
	for name, app := range map[string]Application{"kustomize": overlayApp, "directory": webApp} {
		t.Run(name, func(t *testing.T) {
			objs, err := Render(context.Background(), repo, app)
			if err != nil {
				t.Fatal(err)
			}
			p, err := newPlanner(context.Background(), Request{RepoDir: repo, Apps: []Application{app},
				Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "x"}, Change: Change{Replicas: &Replicas{Count: 1}}})
			if err != nil {
				t.Fatal(err)
			}
			internal, err := renderApp(context.Background(), p.before, app, true)
			if err != nil {
				t.Fatal(err)
			}
			if want := exportObjects(internal); !reflect.DeepEqual(objs, want) {
				t.Fatalf("Render differs from the planner's before-render:\n%+v\n%+v", objs, want)
			}
			if app.SourceType == SourceKustomize {
				var dep *Object
				for i := range objs {
					if objs[i].Manifest["kind"] == "Deployment" {
						dep = &objs[i]
					}
				}
				if dep == nil {
					t.Fatal("no Deployment rendered")
				}
				if name, _ := getPath(dep.Manifest, []string{"metadata", "name"}); name != "prod-api" || dep.Origin != "apps/api/base/deployment.yaml" {
					t.Fatalf("Application options or origin not applied: name %v origin %q", name, dep.Origin)
				}
			}

			data, err := EncodeObjects(objs)
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeObjects(data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, objs) {
				t.Fatalf("decoded render differs from the fresh one:\n%#v\n%#v", back, objs)
			}
		})
	}
}

// renderStored renders app and returns the render as it comes back from its stored
// form (EncodeObjects, DecodeObjects), as a render cache hands it to Plan.
func renderStored(ctx context.Context, repo string, app Application) ([]Object, error) {
	objs, err := Render(ctx, repo, app)
	if err != nil {
		return nil, err
	}
	data, err := EncodeObjects(objs)
	if err != nil {
		return nil, err
	}
	return DecodeObjects(data)
}

func TestDecodeObjectsRefusesGarbage(t *testing.T) {
	if _, err := DecodeObjects([]byte("not a render")); err == nil {
		t.Fatal("garbage decoded")
	}
}

func TestPlanUsesBeforeRenderAndKeepsItsResult(t *testing.T) {
	repo := testtree.Write(t, overlayRepo)
	req := Request{RepoDir: repo, Apps: []Application{overlayApp, webApp}, App: "api",
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "prod-api"},
		Change: Change{Resources: &Resources{Container: "api", Requests: map[string]string{"memory": "256Mi"}}}}
	fresh, err := Plan(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}

	var calls atomic.Int32
	req.BeforeRender = func(ctx context.Context, app Application) ([]Object, error) {
		calls.Add(1)
		return renderStored(ctx, repo, app)
	}
	supplied, err := Plan(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() == 0 {
		t.Fatal("Plan rendered the before-state itself although BeforeRender was given")
	}
	if !reflect.DeepEqual(fresh, supplied) {
		t.Fatalf("a supplied before-render changes the result:\n%+v\n%+v", fresh, supplied)
	}

	req.BeforeRender = func(context.Context, Application) ([]Object, error) {
		return nil, errors.New("cache unreadable")
	}
	if _, err := Plan(context.Background(), req); err == nil || !strings.Contains(err.Error(), "cache unreadable") {
		t.Fatalf("a failing BeforeRender is not reported: %v", err)
	}
}

func TestResultCarriesChangedObjectsButNeverPrintsThem(t *testing.T) {
	repo := testtree.Write(t, overlayRepo)
	cases := map[string]struct {
		req      Request
		wantKind string
		wantName string
		check    func(t *testing.T, obj map[string]any)
	}{
		"kustomize resources": {
			req: Request{RepoDir: repo, Apps: []Application{overlayApp}, Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "prod-api"},
				Change: Change{Resources: &Resources{Container: "api", Limits: map[string]string{"memory": "1Gi"}}}},
			wantKind: "Deployment", wantName: "prod-api",
			check: func(t *testing.T, obj map[string]any) {
				c, _ := getPath(obj, []string{"spec", "template", "spec", "containers"})
				ctr := c.([]any)[0].(map[string]any)
				if img := ctr["image"]; img != "registry.example/api:1.4.2" {
					t.Fatalf("after-render image %v: the Application's images override is not applied", img)
				}
				if mem, _ := getPath(ctr, []string{"resources", "limits", "memory"}); mem != "1Gi" {
					t.Fatalf("after-render memory limit %v", mem)
				}
			},
		},
		"kustomize new config map": {
			req: Request{RepoDir: repo, Apps: []Application{overlayApp},
				Change: Change{NewResource: &NewResource{Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\ndata:\n  fast: \"true\"\n"}}},
			wantKind: "ConfigMap", wantName: "prod-flags",
			check: func(t *testing.T, obj map[string]any) {
				if v, _ := getPath(obj, []string{"data", "fast"}); v != "true" {
					t.Fatalf("after-render data %v", v)
				}
			},
		},
		"directory replicas": {
			req: Request{RepoDir: repo, Apps: []Application{webApp}, Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				Change: Change{Replicas: &Replicas{Count: 5}}},
			wantKind: "Deployment", wantName: "web",
			check: func(t *testing.T, obj map[string]any) {
				if n, _ := getPath(obj, []string{"spec", "replicas"}); n != int64(5) {
					t.Fatalf("after-render replicas %v", n)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := Plan(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Changed) != 1 {
				t.Fatalf("changed objects %+v, want one", res.Changed)
			}
			got := res.Changed[0]
			kind, _ := got.Object["kind"].(string)
			name, _ := getPath(got.Object, []string{"metadata", "name"})
			ns, _ := getPath(got.Object, []string{"metadata", "namespace"})
			if got.App != tc.req.Apps[0].Name || kind != tc.wantKind || name != tc.wantName || ns != "shop" {
				t.Fatalf("changed object %s %v in %v of app %s", kind, name, ns, got.App)
			}
			tc.check(t, got.Object)
			printed, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(printed), "hunter2") || strings.Contains(string(printed), `"Changed"`) {
				t.Fatalf("the real objects are in the serialised result: %s", printed)
			}
			// The result's objects are copies: changing one must not reach a render.
			got.Object["kind"] = "Mutated"
			if again, _ := Plan(context.Background(), tc.req); again.Changed[0].Object["kind"] != tc.wantKind {
				t.Fatal("changed objects share state with later plans")
			}
		})
	}
}

func TestEncodeObjectsKeepsValueTypes(t *testing.T) {
	cases := map[string]any{
		"float that looks whole": 1.0,
		"integer":                int64(1),
		"null":                   nil,
		"empty list":             []any{},
		"empty map":              map[string]any{},
		"nested":                 []any{map[string]any{"a": []any{true, "x", -2.5}}},
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			in := []Object{{Manifest: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "v": v}, File: "a.yaml", Doc: 2}}
			data, err := EncodeObjects(in)
			if err != nil {
				t.Fatal(err)
			}
			out, err := DecodeObjects(data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(in, out) {
				t.Fatalf("round trip:\n%#v\n%#v", in, out)
			}
		})
	}
	if _, err := EncodeObjects([]Object{{Manifest: map[string]any{"v": struct{}{}}}}); err == nil {
		t.Fatal("a value no manifest holds was encoded")
	}
}

// TestRenderRefusesRemoteReferencesWithoutFetching: kustomize would fetch these
// over HTTP or git; Render must refuse them before the build, so that nothing is
// fetched (PATH is emptied: a git run would fail with a different reason).
func TestRenderRefusesRemoteReferencesWithoutFetching(t *testing.T) {
	t.Setenv("PATH", "")
	cases := map[string]struct {
		kustomization string
		code          string
	}{
		"https resource": {
			kustomization: "resources:\n  - https://example.com/deploy/web.yaml\n",
			code:          CodeRemoteBase,
		},
		"git base with ref": {
			kustomization: "resources:\n  - github.com/example/deploy//base?ref=v1\n",
			code:          CodeRemoteBase,
		},
		"remote component": {
			kustomization: "components:\n  - https://github.com/example/deploy//components/debug?ref=main\n",
			code:          CodeRemoteBase,
		},
		"missing local base": {
			kustomization: "resources:\n  - ../no-such-base\n",
			code:          CodeRenderFailed,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			repo := testtree.Write(t, map[string]string{"app/kustomization.yaml": tc.kustomization})
			_, err := Render(context.Background(), repo, Application{Name: "web", Path: "app", SourceType: SourceKustomize})
			var ref *Refusal
			if !errors.As(err, &ref) || ref.Code != tc.code || ref.App != "web" {
				t.Fatalf("want a %s refusal for web, got %v", tc.code, err)
			}
			if !strings.Contains(ref.Reason, "app/kustomization.yaml") {
				t.Fatalf("the reason does not name the kustomization: %s", ref.Reason)
			}
		})
	}
}

// TestRenderUsesArgoCDKustomizeDefaults: Argo CD runs a plain "kustomize build":
// files outside the kustomization root are refused, Helm inflation and plugins
// (exec functions, external transformers) are off.
func TestRenderUsesArgoCDKustomizeDefaults(t *testing.T) {
	const deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n"
	cases := map[string]struct {
		files  map[string]string
		reason string
	}{
		"load restrictions: a patch outside the kustomization root": {
			files: map[string]string{
				"app/kustomization.yaml": "resources:\n  - deployment.yaml\npatches:\n  - path: ../shared/replicas.yaml\n",
				"app/deployment.yaml":    deployment,
				"shared/replicas.yaml":   "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n",
			},
			reason: "is not in or below",
		},
		"helm inflation off": {
			files: map[string]string{
				"app/kustomization.yaml": "helmCharts:\n  - name: web\n    version: 1.0.0\n    repo: oci://registry.example.com/charts\n",
			},
			reason: "enable-helm",
		},
		"exec function off": {
			files: map[string]string{
				"app/kustomization.yaml": "resources:\n  - deployment.yaml\ntransformers:\n  - fn.yaml\n",
				"app/deployment.yaml":    deployment,
				"app/fn.yaml": "apiVersion: example.com/v1\nkind: Mutate\nmetadata:\n  name: mutate\n  annotations:\n" +
					"    config.kubernetes.io/function: |\n      exec:\n        path: ./mutate.sh\n",
				"app/mutate.sh": "#!/bin/sh\ncat\n",
			},
			reason: "plugin",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			repo := testtree.Write(t, tc.files)
			_, err := Render(context.Background(), repo, Application{Name: "web", Path: "app", SourceType: SourceKustomize})
			var ref *Refusal
			if !errors.As(err, &ref) || ref.Code != CodeRenderFailed {
				t.Fatalf("want a %s refusal, got %v", CodeRenderFailed, err)
			}
			if !strings.Contains(ref.Reason, tc.reason) {
				t.Fatalf("reason lacks %q: %s", tc.reason, ref.Reason)
			}
		})
	}
}
