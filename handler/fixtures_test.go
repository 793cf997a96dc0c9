package handler

import (
	"context"
	"encoding/json"
	"testing"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestInstallationFixturesInOrder plays GitHub's documented payloads for one
// installation's life through the handlers.
func TestInstallationFixturesInOrder(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		const id = 51234567
		const (
			deploy   = "https://github.com/acme/deploy"
			platform = "https://github.com/acme/platform"
		)
		team, err := db.CreateTeam(ctx, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.BindInstallation(ctx, team.ID, store.BoundInstallation{InstallationID: id, AccountLogin: "acme"}); err != nil {
			t.Fatal(err)
		}
		cluster, err := db.CreateCluster(ctx, store.Cluster{TeamID: team.ID, Name: "prod", Access: store.ClusterInCluster})
		if err != nil {
			t.Fatal(err)
		}
		base := Base{Store: db, App: github.App{Slug: "kukie-gitops"}, WebHost: "github.com"}
		handlers := map[string]interface {
			Handle(context.Context, string, string, []byte) error
		}{
			"installation":              &Installation{Base: base},
			"installation_repositories": &InstallationRepositories{Base: base},
		}
		steps := []struct {
			event, name string
			status      store.InstallationStatus
			repos       []string
			check       func(t *testing.T)
		}{
			{event: "installation", name: "created", status: store.InstallationActive, repos: []string{deploy}},
			{event: "installation", name: "suspend", status: store.InstallationSuspended, repos: []string{deploy}},
			{event: "installation", name: "unsuspend", status: store.InstallationActive, repos: []string{deploy}},
			{event: "installation", name: "new_permissions_accepted", status: store.InstallationActive, repos: []string{deploy}},
			{event: "installation_repositories", name: "added", status: store.InstallationActive, repos: []string{deploy, platform},
				check: func(t *testing.T) {
					if _, _, err := db.ConnectRepo(ctx, cluster.ID, platform, store.ConnectionConnected); err != nil {
						t.Fatal(err)
					}
				}},
			{event: "installation_repositories", name: "removed", status: store.InstallationActive, repos: []string{deploy},
				check: func(t *testing.T) {
					conn, err := db.RepoConnectionFor(ctx, cluster.ID, platform)
					if err != nil || conn.Status != store.ConnectionRevoked {
						t.Errorf("connection to acme/platform = %+v, %v; want revoked", conn, err)
					}
				}},
			{event: "installation", name: "deleted", status: store.InstallationDeleted, repos: []string{deploy}},
		}
		for _, s := range steps {
			payload := githubtest.Fixture(t, s.event, s.name)
			if err := handlers[s.event].Handle(ctx, s.event, "fixture-"+s.name, payload); err != nil {
				t.Fatalf("%s/%s: %v", s.event, s.name, err)
			}
			inst, err := db.InstallationByGitHubID(ctx, id)
			if err != nil || inst.Status != s.status {
				t.Errorf("after %s/%s: %s, %v; want %s", s.event, s.name, inst.Status, err, s.status)
			}
			repos, err := db.InstallationRepos(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range repos {
				got = append(got, r.Repo)
			}
			if len(got) != len(s.repos) || (len(got) > 0 && got[0] != s.repos[0]) || (len(got) > 1 && got[1] != s.repos[1]) {
				t.Errorf("after %s/%s: repos %v, want %v", s.event, s.name, got, s.repos)
			}
			if s.check != nil {
				s.check(t)
			}
		}
	})
}

// TestBotSenderInFixturesIsOwnEvent checks the bot login against GitHub's payload
// shape: the App's own pull request is ours, a person's merge is not.
func TestBotSenderInFixturesIsOwnEvent(t *testing.T) {
	b := Base{App: github.App{Slug: "kukie-gitops"}}
	for name, want := range map[string]bool{"opened": true, "closed_merged": false} {
		var ev gh.PullRequestEvent
		if err := json.Unmarshal(githubtest.Fixture(t, "pull_request", name), &ev); err != nil {
			t.Fatal(err)
		}
		if got := b.IsOwnEvent(ev.GetSender().GetLogin()); got != want {
			t.Errorf("pull_request/%s sent by %s: IsOwnEvent = %v, want %v", name, ev.GetSender().GetLogin(), got, want)
		}
	}
}
