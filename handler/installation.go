package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/store"
)

// Installation keeps a bound installation's status current: on created, deleted,
// suspend, unsuspend and new_permissions_accepted it stores what GitHub answers now
// (see settle), and a deleted installation stays deleted, the plans on the
// repositories it alone granted told so. Binding happens only through the
// setup callback with a valid state; of installations no team has bound, it records
// only who created them (a "created" event's sender and requester), which the
// callback requires of the person it binds for.
type Installation struct {
	Base
}

// Handles implements githubapp.EventHandler.
func (h *Installation) Handles() []string { return []string{"installation"} }

// Handle implements githubapp.EventHandler.
func (h *Installation) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	var event installationEvent
	if err := parse(eventType, payload, &event); err != nil {
		return err
	}
	if event.Installation == nil {
		return missing(eventType, "installation")
	}
	switch event.Action {
	case "created", "unsuspend", "new_permissions_accepted", "suspend", "deleted":
	default:
		return nil
	}
	id := event.Installation.ID
	c := checkPayload(eventType)
	c.number("installation.id", id)
	if event.Action == "created" {
		for i, r := range event.Repositories {
			c.repo(fmt.Sprintf("repositories[%d]", i), r)
		}
	}
	if err := c.Err(); err != nil {
		return err
	}
	logger := zerolog.Ctx(ctx).With().Int64(githubapp.LogKeyInstallationID, id).Str(LogKeyAction, event.Action).Logger()
	ctx = logger.WithContext(ctx)

	if err := h.recordInstaller(ctx, id, event); err != nil {
		return err
	}
	bound, err := h.Store.InstallationByGitHubID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		logger.Info().Msg("Ignoring event of an installation no team has bound")
		return nil
	}
	if err != nil {
		return err
	}
	if bound.Status == store.InstallationDeleted {
		if event.Action == "deleted" {
			// The deletion was recorded by an earlier delivery, which may have
			// stopped before telling the plans.
			return h.tellPlansOfDeletion(ctx, bound, event)
		}
		// GitHub never gives a deleted installation's ID to another, so whatever
		// arrives after the deletion is an old delivery.
		logger.Info().Msg("Ignoring event of an installation already deleted")
		return nil
	}

	// The status is GitHub's answer now, not the payload's: see settle.
	inst := bound
	write := func(ctx context.Context, status store.InstallationStatus) error {
		inst, err = h.Store.SetInstallationStatus(ctx, id, status)
		return err
	}
	status := store.InstallationDeleted
	if event.Action == "deleted" {
		err = write(ctx, status)
	} else {
		status, err = settle(ctx,
			func(ctx context.Context) (store.InstallationStatus, error) { return h.currentStatus(ctx, id) }, write,
			func(a, b store.InstallationStatus) bool { return a == b })
	}
	if err != nil {
		return err
	}
	if err := h.audit(ctx, inst, event); err != nil {
		return err
	}
	logger.Info().Str("status", string(status)).Msg("Installation status updated")
	if status == store.InstallationDeleted {
		return h.tellPlansOfDeletion(ctx, inst, event)
	}

	// A new installation's repositories are GitHub's listing now (the setup callback
	// may have stored an older one, and the payload's list may be older still). A
	// suspended installation gets no token to list them with: the payload's list is
	// the best there is until it is unsuspended.
	if event.Action != "created" {
		return nil
	}
	var change store.RepoAccessChange
	switch {
	case status == store.InstallationActive:
		if change, err = h.settleRepos(ctx, id, ""); err != nil {
			return err
		}
	case status == store.InstallationSuspended && event.Repositories != nil:
		repos, err := h.repos(event.Repositories)
		if err != nil {
			return Permanent(err)
		}
		if change, err = h.Store.ReplaceInstallationRepos(ctx, id, repos, ""); err != nil {
			return err
		}
	}
	return h.revoked(ctx, change.Revoked, store.RepoAccessLost)
}

