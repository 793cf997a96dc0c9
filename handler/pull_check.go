package handler

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/prcheck"
)

// PullChecker checks the heads of pull requests and merge groups the service did
// not open; *prcheck.Checker implements it.
type PullChecker interface {
	Check(ctx context.Context, h prcheck.Head) error
	// Cancel stops a running check of repo's key, on any replica.
	Cancel(ctx context.Context, repo, key string) error
	// BaseMoved marks stale the checks of pull requests whose base branch a push
	// moved under the Applications they render.
	BaseMoved(ctx context.Context, m prcheck.BaseMove) error
}

// Check run external ids of the heads PullChecker checks (a plan's run carries the
// plan code instead).
const (
	pullKeyPrefix       = "pull/"
	mergeGroupKeyPrefix = "merge_group/"
)

func pullKey(number int64) string { return pullKeyPrefix + strconv.FormatInt(number, 10) }

// pullHead is the head to check of a pull request into repo (the payload's base
// repository) whose head is a branch of headRepo ("owner/name"; empty for a
// deleted fork): a fork unless that is repo.
func (b *Base) pullHead(inst int64, repo repoRef, number int64, baseRef, baseSHA, headSHA, headRepo string) (prcheck.Head, error) {
	r, err := b.Repo(repo.FullName)
	if err != nil {
		return prcheck.Head{}, Permanent(err)
	}
	return prcheck.Head{InstallationID: inst, Repo: repoName(repo), RepoURL: r.URL(), BaseBranch: baseRef,
		BaseSHA: baseSHA, HeadSHA: headSHA, Key: pullKey(number), Fork: github.NormalizeFullName(headRepo) != repoName(repo)}, nil
}

// checkPullEvent runs the check of a pull request someone else opened: on every
// new head (opened, synchronize, reopened) and when a draft becomes ready. Drafts
// are checked too (a render costs little, and early is when it helps); a closed
// pull request's running check stops. Pull requests from forks are checked: the
// head is only rendered, and GitHub serves a fork's head from the base repository;
// it is never dry-run against a cluster (Head.Fork).
func (h *PullRequest) checkPullEvent(ctx context.Context, event pullRequestEvent) error {
	if h.Checks == nil || h.IsOwnEvent(event.Sender.Login) {
		return nil
	}
	pr := event.PullRequest
	c := checkPayload("pull_request")
	repo := c.repo("repository", event.Repo)
	c.number("pull_request.number", pr.Number)
	switch event.Action {
	case "opened", "synchronize", "reopened", "ready_for_review":
		c.number("installation.id", event.Installation.ID)
		c.text("pull_request.base.ref", pr.Base.Ref)
		c.sha("pull_request.base.sha", pr.Base.SHA)
		c.sha("pull_request.head.sha", pr.Head.SHA)
		if err := c.Err(); err != nil {
			return err
		}
	case "closed":
		if err := c.Err(); err != nil {
			return err
		}
		return h.Checks.Cancel(ctx, repo, pullKey(pr.Number))
	default:
		return nil
	}
	head, err := h.pullHead(event.Installation.ID, event.Repo, pr.Number, pr.Base.Ref, pr.Base.SHA, pr.Head.SHA, pr.Head.Repo.FullName)
	if err != nil {
		return err
	}
	return h.Checks.Check(ctx, head)
}

// recheckPull checks a pull request's current head again (the Re-run buttons),
// read from GitHub: a re-run names the pull request, not its base.
func (b *Base) recheckPull(ctx context.Context, checks PullChecker, inst int64, repo repoRef, number int64) error {
	owner, name, ok := strings.Cut(repoName(repo), "/")
	if !ok {
		return Permanent(fmt.Errorf("repository %q in payload has no owner/name", repo.FullName))
	}
	c, err := b.ClientCreator.NewInstallationClient(inst)
	if err != nil {
		return fmt.Errorf("client for installation %d: %w", inst, err)
	}
	pr, err := github.GetPull(ctx, c, owner, name, number)
	if err != nil {
		return err
	}
	if pr.State != "open" {
		return nil
	}
	head, err := b.pullHead(inst, repo, number, pr.BaseRef, pr.BaseSHA, pr.HeadSHA, pr.HeadRepo)
	if err != nil {
		return err
	}
	return checks.Check(ctx, head)
}

// MergeGroup reports kukie/render on a merge queue's group head, so a queue that
// requires the check can merge.
type MergeGroup struct {
	Base
	Checks PullChecker
}

// Handles implements githubapp.EventHandler.
func (h *MergeGroup) Handles() []string { return []string{"merge_group"} }

// Handle implements githubapp.EventHandler.
func (h *MergeGroup) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event mergeGroupEvent
	if err := parse(eventType, payload, &event); err != nil {
		return err
	}
	c := checkPayload(eventType)
	if event.Action != "checks_requested" {
		if event.Action == "destroyed" && event.MergeGroup != nil && h.Checks != nil {
			repo := c.repo("repository", event.Repo)
			c.text("merge_group.head_ref", event.MergeGroup.HeadRef)
			if err := c.Err(); err != nil {
				return err
			}
			return h.Checks.Cancel(ctx, repo, mergeGroupKeyPrefix+event.MergeGroup.HeadRef)
		}
		return nil
	}
	g := event.MergeGroup
	if g == nil {
		return missing(eventType, "merge_group")
	}
	if h.Checks == nil {
		return nil
	}
	repo := c.repo("repository", event.Repo)
	c.number("installation.id", event.Installation.ID)
	c.text("merge_group.head_ref", g.HeadRef)
	c.text("merge_group.base_ref", g.BaseRef)
	c.sha("merge_group.head_sha", g.HeadSHA)
	c.sha("merge_group.base_sha", g.BaseSHA)
	if err := c.Err(); err != nil {
		return err
	}
	r, err := h.Repo(event.Repo.FullName)
	if err != nil {
		return Permanent(err)
	}
	return h.Checks.Check(ctx, prcheck.Head{InstallationID: event.Installation.ID, Repo: repo, RepoURL: r.URL(),
		BaseBranch: strings.TrimPrefix(g.BaseRef, "refs/heads/"), BaseSHA: g.BaseSHA, HeadSHA: g.HeadSHA,
		Key: mergeGroupKeyPrefix + g.HeadRef})
}

var _ githubapp.EventHandler = &MergeGroup{}
