package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func createTeam(t *testing.T, db *store.DB, name string) store.Team {
	t.Helper()
	team, err := db.CreateTeam(context.Background(), name)
	if err != nil {
		t.Fatalf("create team %s: %v", name, err)
	}
	return team
}

func TestInstallStateIsOneTime(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team := createTeam(t, db, "team-a")
		state, expires, err := db.CreateInstallState(ctx, team.ID, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Until(expires); d < 9*time.Minute || d > 10*time.Minute {
			t.Errorf("state expires in %v, want 10 minutes", d)
		}
		var stored int
		if err := db.GetContext(ctx, &stored, db.Rebind(`SELECT COUNT(*) FROM install_states WHERE state_hash = ?`), state.Reveal()); err != nil {
			t.Fatal(err)
		}
		if stored != 0 {
			t.Error("the clear-text state is stored; want only its hash")
		}
		expired, _, err := db.CreateInstallState(ctx, team.ID, -time.Second)
		if err != nil {
			t.Fatal(err)
		}

		got, err := db.ConsumeInstallState(ctx, state)
		if err != nil || got != team.ID {
			t.Fatalf("ConsumeInstallState = %q, %v; want team %s", got, err, team.ID)
		}
		cases := map[string]secret.Secret{
			"reused":  state,
			"expired": expired,
			"unknown": secret.New("not-a-state"),
			"empty":   "",
		}
		for name, s := range cases {
			t.Run(name, func(t *testing.T) {
				if _, err := db.ConsumeInstallState(ctx, s); !errors.Is(err, store.ErrInstallStateInvalid) {
					t.Errorf("ConsumeInstallState error = %v, want ErrInstallStateInvalid", err)
				}
			})
		}
	})
}

func TestInstallStateConcurrentConsumersOneWins(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team := createTeam(t, db, "team-a")
		state, _, err := db.CreateInstallState(ctx, team.ID, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins, invalid := 0, 0
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := db.ConsumeInstallState(ctx, state)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, store.ErrInstallStateInvalid):
					invalid++
				default:
					t.Errorf("ConsumeInstallState: %v", err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 || invalid != 9 {
			t.Errorf("wins = %d, invalid = %d; want 1 and 9", wins, invalid)
		}
	})
}

func TestBindInstallationConcurrentTeamsExactlyOneBinding(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		teams := []store.Team{createTeam(t, db, "team-a"), createTeam(t, db, "team-b")}
		const installationID = 4242
		var wg sync.WaitGroup
		results := make([]error, 20)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, results[i] = db.BindInstallation(ctx, teams[i%2].ID, store.BoundInstallation{
					InstallationID: installationID, AccountLogin: "acme", AccountType: "Organization",
				})
			}()
		}
		wg.Wait()

		inst, err := db.InstallationByGitHubID(ctx, installationID)
		if err != nil {
			t.Fatal(err)
		}
		var rows int
		if err := db.GetContext(ctx, &rows, db.Rebind(`SELECT COUNT(*) FROM installations WHERE installation_id = ?`), installationID); err != nil {
			t.Fatal(err)
		}
		if rows != 1 {
			t.Fatalf("%d bindings of installation %d, want 1", rows, installationID)
		}
		for i, err := range results {
			team := teams[i%2]
			switch {
			case team.ID == inst.TeamID && err != nil:
				t.Errorf("bind %d by the winning team %s: %v, want success (same binding)", i, team.Name, err)
			case team.ID != inst.TeamID && !errors.Is(err, store.ErrInstallationTaken):
				t.Errorf("bind %d by the losing team %s: %v, want ErrInstallationTaken", i, team.Name, err)
			}
		}
		if inst.Status != store.InstallationActive || inst.AccountLogin != "acme" {
			t.Errorf("binding = %+v, want active for acme", inst)
		}
	})
}

