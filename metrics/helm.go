package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kukie/kukie-gitops/render/helmexec"
)

// HelmPool is what HelmWorkers reads at a scrape; *helmexec.Pool is one.
type HelmPool interface {
	Stats() helmexec.Stats
}

// HelmWorkers records what the Helm worker processes do (render/helmexec): it
// is the helmexec.Observer of the service's pool, and reports the pool's
// workers and queue at each scrape. Its labels are helmexec's exit causes and
// outcomes: fixed sets.
type HelmWorkers struct {
	pool     HelmPool
	starts   prometheus.Counter
	exits    *prometheus.CounterVec
	renders  *prometheus.CounterVec
	duration prometheus.Histogram
	wait     prometheus.Histogram
}

var (
	helmWorkersMaxDesc = prometheus.NewDesc("kukie_helm_workers_max",
		"Most Helm worker processes the pool runs at once (render.helm_workers).", nil, nil)
	helmWorkersDesc = prometheus.NewDesc("kukie_helm_workers",
		"Helm worker processes running, by state: idle (waiting for a render) or busy (rendering, or starting for a render).", []string{"state"}, nil)
	helmWaitingDesc = prometheus.NewDesc("kukie_helm_renders_waiting",
		"Helm renders waiting for a worker slot: all render.helm_workers slots are rendering.", nil, nil)
)

// NewHelmWorkers registers the Helm worker metrics of pool on reg. The caller
// makes the result pool's observer (helmexec.Pool.SetObserver).
func NewHelmWorkers(reg prometheus.Registerer, pool HelmPool) (*HelmWorkers, error) {
	m := &HelmWorkers{
		pool: pool,
		starts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kukie_helm_worker_starts_total",
			Help: "Helm worker processes started: at a render that found no idle worker, after one ended.",
		}),
		exits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kukie_helm_worker_exits_total",
			Help: "Helm worker processes ended, by cause: normal (the pool closed), memory_limit or stack_limit (the templates took more than render.helm_worker_memory allows), deadline or cancelled (killed when its render's time ran out or its caller gave up), crash (ended by itself or killed from outside, e.g. by the kernel's out-of-memory killer).",
		}, []string{"cause"}),
		renders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kukie_helm_renders_total",
			Help: "Helm chart renders in worker processes, by outcome: ok, template_error (the chart's own error), output_too_large, memory_limit, stack_limit, deadline, cancelled, failed (no worker could start, or it ended without an answer).",
		}, []string{"outcome"}),
		// A warm worker renders a small chart in milliseconds; a render ends at its
		// deadline, which is seconds.
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kukie_helm_render_duration_seconds",
			Help:    "Time a Helm worker took for one render, from the request to its answer or its end.",
			Buckets: prometheus.ExponentialBuckets(0.002, 3, 10),
		}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kukie_helm_render_wait_seconds",
			Help:    "Time a Helm render waited for a worker: for a free slot, and for a worker to start when none was idle.",
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 10),
		}),
	}
	for _, c := range []prometheus.Collector{m.starts, m.exits, m.renders, m.duration, m.wait, helmPoolCollector{pool}} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register Helm worker metrics: %w", err)
		}
	}
	// Every cause and outcome has a series from the start, at zero, for rates and
	// alerts.
	for _, c := range helmexec.ExitCauses {
		m.exits.WithLabelValues(string(c))
	}
	for _, o := range helmexec.Outcomes {
		m.renders.WithLabelValues(string(o))
	}
	return m, nil
}

// WorkerStarted implements helmexec.Observer.
func (m *HelmWorkers) WorkerStarted() { m.starts.Inc() }

// WorkerExited implements helmexec.Observer.
func (m *HelmWorkers) WorkerExited(cause helmexec.ExitCause) {
	m.exits.WithLabelValues(string(cause)).Inc()
}

// Rendered implements helmexec.Observer.
func (m *HelmWorkers) Rendered(ev helmexec.RenderEvent) {
	m.renders.WithLabelValues(string(ev.Outcome)).Inc()
	m.wait.Observe(ev.Wait.Seconds())
	if ev.Ran {
		m.duration.Observe(ev.Run.Seconds())
	}
}

var _ helmexec.Observer = (*HelmWorkers)(nil)

// helmPoolCollector reports the pool's gauges from one read of its stats.
type helmPoolCollector struct{ pool HelmPool }

func (c helmPoolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- helmWorkersMaxDesc
	ch <- helmWorkersDesc
	ch <- helmWaitingDesc
}

func (c helmPoolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stats()
	// A worker just ended may still be counted idle for a moment; busy is never
	// reported below zero.
	busy := max(st.Running-int64(st.Idle), 0)
	ch <- prometheus.MustNewConstMetric(helmWorkersMaxDesc, prometheus.GaugeValue, float64(st.Workers))
	ch <- prometheus.MustNewConstMetric(helmWorkersDesc, prometheus.GaugeValue, float64(st.Idle), "idle")
	ch <- prometheus.MustNewConstMetric(helmWorkersDesc, prometheus.GaugeValue, float64(busy), "busy")
	ch <- prometheus.MustNewConstMetric(helmWaitingDesc, prometheus.GaugeValue, float64(st.Waiting))
}
