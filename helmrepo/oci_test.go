package helmrepo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/helmrepo"
	"github.com/kukie/kukie-gitops/internal/chartrepotest"
	"github.com/kukie/kukie-gitops/render"
)

// A dependency in an OCI registry is pulled as Helm pushed it: the manifest of
// the version's tag and its chart layer, checked against its digest.
func TestFetchFromOCIRegistry(t *testing.T) {
	archive := packageChart(t, "cache", "1.2.3")
	host := chartrepotest.ServeOCI(t, "charts", archive)
	f := helmrepo.New(helmrepo.WithLoopback(), helmrepo.WithPlainHTTP())
	got, err := f.FetchChart(context.Background(), render.ChartDependency{Repository: "oci://" + host + "/charts", Name: "cache", Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(archive) {
		t.Fatal("the pulled archive is not the one pushed")
	}
	_, err = f.FetchChart(context.Background(), render.ChartDependency{Repository: "oci://" + host + "/charts", Name: "cache", Version: "9.9.9"})
	if err == nil || !strings.Contains(err.Error(), "has no "+host+"/charts/cache:9.9.9") {
		t.Fatalf("a missing tag: %v", err)
	}
}
