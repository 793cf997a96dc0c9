package handler

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func payload(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type revocations struct {
	got    []store.RepoConnection
	reason string
}

func (r *revocations) ConnectionsRevoked(_ context.Context, revoked []store.RepoConnection, reason string) error {
	r.got = append(r.got, revoked...)
	r.reason = reason
	return nil
}

func newBase(db *store.DB) Base {
	return Base{Store: db, App: github.App{ID: 1, Slug: "kukie"}, WebHost: "github.com"}
}

func TestInstallationEventsKeepStatus(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.BindInstallation(ctx, team.ID, store.BoundInstallation{InstallationID: 42, AccountLogin: "acme"}); err != nil {
			t.Fatal(err)
		}
		h := &Installation{Base: newBase(db)}
		now := gh.Timestamp{Time: time.Now()}
		steps := []struct {
			action    string
			suspended bool
			want      store.InstallationStatus
		}{
			{"suspend", true, store.InstallationSuspended},
			{"unsuspend", false, store.InstallationActive},
			{"new_permissions_accepted", false, store.InstallationActive},
			{"created", true, store.InstallationSuspended},
			{"created", false, store.InstallationActive},
			{"deleted", false, store.InstallationDeleted},
		}
		for _, s := range steps {
			inst := &gh.Installation{ID: gh.Int64(42), Account: &gh.User{Login: gh.String("acme")}}
			if s.suspended {
				inst.SuspendedAt = &now
			}
			ev := gh.InstallationEvent{Action: gh.String(s.action), Installation: inst, Sender: &gh.User{Login: gh.String("octocat")}}
			if err := h.Handle(ctx, "installation", "d-"+s.action, payload(t, ev)); err != nil {
				t.Fatalf("%s: %v", s.action, err)
			}
			got, err := db.InstallationByGitHubID(ctx, 42)
			if err != nil || got.Status != s.want {
				t.Errorf("after %s (suspended %v): %s, %v; want %s", s.action, s.suspended, got.Status, err, s.want)
			}
		}
		events, err := db.ListAuditEvents(ctx, store.AuditFilter{SubjectType: "installation", SubjectID: "42"})
		if err != nil || len(events) != len(steps) {
			t.Errorf("%d audit events, want %d: %v", len(events), len(steps), err)
		}

		// Unbound installations and unknown actions are not errors; garbage is permanent.
		unbound := gh.InstallationEvent{Action: gh.String("suspend"), Installation: &gh.Installation{ID: gh.Int64(7)}}
		if err := h.Handle(ctx, "installation", "d-unbound", payload(t, unbound)); err != nil {
			t.Errorf("unbound installation: %v", err)
		}
		other := gh.InstallationEvent{Action: gh.String("something_new"), Installation: &gh.Installation{ID: gh.Int64(42)}}
		if err := h.Handle(ctx, "installation", "d-new", payload(t, other)); err != nil {
			t.Errorf("unknown action: %v", err)
		}
		if err := h.Handle(ctx, "installation", "d-bad", []byte(`{"action": 5}`)); !IsPermanent(err) {
			t.Errorf("malformed payload: %v, want a permanent error", err)
		}
	})
}

