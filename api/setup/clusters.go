package setup

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
)

// ClusterRequest is the body of POST /api/v1/clusters: a kubeconfig or in_cluster.
type ClusterRequest struct {
	Name       string `json:"name"`
	Kubeconfig string `json:"kubeconfig"`
	InCluster  bool   `json:"in_cluster"`
}

// Cluster is a registered cluster as the routes answer it; its credentials are
// never answered.
type Cluster struct {
	Name      string    `json:"name"`
	Access    string    `json:"access"`
	CreatedAt time.Time `json:"created_at"`
	// Warnings say what of the kubeconfig just given the team should change:
	// insecure-skip-tls-verify, where the operator allows it.
	Warnings []string `json:"warnings,omitempty"`
}

// createCluster answers POST /api/v1/clusters: register a cluster reached with a
// kubeconfig (stored sealed) or with the service's own service account.
func (a *API) createCluster(w http.ResponseWriter, r *http.Request) {
	var req ClusterRequest
	if !server.DecodeJSON(w, r, &req) {
		return
	}
	t := team(r)
	if err := store.ValidateClusterName(req.Name); err != nil {
		server.WriteError(w, http.StatusBadRequest, "invalid_cluster_name", err.Error())
		return
	}
	c := store.Cluster{TeamID: t.ID, Name: req.Name}
	var warnings []string
	switch {
	case req.InCluster && req.Kubeconfig != "":
		server.WriteError(w, http.StatusBadRequest, "invalid_cluster", "give either kubeconfig or in_cluster, not both")
		return
	case req.InCluster:
		if !slices.Contains(a.InClusterTeams, t.Name) {
			server.WriteError(w, http.StatusForbidden, "in_cluster_not_allowed", fmt.Sprintf(
				"in_cluster reaches the cluster with this service's own service account, and its operator has not allowed team %s to use it "+
					"(clusters.in_cluster_teams); register the cluster with a kubeconfig instead", t.Name))
			return
		}
		c.Access = store.ClusterInCluster
	case req.Kubeconfig != "":
		sealedConfig, warned, ok := a.sealKubeconfig(w, r, t.ID, req.Name, req.Kubeconfig, " (or use in_cluster)")
		if !ok {
			return
		}
		warnings = warned
		c.Access, c.SealedCredentials = store.ClusterKubeconfig, sealedConfig
	default:
		server.WriteError(w, http.StatusBadRequest, "invalid_cluster", "give kubeconfig (the cluster's kubeconfig as text) or in_cluster: true")
		return
	}
	created, err := a.Store.CreateCluster(r.Context(), c)
	if errors.Is(err, store.ErrConflict) {
		server.WriteError(w, http.StatusConflict, "cluster_exists", fmt.Sprintf("your team already has a cluster named %q", req.Name))
		return
	}
	if err != nil {
		internalError(w, r, err)
		return
	}
	a.audit(r, store.AuditEvent{TeamID: t.ID, Actor: "team:" + t.Name, Action: "cluster.create", SubjectType: "cluster",
		SubjectID: created.ID, Detail: mustJSON(auditDetail(map[string]any{"name": created.Name, "access": string(created.Access)}, warnings))})
	server.WriteJSON(w, http.StatusCreated, Cluster{Name: created.Name, Access: string(created.Access), CreatedAt: created.CreatedAt, Warnings: warnings})
}

// KubeconfigRequest is the body of PUT /api/v1/clusters/{cluster}/kubeconfig.
type KubeconfigRequest struct {
	Kubeconfig string `json:"kubeconfig"`
}

