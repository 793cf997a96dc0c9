package helmexec

import (
	"context"
	"errors"
	"time"
)

// ExitCause is why a worker process ended.
type ExitCause string

// The causes of a worker's end.
const (
	// ExitNormal: the pool ended it, closed or not keeping it.
	ExitNormal ExitCause = "normal"
	// ExitMemoryLimit and ExitStackLimit: its templates took more than it
	// allows.
	ExitMemoryLimit ExitCause = "memory_limit"
	ExitStackLimit  ExitCause = "stack_limit"
	// ExitDeadline and ExitCancelled: killed because its render's context
	// passed its deadline or was cancelled.
	ExitDeadline  ExitCause = "deadline"
	ExitCancelled ExitCause = "cancelled"
	// ExitCrash: it ended by itself or was killed from outside (the kernel's
	// out-of-memory killer, an operator), during a render or while idle.
	ExitCrash ExitCause = "crash"
)

// ExitCauses are every ExitCause.
var ExitCauses = []ExitCause{ExitNormal, ExitMemoryLimit, ExitStackLimit, ExitDeadline, ExitCancelled, ExitCrash}

// Outcome is how a Render or a Kustomize build ended.
type Outcome string

// The outcomes of a Render.
const (
	OutcomeOK            Outcome = "ok"
	OutcomeTemplateError Outcome = "template_error"
	// OutcomeBuildError: kustomize's own error for the kustomization.
	OutcomeBuildError  Outcome = "build_error"
	OutcomeTooLarge    Outcome = "output_too_large"
	OutcomeMemoryLimit Outcome = "memory_limit"
	OutcomeStackLimit  Outcome = "stack_limit"
	OutcomeDeadline    Outcome = "deadline"
	OutcomeCancelled   Outcome = "cancelled"
	// OutcomeFailed: no worker could be started, or one ended without an answer
	// or failed in Helm itself.
	OutcomeFailed Outcome = "failed"
)

// Outcomes are every Outcome.
var Outcomes = []Outcome{OutcomeOK, OutcomeTemplateError, OutcomeBuildError, OutcomeTooLarge, OutcomeMemoryLimit, OutcomeStackLimit,
	OutcomeDeadline, OutcomeCancelled, OutcomeFailed}

// RenderEvent is one Render as an Observer is told of it.
type RenderEvent struct {
	Outcome Outcome
	// Wait is how long the render waited for a worker: for a free slot and, when
	// no worker was idle, for one to start.
	Wait time.Duration
	// Run is how long the worker took, from the request to its answer or end;
	// Ran says it got that far.
	Run time.Duration
	Ran bool
	// Forwarded, of a kustomize build, counts the file system calls the worker
	// sent to this process; Answered those it answered from what its request
	// carried (see KustomizeJob.Expected). Both are 0 when the worker gave no
	// answer.
	Forwarded, Answered int
}

// Observer is told what a Pool's workers do; metrics implement it. Its methods
// are called from the goroutines of renders and must not block.
type Observer interface {
	WorkerStarted()
	// WorkerExited is told once of every worker that was started.
	WorkerExited(ExitCause)
	Rendered(RenderEvent)
}

// Stats are a Pool's workers and renders at one moment.
type Stats struct {
	// Workers is the most the pool runs at once (Config.Workers).
	Workers int
	// Running is the worker processes started and not yet ended; Idle those of
	// them waiting for a render.
	Running int64
	Idle    int
	// Waiting is the renders waiting for a slot: all Workers are rendering.
	Waiting int64
}

// observerBox lets an interface live in an atomic.Pointer.
type observerBox struct{ Observer }

type nopObserver struct{}

func (nopObserver) WorkerStarted()         {}
func (nopObserver) WorkerExited(ExitCause) {}
func (nopObserver) Rendered(RenderEvent)   {}

// outcomeOf classifies the error of a Render.
func outcomeOf(err error) Outcome {
	var limit *LimitError
	var te *TemplateError
	var be *BuildError
	switch {
	case err == nil:
		return OutcomeOK
	case errors.As(err, &te):
		return OutcomeTemplateError
	case errors.As(err, &be):
		return OutcomeBuildError
	case errors.Is(err, ErrOutputTooLarge):
		return OutcomeTooLarge
	case errors.As(err, &limit) && limit.Stack:
		return OutcomeStackLimit
	case errors.As(err, &limit):
		return OutcomeMemoryLimit
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeDeadline
	case errors.Is(err, context.Canceled):
		return OutcomeCancelled
	}
	return OutcomeFailed
}

// exitCauseOf is why a worker that ended without an answer ended, from the
// error its render gets.
func exitCauseOf(err error) ExitCause {
	switch outcomeOf(err) {
	case OutcomeMemoryLimit:
		return ExitMemoryLimit
	case OutcomeStackLimit:
		return ExitStackLimit
	case OutcomeDeadline:
		return ExitDeadline
	case OutcomeCancelled:
		return ExitCancelled
	}
	return ExitCrash
}