func TestInstallationRequestIsResolvedByBinding(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team := createTeam(t, db, "team-a")
		for range 2 {
			if _, err := db.RecordInstallationRequest(ctx, team.ID); err != nil {
				t.Fatal(err)
			}
		}
		list, err := db.ListInstallations(ctx, team.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].Status != store.InstallationPendingApproval || list[0].InstallationID != 0 {
			t.Fatalf("installations = %+v, want one pending request", list)
		}
		if _, err := db.BindInstallation(ctx, team.ID, store.BoundInstallation{InstallationID: 7, AccountLogin: "acme", Suspended: true}); err != nil {
			t.Fatal(err)
		}
		list, err = db.ListInstallations(ctx, team.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].InstallationID != 7 || list[0].Status != store.InstallationSuspended {
			t.Fatalf("installations = %+v, want only the suspended binding of 7", list)
		}
	})
}

func TestInstallationReposDriveConnections(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team := createTeam(t, db, "team-a")
		other := createTeam(t, db, "team-b")
		const (
			repoA = "https://github.com/acme/deploy"
			repoB = "https://github.com/acme/infra"
		)
		if _, err := db.BindInstallation(ctx, team.ID, store.BoundInstallation{InstallationID: 1, AccountLogin: "acme"}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.BindInstallation(ctx, other.ID, store.BoundInstallation{InstallationID: 2, AccountLogin: "acme-b"}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ReplaceInstallationRepos(ctx, 1, []store.InstallationRepo{{Repo: repoA, GitHubRepoID: 11}, {Repo: repoB, GitHubRepoID: 12}}, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ReplaceInstallationRepos(ctx, 2, []store.InstallationRepo{{Repo: repoA, GitHubRepoID: 11}}, ""); err != nil {
			t.Fatal(err)
		}
		prod := createCluster(t, db, team.ID, "prod")
		otherProd := createCluster(t, db, other.ID, "prod")
		for _, c := range []store.Cluster{prod, otherProd} {
			if _, _, err := db.ConnectRepo(ctx, c.ID, repoA, store.ConnectionConnected); err != nil {
				t.Fatal(err)
			}
		}

		insts, err := db.InstallationsForRepo(ctx, team.ID, repoA)
		if err != nil || len(insts) != 1 || insts[0].InstallationID != 1 {
			t.Fatalf("InstallationsForRepo = %+v, %v; want installation 1", insts, err)
		}

		revoked, err := db.RemoveInstallationRepos(ctx, 1, []string{repoA}, "removed by octocat")
		if err != nil {
			t.Fatal(err)
		}
		if len(revoked) != 1 || revoked[0].ClusterID != prod.ID || revoked[0].Status != store.ConnectionRevoked {
			t.Fatalf("revoked = %+v, want only team-a's prod connection", revoked)
		}
		conn, err := db.RepoConnectionFor(ctx, prod.ID, repoA)
		if err != nil || conn.Status != store.ConnectionRevoked || conn.StatusReason != "removed by octocat" {
			t.Errorf("team-a connection = %+v, %v; want revoked with the reason", conn, err)
		}
		conn, err = db.RepoConnectionFor(ctx, otherProd.ID, repoA)
		if err != nil || conn.Status != store.ConnectionConnected {
			t.Errorf("team-b connection = %+v, %v; want still connected (its installation kept access)", conn, err)
		}

		restored, err := db.AddInstallationRepos(ctx, 1, []store.InstallationRepo{{Repo: repoA, GitHubRepoID: 11}})
		if err != nil {
			t.Fatal(err)
		}
		if len(restored) != 1 || restored[0].Status != store.ConnectionConnected || restored[0].StatusReason != "" {
			t.Errorf("restored = %+v, want the connection back", restored)
		}

		change, err := db.ReplaceInstallationRepos(ctx, 1, []store.InstallationRepo{{Repo: repoB, GitHubRepoID: 12}}, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(change.Revoked) != 1 || change.Revoked[0].Repo != repoA || change.Revoked[0].StatusReason != store.RepoAccessLost {
			t.Errorf("replace revoked %+v, want the connection to %s", change.Revoked, repoA)
		}
		repos, err := db.InstallationRepos(ctx, 1)
		if err != nil || len(repos) != 1 || repos[0].Repo != repoB {
			t.Errorf("InstallationRepos = %+v, %v; want only %s", repos, err, repoB)
		}

		if _, err := db.RemoveInstallationRepos(ctx, 99, []string{repoA}, "x"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("removing from an unbound installation: %v, want ErrNotFound", err)
		}
	})
}

func TestSetInstallationStatus(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team := createTeam(t, db, "team-a")
		if _, err := db.BindInstallation(ctx, team.ID, store.BoundInstallation{InstallationID: 5}); err != nil {
			t.Fatal(err)
		}
		for _, status := range []store.InstallationStatus{store.InstallationSuspended, store.InstallationActive, store.InstallationDeleted} {
			got, err := db.SetInstallationStatus(ctx, 5, status)
			if err != nil || got.Status != status {
				t.Fatalf("SetInstallationStatus(%s) = %+v, %v", status, got, err)
			}
		}
		if _, err := db.SetInstallationStatus(ctx, 6, store.InstallationActive); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unbound installation: %v, want ErrNotFound", err)
		}
	})
}

