package metrics

import (
	"fmt"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterBuildInfo registers kukie_build_info, always 1, whose labels say which
// version and Go runtime a replica runs: during a rollout, which replicas run the
// new version; joined to other series, which version an error rate belongs to.
func RegisterBuildInfo(reg prometheus.Registerer, version string) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "kukie_build_info",
		Help:        "Always 1; the labels are the service's version and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	g.Set(1)
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("register build info: %w", err)
	}
	return nil
}
