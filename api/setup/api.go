// Package setup serves what a team sets up before changes can flow, and the tokens
// its agents then use: the installation state and the setup callback that bind a
// GitHub App installation to the team, the team's clusters (with their sealed
// credentials) and the repositories connected to them, and repository-scoped
// installation tokens for agents. Mount adds the routes to a server.Server.
//
// It must not write to a repository or a cluster, and must not act on webhook
// deliveries (package webhook stores them, package handler runs them). It asks
// GitHub only to confirm what a caller claims (the installation, the installer, its
// repositories) and for the repository-scoped tokens it hands out, and reads a
// cluster only for its Applications' repositories, to suggest which to connect.
package setup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/ratelimit"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
)

// CallbackPath is where GitHub sends the browser back after an installation (the
// App's setup URL).
const CallbackPath = "/github/setup"

const (
	// DefaultStateTTL is how long an install link stays valid.
	DefaultStateTTL = 10 * time.Minute
	// DefaultInstallerWait is how long the setup callback waits for the
	// installation's "created" webhook, which says who installed it: GitHub sends the
	// browser back and the webhook at about the same time, in either order.
	DefaultInstallerWait = 15 * time.Second
)

// GitHubApps is what the endpoints ask GitHub; github.Installations implements it.
type GitHubApps interface {
	Get(ctx context.Context, installationID int64) (github.Installation, error)
	Repositories(ctx context.Context, installationID int64, webHost string) ([]github.RepoRef, error)
	MintRepoToken(ctx context.Context, installationID int64, repo github.Repo) (github.Token, error)
}

// InstallerCheck proves, on the setup callback, who the person GitHub sent back is
// and that they can access the installation the callback names: the installation id
// is attacker-controlled, the authorization code GitHub adds when the App requests
// user authorization during installation is not. *github.UserInstallations
// implements it.
type InstallerCheck interface {
	// ExchangeCode trades the callback's authorization code for a user access token.
	ExchangeCode(ctx context.Context, code secret.Secret) (secret.Secret, error)
	// AuthenticatedUser is the token's person.
	AuthenticatedUser(ctx context.Context, userToken secret.Secret) (github.User, error)
	// CanAccessInstallation reports whether the token's person can access the
	// installation.
	CanAccessInstallation(ctx context.Context, userToken secret.Secret, installationID int64) (bool, error)
}

// ApplicationRepoLister reads the repository URLs a cluster's Argo CD Applications
// deploy from (spec.source.repoURL and spec.sources[].repoURL).
type ApplicationRepoLister interface {
	RepoURLs(ctx context.Context, cluster store.Cluster) ([]string, error)
}

// CredentialsListener is told that a team's cluster has new credentials in the
// store; it returns once what the service follows on the cluster uses them.
type CredentialsListener interface {
	CredentialsChanged(ctx context.Context, cluster clusteraccess.Ref) error
}

// API holds the endpoints' collaborators.
type API struct {
	Store  *store.DB
	GitHub GitHubApps
	// Installer checks that the person who installed the App can access the
	// installation before it is bound. Unset (a dev run without the App's client
	// credentials), the setup callback binds without that check and says so loudly in
	// the log of every bind; the production profile refuses to start that way.
	Installer InstallerCheck
	// App is the App's identity (slug, public page) read at startup. The zero App is
	// a run without a GitHub App: the routes of NeedApp and the setup callback answer
	// 503 github_not_configured, since an install link would lead nowhere and no
	// installation could be confirmed or issue a token.
	App github.App
	// WebHost is the GitHub host repositories must live on.
	WebHost string
	// Credentials seals cluster kubeconfigs; without a key, kubeconfig
	// registration is refused.
	Credentials *sealed.Box
	// InClusterTeams names the teams that may register a cluster reached with the
	// service's own service account (in_cluster); empty refuses it to every team.
	InClusterTeams []string
	// AllowInsecureTLS accepts kubeconfigs with insecure-skip-tls-verify, with a
	// warning in the answer (clusters.allow_insecure_tls); refused otherwise.
	AllowInsecureTLS bool
	// AppRepos reads the clusters' Applications for repository suggestions
	// (ApplicationRepos); without it the suggestions endpoint answers 503.
	AppRepos ApplicationRepoLister
	// Access, when set, is told that a team replaced a cluster's kubeconfig, so the
	// service's watches of the cluster go on with the new credentials
	// (clusteraccess.Clusters).
	Access CredentialsListener
	// StateTTL defaults to DefaultStateTTL.
	StateTTL time.Duration
	// InstallerWait defaults to DefaultInstallerWait; negative: no wait, one look.
	InstallerWait time.Duration
	// AdminLimit, when set, limits each team's calls to the routes of CallOut.
	AdminLimit *ratelimit.Limiter
}

