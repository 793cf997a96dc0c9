package handler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/store"
)

// maxSettleReads bounds settle's reads; an installation that changes on GitHub more
// often than that while one delivery is handled is left to the inbox's retry.
const maxSettleReads = 8

// settle records what GitHub says now about an installation. An installation event
// is only a trigger: deliveries arrive out of order, are redelivered days later and
// run on several workers at once, so a stale payload must not undo a newer state.
// A state is written only once two reads in a row returned it, so that one stray
// answer (a 404 of an installation GitHub still has, followed by a failing retry)
// is never stored, and then read once more: when that read differs, settle goes on
// from it. Reading after writing keeps racing handlers right without a lock: the
// last write to the store is followed by its own handler's read, which found it
// still GitHub's state (and a later change on GitHub sends another event). This
// holds as far as GitHub's reads follow its own changes at once, which they do but
// for moments of replication lag.
func settle[T any](ctx context.Context, read func(context.Context) (T, error), write func(context.Context, T) error, same func(a, b T) bool) (T, error) {
	last, err := read(ctx)
	if err != nil {
		return last, err
	}
	written := false
	for range maxSettleReads - 1 {
		current, err := read(ctx)
		if err != nil {
			return last, err
		}
		switch {
		case !same(last, current):
			last, written = current, false
		case written:
			return current, nil
		default:
			if err := write(ctx, current); err != nil {
				return current, err
			}
			written = true
		}
	}
	return last, fmt.Errorf("the installation kept changing on GitHub over %d reads", maxSettleReads)
}

// currentStatus reads an installation's status from GitHub (one App JWT request):
// deleted when GitHub no longer knows it.
func (b *Base) currentStatus(ctx context.Context, installationID int64) (store.InstallationStatus, error) {
	inst, err := b.installations().Get(ctx, installationID)
	switch {
	case errors.Is(err, github.ErrInstallationNotFound):
		return store.InstallationDeleted, nil
	case err != nil:
		return "", err
	case inst.Suspended:
		return store.InstallationSuspended, nil
	}
	return store.InstallationActive, nil
}

// currentRepos lists every repository an installation can access now, as GitHub
// answers with an installation token, sorted by URL.
func (b *Base) currentRepos(ctx context.Context, installationID int64) ([]store.InstallationRepo, error) {
	refs, err := b.installations().Repositories(ctx, installationID, b.WebHost)
	if err != nil {
		return nil, err
	}
	repos := make([]store.InstallationRepo, len(refs))
	for i, ref := range refs {
		repos[i] = store.InstallationRepo{Repo: ref.Repo.URL(), GitHubRepoID: ref.ID}
	}
	slices.SortFunc(repos, func(a, b store.InstallationRepo) int { return strings.Compare(a.Repo, b.Repo) })
	return repos, nil
}

// settleRepos makes GitHub's current listing the installation's repositories,
// revoking connections to repositories no longer in it with reason.
func (b *Base) settleRepos(ctx context.Context, installationID int64, reason string) (store.RepoAccessChange, error) {
	var total store.RepoAccessChange
	_, err := settle(ctx,
		func(ctx context.Context) ([]store.InstallationRepo, error) {
			return b.currentRepos(ctx, installationID)
		},
		func(ctx context.Context, repos []store.InstallationRepo) error {
			change, err := b.Store.ReplaceInstallationRepos(ctx, installationID, repos, reason)
			if err != nil {
				return err
			}
			total.Revoked = append(total.Revoked, change.Revoked...)
			total.Restored = append(total.Restored, change.Restored...)
			return nil
		},
		slices.Equal[[]store.InstallationRepo])
	return total, err
}
