package plan

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/store"
)

// Observer is told what the pipeline did, for metrics. Every label it is given comes
// from a fixed set (states, step names, error codes), never a plan code or a
// repository. Calls are made on the worker's goroutine and must not block.
type Observer interface {
	// Transition is a recorded move of a plan between two states; from is "" for a
	// plan just created.
	Transition(from, to Status)
	// Step is one run of the step a plan in state took, however it ended.
	Step(state Status, d time.Duration)
	// Refused is a plan refused with code.
	Refused(code string)
	// Deployed is a plan that reached deployed, d after it was merged.
	Deployed(d time.Duration)
	// DeployTimedOut is a plan moved to deploy_failed because it was not deployed
	// within the deploy timeout, as opposed to a rollout that failed.
	DeployTimedOut()
	// PullSweep is one sweep of open pull requests (SweepPulls) and what it did.
	PullSweep(PullSweep)
}

// nopObserver is the observer of a pipeline configured without one.
type nopObserver struct{}

func (nopObserver) Transition(Status, Status)  {}
func (nopObserver) Step(Status, time.Duration) {}
func (nopObserver) Refused(string)             {}
func (nopObserver) Deployed(time.Duration)     {}
func (nopObserver) DeployTimedOut()            {}
func (nopObserver) PullSweep(PullSweep)        {}

// observeSaved reports a recorded move of saved from from.
func (p *Pipeline) observeSaved(ctx context.Context, from Status, saved store.Plan) {
	to := Status(saved.Status)
	if to == from {
		return
	}
	p.observer.Transition(from, to)
	if to == StatusRefused {
		p.observer.Refused(saved.ErrorCode)
	}
	if to != StatusDeployed {
		return
	}
	// The merge is the last move into merged: a plan redeployed after deploy_failed
	// is measured from its merge, like the first attempt.
	// The move is recorded already; a shutdown that cancels ctx right after it must
	// not lose its measurement, so the short history read does not follow ctx.
	events, err := p.db.PlanEvents(context.WithoutCancel(ctx), saved.Code)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("plan", saved.Code).Msg("Reading the plan's history for the deploy latency failed")
		return
	}
	var merged, deployed time.Time
	for _, ev := range events {
		switch Status(ev.ToStatus) {
		case StatusMerged:
			merged = ev.CreatedAt
		case StatusDeployed:
			deployed = ev.CreatedAt
		}
	}
	if !merged.IsZero() && !deployed.IsZero() {
		p.observer.Deployed(max(deployed.Sub(merged), 0))
	}
}