// Routes are the token routes Mount adds, each with the scope it needs (the change
// API's OpenAPI test checks the document against them). Everything a team does here
// administers it (installations, clusters, repository connections, repository
// tokens), so every one needs the admin scope.
var Routes = map[string]store.Scope{
	"POST /api/v1/installations/state":                 store.ScopeAdmin,
	"GET /api/v1/installations":                        store.ScopeAdmin,
	"POST /api/v1/clusters":                            store.ScopeAdmin,
	"GET /api/v1/clusters":                             store.ScopeAdmin,
	"PUT /api/v1/clusters/{cluster}/kubeconfig":        store.ScopeAdmin,
	"POST /api/v1/clusters/{cluster}/repos":            store.ScopeAdmin,
	"GET /api/v1/clusters/{cluster}/repos":             store.ScopeAdmin,
	"DELETE /api/v1/clusters/{cluster}/repos":          store.ScopeAdmin,
	"GET /api/v1/clusters/{cluster}/repos/suggestions": store.ScopeAdmin,
	"POST /api/v1/internal/tokens":                     store.ScopeAdmin,
}

// CallOut are the routes of Routes that make the service call GitHub (a repository
// token minted, the installations' repositories read again) or the team's cluster
// (its Applications read, its watches started again with a new kubeconfig): each
// team's calls to them share API.AdminLimit, answered 429 rate_limited past it.
var CallOut = []string{
	"PUT /api/v1/clusters/{cluster}/kubeconfig",
	"POST /api/v1/clusters/{cluster}/repos",
	"GET /api/v1/clusters/{cluster}/repos/suggestions",
	"POST /api/v1/internal/tokens",
}

// NeedApp are the routes of Routes that cannot work without a GitHub App: they hand
// out the App's install link or ask GitHub about an installation. Without one,
// each reads its request (a bad one is still told what is wrong with it) and
// answers 503 github_not_configured (requireApp).
var NeedApp = []string{
	"POST /api/v1/installations/state",
	"GET /api/v1/installations",
	"POST /api/v1/clusters/{cluster}/repos",
	"POST /api/v1/internal/tokens",
}

// CodeGitHubNotConfigured is the error code (503) of an endpoint that needs the
// GitHub App in a run without one.
const CodeGitHubNotConfigured = "github_not_configured"

// ErrGitHubNotConfigured says what an operator sets so that the endpoints needing
// the GitHub App work.
var ErrGitHubNotConfigured = errors.New("GitHub App not configured: set github.app_id and github.private_key_file " +
	"(or KUKIE_GITHUB_APP_ID and KUKIE_GITHUB_PRIVATE_KEY) and restart the service")

// appConfigured reports whether the service runs with a GitHub App; LoadApp
// never returns an App without a slug.
func (a *API) appConfigured() bool { return a.App.Slug != "" }

// requireApp answers 503 github_not_configured and returns false without a
// GitHub App.
func (a *API) requireApp(w http.ResponseWriter) bool {
	if a.appConfigured() {
		return true
	}
	server.WriteError(w, http.StatusServiceUnavailable, CodeGitHubNotConfigured, ErrGitHubNotConfigured.Error())
	return false
}

