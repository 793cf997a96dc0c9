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
	// Checks, when set, checks again the pull requests of a re-requested suite's
	// head that the service did not open.
	Checks PullChecker
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
		// "requested" comes with every push, which pull_request synchronize
		// already answers; only a person's re-run is acted on.
		if event.Action != "rerequested" || h.Checks == nil {
			return nil
		}
		for _, pr := range suite.PullRequests {
			if err := h.recheckPull(ctx, h.Checks, event.Installation.ID, event.Repo, pr.Number); err != nil {
				return err
			}
		}
		return nil
	}
	pl, ok, err := h.Pipeline.PlanForPull(ctx, repoName(event.Repo), branch)
	if err != nil || !ok || pl.HeadSHA != suite.HeadSHA {
		return err
	}
	return h.Pipeline.Reverify(asSender(ctx, event.Sender.Login), pl.Code)
}

var _ githubapp.EventHandler = &CheckSuite{}
