package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kukie/kukie-gitops/kube"
)

// Cluster counts reads of the registered clusters by outcome class; it is the
// kube.ReadObserver of the service's cluster registry.
type Cluster struct {
	reads *prometheus.CounterVec
}

// NewCluster registers the cluster read metrics on reg.
func NewCluster(reg prometheus.Registerer) (*Cluster, error) {
	m := &Cluster{reads: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kukie_cluster_reads_total",
		Help: "Reads of clusters (applications list, one application, one resource, Argo CD's settings) by outcome: ok, not_installed, forbidden, unreachable, not_found or error.",
	}, []string{"read", "outcome"})}
	if err := reg.Register(m.reads); err != nil {
		return nil, fmt.Errorf("register cluster metrics: %w", err)
	}
	return m, nil
}

// Read implements kube.ReadObserver.
func (m *Cluster) Read(read, outcome string) { m.reads.WithLabelValues(read, outcome).Inc() }

var _ kube.ReadObserver = (*Cluster)(nil)
