package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
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

// installationFixture is an installation of the App on a fake GitHub, with access
// to acme/deploy and acme/infra, bound to team shop, and handlers reaching GitHub as
// the App. Webhooks are recorded, not sent: tests hand them to the handlers in the
// order they choose.
type installationFixture struct {
	gh   *githubtest.Server
	base Base
	id   int64
	team store.Team
}

func newInstallationFixture(t *testing.T, db *store.DB) installationFixture {
	t.Helper()
	ctx := context.Background()
	gh := githubtest.New(t)
	gh.CreateRepo(t, "acme", "deploy", map[string]string{"README.md": "manifests\n"}, "main")
	gh.CreateRepo(t, "acme", "infra", map[string]string{"README.md": "infra\n"}, "main")
	id := gh.CreateInstallation(t, "acme", "deploy", "infra")
	team, err := db.CreateTeam(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.BindInstallation(ctx, team.ID, store.BoundInstallation{InstallationID: id, AccountLogin: "acme"}); err != nil {
		t.Fatal(err)
	}
	cc, err := github.NewClientCreator(github.Config{AppID: gh.AppID(), PrivateKey: gh.PrivateKeyPEM(), APIURL: gh.APIURL(), WebURL: gh.URL()}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	base := Base{ClientCreator: cc, Store: db, App: github.App{ID: gh.AppID(), Slug: gh.AppSlug()}, WebHost: strings.TrimPrefix(gh.URL(), "http://")}
	return installationFixture{gh: gh, base: base, id: id, team: team}
}

// handled hands a recorded delivery to h, failing the test when it fails.
func handled(t *testing.T, h interface {
	Handle(context.Context, string, string, []byte) error
}, d githubtest.Delivery) {
	t.Helper()
	if err := h.Handle(context.Background(), d.Event, d.ID, d.Payload); err != nil {
		t.Fatalf("%s %s: %v", d.Event, d.Action, err)
	}
}

// last is the latest recorded delivery of event and action.
func (f installationFixture) last(t *testing.T, event, action string) githubtest.Delivery {
	t.Helper()
	ds := f.gh.DeliveriesOf(event, action)
	if len(ds) == 0 {
		t.Fatalf("no %s %s delivery", event, action)
	}
	return ds[len(ds)-1]
}

func (f installationFixture) status(t *testing.T, db *store.DB) store.InstallationStatus {
	t.Helper()
	got, err := db.InstallationByGitHubID(context.Background(), f.id)
	if err != nil {
		t.Fatal(err)
	}
	return got.Status
}

func TestInstallationEventsRecordGitHubsStatus(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		f := newInstallationFixture(t, db)
		h := &Installation{Base: f.base}
		handle := func(d githubtest.Delivery) { t.Helper(); handled(t, h, d) }

		f.gh.SuspendInstallation(t, f.id)
		suspend := f.last(t, "installation", "suspend")
		handle(suspend)
		if got := f.status(t, db); got != store.InstallationSuspended {
			t.Fatalf("after suspend: %s", got)
		}
		f.gh.UnsuspendInstallation(t, f.id)
		unsuspend := f.last(t, "installation", "unsuspend")
		handle(unsuspend)
		if got := f.status(t, db); got != store.InstallationActive {
			t.Fatalf("after unsuspend: %s", got)
		}
		f.gh.AcceptNewPermissions(t, f.id, githubtest.DefaultPermissions())
		handle(f.last(t, "installation", "new_permissions_accepted"))

		// A suspension redelivered after the unsuspension does not suspend again: the
		// payload said suspended, GitHub says active.
		handle(suspend)
		if got := f.status(t, db); got != store.InstallationActive {
			t.Errorf("after a late suspend delivery: %s, want active", got)
		}

		// An unsuspension that arrives after the installation was deleted, but before
		// the deletion's own delivery, records the deletion GitHub answers with.
		f.gh.DeleteInstallation(t, f.id)
		handle(unsuspend)
		if got := f.status(t, db); got != store.InstallationDeleted {
			t.Errorf("after an unsuspend delivery of a deleted installation: %s, want deleted", got)
		}
		handle(f.last(t, "installation", "deleted"))

		// After the deletion, old deliveries change nothing and ask GitHub nothing.
		f.gh.ResetRequestCounts()
		handle(f.last(t, "installation", "created"))
		handle(unsuspend)
		if got := f.status(t, db); got != store.InstallationDeleted {
			t.Errorf("after old deliveries of a deleted installation: %s, want deleted", got)
		}
		if n := f.gh.TotalRequests(); n != 0 {
			t.Errorf("%d requests to GitHub for a deleted installation's old deliveries: %v", n, f.gh.RequestCounts())
		}
		events, err := db.ListAuditEvents(ctx, store.AuditFilter{SubjectType: "installation", SubjectID: fmt.Sprint(f.id)})
		// The deletion's own delivery found the deletion recorded already.
		if err != nil || len(events) != 5 {
			t.Errorf("%d audit events, want one for each delivery acted on (5): %v", len(events), err)
		}

		// Unbound installations and unknown actions are not errors; garbage is permanent.
		unbound := gh.InstallationEvent{Action: gh.String("suspend"), Installation: &gh.Installation{ID: gh.Int64(7)}}
		if err := h.Handle(ctx, "installation", "d-unbound", payload(t, unbound)); err != nil {
			t.Errorf("unbound installation: %v", err)
		}
		other := gh.InstallationEvent{Action: gh.String("something_new"), Installation: &gh.Installation{ID: gh.Int64(f.id)}}
		if err := h.Handle(ctx, "installation", "d-new", payload(t, other)); err != nil {
			t.Errorf("unknown action: %v", err)
		}
		if err := h.Handle(ctx, "installation", "d-bad", []byte(`{"action": 5}`)); !IsPermanent(err) {
			t.Errorf("malformed payload: %v, want a permanent error", err)
		}
	})
}

