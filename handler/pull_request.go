package handler

import (
	"context"
	"strings"

	gh "github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/store"
)

// Pipeline is what the change pipeline's handlers drive; *plan.Pipeline implements it.
// Repositories are named "owner/name" in lower case.
type Pipeline interface {
	PlanForPull(ctx context.Context, repo, branch string) (store.Plan, bool, error)
	PullClosed(ctx context.Context, repo, branch string, number int64, merged bool, mergeSHA string) error
	HeadPushed(ctx context.Context, repo, branch, sha, sender string) error
	BasePushed(ctx context.Context, repo, branch, after string, changed []string) error
	Reverify(ctx context.Context, code string) error
	Cancel(ctx context.Context, teamID, code string) (store.Plan, error)
}

// repoName is the pipeline's name of a payload's repository.
func repoName(r *gh.Repository) string { return strings.ToLower(r.GetFullName()) }

// isPlanBranch reports whether a pull request head is a kukie branch of the same
// repository (a fork's branch of that name is someone else's).
func isPlanBranch(pr *gh.PullRequest) bool {
	return strings.HasPrefix(pr.GetHead().GetRef(), github.BranchPrefix) &&
		strings.EqualFold(pr.GetHead().GetRepo().GetFullName(), pr.GetBase().GetRepo().GetFullName())
}

// PullRequest moves plans when their pull requests close (merged or not) and
// re-verifies when someone else pushes to a plan's branch.
type PullRequest struct {
	Base
	Pipeline Pipeline
}

// Handles implements githubapp.EventHandler.
func (h *PullRequest) Handles() []string { return []string{"pull_request"} }

// Handle implements githubapp.EventHandler.
func (h *PullRequest) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event gh.PullRequestEvent
	if err := parse(eventType, payload, &event); err != nil {
		return err
	}
	pr := event.GetPullRequest()
	if !isPlanBranch(pr) {
		return nil
	}
	repo := repoName(event.GetRepo())
	logger := zerolog.Ctx(ctx).With().Str(LogKeyAction, event.GetAction()).Int("pr", pr.GetNumber()).Logger()
	ctx = logger.WithContext(ctx)
	switch event.GetAction() {
	case "closed":
		return h.Pipeline.PullClosed(ctx, repo, pr.GetHead().GetRef(), int64(pr.GetNumber()), pr.GetMerged(), pr.GetMergeCommitSHA())
	case "synchronize":
		if h.IsOwnEvent(event.GetSender()) {
			return nil
		}
		return h.Pipeline.HeadPushed(ctx, repo, pr.GetHead().GetRef(), pr.GetHead().GetSHA(), event.GetSender().GetLogin())
	}
	return nil
}

var _ githubapp.EventHandler = &PullRequest{}