func createCluster(t *testing.T, db *store.DB, teamID, name string) store.Cluster {
	t.Helper()
	c, err := db.CreateCluster(context.Background(), store.Cluster{TeamID: teamID, Name: name, Access: store.ClusterInCluster})
	if err != nil {
		t.Fatalf("create cluster %s: %v", name, err)
	}
	return c
}

func TestClustersAndConnections(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team := createTeam(t, db, "team-a")
		other := createTeam(t, db, "team-b")
		prod := createCluster(t, db, team.ID, "prod")
		createCluster(t, db, other.ID, "prod") // names are per team

		bad := map[string]store.Cluster{
			"duplicate name":          {TeamID: team.ID, Name: "prod", Access: store.ClusterInCluster},
			"invalid name":            {TeamID: team.ID, Name: "Prod_1", Access: store.ClusterInCluster},
			"kubeconfig without data": {TeamID: team.ID, Name: "stage", Access: store.ClusterKubeconfig},
			"in-cluster with data":    {TeamID: team.ID, Name: "stage", Access: store.ClusterInCluster, SealedCredentials: "v1:x"},
			"unknown access":          {TeamID: team.ID, Name: "stage", Access: "magic"},
		}
		for name, c := range bad {
			t.Run(name, func(t *testing.T) {
				if _, err := db.CreateCluster(ctx, c); err == nil {
					t.Error("CreateCluster succeeded, want an error")
				}
			})
		}
		if _, err := db.CreateCluster(ctx, bad["duplicate name"]); !errors.Is(err, store.ErrConflict) {
			t.Errorf("duplicate cluster: %v, want ErrConflict", err)
		}
		sealed, err := db.CreateCluster(ctx, store.Cluster{TeamID: team.ID, Name: "stage", Access: store.ClusterKubeconfig, SealedCredentials: "v1:abc"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := db.ClusterByName(ctx, team.ID, "stage")
		if err != nil || got.ID != sealed.ID || got.SealedCredentials != "v1:abc" {
			t.Fatalf("ClusterByName = %+v, %v", got, err)
		}
		if _, err := db.ClusterByName(ctx, team.ID, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown cluster: %v, want ErrNotFound", err)
		}
		// New credentials replace the old ones, in-cluster access included, and only
		// the team's own cluster of that name changes.
		for _, name := range []string{"stage", "prod"} {
			replaced, err := db.ReplaceClusterKubeconfig(ctx, team.ID, name, "v1:rotated-"+name)
			if err != nil || replaced.Access != store.ClusterKubeconfig || replaced.SealedCredentials != "v1:rotated-"+name {
				t.Fatalf("ReplaceClusterKubeconfig(%s) = %+v, %v", name, replaced, err)
			}
			if got, err := db.ClusterByName(ctx, team.ID, name); err != nil || got.SealedCredentials != "v1:rotated-"+name || got.ID != replaced.ID {
				t.Fatalf("after the replacement ClusterByName(%s) = %+v, %v", name, got, err)
			}
		}
		if theirs, err := db.ClusterByName(ctx, other.ID, "prod"); err != nil || theirs.Access != store.ClusterInCluster {
			t.Fatalf("the other team's prod = %+v, %v; want it untouched", theirs, err)
		}
		if _, err := db.ReplaceClusterKubeconfig(ctx, team.ID, "nope", "v1:x"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("replacing the kubeconfig of an unknown cluster: %v, want ErrNotFound", err)
		}
		if _, err := db.ReplaceClusterKubeconfig(ctx, team.ID, "stage", ""); err == nil {
			t.Error("replaced a kubeconfig with nothing")
		}
		list, err := db.ListClusters(ctx, team.ID)
		if err != nil || len(list) != 2 || list[0].Name != "prod" || list[1].Name != "stage" {
			t.Errorf("ListClusters = %+v, %v; want prod, stage", list, err)
		}

		const repo = "https://github.com/acme/deploy"
		c1, created, err := db.ConnectRepo(ctx, prod.ID, repo, store.ConnectionPendingApproval)
		if err != nil || !created || c1.Status != store.ConnectionPendingApproval {
			t.Fatalf("ConnectRepo = %+v, %v, %v", c1, created, err)
		}
		c2, created, err := db.ConnectRepo(ctx, prod.ID, repo, store.ConnectionConnected)
		if err != nil || created || c2.ID != c1.ID || c2.Status != store.ConnectionConnected {
			t.Fatalf("second ConnectRepo = %+v, %v, %v; want the same connection, now connected", c2, created, err)
		}
		conns, err := db.ListRepoConnections(ctx, prod.ID)
		if err != nil || len(conns) != 1 {
			t.Fatalf("ListRepoConnections = %+v, %v", conns, err)
		}
		if err := db.DisconnectRepo(ctx, prod.ID, repo); err != nil {
			t.Fatal(err)
		}
		if err := db.DisconnectRepo(ctx, prod.ID, repo); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("second disconnect: %v, want ErrNotFound", err)
		}
	})
}

