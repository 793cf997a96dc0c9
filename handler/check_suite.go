package handler

import (
	"context"
	"strings"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/kukie/kukie-gitops/github"
)

// CheckSuite re-runs kukie/render for a plan's branch when GitHub requests (or a
// person re-requests) the checks of its head commit.
type CheckSuite struct {
	Base
	Pipeline Pipeline
}

// Handles implements githubapp.EventHandler.
func (h *CheckSuite) Handles() []string { return []string{"check_suite"} }

// Handle implements githubapp.EventHandler.
func (h *CheckSuite) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event checkSuiteEvent
	if err := parse(eventType, payload, &event); err != nil {
		return err
	}
	switch event.Action {
	case "requested", "rerequested":
	default:
		return nil
	}
	suite := event.CheckSuite
	if suite == nil {
		return missing(eventType, "check_suite")
	}
	if h.IsOwnEvent(event.Sender.Login) {
		// The suite of the App's own commit: the pipeline publishes its check run
		// itself; answering the request would verify the same commit twice.
		return nil
	}
	branch := suite.HeadBranch
	if !strings.HasPrefix(branch, github.BranchPrefix) {
		return nil
	}
	pl, ok, err := h.Pipeline.PlanForPull(ctx, repoName(event.Repo), branch)
	if err != nil || !ok || pl.HeadSHA != suite.HeadSHA {
		return err
	}
	return h.Pipeline.Reverify(ctx, pl.Code)
}

var _ githubapp.EventHandler = &CheckSuite{}