// replaceKubeconfig answers PUT /api/v1/clusters/{cluster}/kubeconfig: the cluster
// is reached with a new kubeconfig (a rotated token or certificate), checked as at
// registration and stored sealed in place of its credentials. It answers once the
// service's watches of the cluster (the deployments it follows, the Applications)
// run with the new kubeconfig, so the old credentials may be revoked then.
func (a *API) replaceKubeconfig(w http.ResponseWriter, r *http.Request) {
	c, ok := a.cluster(w, r)
	if !ok {
		return
	}
	var req KubeconfigRequest
	if !server.DecodeJSON(w, r, &req) {
		return
	}
	if req.Kubeconfig == "" {
		server.WriteError(w, http.StatusBadRequest, "invalid_kubeconfig", "give kubeconfig: the cluster's new kubeconfig as text")
		return
	}
	sealedConfig, warnings, ok := a.sealKubeconfig(w, r, c.TeamID, c.Name, req.Kubeconfig, "")
	if !ok {
		return
	}
	replaced, err := a.Store.ReplaceClusterKubeconfig(r.Context(), c.TeamID, c.Name, sealedConfig)
	if err != nil {
		internalError(w, r, err)
		return
	}
	t := team(r)
	a.audit(r, store.AuditEvent{TeamID: t.ID, Actor: "team:" + t.Name, Action: "cluster.kubeconfig", SubjectType: "cluster",
		SubjectID: replaced.ID, Detail: mustJSON(auditDetail(map[string]any{"name": replaced.Name, "previous_access": string(c.Access)}, warnings))})
	if a.Access != nil {
		// Stored already: a watch that cannot start again now does at its next
		// refusal of the old credentials, or at the cluster's next use.
		if err := a.Access.CredentialsChanged(r.Context(), clusteraccess.Ref{TeamID: c.TeamID, Name: c.Name}); err != nil {
			logger(r).Warn().Err(err).Str("cluster", c.Name).Msg("Watches of the cluster not started again with its new kubeconfig")
		}
	}
	server.WriteJSON(w, http.StatusOK, Cluster{Name: replaced.Name, Access: string(replaced.Access), CreatedAt: replaced.CreatedAt, Warnings: warnings})
}

// auditDetail is detail with the warnings the kubeconfig was accepted with, if
// any: whoever reads the audit trail later learns that the operator's setting let
// a kubeconfig in that would otherwise have been refused (unverified TLS), and
// what to ask the team to change.
func auditDetail(detail map[string]any, warnings []string) map[string]any {
	if len(warnings) > 0 {
		detail["warnings"] = warnings
	}
	return detail
}

// sealKubeconfig checks a team's kubeconfig for its cluster name and seals it for
// the store, with the warnings of what the team should change in it; otherwise it
// answers why not (orElse ends the advice when no key is configured) and returns
// false.
func (a *API) sealKubeconfig(w http.ResponseWriter, r *http.Request, teamID, name, kubeconfig, orElse string) (string, []string, bool) {
	warnings, err := validateKubeconfig([]byte(kubeconfig), kube.KubeconfigOptions{AllowInsecureTLS: a.AllowInsecureTLS})
	if err != nil {
		server.WriteError(w, http.StatusBadRequest, "invalid_kubeconfig", err.Error())
		return "", nil, false
	}
	if len(warnings) > 0 {
		logger(r).Warn().Strs("warnings", warnings).Str("cluster", name).Msg("Kubeconfig accepted with warnings")
	}
	sealedConfig, err := a.Credentials.Seal([]byte(kubeconfig), store.CredentialsAssociatedData(teamID, name))
	if errors.Is(err, sealed.ErrNoKey) {
		server.WriteError(w, http.StatusServiceUnavailable, "credentials_key_missing",
			"no encryption key for stored credentials is configured, so a kubeconfig cannot be stored; set encryption.key_file"+orElse)
		return "", nil, false
	}
	if err != nil {
		internalError(w, r, err)
		return "", nil, false
	}
	return sealedConfig, warnings, true
}

// validateKubeconfig refuses text that is not a kubeconfig with a usable current
// context, so a typo is reported now rather than at the first change, and anything
// beyond inline credentials (kube.LoadKubeconfig): the service would run a team's
// exec plugin or read a file it names on its own host, or send the team's
// credentials over TLS it does not verify unless opts allow it (then warned).
func validateKubeconfig(b []byte, opts kube.KubeconfigOptions) (warnings []string, err error) {
	cfg, warnings, err := kube.LoadKubeconfigWith(b, opts)
	var refused *kube.KubeconfigError
	if errors.As(err, &refused) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig does not parse: %w", err)
	}
	if cfg.CurrentContext == "" {
		return nil, errors.New("kubeconfig has no current-context")
	}
	if _, err := clientcmd.NewNonInteractiveClientConfig(*cfg, "", &clientcmd.ConfigOverrides{}, nil).ClientConfig(); err != nil {
		return nil, fmt.Errorf("kubeconfig is not usable: %w", err)
	}
	return warnings, nil
}

