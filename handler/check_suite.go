package handler

import (
	"context"
	"strings"

	gh "github.com/google/go-github/v62/github"
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
	var event gh.CheckSuiteEvent
	if err := parse(eventType, payload, &event); err != nil {
		return err
	}
	switch event.GetAction() {
	case "requested", "rerequested":
	default:
		return nil
	}
	if h.IsOwnEvent(event.GetSender()) {
		// The suite of the App's own commit: the pipeline publishes its check run
		// itself; answering the request would verify the same commit twice.
		return nil
	}
	branch := event.GetCheckSuite().GetHeadBranch()
	if !strings.HasPrefix(branch, github.BranchPrefix) {
		return nil
	}
	pl, ok, err := h.Pipeline.PlanForPull(ctx, repoName(event.GetRepo()), branch)
	if err != nil || !ok || pl.HeadSHA != event.GetCheckSuite().GetHeadSHA() {
		return err
	}
	return h.Pipeline.Reverify(ctx, pl.Code)
}

var _ githubapp.EventHandler = &CheckSuite{}
