package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kukie/kukie-gitops/render"
)

// Render records the renders of Applications; it is the render.Observer the
// pipeline's render engine passes down.
type Render struct {
	duration *prometheus.HistogramVec
	objects  *prometheus.HistogramVec
}

// NewRender registers the render metrics on reg.
func NewRender(reg prometheus.Registerer) (*Render, error) {
	m := &Render{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kukie_render_duration_seconds",
			Help:    "Duration of one Application render, by source type (Directory, Kustomize, Helm, Plugin, other) and outcome (ok, error: refused, failed or out of time).",
			Buckets: prometheus.ExponentialBuckets(0.005, 3, 10),
		}, []string{"source_type", "outcome"}),
		objects: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kukie_render_objects",
			Help:    "Objects one successful Application render produced, by source type.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8),
		}, []string{"source_type"}),
	}
	for _, c := range []prometheus.Collector{m.duration, m.objects} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register render metrics: %w", err)
		}
	}
	return m, nil
}

// Rendered implements render.Observer.
func (m *Render) Rendered(sourceType render.SourceType, d time.Duration, objects int, err error) {
	st := "other"
	switch sourceType {
	case render.SourceDirectory, render.SourceKustomize, render.SourceHelm, render.SourcePlugin:
		// Argo CD's names, a fixed set; anything else an Application says is "other".
		st = string(sourceType)
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.duration.WithLabelValues(st, outcome).Observe(d.Seconds())
	if err == nil {
		m.objects.WithLabelValues(st).Observe(float64(objects))
	}
}

var _ render.Observer = (*Render)(nil)