// tellPlansOfDeletion tells the plans on the repositories of the deleted installation inst
// that their connections lost it, as removing each repository would: an uninstall
// takes them all, and no token is minted for a deleted installation, so they would
// otherwise wait for ever, their pull requests open and their files held. The
// connections themselves stay as they are, shown not_installed while no active
// installation of the team grants them (and working again once one does); one that
// another active installation of the team still grants is left alone. Done again,
// it tells the plans again, which have moved on already.
func (h *Installation) tellPlansOfDeletion(ctx context.Context, inst store.Installation, event installationEvent) error {
	if h.Revocations == nil {
		return nil
	}
	reason := "the GitHub App was uninstalled from " + inst.AccountLogin
	if event.Action == "deleted" && event.Sender.Login != "" {
		reason = event.Sender.Login + " uninstalled the GitHub App from " + inst.AccountLogin
	}
	repos, err := h.Store.InstallationRepos(ctx, inst.InstallationID)
	if err != nil {
		return err
	}
	clusters, err := h.Store.ListClusters(ctx, inst.TeamID)
	if err != nil {
		return err
	}
	var lost []store.RepoConnection
	for _, r := range repos {
		granting, err := h.Store.InstallationsForRepo(ctx, inst.TeamID, r.Repo)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(granting, func(in store.Installation) bool {
			return in.InstallationID != inst.InstallationID && in.Status == store.InstallationActive
		}) {
			continue
		}
		for _, cl := range clusters {
			conn, err := h.Store.RepoConnectionFor(ctx, cl.ID, r.Repo)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if conn.Status == store.ConnectionConnected {
				lost = append(lost, conn)
			}
		}
	}
	if len(lost) == 0 {
		return nil
	}
	if err := h.Revocations.ConnectionsRevoked(ctx, lost, reason); err != nil {
		return fmt.Errorf("announce connections of the deleted installation %d: %w", inst.InstallationID, err)
	}
	return nil
}

// recordInstaller keeps who created an installation ("created") until it is deleted.
func (h *Installation) recordInstaller(ctx context.Context, id int64, event installationEvent) error {
	switch event.Action {
	case "created":
		if event.Sender.ID <= 0 {
			// Nobody can then bind it, which is the safe side.
			zerolog.Ctx(ctx).Warn().Msg("Installation created without a sender; nobody is recorded as its installer")
			return nil
		}
		in := store.Installer{InstallationID: id, SenderID: event.Sender.ID, SenderLogin: event.Sender.Login}
		if event.Requester != nil {
			in.RequesterID, in.RequesterLogin = event.Requester.ID, event.Requester.Login
		}
		return h.Store.RecordInstaller(ctx, in)
	case "deleted":
		return h.Store.ForgetInstaller(ctx, id)
	}
	return nil
}

func (h *Installation) audit(ctx context.Context, inst store.Installation, event installationEvent) error {
	detail, err := json.Marshal(map[string]any{
		"installation_id": inst.InstallationID,
		"account":         inst.AccountLogin,
		"action":          event.Action,
		"status":          inst.Status,
	})
	if err != nil {
		return fmt.Errorf("audit installation %d: %w", inst.InstallationID, err)
	}
	_, err = h.Store.RecordAuditEvent(ctx, store.AuditEvent{
		TeamID: inst.TeamID, Actor: "github:" + event.Sender.Login, Action: "installation." + event.Action,
		SubjectType: "installation", SubjectID: fmt.Sprint(inst.InstallationID), Detail: detail,
	})
	return err
}

func (b *Base) repos(list []repoRef) ([]store.InstallationRepo, error) {
	out := make([]store.InstallationRepo, 0, len(list))
	for _, r := range list {
		repo, err := b.Repo(r.FullName)
		if err != nil {
			return nil, err
		}
		out = append(out, store.InstallationRepo{Repo: repo.URL(), GitHubRepoID: r.ID})
	}
	return out, nil
}

// revoked records and announces connections that lost access.
func (b *Base) revoked(ctx context.Context, conns []store.RepoConnection, reason string) error {
	logger := zerolog.Ctx(ctx)
	for _, c := range conns {
		logger.Warn().Str("repo", c.Repo).Str("cluster_id", c.ClusterID).Msg("Repository connection revoked: " + reason)
		detail, err := json.Marshal(map[string]string{"repo": c.Repo, "cluster_id": c.ClusterID, "reason": reason})
		if err != nil {
			return fmt.Errorf("audit revoked connection %s: %w", c.ID, err)
		}
		cluster, err := b.Store.ClusterByID(ctx, c.ClusterID)
		if err != nil {
			return err
		}
		if _, err := b.Store.RecordAuditEvent(ctx, store.AuditEvent{
			TeamID: cluster.TeamID, Actor: "system", Action: "repo_connection.revoked",
			SubjectType: "repo_connection", SubjectID: c.ID, Detail: detail,
		}); err != nil {
			return err
		}
	}
	if b.Revocations != nil && len(conns) > 0 {
		if err := b.Revocations.ConnectionsRevoked(ctx, conns, reason); err != nil {
			return fmt.Errorf("announce revoked connections: %w", err)
		}
	}
	return nil
}

var _ githubapp.EventHandler = &Installation{}
