package handler

import (
	"context"
	"strings"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/store"
)

// Pipeline is what the change pipeline's handlers drive; *plan.Pipeline implements it.
// Repositories are named "owner/name" in lower case.
type Pipeline interface {
	PlanForPull(ctx context.Context, repo, branch string) (store.Plan, bool, error)
	PullClosed(ctx context.Context, repo, branch, base string, number int64, merged bool, mergeSHA string) error
	PullRetargeted(ctx context.Context, repo, branch, from, to string, number int64) error
	HeadPushed(ctx context.Context, repo, branch, sha, sender string) error
	BasePushed(ctx context.Context, repo, branch, after string, changed []string) error
	Reverify(ctx context.Context, code string) error
	Cancel(ctx context.Context, teamID, code, reason string) (store.Plan, error)
}

// repoName is the pipeline's name of a payload's repository.
func repoName(r repoRef) string { return github.NormalizeFullName(r.FullName) }

// isPlanBranch reports whether a pull request head is a kukie branch of the same
// repository (a fork's branch of that name is someone else's).
func isPlanBranch(head, base branchRef) bool {
	return strings.HasPrefix(head.Ref, github.BranchPrefix) && repoName(head.Repo) == repoName(base.Repo)
}

// PullRequest moves plans when their pull requests close (merged or not), tells the
// pipeline when a person retargets one at another base branch, and re-verifies when
// someone else pushes to a plan's branch; every other pull
// request's head is checked by Checks (see checkPullEvent).
type PullRequest struct {
	Base
	Pipeline Pipeline
	// Checks, when set, checks the pull requests the service did not open.
	Checks PullChecker
}

// Handles implements githubapp.EventHandler.
func (h *PullRequest) Handles() []string { return []string{"pull_request"} }

// Handle implements githubapp.EventHandler.
func (h *PullRequest) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event pullRequestEvent
	if err := parse(eventType, payload, &event); err != nil {
		return err
	}
	pr := event.PullRequest
	if pr == nil {
		return missing(eventType, "pull_request")
	}
	if !isPlanBranch(pr.Head, pr.Base) {
		return h.checkPullEvent(ctx, event)
	}
	repo := repoName(event.Repo)
	logger := zerolog.Ctx(ctx).With().Str(LogKeyAction, event.Action).Int64("pr", pr.Number).Logger()
	ctx = logger.WithContext(ctx)
	switch event.Action {
	case "closed":
		return h.Pipeline.PullClosed(ctx, repo, pr.Head.Ref, pr.Base.Ref, pr.Number, pr.Merged, pr.MergeCommitSHA)
	case "edited":
		// Only a new base matters to the plan (a retargeted pull request would merge
		// the change where its Application does not deploy from); title and body
		// edits do not.
		if c := event.Changes; c != nil && c.Base != nil && c.Base.Ref.From != "" && c.Base.Ref.From != pr.Base.Ref {
			return h.Pipeline.PullRetargeted(ctx, repo, pr.Head.Ref, c.Base.Ref.From, pr.Base.Ref, pr.Number)
		}
		return nil
	case "synchronize":
		if h.IsOwnEvent(event.Sender.Login) {
			return nil
		}
		return h.Pipeline.HeadPushed(ctx, repo, pr.Head.Ref, pr.Head.SHA, event.Sender.Login)
	}
	return nil
}

var _ githubapp.EventHandler = &PullRequest{}