// Two workers handling a suspension and an unsuspension at once end with GitHub's
// last word: a change on GitHub just after the handler wrote what two reads agreed
// on is found by the read after the write.
func TestInstallationStatusSettlesOnAChangeDuringTheEvent(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		f := newInstallationFixture(t, db)
		h := &Installation{Base: f.base}
		f.gh.SuspendInstallation(t, f.id)
		f.gh.UnsuspendInstallation(t, f.id)
		unsuspend := f.last(t, "installation", "unsuspend")
		var written []store.InstallationStatus
		reads := 0
		f.gh.OnRequest("GET /app/installations/{installation_id}", func() {
			reads++
			if reads == 3 {
				// The first two reads agreed on active, which is written now.
				written = append(written, f.status(t, db))
				f.gh.SuspendInstallation(t, f.id)
			}
		})
		if err := h.Handle(ctx, unsuspend.Event, unsuspend.ID, unsuspend.Payload); err != nil {
			t.Fatal(err)
		}
		if got := f.status(t, db); got != store.InstallationSuspended || len(written) != 1 || written[0] != store.InstallationActive {
			t.Errorf("status %s (active written first: %v) after GitHub suspended the installation during the event, want suspended", got, written)
		}
		if reads != 5 {
			t.Errorf("%d reads of the installation, want 5 (two agreeing, changed on the confirming read, two agreeing, confirmed)", reads)
		}
	})
}

func TestInstallationRepositoriesFollowGitHubsListing(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		f := newInstallationFixture(t, db)
		deploy := "https://" + f.base.WebHost + "/acme/deploy"
		cluster, err := db.CreateCluster(ctx, store.Cluster{TeamID: f.team.ID, Name: "prod", Access: store.ClusterInCluster})
		if err != nil {
			t.Fatal(err)
		}
		ins := &Installation{Base: f.base}
		created := f.last(t, "installation", "created")
		if err := ins.Handle(ctx, created.Event, created.ID, created.Payload); err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.ConnectRepo(ctx, cluster.ID, deploy, store.ConnectionConnected); err != nil {
			t.Fatal(err)
		}
		listener := &revocations{}
		base := f.base
		base.Revocations = listener
		h := &InstallationRepositories{Base: base}
		handle := func(d githubtest.Delivery) { t.Helper(); handled(t, h, d) }
		connection := func() store.RepoConnection {
			t.Helper()
			conn, err := db.RepoConnectionFor(ctx, cluster.ID, deploy)
			if err != nil {
				t.Fatal(err)
			}
			return conn
		}

		f.gh.RemoveInstallationRepos(t, f.id, "deploy")
		removed := f.last(t, "installation_repositories", "removed")
		f.gh.ResetRequestCounts()
		handle(removed)
		// One repository is asked about with the App's requests, not listed with the
		// installation's.
		if n := f.gh.RequestCount("GET /repos/{owner}/{repo}/installation"); n != 3 {
			t.Errorf("%d reads of the repository's installation, want 3 (two agreeing, confirmed)", n)
		}
		if n := f.gh.RequestCount("GET /installation/repositories"); n != 0 {
			t.Errorf("%d listings of the installation's repositories for an event naming one", n)
		}
		conn := connection()
		const reason = "octocat removed the repository from the GitHub App installation on acme"
		if conn.Status != store.ConnectionRevoked || conn.StatusReason != reason {
			t.Fatalf("connection = %s (%q); want revoked for %q", conn.Status, conn.StatusReason, reason)
		}
		if len(listener.got) != 1 || listener.got[0].ID != conn.ID || listener.reason != reason {
			t.Errorf("listener heard %+v (%q)", listener.got, listener.reason)
		}
		events, err := db.ListAuditEvents(ctx, store.AuditFilter{SubjectType: "repo_connection", SubjectID: conn.ID})
		if err != nil || len(events) != 1 || events[0].Action != "repo_connection.revoked" || events[0].TeamID != f.team.ID {
			t.Errorf("audit = %+v, %v", events, err)
		}

		f.gh.AddInstallationRepos(t, f.id, "deploy")
		added := f.last(t, "installation_repositories", "added")
		handle(added)
		if conn := connection(); conn.Status != store.ConnectionConnected {
			t.Errorf("after re-adding: %s, want connected", conn.Status)
		}
		// The removal redelivered after the repository came back revokes nothing.
		handle(removed)
		if conn := connection(); conn.Status != store.ConnectionConnected {
			t.Errorf("after a late removal delivery: %s (%q), want connected", conn.Status, conn.StatusReason)
		}
		// And an addition redelivered after another removal restores nothing.
		f.gh.RemoveInstallationRepos(t, f.id, "deploy")
		handle(f.last(t, "installation_repositories", "removed"))
		handle(added)
		if conn := connection(); conn.Status != store.ConnectionRevoked {
			t.Errorf("after a late addition delivery: %s, want revoked", conn.Status)
		}
		repos, err := db.InstallationRepos(ctx, f.id)
		if err != nil || len(repos) != 1 || !strings.HasSuffix(repos[0].Repo, "/acme/infra") {
			t.Errorf("installation repositories = %+v, %v; want only acme/infra", repos, err)
		}
	})
}

