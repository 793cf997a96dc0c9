package handler

import (
	"context"
	"sort"
	"strings"

	gh "github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/kukie/kukie-gitops/github"
)

// Push re-verifies open plans when their base branch moves under them. Pushes to
// kukie branches arrive as pull_request synchronize and are handled there.
type Push struct {
	Base
	Pipeline Pipeline
}

// Handles implements githubapp.EventHandler.
func (h *Push) Handles() []string { return []string{"push"} }

// Handle implements githubapp.EventHandler.
func (h *Push) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event gh.PushEvent
	if err := parse(eventType, payload, &event); err != nil {
		return err
	}
	branch, ok := strings.CutPrefix(event.GetRef(), "refs/heads/")
	if !ok || event.GetDeleted() || strings.HasPrefix(branch, github.BranchPrefix) {
		return nil
	}
	return h.Pipeline.BasePushed(ctx, strings.ToLower(event.GetRepo().GetFullName()), branch, event.GetAfter(), changedFiles(event))
}

// changedFiles lists the files a push touched. GitHub lists at most 20 commits per
// push; beyond that (or a forced push) the list is unknown and nil means "any".
func changedFiles(event gh.PushEvent) []string {
	if len(event.Commits) >= 20 || event.GetForced() {
		return nil
	}
	set := map[string]bool{}
	for _, c := range event.Commits {
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
