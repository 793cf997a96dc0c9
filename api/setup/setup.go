package setup

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
)

func logger(r *http.Request) *zerolog.Logger { return zerolog.Ctx(r.Context()) }

// InstallState answers POST /api/v1/installations/state.
type InstallState struct {
	State      string    `json:"state"`
	InstallURL string    `json:"install_url"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// createInstallState answers POST /api/v1/installations/state: a one-time state for
// the caller's team and the link that installs the App with it.
func (a *API) createInstallState(w http.ResponseWriter, r *http.Request) {
	if !a.requireApp(w) {
		return
	}
	ttl := a.StateTTL
	if ttl <= 0 {
		ttl = DefaultStateTTL
	}
	t := team(r)
	state, expires, err := a.Store.CreateInstallState(r.Context(), t.ID, ttl)
	if err != nil {
		internalError(w, r, err)
		return
	}
	a.audit(r, store.AuditEvent{TeamID: t.ID, Actor: "team:" + t.Name, Action: "installation.state_created",
		SubjectType: "team", SubjectID: t.ID, Detail: mustJSON(map[string]any{"expires_at": expires})})
	w.Header().Set("Cache-Control", "no-store")
	server.WriteJSON(w, http.StatusCreated, InstallState{
		State: state.Reveal(), InstallURL: a.App.InstallURL(state.Reveal()), ExpiresAt: expires,
	})
}

// Installation is one of the team's GitHub App installations.
type Installation struct {
	InstallationID int64     `json:"installation_id,omitempty"`
	Account        string    `json:"account,omitempty"`
	AccountType    string    `json:"account_type,omitempty"`
	Status         string    `json:"status"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// listInstallations answers GET /api/v1/installations.
func (a *API) listInstallations(w http.ResponseWriter, r *http.Request) {
	if !a.requireApp(w) {
		return
	}
	list, err := a.Store.ListInstallations(r.Context(), team(r).ID)
	if err != nil {
		internalError(w, r, err)
		return
	}
	out := make([]Installation, len(list))
	for i, in := range list {
		out[i] = Installation{InstallationID: in.InstallationID, Account: in.AccountLogin, AccountType: in.AccountType,
			Status: string(in.Status), UpdatedAt: in.UpdatedAt}
	}
	server.WriteJSON(w, http.StatusOK, InstallationList{InstallURL: a.App.InstallURL(""), Installations: out})
}

// InstallationList answers GET /api/v1/installations: the installations and the
// link that installs the App (without a team's state).
type InstallationList struct {
	InstallURL    string         `json:"install_url"`
	Installations []Installation `json:"installations"`
}

// refreshRepos reads the installation's repositories from GitHub and stores them,
// returning how many there are.
func (a *API) refreshRepos(r *http.Request, installationID int64) (int, error) {
	refs, err := a.GitHub.Repositories(r.Context(), installationID, a.WebHost)
	if err != nil {
		return 0, err
	}
	repos := make([]store.InstallationRepo, len(refs))
	for i, ref := range refs {
		repos[i] = store.InstallationRepo{Repo: ref.Repo.URL(), GitHubRepoID: ref.ID}
	}
	if _, err := a.Store.ReplaceInstallationRepos(r.Context(), installationID, repos, ""); err != nil {
		return 0, err
	}
	return len(repos), nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Only maps of plain values are passed; failing to encode one is a bug.
		panic(fmt.Sprintf("encode audit detail: %v", err))
	}
	return b
}
