package plan

import "fmt"

// Status is where a plan stands in its lifecycle. The values are stored in the
// database and returned by the API, so they never change spelling.
type Status string

// Plan states, in the order a successful plan passes through them.
const (
	StatusDeciding     Status = "deciding"
	StatusPreparing    Status = "preparing"
	StatusWaiting      Status = "waiting"
	StatusCommitting   Status = "committing"
	StatusPROpen       Status = "pr_open"
	StatusMerged       Status = "merged"
	StatusDeploying    Status = "deploying"
	StatusDeployed     Status = "deployed"
	StatusDeployFailed Status = "deploy_failed"
	StatusRolledBack   Status = "rolled_back"
	StatusRefused      Status = "refused"
	StatusClosed       Status = "closed"
	StatusFailed       Status = "failed"
)

// AllStatuses lists every state, for validation of filters and for documentation.
var AllStatuses = []Status{
	StatusDeciding, StatusPreparing, StatusRefused, StatusWaiting, StatusCommitting,
	StatusPROpen, StatusMerged, StatusClosed, StatusDeploying, StatusDeployed,
	StatusDeployFailed, StatusRolledBack, StatusFailed,
}

// transitions is the whole state machine: a move not listed here is a bug and is
// refused by Transition, so a late webhook or a racing worker cannot, for example,
// reopen a closed plan.
var transitions = map[Status][]Status{
	StatusDeciding:     {StatusPreparing, StatusRefused, StatusFailed, StatusClosed},
	StatusPreparing:    {StatusCommitting, StatusWaiting, StatusRefused, StatusFailed, StatusClosed},
	StatusWaiting:      {StatusPreparing, StatusRefused, StatusFailed, StatusClosed},
	StatusCommitting:   {StatusPROpen, StatusRefused, StatusFailed, StatusClosed},
	StatusPROpen:       {StatusMerged, StatusClosed, StatusRefused, StatusFailed},
	StatusMerged:       {StatusDeploying, StatusRolledBack},
	StatusDeploying:    {StatusDeployed, StatusDeployFailed, StatusRolledBack},
	StatusDeployed:     {StatusRolledBack},
	StatusDeployFailed: {StatusDeploying, StatusRolledBack},
	// An operator retry sends a failed plan back to the step that failed, or to
	// waiting when another plan took its files in the meantime.
	StatusFailed: {StatusDeciding, StatusPreparing, StatusCommitting, StatusPROpen, StatusClosed, StatusRefused, StatusWaiting},
}

// Valid reports whether s is a known state.
func (s Status) Valid() bool {
	_, ok := transitions[s]
	return ok || s.Terminal()
}

// Terminal reports whether no further transition can leave s.
func (s Status) Terminal() bool {
	switch s {
	case StatusRefused, StatusClosed, StatusRolledBack:
		return true
	}
	return false
}

// Working reports whether the pipeline itself (not a webhook or a person) moves the
// plan on from s; such plans are resumed when the process restarts.
func (s Status) Working() bool {
	switch s {
	case StatusDeciding, StatusPreparing, StatusCommitting, StatusPROpen, StatusMerged, StatusDeploying:
		return true
	}
	return false
}

// HoldsLocks reports whether a plan in state s owns its file locks. A failed plan
// does not: it may never be retried, and every later change to its files would wait
// for it. A retry takes the files again (or waits for them).
func (s Status) HoldsLocks() bool {
	switch s {
	case StatusCommitting, StatusPROpen:
		return true
	}
	return false
}

// Cancellable reports whether a person may still cancel a plan in state s.
func (s Status) Cancellable() bool {
	for _, to := range transitions[s] {
		if to == StatusClosed {
			return true
		}
	}
	return false
}

// CanMove reports whether the state machine allows from → to.
func CanMove(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// TransitionError is returned when a move is not allowed from the plan's current state.
type TransitionError struct {
	Code     string
	From, To Status
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("plan %s: cannot move from %s to %s", e.Code, e.From, e.To)
}
