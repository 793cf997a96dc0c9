package setup_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/api/setup"
	"github.com/kukie/kukie-gitops/api/webhook"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/handler"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/internal/servicetest"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
)

// env is the setup API and the webhook route running against a fake GitHub and a real
// database, with two teams.
type env struct {
	t       *testing.T
	gh      *githubtest.Server
	db      *store.DB
	api     *setup.API
	hooks   *webhook.Receiver
	inbox   *handler.Inbox
	http    *httptest.Server
	logs    *servicetest.SyncBuffer
	clients githubapp.ClientCreator

	teamA, teamB   store.Team
	tokenA, tokenB secret.Secret
}

type envOption func(*setup.API)

func newEnv(t *testing.T, db *store.DB, opts ...envOption) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{t: t, gh: githubtest.New(t), db: db, logs: &servicetest.SyncBuffer{}}
	logger := zerolog.New(e.logs).Level(zerolog.DebugLevel)

	cfg := github.Config{AppID: e.gh.AppID(), PrivateKey: e.gh.PrivateKeyPEM(), APIURL: e.gh.APIURL(), WebURL: e.gh.URL()}
	cc, err := github.NewClientCreator(cfg, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	e.clients = cc
	app, err := github.LoadApp(logger.WithContext(ctx), cc)
	if err != nil {
		t.Fatal(err)
	}
	webHost, err := cfg.WebHost()
	if err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte{7}, sealed.KeySize)
	box, err := sealed.New(key)
	if err != nil {
		t.Fatal(err)
	}
	base := handler.Base{ClientCreator: cc, Store: db, App: app, WebHost: webHost}
	e.inbox, err = handler.NewInbox(db, handler.InboxOptions{}, &handler.Installation{Base: base}, &handler.InstallationRepositories{Base: base})
	if err != nil {
		t.Fatal(err)
	}
	e.api = &setup.API{
		Store: db, GitHub: github.Installations{Clients: cc}, App: app, WebHost: webHost,
		Credentials: box,
		Installer:   e.installerCheck(e.gh.ClientSecret()),
		// The two teams below may use in-cluster access; tests of its refusal use
		// another team.
		InClusterTeams: []string{"team-a", "team-b"},
		// The tests hand the installation webhook to the inbox themselves (drain):
		// a callback looks once for who installed it.
		InstallerWait: -1,
	}
	for _, o := range opts {
		o(e.api)
	}
	e.hooks = &webhook.Receiver{Store: db, Secret: e.gh.WebhookSecret(), Inbox: e.inbox}
	srv, err := server.New(server.Config{}, server.Deps{Logger: logger, Auth: db})
	if err != nil {
		t.Fatal(err)
	}
	e.api.Mount(srv)
	e.hooks.Mount(srv)
	e.http = httptest.NewServer(srv.Handler())
	t.Cleanup(e.http.Close)
	e.gh.SetWebhookURL(e.http.URL + webhook.Path)

	e.teamA, e.tokenA = e.team("team-a")
	e.teamB, e.tokenB = e.team("team-b")
	e.gh.AddUser(e.installer(e.tokenA))
	e.gh.AddUser(e.installer(e.tokenB))
	return e
}

// installerCheck checks installers against the fake with the App's client id and
// clientSecret.
func (e *env) installerCheck(clientSecret secret.Secret) setup.InstallerCheck {
	e.t.Helper()
	cfg := github.Config{AppID: e.gh.AppID(), PrivateKey: e.gh.PrivateKeyPEM(), APIURL: e.gh.APIURL(), WebURL: e.gh.URL(),
		ClientID: e.gh.ClientID(), ClientSecret: clientSecret}
	check, err := github.NewUserInstallations(cfg, e.clients)
	if err != nil {
		e.t.Fatal(err)
	}
	return check
}

// withoutInstallerCheck runs the API as a dev run without the App's client
// credentials does.
func withoutInstallerCheck() envOption {
	return func(api *setup.API) { api.Installer = nil }
}

// installer is the GitHub login of the person of a team (by its API token) who
// installs the App.
func (e *env) installer(token secret.Secret) string {
	if token == e.tokenB {
		return "bob"
	}
	return "alice"
}

// install has the team's installer install the App on account for repos, and the
// service handle GitHub's installation webhook, which names them as its installer.
func (e *env) install(token secret.Secret, account string, repos ...string) int64 {
	e.t.Helper()
	id := e.gh.CreateInstallationBy(e.t, e.installer(token), account, repos...)
	e.drain()
	return id
}

// code lets the team's installer access the installation, as access to one of its
// repositories does on GitHub, and returns the authorization code GitHub hands the
// callback.
func (e *env) code(token secret.Secret, installationID int64) string {
	e.t.Helper()
	e.gh.GrantInstallationAccess(e.t, e.installer(token), installationID)
	return e.gh.AuthorizationCode(e.t, e.installer(token))
}

func (e *env) team(name string) (store.Team, secret.Secret) {
	e.t.Helper()
	ctx := context.Background()
	team, err := e.db.CreateTeam(ctx, name)
	if err != nil {
		e.t.Fatal(err)
	}
	_, tok, err := e.db.CreateAPIToken(ctx, team.ID, "test")
	if err != nil {
		e.t.Fatal(err)
	}
	return team, tok
}

// do sends a request with the team token (none when token is empty) and returns the
// status and body.
func (e *env) do(method, path string, token secret.Secret, body any) (int, []byte) {
	e.t.Helper()
	return servicetest.Do(e.t, e.http, method, path, token, body)
}

// state asks the API for an install state as team.
func (e *env) state(token secret.Secret) string {
	e.t.Helper()
	status, body := e.do("POST", "/api/v1/installations/state", token, nil)
	if status != http.StatusCreated {
		e.t.Fatalf("create state: %d %s", status, body)
	}
	var out struct {
		State      string `json:"state"`
		InstallURL string `json:"install_url"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		e.t.Fatal(err)
	}
	if !strings.HasSuffix(out.InstallURL, "/installations/new?state="+out.State) {
		e.t.Fatalf("install url %q does not carry the state", out.InstallURL)
	}
	return out.State
}

// callback plays the browser coming back from GitHub.
func (e *env) callback(query string) (int, string) {
	e.t.Helper()
	status, body := e.do("GET", setup.CallbackPath+"?"+query, "", nil)
	return status, string(body)
}

// drain processes every stored webhook delivery.
func (e *env) drain() {
	e.t.Helper()
	e.gh.WaitForDeliveries()
	if _, err := e.inbox.Drain(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// bind installs through the whole setup flow as team (token), its installer
// authorizing the App, and returns the installation's status page.
func (e *env) bind(token secret.Secret, installationID int64) (int, string) {
	e.t.Helper()
	return e.callback("installation_id=" + itoa(installationID) + "&setup_action=install&state=" + e.state(token) +
		"&code=" + e.code(token, installationID))
}

func itoa(v int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// repoURL is the canonical URL of a repository on the fake.
func (e *env) repoURL(fullName string) string {
	r, err := github.ParseRepoURL(e.gh.URL() + "/" + fullName)
	if err != nil {
		e.t.Fatal(err)
	}
	return r.URL()
}
