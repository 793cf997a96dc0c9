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

// A chart version is pulled from an OCI registry as the tag written, as Helm
// pulls it for Argo CD ("helm pull oci://... --version"): a version with a
// leading v is the tag with it, found under no other, and build metadata is
// tagged with _ for +, as Helm pushes it.
func TestFetchFromOCIRegistryAtTheTagWritten(t *testing.T) {
	plain := packageChart(t, "cache", "1.2.3")
	build := packageChart(t, "cache", "2.0.0+build.1")
	unprefixed := packageChart(t, "cache", "1.4.0")
	host := chartrepotest.ServeOCITagged(t, "charts", map[string][]byte{"1.2.3": plain, "2.0.0+build.1": build, "v1.4.0": unprefixed})
	f := helmrepo.New(helmrepo.WithLoopback(), helmrepo.WithPlainHTTP())
	for version, want := range map[string][]byte{"1.2.3": plain, "2.0.0+build.1": build, "v1.4.0": unprefixed, "v1.2.3": nil, "1.4.0": nil} {
		t.Run(version, func(t *testing.T) {
			got, err := f.FetchChart(context.Background(), render.ChartDependency{Repository: "oci://" + host + "/charts", Name: "cache", Version: version})
			if want == nil {
				if err == nil || !strings.Contains(err.Error(), "has no "+host+"/charts/cache:"+version) {
					t.Fatalf("got %v, want no tag %s", err, version)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("pulled %s for %s", loadArchive(t, got).Metadata.Version, version)
			}
		})
	}
}
