package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kukie/kukie-gitops/render/helmexec"
)

// WorkerPool is what Workers reads at a scrape; *helmexec.Pool is one.
type WorkerPool interface {
	Stats() helmexec.Stats
}

// Workers records what the worker processes of one tool do (render/helmexec):
// Helm's chart renders or kustomize's builds. It is the helmexec.Observer of
// the service's pool of that tool, and reports the pool's workers and queue at
// each scrape. Its names carry the tool (kukie_helm_…, kukie_kustomize_…); its
// labels are helmexec's exit causes and outcomes: fixed sets.
type Workers struct {
	pool     WorkerPool
	starts   prometheus.Counter
	exits    *prometheus.CounterVec
	jobs     *prometheus.CounterVec
	duration prometheus.Histogram
	wait     prometheus.Histogram
	// fsCalls, of kustomize's pool only, counts the file system calls of its
	// builds by who answered them: the request or the parent.
	fsCalls *prometheus.CounterVec
}

// workerTool names the metrics of one tool's pool: the tool (Helm, kustomize),
// its prefix in metric names, what a job is called (render, build), and the
// settings that size the pool.
type workerTool struct {
	name, prefix, job, jobs string
	workersKey, memoryKey   string
}

var (
	helmTool      = workerTool{name: "Helm", prefix: "kukie_helm_", job: "render", jobs: "renders", workersKey: "render.helm_workers", memoryKey: "render.helm_worker_memory"}
	kustomizeTool = workerTool{name: "kustomize", prefix: "kukie_kustomize_", job: "build", jobs: "builds", workersKey: "render.kustomize_workers", memoryKey: "render.kustomize_worker_memory"}
)

// NewHelmWorkers registers the Helm worker metrics of pool on reg. The caller
// makes the result pool's observer (helmexec.Pool.SetObserver).
func NewHelmWorkers(reg prometheus.Registerer, pool WorkerPool) (*Workers, error) {
	return newWorkers(reg, pool, helmTool)
}

// NewKustomizeWorkers registers the kustomize worker metrics of pool on reg.
// The caller makes the result pool's observer (helmexec.Pool.SetObserver).
func NewKustomizeWorkers(reg prometheus.Registerer, pool WorkerPool) (*Workers, error) {
	return newWorkers(reg, pool, kustomizeTool)
}

func newWorkers(reg prometheus.Registerer, pool WorkerPool, t workerTool) (*Workers, error) {
	m := &Workers{
		pool: pool,
		starts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: t.prefix + "worker_starts_total",
			Help: fmt.Sprintf("%s worker processes started: at a %s that found no idle worker, after one ended.", t.name, t.job),
		}),
		exits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: t.prefix + "worker_exits_total",
			Help: fmt.Sprintf("%s worker processes ended, by cause: normal (the pool closed), memory_limit or stack_limit (the %s took more than %s allows), deadline or cancelled (killed when its %s's time ran out or its caller gave up), crash (ended by itself or killed from outside, e.g. by the kernel's out-of-memory killer).",
				t.name, t.job, t.memoryKey, t.job),
		}, []string{"cause"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: t.prefix + t.jobs + "_total",
			Help: fmt.Sprintf("%s %s in worker processes, by outcome: ok, template_error (a chart's own error), build_error (a kustomization's own error), output_too_large, memory_limit, stack_limit, deadline, cancelled, failed (no worker could start, or it ended without an answer).", t.name, t.jobs),
		}, []string{"outcome"}),
		// A warm worker renders a small chart or builds a small kustomization in
		// milliseconds; a job ends at its deadline, which is seconds.
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    t.prefix + t.job + "_duration_seconds",
			Help:    fmt.Sprintf("Time a %s worker took for one %s, from the request to its answer or its end.", t.name, t.job),
			Buckets: prometheus.ExponentialBuckets(0.002, 3, 10),
		}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    t.prefix + t.job + "_wait_seconds",
			Help:    fmt.Sprintf("Time a %s %s waited for a worker: for a free slot, and for a worker to start when none was idle.", t.name, t.job),
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 10),
		}),
	}
	gauges := poolCollector{
		pool: pool,
		max: prometheus.NewDesc(t.prefix+"workers_max",
			fmt.Sprintf("Most %s worker processes the pool runs at once (%s).", t.name, t.workersKey), nil, nil),
		workers: prometheus.NewDesc(t.prefix+"workers",
			fmt.Sprintf("%s worker processes running, by state: idle (waiting for a %s) or busy (at a %s, or starting for one).", t.name, t.job, t.job), []string{"state"}, nil),
		waiting: prometheus.NewDesc(t.prefix+t.jobs+"_waiting",
			fmt.Sprintf("%s %s waiting for a worker slot: all %s slots are busy.", t.name, t.jobs, t.workersKey), nil, nil),
	}
	collectors := []prometheus.Collector{m.starts, m.exits, m.jobs, m.duration, m.wait, gauges}
	if t == kustomizeTool {
		m.fsCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: t.prefix + "worker_fs_calls_total",
			Help: "File system calls of kustomize builds in worker processes, by what answered them: request (the files the kustomization graph predicted, sent with the build) or parent (forwarded to the service, one round trip each: files the graph did not predict).",
		}, []string{"answered_by"})
		m.fsCalls.WithLabelValues("request")
		m.fsCalls.WithLabelValues("parent")
		collectors = append(collectors, m.fsCalls)
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register %s worker metrics: %w", t.name, err)
		}
	}
	// Every cause and outcome has a series from the start, at zero, for rates and
	// alerts.
	for _, c := range helmexec.ExitCauses {
		m.exits.WithLabelValues(string(c))
	}
	for _, o := range helmexec.Outcomes {
		m.jobs.WithLabelValues(string(o))
	}
	return m, nil
}

// WorkerStarted implements helmexec.Observer.
func (m *Workers) WorkerStarted() { m.starts.Inc() }

// WorkerExited implements helmexec.Observer.
func (m *Workers) WorkerExited(cause helmexec.ExitCause) {
	m.exits.WithLabelValues(string(cause)).Inc()
}

// Rendered implements helmexec.Observer.
func (m *Workers) Rendered(ev helmexec.RenderEvent) {
	m.jobs.WithLabelValues(string(ev.Outcome)).Inc()
	m.wait.Observe(ev.Wait.Seconds())
	if ev.Ran {
		m.duration.Observe(ev.Run.Seconds())
	}
	if m.fsCalls != nil {
		m.fsCalls.WithLabelValues("request").Add(float64(ev.Answered))
		m.fsCalls.WithLabelValues("parent").Add(float64(ev.Forwarded))
	}
}

var _ helmexec.Observer = (*Workers)(nil)

// poolCollector reports the pool's gauges from one read of its stats.
type poolCollector struct {
	pool                  WorkerPool
	max, workers, waiting *prometheus.Desc
}

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.max
	ch <- c.workers
	ch <- c.waiting
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stats()
	// A worker just ended may still be counted idle for a moment; busy is never
	// reported below zero.
	busy := max(st.Running-int64(st.Idle), 0)
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(st.Workers))
	ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(st.Idle), "idle")
	ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(busy), "busy")
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(st.Waiting))
}
