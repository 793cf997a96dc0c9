package handler

import (
	"context"
	"fmt"
	"strings"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/github"
)

// MaxSuitePulls is how many of a re-requested check suite's pull requests are
// checked again: each costs a GitHub call and a render of every Application it
// reaches. GitHub lists the open pull requests whose head is the suite's branch in
// the repository itself, which is one or a few (one per base branch); a payload
// listing more is checked for its first ten, so its length is not the sender's
// choice of how much work one delivery makes.
const MaxSuitePulls = 10

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
	c := checkPayload(eventType)
	branch := suite.HeadBranch
	if !strings.HasPrefix(branch, github.BranchPrefix) {
		// "requested" comes with every push, which pull_request synchronize
		// already answers; only a person's re-run is acted on.
		if event.Action != "rerequested" || h.Checks == nil {
			return nil
		}
		c.number("installation.id", event.Installation.ID)
		c.repo("repository", event.Repo)
		pulls := suite.PullRequests
		if len(pulls) > MaxSuitePulls {
			zerolog.Ctx(ctx).Warn().Int("pull_requests", len(pulls)).Int("checked", MaxSuitePulls).
				Msg("A re-requested check suite lists more pull requests than are checked again; the rest are left out")
			pulls = pulls[:MaxSuitePulls]
		}
		for i, pr := range pulls {
			c.number(fmt.Sprintf("check_suite.pull_requests[%d].number", i), pr.Number)
		}
		if err := c.Err(); err != nil {
			return err
		}
		for _, pr := range pulls {
			if err := h.recheckPull(ctx, h.Checks, event.Installation.ID, event.Repo, pr.Number); err != nil {
				return err
			}
		}
		return nil
	}
	repo := c.repo("repository", event.Repo)
	c.sha("check_suite.head_sha", suite.HeadSHA)
	if err := c.Err(); err != nil {
		return err
	}
	pl, ok, err := h.Pipeline.PlanForPull(ctx, repo, branch)
	if err != nil || !ok || pl.HeadSHA != suite.HeadSHA {
		return err
	}
	return h.Pipeline.Reverify(asSender(ctx, event.Sender.Login), pl.Code)
}

var _ githubapp.EventHandler = &CheckSuite{}
