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
	PullClosed(ctx context.Context, repo, branch, base string, number int64, merged bool, mergeSHA, head string) error
	PullRetargeted(ctx context.Context, repo, branch, from, to string, number int64) error
	HeadPushed(ctx context.Context, repo, branch, sha, sender string) error
	BasePushed(ctx context.Context, repo, branch, after string, changed []string) error
	Reverify(ctx context.Context, code string) error
	Cancel(ctx context.Context, teamID, code, reason string) (store.Plan, error)
}

// repoName is the pipeline's name of a payload's repository.
func repoName(r repoRef) string { return github.NormalizeFullName(r.FullName) }

// isPlanBranch reports whether a pull request head is a kukie branch of repo, the
// repository the pull request is in (a fork's branch of that name is someone
// else's, and so is one of a deleted fork, whose head names no repository).
func isPlanBranch(head branchRef, repo repoRef) bool {
	return strings.HasPrefix(head.Ref, github.BranchPrefix) && head.Repo.FullName != "" && repoName(head.Repo) == repoName(repo)
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
	if !isPlanBranch(pr.Head, event.Repo) {
		return h.checkPullEvent(ctx, event)
	}
	c := checkPayload(eventType)
	repo := c.repo("repository", event.Repo)
	c.number("pull_request.number", pr.Number)
	switch event.Action {
	case "closed":
		c.text("pull_request.base.ref", pr.Base.Ref)
		if pr.Merged {
			c.sha("pull_request.merge_commit_sha", pr.MergeCommitSHA)
		}
	case "edited":
		c.text("pull_request.base.ref", pr.Base.Ref)
	case "synchronize":
		c.sha("pull_request.head.sha", pr.Head.SHA)
	default:
		return nil
	}
	if err := c.Err(); err != nil {
		return err
	}
	logger := zerolog.Ctx(ctx).With().Str(LogKeyAction, event.Action).Int64("pr", pr.Number).Logger()
	ctx = logger.WithContext(ctx)
	switch event.Action {
	case "closed":
		// A head that is no commit SHA is passed as none: the plan's branch is then
		// deleted only at the plan's own commit.
		head := pr.Head.SHA
		if !isCommitSHA(head) {
			head = ""
		}
		return h.Pipeline.PullClosed(ctx, repo, pr.Head.Ref, pr.Base.Ref, pr.Number, pr.Merged, pr.MergeCommitSHA, head)
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