// Mount adds the endpoints to srv: GitHub's setup callback (its one-time state
// proves the caller) and Routes.
func (a *API) Mount(srv *server.Server) {
	// Anyone may call the callback, and it has GitHub exchange a code and look up
	// an installation.
	srv.HandleFunc("GET "+CallbackPath, a.setup, server.LimitPerClient())
	handlers := map[string]http.HandlerFunc{
		"POST /api/v1/installations/state":                 a.createInstallState,
		"GET /api/v1/installations":                        a.listInstallations,
		"POST /api/v1/clusters":                            a.createCluster,
		"GET /api/v1/clusters":                             a.listClusters,
		"PUT /api/v1/clusters/{cluster}/kubeconfig":        a.replaceKubeconfig,
		"POST /api/v1/clusters/{cluster}/repos":            a.connectRepo,
		"GET /api/v1/clusters/{cluster}/repos":             a.listRepos,
		"DELETE /api/v1/clusters/{cluster}/repos":          a.disconnectRepo,
		"GET /api/v1/clusters/{cluster}/repos/suggestions": a.suggestRepos,
		"POST /api/v1/internal/tokens":                     a.issueToken,
	}
	for pattern, h := range handlers {
		if slices.Contains(CallOut, pattern) {
			srv.HandleFunc(pattern, h, server.TeamAuth(Routes[pattern]), server.LimitPerTeam(a.AdminLimit))
			continue
		}
		srv.HandleFunc(pattern, h, server.TeamAuth(Routes[pattern]))
	}
}

// team returns the caller's team; TeamAuth guarantees one.
func team(r *http.Request) store.Team {
	t, _ := server.TeamFrom(r.Context())
	return t
}

// cluster reads the caller's cluster named in the path, or answers 404.
func (a *API) cluster(w http.ResponseWriter, r *http.Request) (store.Cluster, bool) {
	name := r.PathValue("cluster")
	c, err := a.Store.ClusterByName(r.Context(), team(r).ID, name)
	if errors.Is(err, store.ErrNotFound) {
		server.WriteError(w, http.StatusNotFound, "cluster_not_found", clusteraccess.NoClusterNamed(name))
		return store.Cluster{}, false
	}
	if err != nil {
		internalError(w, r, err)
		return store.Cluster{}, false
	}
	return c, true
}

// parseRepo reads a repository the way people and Argo CD write it (any URL form, or
// owner/name on this GitHub) and requires it to live on this GitHub.
func (a *API) parseRepo(raw string) (github.Repo, error) {
	repo, err := github.ParseRepoURL(raw)
	if err != nil {
		// "owner/name" alone names a repository on this GitHub.
		if strings.Count(raw, "/") != 1 || strings.HasPrefix(raw, "/") {
			return github.Repo{}, err
		}
		if repo, err = github.ParseRepoURL("https://" + a.WebHost + "/" + raw); err != nil {
			return github.Repo{}, err
		}
	}
	if repo.Host != a.WebHost {
		return github.Repo{}, fmt.Errorf("repository %s is on %s, but this service works with %s", repo.FullName(), repo.Host, a.WebHost)
	}
	return repo, nil
}

func internalError(w http.ResponseWriter, r *http.Request, err error) {
	logger(r).Error().Err(err).Msg("Request failed")
	server.WriteError(w, http.StatusInternalServerError, "internal", "the server failed to handle the request; it has been logged")
}

// audit records an event; a failure is logged, not shown to the caller, since the
// change it describes has already happened.
func (a *API) audit(r *http.Request, e store.AuditEvent) {
	if _, err := a.Store.RecordAuditEvent(r.Context(), e); err != nil {
		logger(r).Error().Err(err).Str("action", e.Action).Msg("Recording audit event failed")
	}
}