// An event naming many repositories reads them from the installation's listing.
func TestInstallationRepositoriesEventOfManyReadsTheListing(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		f := newInstallationFixture(t, db)
		var names []string
		for i := range maxReposAskedOneByOne + 1 {
			name := fmt.Sprintf("app-%02d", i)
			f.gh.CreateRepo(t, "acme", name, map[string]string{"README.md": name + "\n"}, "main")
			names = append(names, name)
		}
		h := &InstallationRepositories{Base: f.base}
		handle := func(d githubtest.Delivery) { t.Helper(); handled(t, h, d) }
		count := func() int {
			t.Helper()
			repos, err := db.InstallationRepos(ctx, f.id)
			if err != nil {
				t.Fatal(err)
			}
			return len(repos)
		}
		f.gh.AddInstallationRepos(t, f.id, names...)
		added := f.last(t, "installation_repositories", "added")
		f.gh.ResetRequestCounts()
		handle(added)
		if n := count(); n != len(names)+2 {
			t.Errorf("%d repositories recorded, want %d", n, len(names)+2)
		}
		if n := f.gh.RequestCount("GET /repos/{owner}/{repo}/installation"); n != 0 {
			t.Errorf("%d reads of single repositories' installation for an event naming %d", n, len(names))
		}
		if n := f.gh.RequestCount("GET /installation/repositories"); n == 0 {
			t.Error("the installation's listing was not read")
		}
		f.gh.RemoveInstallationRepos(t, f.id, names...)
		handle(f.last(t, "installation_repositories", "removed"))
		handle(added)
		if n := count(); n != 2 {
			t.Errorf("%d repositories recorded after the removal and a late addition delivery, want 2", n)
		}
	})
}

// A suspended installation gets no token to list its repositories with: an event
// naming a few is still checked with GitHub, one by one with the App's own token; a
// larger one is recorded as the payload says.
func TestSuspendedInstallationRepositoriesEvents(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		f := newInstallationFixture(t, db)
		ins := &Installation{Base: f.base}
		h := &InstallationRepositories{Base: f.base}
		handle := handled
		repos := func() []string {
			t.Helper()
			stored, err := db.InstallationRepos(ctx, f.id)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range stored {
				names = append(names, r.Repo[strings.LastIndex(r.Repo, "/")+1:])
			}
			return names
		}
		handle(t, ins, f.last(t, "installation", "created"))
		f.gh.CreateRepo(t, "acme", "extra", map[string]string{"README.md": "extra\n"}, "main")
		f.gh.AddInstallationRepos(t, f.id, "extra")
		added := f.last(t, "installation_repositories", "added")
		handle(t, h, added)
		f.gh.SuspendInstallation(t, f.id)
		handle(t, ins, f.last(t, "installation", "suspend"))

		f.gh.RemoveInstallationRepos(t, f.id, "extra")
		handle(t, h, f.last(t, "installation_repositories", "removed"))
		handle(t, h, added) // late: GitHub says extra is gone
		if got := fmt.Sprint(repos()); got != "[deploy infra]" {
			t.Errorf("repositories %s after a removal and a late addition while suspended, want [deploy infra]", got)
		}

		var names []string
		for i := range maxReposAskedOneByOne + 1 {
			name := fmt.Sprintf("app-%02d", i)
			f.gh.CreateRepo(t, "acme", name, map[string]string{"README.md": name + "\n"}, "main")
			names = append(names, name)
		}
		f.gh.AddInstallationRepos(t, f.id, names...)
		handle(t, h, f.last(t, "installation_repositories", "added"))
		if n := len(repos()); n != len(names)+2 {
			t.Errorf("%d repositories after a suspended installation's event naming %d, want %d", n, len(names), len(names)+2)
		}

		inst := &gh.Installation{ID: gh.Int64(f.id), Account: &gh.User{Login: gh.String("acme")}}
		bad := gh.InstallationRepositoriesEvent{Action: gh.String("added"), RepositoriesAdded: []*gh.Repository{{FullName: gh.String("no-slash")}}, Installation: inst}
		if err := h.Handle(ctx, "installation_repositories", "d-bad", payload(t, bad)); !IsPermanent(err) {
			t.Errorf("repository without owner: %v, want a permanent error", err)
		}
	})
}

