package helmrepo_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/helmrepo"
	"github.com/kukie/kukie-gitops/internal/chartrepotest"
	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render"
)

// lockedChart writes chart web depending on cache 1.2.3 from repository, with
// the Chart.lock "helm dependency update" writes for it, and the values that
// scale the dependency's Deployment.
func lockedChart(t *testing.T, repository string) string {
	t.Helper()
	deps := []*chart.Dependency{{Name: "cache", Version: "~1.2.0", Repository: repository}}
	locked := []*chart.Dependency{{Name: "cache", Version: "1.2.3", Repository: repository}}
	data, err := json.Marshal([2][]*chart.Dependency{deps, locked})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	lock, err := yaml.Marshal(map[string]any{"dependencies": locked, "digest": "sha256:" + hex.EncodeToString(sum[:]), "generated": "2026-01-01T00:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	chartYAML, err := yaml.Marshal(map[string]any{"apiVersion": "v2", "name": "web", "version": "0.1.0", "dependencies": deps})
	if err != nil {
		t.Fatal(err)
	}
	return testtree.Write(t, map[string]string{
		"chart/Chart.yaml":  string(chartYAML),
		"chart/Chart.lock":  string(lock),
		"chart/values.yaml": "cache:\n  # two for the cache\n  replicas: 2\n",
	})
}

func scaleCache(dir string) render.Request {
	return render.Request{RepoDir: dir, Apps: []render.Application{{Name: "web", Path: "chart", SourceType: render.SourceHelm, Namespace: "shop"}},
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "cache"},
		Change: render.Change{Replicas: &render.Replicas{Count: 3}}}
}

// A chart whose dependency is pinned by Chart.lock, not vendored, renders with
// the archive fetched from the chart repository (or OCI registry) the lock
// names, and the change to the dependency's Deployment is found in the chart's
// values; without a chart source it is refused, saying so.
func TestPlanFetchesLockedDependencies(t *testing.T) {
	archive := packageChart(t, "cache", "1.2.3")
	r := newChartRepo(t, map[string][]byte{"cache-1.2.3.tgz": archive}, nil, nil)
	host := chartrepotest.ServeOCI(t, "charts", archive)
	f := helmrepo.New(helmrepo.WithLoopback(), helmrepo.WithPlainHTTP())
	for name, repository := range map[string]string{"chart repository": r.URL + "/charts", "OCI registry": "oci://" + host + "/charts"} {
		t.Run(name, func(t *testing.T) {
			dir := lockedChart(t, repository)
			res, err := render.Plan(render.WithCharts(context.Background(), f), scaleCache(dir))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Edits) != 1 || res.Edits[0].Path != "chart/values.yaml" || string(res.Edits[0].New) != "cache:\n  # two for the cache\n  replicas: 3\n" {
				t.Fatalf("edits %+v\n%s", res.Edits, res.GitDiff)
			}
			_, err = render.Plan(context.Background(), scaleCache(dir))
			var ref *render.Refusal
			if !errors.As(err, &ref) || ref.Code != render.CodeHelmDependency || !strings.Contains(ref.Reason, "the dependency cache is not vendored under charts/, and this render fetches no chart dependencies") {
				t.Fatalf("without a chart source: %v", err)
			}
		})
	}
}

// An Application's chart pinned at a version written otherwise than its
// repository publishes it (targetRevision v1.2.3 of a chart published as
// 1.2.3, and the reverse) renders with the chart Argo CD deploys for it: the
// one Helm finds in the index by that version. From an OCI registry it is the
// chart of the tag written, whose Chart.yaml may say the version without its v.
func TestPlanRendersTheChartVersionArgoCDFinds(t *testing.T) {
	unprefixed := newChartRepo(t, map[string][]byte{"cache-1.2.3.tgz": packageChart(t, "cache", "1.2.3")}, nil, nil)
	prefixed := newChartRepo(t, map[string][]byte{"cache-v1.2.3.tgz": packageChart(t, "cache", "v1.2.3")}, nil, nil)
	host := chartrepotest.ServeOCITagged(t, "charts", map[string][]byte{"v1.2.3": packageChart(t, "cache", "1.2.3")})
	f := helmrepo.New(helmrepo.WithLoopback(), helmrepo.WithPlainHTTP())
	cases := map[string]render.ChartDependency{
		"v1.2.3 of a repository publishing 1.2.3": {Repository: unprefixed.URL + "/charts", Name: "cache", Version: "v1.2.3"},
		"1.2.3 of a repository publishing v1.2.3": {Repository: prefixed.URL + "/charts", Name: "cache", Version: "1.2.3"},
		"the tag v1.2.3 of a chart 1.2.3":         {Repository: "oci://" + host + "/charts", Name: "cache", Version: "v1.2.3"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			app := render.Application{Name: "cache", Path: "envs/prod", SourceType: render.SourceHelm, Namespace: "shop", Chart: &c,
				Helm: render.HelmOptions{ReleaseName: "cache", ValueFiles: []string{"/envs/prod/cache.yaml"}}}
			res, err := render.Plan(render.WithCharts(context.Background(), f), render.Request{
				RepoDir: testtree.Write(t, map[string]string{"envs/prod/cache.yaml": "replicas: 2\n"}), Apps: []render.Application{app},
				Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "cache"},
				Change: render.Change{Replicas: &render.Replicas{Count: 3}}})
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			if len(res.Edits) != 1 || res.Edits[0].Path != "envs/prod/cache.yaml" || string(res.Edits[0].New) != "replicas: 3\n" {
				t.Fatalf("edits %+v\n%s", res.Edits, res.GitDiff)
			}
		})
	}
}
