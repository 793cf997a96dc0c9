package helmrepo_test

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	ggcr "github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v4/pkg/registry"

	"github.com/kukie/kukie-gitops/helmrepo"
	"github.com/kukie/kukie-gitops/render"
)

// ociRegistry is an OCI registry on the loopback interface holding the charts
// Helm's registry client pushed to it, and its host.
func ociRegistry(t *testing.T, charts ...[]byte) string {
	t.Helper()
	s := httptest.NewServer(ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(s.Close)
	host := strings.TrimPrefix(s.URL, "http://")
	c, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")))
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range charts {
		md := loadArchive(t, data).Metadata
		if _, err := c.Push(data, host+"/charts/"+md.Name+":"+md.Version); err != nil {
			t.Fatal(err)
		}
	}
	return host
}

// A dependency in an OCI registry is pulled as Helm pushed it: the manifest of
// the version's tag and its chart layer, checked against its digest.
func TestFetchFromOCIRegistry(t *testing.T) {
	archive := packageChart(t, "cache", "1.2.3")
	host := ociRegistry(t, archive)
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
