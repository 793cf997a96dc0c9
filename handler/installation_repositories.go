package handler

import (
	"context"
	"errors"
	"fmt"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/store"
)

// InstallationRepositories keeps the list of repositories a bound installation can
// access current. A removed repository revokes the connections that relied on it; an
// added one restores them.
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
	logger := zerolog.Ctx(ctx).With().Int64(githubapp.LogKeyInstallationID, id).Str(LogKeyAction, event.Action).Logger()
	ctx = logger.WithContext(ctx)

	if _, err := h.Store.InstallationByGitHubID(ctx, id); errors.Is(err, store.ErrNotFound) {
		logger.Info().Msg("Ignoring event of an installation no team has bound")
		return nil
	} else if err != nil {
		return err
	}

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
		reason := fmt.Sprintf("%s removed the repository from the GitHub App installation on %s",
			event.Sender.Login, event.Installation.Account.Login)
		revoked, err := h.Store.RemoveInstallationRepos(ctx, id, urls, reason)
		if err != nil {
			return err
		}
		if err := h.revoked(ctx, revoked, reason); err != nil {
			return err
		}
	}
	logger.Info().Int("added", len(added)).Int("removed", len(removed)).Msg("Installation repositories updated")
	return nil
}

var _ githubapp.EventHandler = &InstallationRepositories{}
