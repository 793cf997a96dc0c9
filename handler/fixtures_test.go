package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// scriptedInstallation answers as GitHub would for one installation whose state a
// test sets; it lets GitHub's documented payloads, whose ids no fake serves, be
// played through the handlers.
type scriptedInstallation struct {
	suspended, deleted bool
	repos              []string // owner/name
}

func (s *scriptedInstallation) Get(_ context.Context, id int64) (github.Installation, error) {
	if s.deleted {
		return github.Installation{}, github.ErrInstallationNotFound
	}
	return github.Installation{ID: id, AccountLogin: "acme", Suspended: s.suspended}, nil
}

func (s *scriptedInstallation) Repositories(_ context.Context, id int64, webHost string) ([]github.RepoRef, error) {
	if s.deleted || s.suspended {
		return nil, fmt.Errorf("installation %d cannot list its repositories", id)
	}
	var out []github.RepoRef
	for i, name := range s.repos {
		owner, repo, _ := strings.Cut(name, "/")
		out = append(out, github.RepoRef{ID: int64(i + 1), Repo: github.Repo{Host: webHost, Owner: owner, Name: repo}})
	}
	return out, nil
}

func (s *scriptedInstallation) HasRepository(_ context.Context, _ int64, repo github.Repo) (bool, error) {
	if s.deleted {
		return false, nil
	}
	return slices.Contains(s.repos, repo.FullName()), nil
}

// TestInstallationFixturesInOrder plays GitHub's documented payloads for one
// installation's life through the handlers, GitHub answering as it would after each.
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
		gitHub := &scriptedInstallation{}
		base := Base{Store: db, App: github.App{Slug: "kukie-gitops"}, WebHost: "github.com", Installations: gitHub}
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
			github      scriptedInstallation // what GitHub answers after the event
			check       func(t *testing.T)
		}{
			{event: "installation", name: "created", status: store.InstallationActive, repos: []string{deploy},
				github: scriptedInstallation{repos: []string{"acme/deploy"}}},
			{event: "installation", name: "suspend", status: store.InstallationSuspended, repos: []string{deploy},
				github: scriptedInstallation{suspended: true, repos: []string{"acme/deploy"}}},
			{event: "installation", name: "unsuspend", status: store.InstallationActive, repos: []string{deploy},
				github: scriptedInstallation{repos: []string{"acme/deploy"}}},
			{event: "installation", name: "new_permissions_accepted", status: store.InstallationActive, repos: []string{deploy},
				github: scriptedInstallation{repos: []string{"acme/deploy"}}},
			{event: "installation_repositories", name: "added", status: store.InstallationActive, repos: []string{deploy, platform},
				github: scriptedInstallation{repos: []string{"acme/deploy", "acme/platform"}},
				check: func(t *testing.T) {
					if _, _, err := db.ConnectRepo(ctx, cluster.ID, platform, store.ConnectionConnected); err != nil {
						t.Fatal(err)
					}
				}},
			{event: "installation_repositories", name: "removed", status: store.InstallationActive, repos: []string{deploy},
				github: scriptedInstallation{repos: []string{"acme/deploy"}},
				check: func(t *testing.T) {
					conn, err := db.RepoConnectionFor(ctx, cluster.ID, platform)
					if err != nil || conn.Status != store.ConnectionRevoked {
						t.Errorf("connection to acme/platform = %+v, %v; want revoked", conn, err)
					}
				}},
			{event: "installation", name: "deleted", status: store.InstallationDeleted, repos: []string{deploy},
				github: scriptedInstallation{deleted: true}},
		}
		for _, s := range steps {
			*gitHub = s.github
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
