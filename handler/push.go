package handler

import (
	"context"
	"sort"
	"strings"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/prcheck"
)

// Push re-verifies open plans when their base branch moves under them, and marks
// stale the checks of other pull requests into that branch that render what the
// push changed, and, for a push to the default branch, the kukie/policy runs of
// pull requests into any branch whose policy it changed. Pushes to kukie branches arrive as pull_request synchronize and are
// handled there.
type Push struct {
	Base
	Pipeline Pipeline
	// Checks, when set, is told of every push to a branch (PullChecker.BaseMoved).
	Checks PullChecker
}

// Handles implements githubapp.EventHandler.
func (h *Push) Handles() []string { return []string{"push"} }

// Handle implements githubapp.EventHandler.
func (h *Push) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event pushEvent
	if err := parse(eventType, payload, &event); err != nil {
		return err
	}
	if event.Repo == nil {
		return missing(eventType, "repository")
	}
	branch, ok := strings.CutPrefix(event.Ref, "refs/heads/")
	if !ok || event.Deleted || strings.HasPrefix(branch, github.BranchPrefix) {
		return nil
	}
	c := checkPayload(eventType)
	repo := c.repo("repository", event.Repo.repoRef)
	c.text("ref", branch)
	c.sha("after", event.After)
	if strings.Trim(event.After, "0") == "" {
		c.fail("after", "is the zero SHA, which names no commit, yet deleted is false")
	}
	if event.Before != "" {
		c.sha("before", event.Before)
	}
	if h.Checks != nil {
		c.number("installation.id", event.Installation.ID)
	}
	if err := c.Err(); err != nil {
		return err
	}
	files := changedFiles(event)
	if err := h.Pipeline.BasePushed(ctx, repo, branch, event.After, files); err != nil {
		return err
	}
	if h.Checks == nil {
		return nil
	}
	r, err := h.Repo(event.Repo.FullName)
	if err != nil {
		return Permanent(err)
	}
	return h.Checks.BaseMoved(ctx, prcheck.BaseMove{InstallationID: event.Installation.ID, Repo: repo, RepoURL: r.URL(),
		Branch: branch, SHA: event.After, Before: event.Before, Files: files, Default: branch == event.Repo.DefaultBranch})
}

// changedFiles lists the files a push touched, or nil when they are unknown (the
// pipeline then treats every file as changed). A push does not say which files it
// changed when it lists no commits, when it may list only some of them (GitHub lists
// at most 20), when it was forced, or when a commit's file lists are all empty:
// GitHub leaves them out for very large commits, so an empty list means "not
// listed", not "no files".
func changedFiles(event pushEvent) []string {
	if len(event.Commits) == 0 || len(event.Commits) >= 20 || event.Forced {
		return nil
	}
	set := map[string]bool{}
	for _, c := range event.Commits {
		if len(c.Added)+len(c.Modified)+len(c.Removed) == 0 {
			return nil
		}
		for _, list := range [][]string{c.Added, c.Modified, c.Removed} {
			for _, f := range list {
				set[f] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

var _ githubapp.EventHandler = &Push{}
