package handler

import (
	"context"

	gh "github.com/google/go-github/v62/github"
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
	var event gh.CheckRunEvent
	if err := parse(eventType, payload, &event); err != nil {
		return err
	}
	run := event.GetCheckRun()
	if run.GetName() != github.CheckRunName || h.IsOwnEvent(event.GetSender()) {
		return nil
	}
	switch event.GetAction() {
	case "rerequested":
	case "requested_action":
		if event.GetRequestedAction().Identifier != github.RerenderAction {
			return nil
		}
	default:
		return nil
	}
	code := run.GetExternalID()
	if code == "" {
		return nil
	}
	return h.Pipeline.Reverify(ctx, code)
}

var _ githubapp.EventHandler = &CheckRun{}
