//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/e2e/argocdharness"
	"github.com/kukie/kukie-gitops/helmrepo"
	"github.com/kukie/kukie-gitops/internal/chartrepotest"
	"github.com/kukie/kukie-gitops/render"
)

const (
	// helmRepoCharts holds the chart (cache, at helmRepoVersion) the test
	// serves from a chart repository of its own; helmRepoValues is the Git tree
	// its values come from.
	helmRepoCharts  = "testdata/helmrepo/chart"
	helmRepoVersion = "1.2.0"
	helmRepoValues  = "testdata/helmrepo/values"
)

// testHelmRepositoryParity is the proof that a chart from a Helm repository, its
// values from a Git repository through a ref source (the usual shape of a
// third-party chart in Argo CD), renders in the service as Argo CD's repo server
// renders it: the repo server fetches the chart from the chart repository and the
// values file from Git, the service fetches the chart through the fetcher it
// uses for every chart (helmrepo, here allowed the loopback interface) and reads
// the values from the tree, and the two must hold the same objects.
func (s *suite) testHelmRepositoryParity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	charts := chartrepotest.Serve(t, helmRepoCharts)
	sha := s.github.CreateRepo(t, "acme", "cache-values", readTree(t, helmRepoValues), "main")
	s.github.SetPrivate(t, "acme/cache-values", false)
	valuesURL := s.github.CloneURL("acme/cache-values")
	chartSource := map[string]any{
		"repoURL": charts.URL, "chart": "cache", "targetRevision": helmRepoVersion,
		"helm": map[string]any{"releaseName": "cache", "valueFiles": []any{"$values/envs/prod/cache.yaml"}},
	}
	refSource := map[string]any{"repoURL": valuesURL, "targetRevision": "main", "ref": "values"}
	caps := s.clusterCapabilities(t)

	resp, err := s.argo.GenerateManifest(ctx, argocdharness.ManifestRequest{
		Repo:               argocdharness.Repository{Repo: charts.URL, Type: "helm"},
		Revision:           helmRepoVersion,
		AppName:            "cache",
		Namespace:          "cache",
		ApplicationSource:  chartSource,
		KubeVersion:        caps.kubeVersion,
		APIVersions:        caps.apiVersions,
		NoCache:            true,
		HasMultipleSources: true,
		RefSources:         map[string]argocdharness.RefTarget{"$values": {Repo: argocdharness.Repository{Repo: valuesURL}, TargetRevision: sha}},
		ProjectName:        "default",
		ProjectSourceRepos: []string{"*"},
	})
	if err != nil {
		t.Fatalf("repo server: %v", err)
	}
	var theirs []map[string]any
	for _, m := range resp.Manifests {
		var obj map[string]any
		if err := json.Unmarshal([]byte(m), &obj); err != nil {
			t.Fatalf("repo server: manifest is not JSON: %v", err)
		}
		theirs = append(theirs, obj)
	}
	t.Logf("repo server: %s, %d objects, %v", resp.SourceType, len(theirs), resp.Commands)
	if len(theirs) != 2 {
		t.Fatalf("the repo server rendered %d objects, want the chart's Deployment and Service", len(theirs))
	}

	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "cache", "namespace": argocdharness.Namespace},
		"spec": map[string]any{
			"project":     "default",
			"sources":     []any{chartSource, refSource},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "cache"},
		},
		"status": map[string]any{"sourceTypes": []any{resp.SourceType}},
	}}
	model, err := argocd.ParseApplication(app.Object)
	if err != nil {
		t.Fatalf("parse application: %v", err)
	}
	fetch := render.WithCharts(ctx, helmrepo.New(helmrepo.WithLoopback(), helmrepo.WithPlainHTTP()))
	var ours []map[string]any
	apps := render.FromArgoCD(model, nil)
	if len(apps) != 1 {
		t.Fatalf("FromArgoCD made %d applications of the chart and its ref source, want 1", len(apps))
	}
	ra := apps[0]
	if ra.Unsupported != "" {
		t.Fatalf("render calls %s unsupported: %s", ra.Name, ra.Unsupported)
	}
	ra.Helm.KubeVersion, ra.Helm.APIVersions = caps.kubeVersion, caps.apiVersions
	objs, err := render.Render(fetch, helmRepoValues, ra)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	for _, o := range objs {
		ours = append(ours, o.Manifest)
	}
	if diffs := compareObjects(theirs, ours); len(diffs) > 0 {
		t.Fatalf("render differs from Argo CD's repo server in %d of %d objects:\n%s", len(diffs), len(theirs), strings.Join(diffs, "\n"))
	}
	t.Logf("%d objects equal", len(theirs))

	// A version written with a leading v the index does not list (v1.2.0 of
	// an index listing 1.2.0) is one exact version to Argo CD, which helm pull
	// finds by its semantic version: the service must find the same chart.
	t.Run("a version with a leading v", func(t *testing.T) {
		chart := maps.Clone(chartSource)
		chart["targetRevision"] = "v" + helmRepoVersion
		s.checkChartParity(t, ctx, chartApp{repo: argocdharness.Repository{Repo: charts.URL, Type: "helm"}, chart: chart, ref: refSource, refSHA: sha}, helmRepoValues, caps)
	})
}