// listClusters answers GET /api/v1/clusters. Credentials are never listed.
func (a *API) listClusters(w http.ResponseWriter, r *http.Request) {
	list, err := a.Store.ListClusters(r.Context(), team(r).ID)
	if err != nil {
		internalError(w, r, err)
		return
	}
	out := make([]Cluster, len(list))
	for i, c := range list {
		out[i] = Cluster{Name: c.Name, Access: string(c.Access), CreatedAt: c.CreatedAt}
	}
	server.WriteJSON(w, http.StatusOK, ClusterList{Clusters: out})
}

// ClusterList answers GET /api/v1/clusters.
type ClusterList struct {
	Clusters []Cluster `json:"clusters"`
}

// Repository statuses shown to people.
const (
	StatusConnected       = "connected"
	StatusPendingApproval = "pending_approval"
	StatusNotInstalled    = "not_installed"
	StatusRevoked         = "revoked"
	StatusSuspended       = "suspended"
	StatusInstallable     = "installable"
)

// RepoConnection is a repository connected (or, among suggestions, connectable) to
// a cluster, with its status as it stands now and why.
type RepoConnection struct {
	Repo      string    `json:"repo"`
	FullName  string    `json:"full_name"`
	Status    string    `json:"status"`
	Reason    string    `json:"reason,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// ConnectRequest is the body of POST /api/v1/clusters/{cluster}/repos.
type ConnectRequest struct {
	Repo string `json:"repo"`
}

// RepoNotInstalledError is the repo_not_installed answer of connecting a repository:
// an error that also carries the install link.
type RepoNotInstalledError struct {
	server.ErrorBody
	InstallURL string `json:"install_url"`
}

// connectRepo answers POST /api/v1/clusters/{cluster}/repos. Only a repository the
// team's installation can see is connected; when the team's installation still
// waits for an owner's approval the connection is recorded as pending_approval.
func (a *API) connectRepo(w http.ResponseWriter, r *http.Request) {
	var req ConnectRequest
	if !server.DecodeJSON(w, r, &req) || !a.requireApp(w) {
		return
	}
	c, ok := a.cluster(w, r)
	if !ok {
		return
	}
	repo, err := a.parseRepo(req.Repo)
	if err != nil {
		server.WriteError(w, http.StatusBadRequest, "invalid_repo", err.Error())
		return
	}
	t := team(r)
	access, err := a.repoAccess(r, t.ID, repo, true)
	if err != nil {
		internalError(w, r, err)
		return
	}
	status := store.ConnectionConnected
	switch access.status {
	case StatusConnected:
	case StatusPendingApproval:
		status = store.ConnectionPendingApproval
	case StatusSuspended:
		server.WriteError(w, http.StatusForbidden, "installation_suspended",
			fmt.Sprintf("the app installation that can see %s is suspended on GitHub; ask an owner to unsuspend it", repo.FullName()))
		return
	default:
		server.WriteJSON(w, http.StatusForbidden, RepoNotInstalledError{
			ErrorBody: server.ErrorBody{Error: "repo_not_installed", Reason: fmt.Sprintf(
				"your team's GitHub App installation cannot see %s: install the app on %s or add the repository to the installation, then connect it again (%s)",
				repo.FullName(), repo.Owner, a.App.InstallURL(""))},
			InstallURL: a.App.InstallURL(""),
		})
		return
	}
	conn, created, err := a.Store.ConnectRepo(r.Context(), c.ID, repo.URL(), status)
	if err != nil {
		internalError(w, r, err)
		return
	}
	a.audit(r, store.AuditEvent{TeamID: t.ID, Actor: "team:" + t.Name, Action: "repo_connection.connect", SubjectType: "repo_connection",
		SubjectID: conn.ID, Detail: mustJSON(map[string]string{"cluster": c.Name, "repo": conn.Repo, "status": string(conn.Status)})})
	code := http.StatusOK
	switch {
	case status == store.ConnectionPendingApproval:
		code = http.StatusAccepted
	case created:
		code = http.StatusCreated
	}
	out := RepoConnection{Repo: conn.Repo, FullName: repo.FullName(), Status: string(conn.Status), UpdatedAt: conn.UpdatedAt}
	if status == store.ConnectionPendingApproval {
		out.Reason = "your team's installation request waits for an organization owner's approval"
	}
	server.WriteJSON(w, code, out)
}

// access is what the team's installations allow for one repository.
type access struct {
	status       string // StatusConnected (visible to an active installation), pending, suspended, not installed
	installation store.Installation
}

// repoAccess finds the team's installation that can see repo. With refresh, and
// when none of the active installations lists it, their repository lists are read
// again from GitHub first (they may predate a change whose webhook is still queued).
func (a *API) repoAccess(r *http.Request, teamID string, repo github.Repo, refresh bool) (access, error) {
	ctx := r.Context()
	insts, err := a.Store.InstallationsForRepo(ctx, teamID, repo.URL())
	if err != nil {
		return access{}, err
	}
	if len(insts) > 0 && insts[0].Status == store.InstallationActive {
		return access{status: StatusConnected, installation: insts[0]}, nil
	}
	all, err := a.Store.ListInstallations(ctx, teamID)
	if err != nil {
		return access{}, err
	}
	if refresh {
		refreshed := false
		for _, in := range all {
			if in.Status != store.InstallationActive {
				continue
			}
			if _, err := a.refreshRepos(r, in.InstallationID); err != nil {
				logger(r).Warn().Err(err).Int64("installation_id", in.InstallationID).Msg("Refreshing installation repositories failed")
				continue
			}
			refreshed = true
		}
		if refreshed {
			return a.repoAccess(r, teamID, repo, false)
		}
	}
	for _, in := range insts {
		if in.Status == store.InstallationSuspended {
			return access{status: StatusSuspended, installation: in}, nil
		}
	}
	for _, in := range all {
		if in.Status == store.InstallationPendingApproval {
			return access{status: StatusPendingApproval, installation: in}, nil
		}
	}
	return access{status: StatusNotInstalled}, nil
}

// listRepos answers GET /api/v1/clusters/{cluster}/repos with each connection's
// status as it stands now: a connection whose installation was deleted or lost the
// repository shows not_installed or revoked, a suspended one suspended.
func (a *API) listRepos(w http.ResponseWriter, r *http.Request) {
	c, ok := a.cluster(w, r)
	if !ok {
		return
	}
	conns, err := a.Store.ListRepoConnections(r.Context(), c.ID)
	if err != nil {
		internalError(w, r, err)
		return
	}
	out := make([]RepoConnection, 0, len(conns))
	for _, conn := range conns {
		item, err := a.describeConnection(r, c.TeamID, conn)
		if err != nil {
			internalError(w, r, err)
			return
		}
		out = append(out, item)
	}
	server.WriteJSON(w, http.StatusOK, RepoConnectionList{Cluster: c.Name, Repos: out})
}

// RepoConnectionList answers GET /api/v1/clusters/{cluster}/repos.
type RepoConnectionList struct {
	Cluster string           `json:"cluster"`
	Repos   []RepoConnection `json:"repos"`
}

func (a *API) describeConnection(r *http.Request, teamID string, conn store.RepoConnection) (RepoConnection, error) {
	item := RepoConnection{Repo: conn.Repo, Status: string(conn.Status), Reason: conn.StatusReason, UpdatedAt: conn.UpdatedAt}
	repo, err := github.ParseRepoURL(conn.Repo)
	if err != nil {
		return RepoConnection{}, fmt.Errorf("stored connection %s: %w", conn.ID, err)
	}
	item.FullName = repo.FullName()
	if conn.Status != store.ConnectionConnected {
		if conn.Status == store.ConnectionPendingApproval && item.Reason == "" {
			item.Reason = "your team's installation request waits for an organization owner's approval"
		}
		return item, nil
	}
	acc, err := a.repoAccess(r, teamID, repo, false)
	if err != nil {
		return RepoConnection{}, err
	}
	switch acc.status {
	case StatusConnected:
	case StatusSuspended:
		item.Status, item.Reason = StatusSuspended, "the app installation on "+acc.installation.AccountLogin+" is suspended on GitHub"
	default:
		item.Status, item.Reason = StatusNotInstalled, "no active app installation of your team can see this repository any more"
	}
	return item, nil
}

// disconnectRepo answers DELETE /api/v1/clusters/{cluster}/repos?repo=<url>.
func (a *API) disconnectRepo(w http.ResponseWriter, r *http.Request) {
	c, ok := a.cluster(w, r)
	if !ok {
		return
	}
	repo, err := a.parseRepo(r.URL.Query().Get("repo"))
	if err != nil {
		server.WriteError(w, http.StatusBadRequest, "invalid_repo", "name the repository with ?repo=<url or owner/name>: "+err.Error())
		return
	}
	err = a.Store.DisconnectRepo(r.Context(), c.ID, repo.URL())
	if errors.Is(err, store.ErrNotFound) {
		server.WriteError(w, http.StatusNotFound, "repo_not_connected", fmt.Sprintf("%s is not connected to cluster %s", repo.FullName(), c.Name))
		return
	}
	if err != nil {
		internalError(w, r, err)
		return
	}
	t := team(r)
	a.audit(r, store.AuditEvent{TeamID: t.ID, Actor: "team:" + t.Name, Action: "repo_connection.disconnect", SubjectType: "cluster",
		SubjectID: c.ID, Detail: mustJSON(map[string]string{"cluster": c.Name, "repo": repo.URL()})})
	w.WriteHeader(http.StatusNoContent)
}

// suggestRepos answers GET /api/v1/clusters/{cluster}/repos/suggestions: the
// repositories the cluster's Applications deploy from, each with what connecting it
// would take.
func (a *API) suggestRepos(w http.ResponseWriter, r *http.Request) {
	c, ok := a.cluster(w, r)
	if !ok {
		return
	}
	if a.AppRepos == nil {
		server.WriteError(w, http.StatusServiceUnavailable, "suggestions_unavailable", "this server does not read clusters' Applications")
		return
	}
	conns, err := a.Store.ListRepoConnections(r.Context(), c.ID)
	if err != nil {
		internalError(w, r, err)
		return
	}
	byRepo := map[string]store.RepoConnection{}
	for _, conn := range conns {
		byRepo[conn.Repo] = conn
	}
	urls, err := a.AppRepos.RepoURLs(r.Context(), c)
	if err != nil {
		logger(r).Warn().Err(err).Str("cluster", c.Name).Msg("Reading the cluster's Applications failed")
		server.WriteError(w, http.StatusBadGateway, "cluster_unreadable", "the cluster's Applications could not be read: "+err.Error())
		return
	}
	out, skipped, err := a.suggestions(r, c.TeamID, urls, byRepo)
	if err != nil {
		internalError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, RepoSuggestions{Cluster: c.Name, Skipped: skipped, Suggestions: out})
}

// RepoSuggestions answers GET /api/v1/clusters/{cluster}/repos/suggestions.
type RepoSuggestions struct {
	Cluster     string           `json:"cluster"`
	Skipped     []SkippedRepo    `json:"skipped"`
	Suggestions []RepoConnection `json:"suggestions"`
}

// SkippedRepo is an Application's repository URL the suggestions leave out, and why.
type SkippedRepo struct {
	URL    string `json:"url"`
	Reason string `json:"reason"`
}

func (a *API) suggestions(r *http.Request, teamID string, urls []string, byRepo map[string]store.RepoConnection) ([]RepoConnection, []SkippedRepo, error) {
	seen := map[string]bool{}
	out := []RepoConnection{}
	skipped := []SkippedRepo{}
	for _, u := range urls {
		repo, err := a.parseRepo(u)
		if err != nil {
			skipped = append(skipped, SkippedRepo{URL: u, Reason: err.Error()})
			continue
		}
		if seen[repo.URL()] {
			continue
		}
		seen[repo.URL()] = true
		if conn, ok := byRepo[repo.URL()]; ok {
			item, err := a.describeConnection(r, teamID, conn)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, item)
			continue
		}
		acc, err := a.repoAccess(r, teamID, repo, false)
		if err != nil {
			return nil, nil, err
		}
		item := RepoConnection{Repo: repo.URL(), FullName: repo.FullName()}
		switch acc.status {
		case StatusConnected:
			item.Status = StatusInstallable
		default:
			item.Status = acc.status
		}
		out = append(out, item)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Repo < out[j].Repo })
	return out, skipped, nil
}
