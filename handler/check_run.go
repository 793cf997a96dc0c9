package handler

import (
	"context"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/kukie/kukie-gitops/github"
)

// CheckRun re-verifies a plan when a person asks GitHub to re-run kukie/render or
// presses its "Re-render" button.
type CheckRun struct {
	Base
	Pipeline Pipeline
}

// Handles implements githubapp.EventHandler.
func (h *CheckRun) Handles() []string { return []string{"check_run"} }

// Handle implements githubapp.EventHandler.
func (h *CheckRun) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event checkRunEvent
	if err := parse(eventType, payload, &event); err != nil {
		return err
	}
	run := event.CheckRun
	if run == nil {
		return missing(eventType, "check_run")
	}
	if run.Name != github.CheckRunName || h.IsOwnEvent(event.Sender.Login) {
		return nil
	}
	switch event.Action {
	case "rerequested":
	case "requested_action":
		if event.RequestedAction == nil || event.RequestedAction.Identifier != github.RerenderAction {
			return nil
		}
	default:
		return nil
	}
	code := run.ExternalID
	if code == "" {
		return nil
	}
	return h.Pipeline.Reverify(ctx, code)
}

var _ githubapp.EventHandler = &CheckRun{}