// GitHub failing the read leaves the recorded status as it was and the delivery to
// be retried; the retry records GitHub's answer. One stray answer is never stored
// either: a 404 of an installation GitHub still has, followed by a read that fails.
func TestInstallationEventRetriesWhenGitHubFails(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		f := newInstallationFixture(t, db)
		h := &Installation{Base: f.base}
		f.gh.SuspendInstallation(t, f.id)
		suspend := f.last(t, "installation", "suspend")
		for name, faults := range map[string][]githubtest.Fault{
			"a 502":                   {{Status: 502, Times: 1}},
			"a 502 after serving":     {{Status: 502, Served: true, Times: 1}},
			"a stray 404, then a 502": {{Status: 404, Times: 1}, {Status: 502, Times: 1}},
		} {
			for _, fault := range faults {
				f.gh.InjectFault(fault.On("GET", "/app/installations/*"))
			}
			err := h.Handle(ctx, suspend.Event, suspend.ID, suspend.Payload)
			if err == nil || IsPermanent(err) {
				t.Errorf("with %s: %v, want an error to retry", name, err)
			}
			if got := f.status(t, db); got != store.InstallationActive {
				t.Errorf("status %s after %s, want active as before", got, name)
			}
		}
		if err := h.Handle(ctx, suspend.Event, suspend.ID, suspend.Payload); err != nil {
			t.Fatal(err)
		}
		if got := f.status(t, db); got != store.InstallationSuspended {
			t.Errorf("status %s after the retry, want suspended", got)
		}
	})
}

// TestDeletedInstallationTellsThePlansOnItsRepositories: uninstalling the App takes
// every repository from the installation at once, and no token is minted for it
// any more: the plans on the connections it granted are told, as they are of a
// repository removed from it (see plan.Pipeline.ConnectionsRevoked), rather than
// left open for ever holding their files. The connections stay as they were,
// listed not_installed until an installation of the team grants them again.
func TestDeletedInstallationTellsThePlansOnItsRepositories(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		f := newInstallationFixture(t, db)
		deploy := "https://" + f.base.WebHost + "/acme/deploy"
		cluster, err := db.CreateCluster(ctx, store.Cluster{TeamID: f.team.ID, Name: "prod", Access: store.ClusterInCluster})
		if err != nil {
			t.Fatal(err)
		}
		listener := &revocations{}
		base := f.base
		base.Revocations = listener
		h := &Installation{Base: base}
		handled(t, h, f.last(t, "installation", "created"))
		conn, _, err := db.ConnectRepo(ctx, cluster.ID, deploy, store.ConnectionConnected)
		if err != nil {
			t.Fatal(err)
		}

		f.gh.DeleteInstallation(t, f.id)
		deleted := f.last(t, "installation", "deleted")
		handled(t, h, deleted)
		const reason = "octocat uninstalled the GitHub App from acme"
		if len(listener.got) != 1 || listener.got[0].ID != conn.ID || listener.reason != reason {
			t.Fatalf("listener heard %+v (%q), want the connection to acme/deploy for %q", listener.got, listener.reason, reason)
		}
		if got, err := db.RepoConnectionFor(ctx, cluster.ID, deploy); err != nil || got.Status != store.ConnectionConnected {
			t.Errorf("connection after the uninstall = %+v, %v; want left connected", got, err)
		}
		// The deletion redelivered (its first handling may have stopped before
		// telling the plans) tells them again.
		handled(t, h, deleted)
		if len(listener.got) != 2 {
			t.Errorf("after a redelivered deletion the listener heard %d connections, want 2", len(listener.got))
		}
	})
}