func TestRetriedDeliveryWaitsForItsTime(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		for i := range 2 {
			if err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: fmt.Sprint("d", i), Event: "push", Payload: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
		claimed, err := db.ClaimWebhookDeliveries(ctx, 10, time.Minute)
		if err != nil || len(claimed) != 2 {
			t.Fatalf("claim = %d, %v", len(claimed), err)
		}
		byID := map[string]store.DeliveryClaim{}
		for _, d := range claimed {
			byID[d.DeliveryID] = d.Claim()
		}
		if err := db.RetryWebhookDeliveryAt(ctx, byID["d0"], "boom", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := db.RetryWebhookDeliveryAt(ctx, byID["d1"], "boom", time.Now().Add(-time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		claimed, err = db.ClaimWebhookDeliveries(ctx, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(claimed) != 1 || claimed[0].DeliveryID != "d1" || claimed[0].Attempts != 2 || claimed[0].LastError != "boom" {
			t.Fatalf("claimed %+v, want only d1 (due), on its second attempt", claimed)
		}
		d0, err := db.WebhookDeliveryByID(ctx, "d0")
		if err != nil || d0.State != store.DeliveryPending || d0.LastError != "boom" {
			t.Errorf("d0 = %+v, %v; want pending with its error", d0, err)
		}
		if err := db.RetryWebhookDeliveryAt(ctx, store.DeliveryClaim{DeliveryID: "missing", Attempt: 1}, "x", time.Now()); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("retry of an unknown delivery: %v, want ErrNotFound", err)
		}
	})
}
