package prcheck

import (
	"context"
	"slices"
	"testing"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestStoreConnectionsNameTheConnectedClusters: only the bound team's clusters with
// a connected (not pending, not revoked) connection of the repository count, and an
// installation no team bound, or a suspended one, has none.
func TestStoreConnectionsNameTheConnectedClusters(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		const repo = "https://github.com/acme/deploy"
		team, err := db.CreateTeam(ctx, "shop")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.BindInstallation(ctx, team.ID, store.BoundInstallation{InstallationID: 7, AccountLogin: "acme"}); err != nil {
			t.Fatal(err)
		}
		for name, status := range map[string]store.ConnectionStatus{"prod": store.ConnectionConnected, "stage": store.ConnectionConnected,
			"lab": store.ConnectionPendingApproval, "old": store.ConnectionRevoked, "none": ""} {
			cl, err := db.CreateCluster(ctx, store.Cluster{TeamID: team.ID, Name: name, Access: store.ClusterInCluster})
			if err != nil {
				t.Fatal(err)
			}
			if status != "" {
				if _, _, err := db.ConnectRepo(ctx, cl.ID, repo, status); err != nil {
					t.Fatal(err)
				}
			}
		}
		conns := StoreConnections{DB: db}
		gotTeam, clusters, err := conns.ConnectedClusters(ctx, 7, repo)
		if err != nil || gotTeam != team.ID || !slices.Equal(clusters, []string{"prod", "stage"}) {
			t.Fatalf("ConnectedClusters = %q %v %v, want %q [prod stage]", gotTeam, clusters, err, team.ID)
		}
		if _, clusters, err := conns.ConnectedClusters(ctx, 8, repo); err != nil || len(clusters) != 0 {
			t.Fatalf("unbound installation: %v %v, want none", clusters, err)
		}
		if _, err := db.SetInstallationStatus(ctx, 7, store.InstallationSuspended); err != nil {
			t.Fatal(err)
		}
		if _, clusters, err := conns.ConnectedClusters(ctx, 7, repo); err != nil || len(clusters) != 0 {
			t.Fatalf("suspended installation: %v %v, want none", clusters, err)
		}
	})
}
