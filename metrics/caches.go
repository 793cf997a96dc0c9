package metrics

import (
	"github.com/kukie/kukie-gitops/cache"
	"github.com/prometheus/client_golang/prometheus"
)

// StatsSource is a cache that counts its lookups; *cache.Archives and
// *cache.Renders are.
type StatsSource interface {
	Stats() cache.Stats
}

var cacheDesc = prometheus.NewDesc("kukie_cache_lookups_total",
	"Lookups of the service's on-disk caches (archive: repository trees; render: before-renders) by result (hit, miss).",
	[]string{"cache", "result"}, nil)

// CacheCollector reports the lookups of the named caches at each scrape, from the
// counts the caches keep themselves.
type CacheCollector map[string]StatsSource

// Describe implements prometheus.Collector.
func (c CacheCollector) Describe(ch chan<- *prometheus.Desc) { ch <- cacheDesc }

// Collect implements prometheus.Collector.
func (c CacheCollector) Collect(ch chan<- prometheus.Metric) {
	for name, src := range c {
		st := src.Stats()
		ch <- prometheus.MustNewConstMetric(cacheDesc, prometheus.CounterValue, float64(st.Hits), name, "hit")
		ch <- prometheus.MustNewConstMetric(cacheDesc, prometheus.CounterValue, float64(st.Misses), name, "miss")
	}
}
