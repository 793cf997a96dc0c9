//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/e2e/argocdharness"
	"github.com/kukie/kukie-gitops/internal/chartrepotest"
)

// testOCIRegistryParity is the proof that a chart from an OCI registry, its
// values from Git through a ref source, renders in the service as Argo CD's repo
// server renders it, for each way an Application names such a chart: the repo
// server pulls it (helm pull oci://<repoURL>/<chart> for a repoURL without a
// scheme; the repoURL's own artifact, chart unread, for an oci:// one), the
// service through helmrepo, and the two must hold the same objects. An oci://
// repoURL of the registry path, with the chart beside it, is a chart neither
// finds: both must refuse it.
func (s *suite) testOCIRegistryParity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	host := chartrepotest.ServeOCI(t, "charts", chartrepotest.Package(t, helmRepoCharts)...)
	_, port, _ := strings.Cut(host, ":")
	sha := s.github.CreateRepo(t, "acme", "cache-oci-values", readTree(t, helmRepoValues), "main")
	s.github.SetPrivate(t, "acme/cache-oci-values", false)
	refSource := map[string]any{"repoURL": s.github.CloneURL("acme/cache-oci-values"), "targetRevision": "main", "ref": "values"}
	caps := s.clusterCapabilities(t)
	app := func(repoURL, chart string) chartApp {
		// As the repository secret of a registry reached over plain HTTP
		// describes it: a Helm repository with OCI enabled, or, for an oci://
		// repoURL, an OCI repository.
		repo := argocdharness.Repository{Repo: repoURL, Type: "helm", EnableOCI: true, InsecureOCIForceHttp: true}
		if strings.HasPrefix(repoURL, "oci://") {
			repo = argocdharness.Repository{Repo: repoURL, Type: "oci", InsecureOCIForceHttp: true}
		}
		return chartApp{
			repo: repo,
			chart: map[string]any{
				"repoURL": repoURL, "chart": chart, "targetRevision": helmRepoVersion,
				"helm": map[string]any{"releaseName": "cache", "valueFiles": []any{"$values/envs/prod/cache.yaml"}},
			},
			ref: refSource, refSHA: sha,
		}
	}
	for name, a := range map[string]chartApp{
		"a registry path and a chart":               app(host+"/charts", "cache"),
		"a registry named by a host name":           app("localhost:"+port+"/charts", "cache"),
		"a chart named with its path":               app(host, "charts/cache"),
		"an oci:// repoURL of the chart repository": app("oci://"+host+"/charts/cache", "cache"),
	} {
		t.Run(name, func(t *testing.T) { s.checkChartParity(t, ctx, a, helmRepoValues, caps) })
	}
	t.Run("an oci:// repoURL of the registry path and a chart", func(t *testing.T) {
		s.checkBothRefuse(t, ctx, app("oci://"+host+"/charts", "cache"), caps, host+"/charts:"+helmRepoVersion)
	})
	// From a registry, helm pull takes an exact version as the tag: v1.2.0 is
	// no tag 1.2.0, though an index would list it as 1.2.0.
	t.Run("a version with a leading v the registry does not tag", func(t *testing.T) {
		a := app(host+"/charts", "cache")
		a.chart["targetRevision"] = "v" + helmRepoVersion
		s.checkBothRefuse(t, ctx, a, caps, host+"/charts/cache:v"+helmRepoVersion)
	})
}

// checkBothRefuse fails the test unless the repo server renders nothing of a
// and the service refuses it for having no reference in the registry.
func (s *suite) checkBothRefuse(t *testing.T, ctx context.Context, a chartApp, caps capabilities, reference string) {
	t.Helper()
	if _, objs, err := s.repoServerRender(ctx, a, caps); err == nil {
		t.Fatalf("the repo server rendered %d objects", len(objs))
	} else {
		t.Logf("repo server: %v", err)
	}
	objs, err := serviceRender(ctx, a, "Helm", helmRepoValues, caps)
	if err == nil || !strings.Contains(err.Error(), "has no "+reference) {
		t.Fatalf("render: %d objects, %v; want it to find no %s, as the repo server does not", len(objs), err, reference)
	}
	t.Logf("service: %v", err)
}
