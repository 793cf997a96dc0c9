package clusteraccess

import (
	"context"
	"errors"
	"fmt"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/store"
)

// ErrRepoNotConnected: the repository is not connected to the cluster (or its
// connection was revoked).
var ErrRepoNotConnected = errors.New("repository not connected to the cluster")

// Connections answers, from the repository connections and installations in the
// store, whether a repository is connected to a team's cluster and through which
// installation of the App (the pipeline's plan.Connections).
type Connections struct{ DB *store.DB }

// RepoInstallation returns the installation id through which the team reaches a
// repository (any spelling of its URL) connected to the cluster, or an error
// wrapping ErrRepoNotConnected.
func (s Connections) RepoInstallation(ctx context.Context, teamID, clusterName, repoURL string) (int64, error) {
	canonical, err := github.NormalizeRepoURL(repoURL)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrRepoNotConnected, err)
	}
	cl, err := s.DB.ClusterByName(ctx, teamID, clusterName)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("cluster %s is not registered: %w", clusterName, ErrRepoNotConnected)
	}
	if err != nil {
		return 0, err
	}
	conn, err := s.DB.RepoConnectionFor(ctx, cl.ID, canonical)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("%s: %w", canonical, ErrRepoNotConnected)
	}
	if err != nil {
		return 0, err
	}
	if conn.Status != store.ConnectionConnected {
		return 0, fmt.Errorf("%s is %s: %w", canonical, conn.Status, ErrRepoNotConnected)
	}
	insts, err := s.DB.InstallationsForRepo(ctx, teamID, canonical)
	if err != nil {
		return 0, err
	}
	for _, in := range insts {
		if in.Status == store.InstallationActive && in.InstallationID != 0 {
			return in.InstallationID, nil
		}
	}
	return 0, fmt.Errorf("no active installation of the App can reach %s: %w", canonical, ErrRepoNotConnected)
}
