package render

import (
	"reflect"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/argocd"
)

func decodeArgoCDApp(t *testing.T, manifest string) argocd.Application {
	t.Helper()
	doc, err := sigsyaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	a, err := argocd.DecodeApplication(doc)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestFromArgoCD(t *testing.T) {
	cases := map[string]struct {
		manifest string
		keep     func(argocd.AppSource) bool
		want     []Application
		// unsupported are substrings of each converted app's Unsupported, in order.
		unsupported []string
	}{
		"kustomize with options and status": {
			manifest: `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: web
  namespace: argocd
  annotations:
    argocd.argoproj.io/manifest-generate-paths: .;/bases/web
spec:
  source:
    repoURL: https://github.com/example/deploy.git
    path: overlays/prod
    kustomize:
      namePrefix: prod-
      images: [ghcr.io/example/web:1.2.3]
      replicas: [{name: web, count: 3}, {name: api, count: "2"}]
  destination: {namespace: web}
status:
  sourceType: Kustomize
`,
			want: []Application{{Name: "argocd/web", Path: "overlays/prod", SourceType: SourceKustomize, Namespace: "web",
				ManifestGeneratePaths: ".;/bases/web",
				Kustomize: KustomizeOptions{NamePrefix: "prod-", Images: []string{"ghcr.io/example/web:1.2.3"},
					Replicas: map[string]int64{"web": 3, "api": 2}}}},
		},
		"directory from the explicit block, root path": {
			manifest: `
kind: Application
metadata: {name: plain}
spec:
  source: {repoURL: git@github.com:example/deploy.git, directory: {recurse: true, exclude: "*.json"}}
  destination: {namespace: plain}
`,
			want: []Application{{Name: "plain", Path: ".", SourceType: SourceDirectory, Namespace: "plain", Directory: DirectoryOptions{Recurse: true, Exclude: "*.json"}}},
		},
		"helm, plugin and chart blocks name their type": {
			manifest: `
kind: Application
metadata: {name: m}
spec:
  sources:
  - {repoURL: r, path: h, helm: {valueFiles: [a.yaml]}}
  - {repoURL: r, path: p, plugin: {name: cmp}}
  - {repoURL: https://charts.example, chart: redis, targetRevision: 1.0.0}
`,
			want: []Application{{Name: "m", Path: "h", SourceType: SourceHelm}, {Name: "m (source 2)", Path: "p", SourceType: SourcePlugin},
				{Name: "m (source 3)", Path: ".", SourceType: SourceHelm}},
			unsupported: []string{"multi-source", "multi-source", "multi-source"},
		},
		"multi-source: the sources keep selects, each with its status type": {
			manifest: `
kind: Application
metadata: {name: m, namespace: argocd}
spec:
  sources: [{repoURL: a, path: p1}, {repoURL: b, path: p2}, {repoURL: a, path: p3}]
status:
  sourceTypes: [Directory, Kustomize, Kustomize]
`,
			keep: func(s argocd.AppSource) bool { return s.RepoURL == "a" },
			want: []Application{{Name: "argocd/m", Path: "p1", SourceType: SourceDirectory},
				{Name: "argocd/m (source 3)", Path: "p3", SourceType: SourceKustomize}},
			unsupported: []string{"multi-source", "multi-source"},
		},
		"kustomize options render does not apply": {
			manifest: `
kind: Application
metadata: {name: k}
spec:
  source:
    repoURL: r
    path: k
    kustomize: {namePrefix: a-, patches: [{patch: x}], forceCommonLabels: true, version: v5.0.0}
`,
			want:        []Application{{Name: "k", Path: "k", SourceType: SourceKustomize, Kustomize: KustomizeOptions{NamePrefix: "a-"}}},
			unsupported: []string{"not supported yet (forceCommonLabels, patches)"},
		},
		"replicas count that is not an integer": {
			manifest: `
kind: Application
metadata: {name: k}
spec:
  source: {repoURL: r, path: k, kustomize: {replicas: [{name: web, count: many}, {name: api, count: 2}]}}
status: {sourceType: Kustomize}
`,
			want:        []Application{{Name: "k", Path: "k", SourceType: SourceKustomize, Kustomize: KustomizeOptions{Replicas: map[string]int64{"api": 2}}}},
			unsupported: []string{`count "many" for web is not an integer`},
		},
		"no source": {
			manifest: "kind: Application\nmetadata: {name: e}\nspec: {destination: {namespace: x}}\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := FromArgoCD(decodeArgoCDApp(t, tc.manifest), tc.keep)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d applications %+v, want %d", len(got), got, len(tc.want))
			}
			for i := range got {
				want := ""
				if i < len(tc.unsupported) {
					want = tc.unsupported[i]
				}
				if (want == "") != (got[i].Unsupported == "") || !strings.Contains(got[i].Unsupported, want) {
					t.Errorf("app %d: Unsupported %q, want it to say %q", i, got[i].Unsupported, want)
				}
				got[i].Unsupported = ""
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
