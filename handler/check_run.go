package handler

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/store"
)

// CheckRun re-verifies a plan, or checks a pull request again, when a person asks
// GitHub to re-run kukie/render or kukie/policy, or presses the "Re-render" button.
type CheckRun struct {
	Base
	Pipeline Pipeline
	// Checks, when set, runs again the check of a pull request the service did not
	// open (its run's external id names the pull request).
	Checks PullChecker
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
	if run.Name != github.CheckRunName && run.Name != github.PolicyCheckRunName || h.IsOwnEvent(event.Sender.Login) {
		return nil
	}
	switch event.Action {
	case "rerequested":
		// Either run's Re-run checks the head again, which publishes both.
	case "requested_action":
		if event.RequestedAction == nil || event.RequestedAction.Identifier != github.RerenderAction {
			return nil
		}
	default:
		return nil
	}
	code := run.ExternalID
	switch {
	case code == "":
		return nil
	case strings.HasPrefix(code, pullKeyPrefix):
		if h.Checks == nil {
			return nil
		}
		c := checkPayload(eventType)
		n, err := strconv.ParseInt(strings.TrimPrefix(code, pullKeyPrefix), 10, 64)
		if err != nil || n <= 0 {
			c.fail("check_run.external_id", "%q names no pull request", shown(code))
		}
		c.number("installation.id", event.Installation.ID)
		c.repo("repository", event.Repo)
		if err := c.Err(); err != nil {
			return err
		}
		return h.recheckPull(ctx, h.Checks, event.Installation.ID, event.Repo, n)
	case strings.HasPrefix(code, mergeGroupKeyPrefix):
		// A group's checks run again when the queue builds the group again.
		return nil
	}
	err := h.Pipeline.Reverify(asSender(ctx, event.Sender.Login), code)
	if errors.Is(err, store.ErrNotFound) {
		// The run names a plan this service does not have (plans are never
		// deleted): a retry reads the same code.
		return Skip("check_run event payload names plan %q, which does not exist", shown(code))
	}
	return err
}

var _ githubapp.EventHandler = &CheckRun{}
