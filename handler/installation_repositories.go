package handler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/store"
)

// InstallationRepositories keeps the list of repositories a bound installation can
// access current: on each event it stores GitHub's listing (see settle). A removed
// repository revokes the connections that relied on it; an added one restores them.
type InstallationRepositories struct {
	Base
}

// Handles implements githubapp.EventHandler.
func (h *InstallationRepositories) Handles() []string {
	return []string{"installation_repositories"}
}

// Handle implements githubapp.EventHandler.
func (h *InstallationRepositories) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event installationRepositoriesEvent
	if err := parse(eventType, payload, &event); err != nil {
		return err
	}
	switch event.Action {
	case "added", "removed":
	default:
		return nil
	}
	if event.Installation == nil {
		return missing(eventType, "installation")
	}
	id := event.Installation.ID
	c := checkPayload(eventType)
	c.number("installation.id", id)
	for i, r := range event.RepositoriesAdded {
		c.repo(fmt.Sprintf("repositories_added[%d]", i), r)
	}
	for i, r := range event.RepositoriesRemoved {
		c.repo(fmt.Sprintf("repositories_removed[%d]", i), r)
	}
	if err := c.Err(); err != nil {
		return err
	}
	logger := zerolog.Ctx(ctx).With().Int64(githubapp.LogKeyInstallationID, id).Str(LogKeyAction, event.Action).Logger()
	ctx = logger.WithContext(ctx)

	bound, err := h.Store.InstallationByGitHubID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		logger.Info().Msg("Ignoring event of an installation no team has bound")
		return nil
	}
	if err != nil {
		return err
	}
	if bound.Status == store.InstallationDeleted {
		logger.Info().Msg("Ignoring event of an installation already deleted")
		return nil
	}
	reason := store.RepoAccessLost
	if event.Action == "removed" {
		reason = fmt.Sprintf("%s removed the repository from the GitHub App installation on %s",
			event.Sender.Login, event.Installation.Account.Login)
	}
	n := len(event.RepositoriesAdded) + len(event.RepositoriesRemoved)
	if bound.Status == store.InstallationSuspended && n > maxReposAskedOneByOne {
		// No token lists a suspended installation's repositories (asking about one
		// takes the App's own, which still works); the payload's change is the best
		// there is until it is unsuspended.
		return h.applyPayload(ctx, id, event, reason)
	}

	// The repositories are what GitHub answers now, not the payload's change: see
	// settle. An event naming a few repositories asks about each of them (App
	// requests); a larger one reads the whole listing, whose pages, as many as the
	// installation has repositories by the hundred, cost the installation's own
	// budget, which its plans need.
	var change store.RepoAccessChange
	if n <= maxReposAskedOneByOne {
		change, err = h.settleNamedRepos(ctx, id, event, reason)
	} else {
		change, err = h.settleRepos(ctx, id, reason)
	}
	if err != nil {
		return err
	}
	for _, c := range change.Restored {
		logger.Info().Str("repo", c.Repo).Str("cluster_id", c.ClusterID).Msg("Repository connection restored")
	}
	if err := h.revoked(ctx, change.Revoked, reason); err != nil {
		return err
	}
	logger.Info().Int("restored", len(change.Restored)).Int("revoked", len(change.Revoked)).Msg("Installation repositories updated from GitHub's listing")
	return nil
}

// maxReposAskedOneByOne is the most repositories an event may name for each to be
// asked about on its own rather than read from the installation's listing.
const maxReposAskedOneByOne = 10

// settleNamedRepos asks GitHub whether the installation can access each repository
// the event names, and records that.
func (h *InstallationRepositories) settleNamedRepos(ctx context.Context, id int64, event installationRepositoriesEvent, reason string) (store.RepoAccessChange, error) {
	named := map[string]github.Repo{}
	ids := map[string]int64{}
	for _, r := range slices.Concat(event.RepositoriesAdded, event.RepositoriesRemoved) {
		repo, err := h.Repo(r.FullName)
		if err != nil {
			return store.RepoAccessChange{}, Permanent(err)
		}
		named[repo.URL()], ids[repo.URL()] = repo, r.ID
	}
	var total store.RepoAccessChange
	_, err := settle(ctx,
		func(ctx context.Context) (map[string]bool, error) {
			access := make(map[string]bool, len(named))
			for url, repo := range named {
				ok, err := h.installations().HasRepository(ctx, id, repo)
				if err != nil {
					return nil, err
				}
				access[url] = ok
			}
			return access, nil
		},
		func(ctx context.Context, access map[string]bool) error {
			var add []store.InstallationRepo
			var remove []string
			for url, ok := range access {
				if ok {
					add = append(add, store.InstallationRepo{Repo: url, GitHubRepoID: ids[url]})
				} else {
					remove = append(remove, url)
				}
			}
			if len(add) > 0 {
				restored, err := h.Store.AddInstallationRepos(ctx, id, add)
				if err != nil {
					return err
				}
				total.Restored = append(total.Restored, restored...)
			}
			if len(remove) > 0 {
				revoked, err := h.Store.RemoveInstallationRepos(ctx, id, remove, reason)
				if err != nil {
					return err
				}
				total.Revoked = append(total.Revoked, revoked...)
			}
			return nil
		},
		maps.Equal[map[string]bool])
	return total, err
}

// applyPayload records the repositories an event says were added and removed.
func (h *InstallationRepositories) applyPayload(ctx context.Context, id int64, event installationRepositoriesEvent, reason string) error {
	logger := zerolog.Ctx(ctx)
	added, err := h.repos(event.RepositoriesAdded)
	if err != nil {
		return Permanent(err)
	}
	removed, err := h.repos(event.RepositoriesRemoved)
	if err != nil {
		return Permanent(err)
	}
	if len(added) > 0 {
		restored, err := h.Store.AddInstallationRepos(ctx, id, added)
		if err != nil {
			return err
		}
		for _, c := range restored {
			logger.Info().Str("repo", c.Repo).Str("cluster_id", c.ClusterID).Msg("Repository connection restored")
		}
	}
	if len(removed) > 0 {
		urls := make([]string, len(removed))
		for i, r := range removed {
			urls[i] = r.Repo
		}
		revoked, err := h.Store.RemoveInstallationRepos(ctx, id, urls, reason)
		if err != nil {
			return err
		}
		if err := h.revoked(ctx, revoked, reason); err != nil {
			return err
		}
	}
	logger.Info().Int("added", len(added)).Int("removed", len(removed)).Msg("Installation repositories updated from the event of a suspended installation naming many")
	return nil
}

var _ githubapp.EventHandler = &InstallationRepositories{}
