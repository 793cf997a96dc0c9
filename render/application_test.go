package render

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
)

func TestDetectSourceType(t *testing.T) {
	repo := testtree.Write(t, map[string]string{
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
	repo := testtree.Write(t, map[string]string{
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
