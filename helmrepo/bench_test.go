package helmrepo_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/helmrepo"
	"github.com/kukie/kukie-gitops/render"
)

// BenchmarkFetchFromALargeIndex reads an index of the size of a large public
// repository's (2,000 charts of 10 versions, each with a description, 11 MiB)
// with a fresh Fetcher at each iteration: B/op is what the read and the
// parse of the index allocate.
func BenchmarkFetchFromALargeIndex(b *testing.B) {
	archive := packageChart(b, "cache", "1.2.3")
	sum := sha256.Sum256(archive)
	idx := repo.NewIndexFile()
	for c := range 2000 {
		for v := range 10 {
			md := &chart.Metadata{APIVersion: chart.APIVersionV2, Name: fmt.Sprintf("chart%d", c), Version: fmt.Sprintf("1.%d.0", v),
				Description: strings.Repeat("A chart that deploys a service. ", 8), Home: "https://example.com", Keywords: []string{"a", "b"}}
			if err := idx.MustAdd(md, md.Name+"-"+md.Version+".tgz", "", "sha256:"+hex.EncodeToString(sum[:])); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := idx.MustAdd(&chart.Metadata{APIVersion: chart.APIVersionV2, Name: "cache", Version: "1.2.3"}, "cache-1.2.3.tgz", "", "sha256:"+hex.EncodeToString(sum[:])); err != nil {
		b.Fatal(err)
	}
	index, err := yaml.Marshal(idx)
	if err != nil {
		b.Fatal(err)
	}
	s := serveIndex(b, index, archive)
	dep := render.ChartDependency{Repository: s.URL, Name: "cache", Version: "1.2.3"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := helmrepo.New(helmrepo.WithLoopback()).FetchChart(context.Background(), dep); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(index))/(1<<20), "index-MiB")
}
