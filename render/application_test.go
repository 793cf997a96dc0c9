package render

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestApplicationFromObject(t *testing.T) {
	cases := map[string]struct {
		manifest string
		want     Application
		repo     string
		err      string
	}{
		"kustomize with options and status": {
			manifest: `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: web
  annotations:
    argocd.argoproj.io/manifest-generate-paths: .;/bases/web
spec:
  source:
    repoURL: https://github.com/example/deploy.git
    path: overlays/prod
    kustomize:
      namePrefix: prod-
      images: [ghcr.io/example/web:1.2.3]
      replicas: [{name: web, count: 3}]
  destination: {namespace: web}
status:
  sourceType: Kustomize
`,
			want: Application{Name: "web", Path: "overlays/prod", SourceType: SourceKustomize, Namespace: "web",
				ManifestGeneratePaths: ".;/bases/web",
				Kustomize:             KustomizeOptions{NamePrefix: "prod-", Images: []string{"ghcr.io/example/web:1.2.3"}, Replicas: map[string]int64{"web": 3}}},
			repo: "https://github.com/example/deploy.git",
		},
		"directory from the explicit block": {
			manifest: `
kind: Application
metadata: {name: plain}
spec:
  source: {repoURL: git@github.com:example/deploy.git, path: apps/plain, directory: {recurse: true, exclude: "*.json"}}
  destination: {namespace: plain}
`,
			want: Application{Name: "plain", Path: "apps/plain", SourceType: SourceDirectory, Namespace: "plain", Directory: DirectoryOptions{Recurse: true, Exclude: "*.json"}},
			repo: "git@github.com:example/deploy.git",
		},
		"multi-source": {
			manifest: "kind: Application\nmetadata: {name: m}\nspec:\n  sources: [{path: a}, {path: b}]\n",
			err:      "several sources",
		},
		"not an application": {
			manifest: "kind: Deployment\nmetadata: {name: x}\n",
			err:      "not an Application",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(tc.manifest), &obj); err != nil {
				t.Fatal(err)
			}
			got, repo, err := ApplicationFromObject(obj)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want error %q, got %v", tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) || repo != tc.repo {
				t.Fatalf("got %+v %q\nwant %+v %q", got, repo, tc.want, tc.repo)
			}
		})
	}
}

func TestDetectSourceType(t *testing.T) {
	repo := writeRepo(t, map[string]string{
		"k/kustomization.yaml":               "resources: []\n",
		"k/Chart.yaml":                       "name: x\n",
		"kyml/kustomization.yml":             "resources: []\n",
		"kcap/Kustomization":                 "resources: []\n",
		"kcap/values.yaml":                   "replicas: 1\n",
		"h/Chart.yaml":                       "name: x\n",
		"hsuffix/MyChart.yaml":               "name: x\n",
		"d/a.yaml":                           "kind: ConfigMap\n",
		"d/sub/Chart.yaml":                   "name: nested charts do not count\n",
		"d/sub/kustomization.yaml":           "resources: []\n",
		"d/kustomization.yaml.bak":           "resources: []\n",
		"d/Chart.yml":                        "name: only Chart.yaml counts\n",
		"dirnamed/kustomization.yaml/a.yaml": "kind: ConfigMap\n",
	})
	cases := map[string]struct {
		path string
		want SourceType
	}{
		"kustomization.yaml wins over a chart": {"k", SourceKustomize},
		"kustomization.yml":                    {"kyml", SourceKustomize},
		"Kustomization":                        {"kcap", SourceKustomize},
		"Chart.yaml":                           {"h", SourceHelm},
		"a name ending in Chart.yaml":          {"hsuffix", SourceHelm},
		"plain files; subdirectories and look-alikes do not count": {"d", SourceDirectory},
		"a directory named like a kustomization":                   {"dirnamed", SourceDirectory},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := DetectSourceType(repo, tc.path)
			if err != nil || got != tc.want {
				t.Fatalf("DetectSourceType(%s) = %s, %v; want %s", tc.path, got, err, tc.want)
			}
		})
	}
	t.Run("a path leaving the repository", func(t *testing.T) {
		var ref *Refusal
		if _, err := DetectSourceType(repo, "../x"); !errors.As(err, &ref) || ref.Code != CodePathEscape {
			t.Fatalf("want a %s refusal, got %v", CodePathEscape, err)
		}
	})
}

// TestNewResourceCreatesResourcesList adds a resource to a kustomization that has
// no resources list yet.
func TestNewResourceCreatesResourcesList(t *testing.T) {
	repo := writeRepo(t, map[string]string{
		"app/kustomization.yaml": "namespace: web\npatches: []\n",
	})
	res, err := Plan(context.Background(), Request{RepoDir: repo,
		Apps:   []Application{{Name: "web", Path: "app", SourceType: SourceKustomize, Namespace: "web"}},
		Change: Change{NewResource: &NewResource{Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  A: b\n"}}})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	var kust string
	for _, e := range res.Edits {
		if e.Path == "app/kustomization.yaml" {
			kust = string(e.New)
		}
	}
	if !strings.Contains(kust, "resources:") || !strings.Contains(kust, "configmap-settings.yaml") {
		t.Fatalf("kustomization not extended:\n%s", kust)
	}
	if len(res.ClusterDiff) != 1 || res.ClusterDiff[0].Action != "added" || res.ClusterDiff[0].Namespace != "web" {
		t.Fatalf("cluster diff: %+v", res.ClusterDiff)
	}
}