func TestInstallationRepositoriesRevokeAndRestore(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.BindInstallation(ctx, team.ID, store.BoundInstallation{InstallationID: 42, AccountLogin: "acme"}); err != nil {
			t.Fatal(err)
		}
		const repo = "https://github.com/acme/deploy"
		if _, err := db.ReplaceInstallationRepos(ctx, 42, []store.InstallationRepo{{Repo: repo, GitHubRepoID: 1}}); err != nil {
			t.Fatal(err)
		}
		cluster, err := db.CreateCluster(ctx, store.Cluster{TeamID: team.ID, Name: "prod", Access: store.ClusterInCluster})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.ConnectRepo(ctx, cluster.ID, repo, store.ConnectionConnected); err != nil {
			t.Fatal(err)
		}
		listener := &revocations{}
		base := newBase(db)
		base.Revocations = listener
		h := &InstallationRepositories{Base: base}
		ghRepo := &gh.Repository{ID: gh.Int64(1), Name: gh.String("deploy"), FullName: gh.String("Acme/Deploy")}
		inst := &gh.Installation{ID: gh.Int64(42), Account: &gh.User{Login: gh.String("acme")}}
		removed := gh.InstallationRepositoriesEvent{Action: gh.String("removed"), RepositoriesRemoved: []*gh.Repository{ghRepo},
			Installation: inst, Sender: &gh.User{Login: gh.String("octocat")}}
		if err := h.Handle(ctx, "installation_repositories", "d1", payload(t, removed)); err != nil {
			t.Fatal(err)
		}
		conn, err := db.RepoConnectionFor(ctx, cluster.ID, repo)
		if err != nil || conn.Status != store.ConnectionRevoked {
			t.Fatalf("connection = %+v, %v; want revoked", conn, err)
		}
		if len(listener.got) != 1 || listener.got[0].ID != conn.ID || listener.reason != "octocat removed the repository from the GitHub App installation on acme" {
			t.Errorf("listener heard %+v (%q)", listener.got, listener.reason)
		}
		events, err := db.ListAuditEvents(ctx, store.AuditFilter{SubjectType: "repo_connection", SubjectID: conn.ID})
		if err != nil || len(events) != 1 || events[0].Action != "repo_connection.revoked" || events[0].TeamID != team.ID {
			t.Errorf("audit = %+v, %v", events, err)
		}

		added := gh.InstallationRepositoriesEvent{Action: gh.String("added"), RepositoriesAdded: []*gh.Repository{ghRepo}, Installation: inst}
		if err := h.Handle(ctx, "installation_repositories", "d2", payload(t, added)); err != nil {
			t.Fatal(err)
		}
		if conn, err := db.RepoConnectionFor(ctx, cluster.ID, repo); err != nil || conn.Status != store.ConnectionConnected {
			t.Errorf("after re-adding: %+v, %v; want connected", conn, err)
		}
		bad := gh.InstallationRepositoriesEvent{Action: gh.String("added"), RepositoriesAdded: []*gh.Repository{{FullName: gh.String("no-slash")}}, Installation: inst}
		if err := h.Handle(ctx, "installation_repositories", "d3", payload(t, bad)); !IsPermanent(err) {
			t.Errorf("repository without owner: %v, want a permanent error", err)
		}
	})
}

func TestIsOwnEvent(t *testing.T) {
	b := Base{App: github.App{Slug: "kukie"}}
	cases := map[string]struct {
		sender string
		want   bool
	}{
		"our bot":            {sender: "kukie[bot]", want: true},
		"our bot, any case":  {sender: "Kukie[bot]", want: true},
		"a person":           {sender: "kukie", want: false},
		"another app's bot":  {sender: "dependabot[bot]", want: false},
		"no sender":          {sender: "", want: false},
		"slug prefix attack": {sender: "kukie[bot]x", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := b.IsOwnEvent(tc.sender); got != tc.want {
				t.Errorf("IsOwnEvent = %v, want %v", got, tc.want)
			}
		})
	}
	if (&Base{}).IsOwnEvent("[bot]") {
		t.Error("without a known slug nothing is our own event")
	}
}

func TestInstallationCreatedRecordsItsInstallerUntilDeleted(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		h := &Installation{Base: newBase(db)}
		inst := &gh.Installation{ID: gh.Int64(77), Account: &gh.User{Login: gh.String("acme")}}
		owner := &gh.User{ID: gh.Int64(5), Login: gh.String("owner")}
		member := &gh.User{ID: gh.Int64(6), Login: gh.String("member")}
		// No team has bound installation 77: the event is otherwise ignored.
		created := gh.InstallationEvent{Action: gh.String("created"), Installation: inst, Sender: owner, Requester: member}
		if err := h.Handle(ctx, "installation", "d-created", payload(t, created)); err != nil {
			t.Fatal(err)
		}
		got, err := db.InstallerOf(ctx, 77)
		want := store.Installer{InstallationID: 77, SenderID: 5, SenderLogin: "owner", RequesterID: 6, RequesterLogin: "member"}
		if err != nil || got != want {
			t.Fatalf("installer = %+v, %v; want %+v", got, err, want)
		}
		// Another action's sender is not an installer.
		suspend := gh.InstallationEvent{Action: gh.String("suspend"), Installation: inst, Sender: &gh.User{ID: gh.Int64(8), Login: gh.String("other")}}
		if err := h.Handle(ctx, "installation", "d-suspend", payload(t, suspend)); err != nil {
			t.Fatal(err)
		}
		if got, err := db.InstallerOf(ctx, 77); err != nil || got != want {
			t.Fatalf("installer after suspend = %+v, %v; want %+v", got, err, want)
		}
		deleted := gh.InstallationEvent{Action: gh.String("deleted"), Installation: inst, Sender: owner}
		if err := h.Handle(ctx, "installation", "d-deleted", payload(t, deleted)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.InstallerOf(ctx, 77); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("installer after deleted: %v, want ErrNotFound", err)
		}
	})
}
