package prcheck

import (
	"context"
	"errors"
	"fmt"

	"github.com/kukie/kukie-gitops/store"
)

// StoreConnections implements Connections with the installations, clusters and
// repository connections in the store.
type StoreConnections struct{ DB *store.DB }

// ConnectedClusters implements Connections. An installation no team has bound, or
// one that is not active, has no clusters.
func (s StoreConnections) ConnectedClusters(ctx context.Context, installationID int64, repoURL string) (string, []string, error) {
	in, err := s.DB.InstallationByGitHubID(ctx, installationID)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	if in.Status != store.InstallationActive {
		return "", nil, nil
	}
	clusters, err := s.DB.ListClusters(ctx, in.TeamID)
	if err != nil {
		return "", nil, err
	}
	var names []string
	for _, cl := range clusters {
		conn, err := s.DB.RepoConnectionFor(ctx, cl.ID, repoURL)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("connection of %s to cluster %s: %w", repoURL, cl.Name, err)
		}
		if conn.Status == store.ConnectionConnected {
			names = append(names, cl.Name)
		}
	}
	return in.TeamID, names, nil
}
