//go:build e2e

package e2e

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/e2e/argocdharness"
	"github.com/kukie/kukie-gitops/internal/chartrepotest"
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
	a := chartApp{repo: argocdharness.Repository{Repo: charts.URL, Type: "helm"}, chart: chartSource, ref: refSource, refSHA: sha}
	s.checkChartParity(t, ctx, a, helmRepoValues, caps)

	// A version written with a leading v the index does not list (v1.2.0 of
	// an index listing 1.2.0) is one exact version to Argo CD, which helm pull
	// finds by its semantic version: the service must find the same chart.
	t.Run("a version with a leading v", func(t *testing.T) {
		a := a
		a.chart = maps.Clone(chartSource)
		a.chart["targetRevision"] = "v" + helmRepoVersion
		s.checkChartParity(t, ctx, a, helmRepoValues, caps)
	})
}
