package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kukie/kukie-gitops/plan"
)

// Pipeline records what the change pipeline does; it is the pipeline's
// plan.Observer. Its labels are states, step states and error codes: fixed sets.
type Pipeline struct {
	transitions *prometheus.CounterVec
	steps       *prometheus.HistogramVec
	refusals    *prometheus.CounterVec
	deploy      prometheus.Histogram
	timeouts    prometheus.Counter
	sweeps      prometheus.Counter
	swept       *prometheus.CounterVec
}

// NewPipeline registers the pipeline's metrics on reg.
func NewPipeline(reg prometheus.Registerer) (*Pipeline, error) {
	m := &Pipeline{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kukie_plan_transitions_total",
			Help: `Recorded moves of plans between states; from is "new" for a plan created.`,
		}, []string{"from", "to"}),
		steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kukie_plan_step_duration_seconds",
			Help: "Duration of one run of a pipeline step, by the state it runs in (deciding, preparing, committing, pr_open, merged, deploying).",
			// Steps span a decision (milliseconds) to a render of a large repository or
			// a wait on GitHub (minutes).
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 10),
		}, []string{"step"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kukie_plan_refusals_total",
			Help: "Plans refused, by error code.",
		}, []string{"code"}),
		deploy: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kukie_plan_deploy_latency_seconds",
			Help:    "Time from a plan's merge to its being deployed (healthy in the cluster).",
			Buckets: []float64{5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600},
		}),
		// Apart from the deploying -> deploy_failed transitions, which also count
		// rollouts that failed: a timeout points at Argo CD not syncing (or a slow
		// rollout), a failure at the change itself.
		timeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kukie_plan_deploy_timeouts_total",
			Help: "Merged plans that ended deploy_failed because they were not deployed within pipeline.deploy_timeout.",
		}),
		sweeps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kukie_plan_pull_sweeps_total",
			Help: "Sweeps of this replica over the plans whose pull request is open, every pipeline.pull_sweep_interval.",
		}),
		// found is a pull_request event the service never received: a few now and
		// then is GitHub's delivery; many, a webhook that does not reach it.
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kukie_plan_pull_sweep_reads_total",
			Help: "Pull requests of open plans the sweeps read or left, by outcome: open (unchanged), found (merged or closed without its event reaching the service, and moved), failed, rate_limited.",
		}, []string{"outcome"}),
	}
	for _, c := range []prometheus.Collector{m.transitions, m.steps, m.refusals, m.deploy, m.timeouts, m.sweeps, m.swept} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register pipeline metrics: %w", err)
		}
	}
	// Every move the state machine allows and every step is reported from the start,
	// at zero, so rates and alerts have a series before the first occurrence.
	m.transitions.WithLabelValues("new", string(plan.StatusDeciding))
	for _, from := range plan.AllStatuses {
		for _, to := range plan.AllStatuses {
			if from != to && plan.CanMove(from, to) {
				m.transitions.WithLabelValues(string(from), string(to))
			}
		}
	}
	for _, s := range plan.StepStates {
		m.steps.WithLabelValues(string(s))
	}
	for _, o := range sweepOutcomes {
		m.swept.WithLabelValues(o)
	}
	return m, nil
}

// Transition implements plan.Observer.
func (m *Pipeline) Transition(from, to plan.Status) {
	f := string(from)
	if f == "" {
		f = "new"
	}
	m.transitions.WithLabelValues(f, string(to)).Inc()
}

// Step implements plan.Observer.
func (m *Pipeline) Step(state plan.Status, d time.Duration) {
	m.steps.WithLabelValues(string(state)).Observe(d.Seconds())
}

// Refused implements plan.Observer.
func (m *Pipeline) Refused(code string) { m.refusals.WithLabelValues(code).Inc() }

// Deployed implements plan.Observer.
func (m *Pipeline) Deployed(d time.Duration) { m.deploy.Observe(d.Seconds()) }

// DeployTimedOut implements plan.Observer.
func (m *Pipeline) DeployTimedOut() { m.timeouts.Inc() }

// sweepOutcomes label kukie_plan_pull_sweep_reads_total.
var sweepOutcomes = []string{"open", "found", "failed", "rate_limited"}

// PullSweep implements plan.Observer.
func (m *Pipeline) PullSweep(s plan.PullSweep) {
	m.sweeps.Inc()
	m.swept.WithLabelValues("open").Add(float64(s.Open))
	m.swept.WithLabelValues("found").Add(float64(s.Found))
	m.swept.WithLabelValues("failed").Add(float64(s.Failed))
	m.swept.WithLabelValues("rate_limited").Add(float64(s.RateLimited))
}

var _ plan.Observer = (*Pipeline)(nil)
