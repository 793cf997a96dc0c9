package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/metrics"
)

type fixedStats cache.Stats

func (f fixedStats) Stats() cache.Stats { return cache.Stats(f) }

func TestCacheCollectorReportsEachCachesLookups(t *testing.T) {
	c := metrics.CacheCollector{"archive": fixedStats{Hits: 7, Misses: 2}, "render": fixedStats{Misses: 1}}
	want := `
# HELP kukie_cache_lookups_total Lookups of the service's on-disk caches (archive: repository trees; render: before-renders) by result (hit, miss).
# TYPE kukie_cache_lookups_total counter
kukie_cache_lookups_total{cache="archive",result="hit"} 7
kukie_cache_lookups_total{cache="archive",result="miss"} 2
kukie_cache_lookups_total{cache="render",result="hit"} 0
kukie_cache_lookups_total{cache="render",result="miss"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
