package setup

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
)

// TokenRequest is the body of POST /api/v1/internal/tokens.
type TokenRequest struct {
	Cluster string `json:"cluster"`
	Repo    string `json:"repo"`
}

// RepoToken answers POST /api/v1/internal/tokens: the token, shown only here.
type RepoToken struct {
	Token       string            `json:"token"`
	ExpiresAt   time.Time         `json:"expires_at"`
	Repository  string            `json:"repository"`
	Permissions map[string]string `json:"permissions"`
}

// issueToken answers POST /api/v1/internal/tokens {cluster, repo}: an installation
// token limited to that one repository (contents and pull requests, write; one hour
// by GitHub's rule), only when the repository is connected to the caller's cluster
// and the installation that grants access is active. The token is handed over in
// this answer and nowhere else: it is not stored, logged or audited.
func (a *API) issueToken(w http.ResponseWriter, r *http.Request) {
	var req TokenRequest
	if !server.DecodeJSON(w, r, &req) || !a.requireApp(w) {
		return
	}
	t := team(r)
	c, err := a.Store.ClusterByName(r.Context(), t.ID, req.Cluster)
	if errors.Is(err, store.ErrNotFound) {
		server.WriteError(w, http.StatusForbidden, "cluster_not_found", clusteraccess.NoClusterNamed(req.Cluster))
		return
	}
	if err != nil {
		internalError(w, r, err)
		return
	}
	repo, err := a.parseRepo(req.Repo)
	if err != nil {
		server.WriteError(w, http.StatusBadRequest, "invalid_repo", err.Error())
		return
	}
	conn, err := a.Store.RepoConnectionFor(r.Context(), c.ID, repo.URL())
	if errors.Is(err, store.ErrNotFound) {
		a.refuse(w, r, c, repo, "repo_not_connected", fmt.Sprintf("%s is not connected to cluster %s; connect it with POST /api/v1/clusters/%s/repos", repo.FullName(), c.Name, c.Name))
		return
	}
	if err != nil {
		internalError(w, r, err)
		return
	}
	switch conn.Status {
	case store.ConnectionConnected:
	case store.ConnectionRevoked:
		a.refuse(w, r, c, repo, "connection_revoked", fmt.Sprintf("the connection of %s to %s was revoked: %s", repo.FullName(), c.Name, conn.StatusReason))
		return
	default:
		a.refuse(w, r, c, repo, "connection_pending_approval", fmt.Sprintf("the connection of %s to %s waits for an organization owner to approve the app", repo.FullName(), c.Name))
		return
	}
	acc, err := a.repoAccess(r, t.ID, repo, false)
	if err != nil {
		internalError(w, r, err)
		return
	}
	switch acc.status {
	case StatusConnected:
	case StatusSuspended:
		a.refuse(w, r, c, repo, "installation_suspended", fmt.Sprintf("the app installation on %s is suspended on GitHub", acc.installation.AccountLogin))
		return
	default:
		a.refuse(w, r, c, repo, "installation_missing", fmt.Sprintf("no active app installation of your team can access %s (deleted, or the repository was removed from it)", repo.FullName()))
		return
	}

	tok, err := a.GitHub.MintRepoToken(r.Context(), acc.installation.InstallationID, repo)
	if err != nil {
		var ghErr *gh.ErrorResponse
		switch {
		case errors.Is(err, github.ErrInstallationNotFound):
			a.refuse(w, r, c, repo, "installation_missing", "GitHub no longer knows the app installation that granted access to "+repo.FullName())
		case errors.As(err, &ghErr) && ghErr.Response != nil && ghErr.Response.StatusCode == http.StatusForbidden:
			a.refuse(w, r, c, repo, "installation_suspended", "GitHub refused a token for "+repo.FullName()+": "+ghErr.Message)
		case errors.As(err, &ghErr) && ghErr.Response != nil && ghErr.Response.StatusCode == http.StatusUnprocessableEntity:
			a.refuse(w, r, c, repo, "installation_missing", "GitHub says the installation cannot access "+repo.FullName()+": "+ghErr.Message)
		default:
			logger(r).Error().Err(err).Str("repo", repo.URL()).Msg("Minting installation token failed")
			server.WriteError(w, http.StatusBadGateway, "github_unavailable", "GitHub did not issue a token; retry later")
		}
		return
	}
	a.audit(r, store.AuditEvent{TeamID: t.ID, Actor: "team:" + t.Name, Action: "token.issue", SubjectType: "repo_connection",
		SubjectID: conn.ID, Detail: mustJSON(map[string]string{
			"cluster": c.Name, "repo": repo.URL(), "installation_id": strconv.FormatInt(tok.Installation, 10),
			"expires_at": tok.ExpiresAt.UTC().Format(time.RFC3339),
		})})
	logger(r).Info().Str("repo", repo.URL()).Str("cluster", c.Name).Time("expires_at", tok.ExpiresAt).Msg("Installation token issued")
	w.Header().Set("Cache-Control", "no-store")
	server.WriteJSON(w, http.StatusCreated, RepoToken{
		Token: tok.Value.Reveal(), ExpiresAt: tok.ExpiresAt, Repository: tok.Repository, Permissions: tok.Permissions,
	})
}

// refuse answers 403 with the reason and records the refusal.
func (a *API) refuse(w http.ResponseWriter, r *http.Request, c store.Cluster, repo github.Repo, code, reason string) {
	t := team(r)
	logger(r).Warn().Str("repo", repo.URL()).Str("cluster", c.Name).Str("reason", code).Msg("Installation token refused")
	a.audit(r, store.AuditEvent{TeamID: t.ID, Actor: "team:" + t.Name, Action: "token.refuse", SubjectType: "cluster",
		SubjectID: c.ID, Detail: mustJSON(map[string]string{"cluster": c.Name, "repo": repo.URL(), "error": code})})
	server.WriteError(w, http.StatusForbidden, code, reason)
}
