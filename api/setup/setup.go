package setup

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
)

func logger(r *http.Request) *zerolog.Logger { return zerolog.Ctx(r.Context()) }

type stateResponse struct {
	State      string    `json:"state"`
	InstallURL string    `json:"install_url"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// createInstallState answers POST /api/v1/installations/state: a one-time state for
// the caller's team and the link that installs the App with it.
func (a *API) createInstallState(w http.ResponseWriter, r *http.Request) {
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
	server.WriteJSON(w, http.StatusCreated, stateResponse{
		State: state.Reveal(), InstallURL: a.App.InstallURL(state.Reveal()), ExpiresAt: expires,
	})
}

type installationJSON struct {
	InstallationID int64     `json:"installation_id,omitempty"`
	Account        string    `json:"account,omitempty"`
	AccountType    string    `json:"account_type,omitempty"`
	Status         string    `json:"status"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// listInstallations answers GET /api/v1/installations.
func (a *API) listInstallations(w http.ResponseWriter, r *http.Request) {
	list, err := a.Store.ListInstallations(r.Context(), team(r).ID)
	if err != nil {
		internalError(w, r, err)
		return
	}
	out := make([]installationJSON, len(list))
	for i, in := range list {
		out[i] = installationJSON{InstallationID: in.InstallationID, Account: in.AccountLogin, AccountType: in.AccountType,
			Status: string(in.Status), UpdatedAt: in.UpdatedAt}
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"installations": out, "install_url": a.App.InstallURL("")})
}

// setup answers GitHub's redirect after an installation, GET
// /github/setup?installation_id=&setup_action=&state=&code=. Every parameter is
// attacker-controlled, so the order matters: the state is checked and consumed
// first, with no call to GitHub; then local checks refuse a callback without an
// authorization code and installations bound to another team; only then is GitHub
// asked, first who the person is and whether they can access the installation (a
// valid state of one's own team must not bind somebody else's installation), then to
// confirm the installation. The binding is written afterwards in its own short
// transaction: no transaction is held while GitHub answers.
func (a *API) setup(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	action := q.Get("setup_action")
	rawID := q.Get("installation_id")
	log := logger(r).With().Str("setup_action", clipParam(action)).Str("installation_id_param", clipParam(rawID)).Logger()

	if q.Get("state") == "" {
		a.refusePage(w, log, "Setup callback without state refused", http.StatusBadRequest, page{
			Title:   "This installation link cannot be used",
			Message: "The link you followed has no state, so it cannot be matched to a team. Nothing was changed.",
			Next:    "Ask your team for a fresh install link (POST /api/v1/installations/state) and open it within ten minutes.",
		})
		return
	}
	teamID, err := a.Store.ConsumeInstallState(ctx, secret.New(q.Get("state")))
	if errors.Is(err, store.ErrInstallStateInvalid) {
		a.refusePage(w, log, "Setup callback with an invalid state refused", http.StatusBadRequest, page{
			Title:   "This installation link has expired or was already used",
			Message: "Install links work once and for ten minutes. Nothing was changed.",
			Next:    "Ask your team for a fresh install link and open it right away.",
		})
		return
	}
	if err != nil {
		a.serverFailed(w, log, err, "Consuming install state failed", "The server could not check the link. Nothing was changed.", "Try again in a minute.")
		return
	}
	t, err := a.Store.TeamByID(ctx, teamID)
	if err != nil {
		a.serverFailed(w, log, err, "Reading team of install state failed", "The server could not read your team. Nothing was changed.", "Try again with a fresh install link.")
		return
	}
	log = log.With().Str("team", t.Name).Logger()

	switch action {
	case "request":
		if _, err := a.Store.RecordInstallationRequest(ctx, t.ID); err != nil {
			a.serverFailed(w, log, err, "Recording installation request failed", "The request could not be recorded.", "Try again with a fresh install link.")
			return
		}
		a.audit(r, store.AuditEvent{TeamID: t.ID, Actor: "team:" + t.Name, Action: "installation.requested", SubjectType: "team", SubjectID: t.ID})
		log.Info().Msg("Installation requested; waiting for an organization owner")
		a.page(w, http.StatusAccepted, page{
			Title:   "Waiting for approval",
			Message: fmt.Sprintf("Your request to install the app for team %s was sent to the organization's owners.", t.Name),
			Next:    "Once an owner approves it, create a new install link and open it to finish connecting the installation to your team.",
		})
		return
	case "install", "update":
	default:
		a.page(w, http.StatusBadRequest, page{
			Title:   "Unknown setup step",
			Message: fmt.Sprintf("GitHub sent the setup step %q, which this service does not know. Nothing was changed.", clipParam(action)),
			Next:    "Start again from a fresh install link.",
		})
		return
	}

	installationID, err := strconv.ParseInt(rawID, 10, 64)
	if err != nil || installationID <= 0 {
		a.page(w, http.StatusBadRequest, page{
			Title:   "This installation link is incomplete",
			Message: fmt.Sprintf("The installation id %q is not a valid number. Nothing was changed.", clipParam(rawID)),
			Next:    "Start again from a fresh install link.",
		})
		return
	}
	log = log.With().Int64("installation_id", installationID).Logger()

	code := secret.New(q.Get("code"))
	if a.Installer != nil && !code.IsSet() {
		a.refusePage(w, log, "Setup callback without an authorization code refused", http.StatusBadRequest, page{
			Code:    "authorization_code_missing",
			Title:   "GitHub did not say who installed the app",
			Message: "The link has no authorization code from GitHub, so the server cannot check that your GitHub account can access this installation. Nothing was changed.",
			Next:    "Start again from a fresh install link and authorize the app when GitHub asks.",
		})
		return
	}

	// Refuse a known foreign installation before asking GitHub anything.
	if existing, err := a.Store.InstallationByGitHubID(ctx, installationID); err == nil && existing.TeamID != t.ID {
		a.taken(w, r, t, installationID)
		return
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		a.serverFailed(w, log, err, "Reading installation binding failed", "The server could not check the installation. Nothing was changed.", "Try again with a fresh install link.")
		return
	}

	if a.Installer == nil {
		log.Warn().Msg("INSECURE: binding without checking that the installer can access the installation; " +
			"set github.client_id and the client secret to check it")
	} else if !a.installerCanAccess(w, r, log, t, code, installationID) {
		return
	}

	inst, err := a.GitHub.Get(ctx, installationID)
	if errors.Is(err, github.ErrInstallationNotFound) {
		a.refusePage(w, log, "Setup callback for an installation GitHub does not know", http.StatusNotFound, page{
			Title:   "GitHub does not know this installation",
			Message: "The installation was not found for this app; it may have been removed. Nothing was changed.",
			Next:    "Install the app again from a fresh install link.",
		})
		return
	}
	if err != nil {
		a.githubUnreachable(w, log, err, "Confirming installation with GitHub failed", "The installation could not be confirmed with GitHub. Nothing was changed.")
		return
	}

	bound, err := a.Store.BindInstallation(ctx, t.ID, store.BoundInstallation{
		InstallationID: inst.ID, AccountLogin: inst.AccountLogin, AccountType: inst.AccountType, Suspended: inst.Suspended,
	})
	if errors.Is(err, store.ErrInstallationTaken) {
		a.taken(w, r, t, installationID)
		return
	}
	if err != nil {
		a.serverFailed(w, log, err, "Binding installation failed", "The installation could not be saved. Nothing was changed.", "Try again with a fresh install link.")
		return
	}
	a.audit(r, store.AuditEvent{TeamID: t.ID, Actor: "team:" + t.Name, Action: "installation.bound", SubjectType: "installation",
		SubjectID: strconv.FormatInt(inst.ID, 10), Detail: mustJSON(map[string]any{"account": inst.AccountLogin, "setup_action": action})})
	log.Info().Str("account", inst.AccountLogin).Msg("Installation bound to team")

	// The binding stands on its own; the repository list is refreshed after it and,
	// should this fail, again when a repository is connected.
	note := ""
	if n, err := a.refreshRepos(r, inst.ID); err != nil {
		log.Warn().Err(err).Msg("Reading the installation's repositories failed")
		note = "The list of repositories could not be read yet; it will be read when you connect a repository."
	} else {
		note = fmt.Sprintf("The app can see %d repositories.", n)
	}
	p := page{
		Title:   "The app is installed",
		Message: fmt.Sprintf("The installation on %s is now connected to team %s. %s", inst.AccountLogin, t.Name, note),
		Next:    "Connect repositories to your clusters with POST /api/v1/clusters/{cluster}/repos.",
	}
	if bound.Status == store.InstallationSuspended {
		p.Message = fmt.Sprintf("The installation on %s is connected to team %s, but it is suspended on GitHub.", inst.AccountLogin, t.Name)
		p.Next = "Ask an owner of " + inst.AccountLogin + " to unsuspend the app; nothing can be changed through it until then."
	}
	a.page(w, http.StatusOK, p)
}

// maxParamEcho bounds how much of a callback parameter reaches a log line or a page.
// The callback URL is public and its parameters are whatever the caller sent, as
// large as the request line allows; GitHub's own are a few bytes.
const maxParamEcho = 64

// clipParam shortens an attacker-controlled parameter to maxParamEcho bytes (never
// splitting a character) and says how long it was.
func clipParam(s string) string {
	if len(s) <= maxParamEcho {
		return s
	}
	cut := maxParamEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

// installerCanAccess exchanges the callback's authorization code for a user access
// token and checks that its person can access the installation. On refusal it has
// answered and returns false. The token lives in this call only: it is neither
// stored nor logged.
func (a *API) installerCanAccess(w http.ResponseWriter, r *http.Request, log zerolog.Logger, t store.Team, code secret.Secret, installationID int64) bool {
	ctx := r.Context()
	userToken, err := a.Installer.ExchangeCode(ctx, code)
	switch {
	case errors.Is(err, github.ErrBadVerificationCode):
		log.Warn().Err(err).Msg("Setup callback with an authorization code GitHub refused")
		a.page(w, http.StatusBadRequest, page{
			Code:    "bad_verification_code",
			Title:   "GitHub did not accept the authorization code",
			Message: "The authorization code in the link is wrong, has expired or was already used. Nothing was changed.",
			Next:    "Start again from a fresh install link and open it right away.",
		})
		return false
	case errors.Is(err, github.ErrIncorrectClientCredentials):
		log.Error().Err(err).Msg("GitHub refused the app's client credentials; installations cannot be bound until they are fixed")
		a.page(w, http.StatusInternalServerError, page{
			Code:    "incorrect_client_credentials",
			Title:   "This service is misconfigured",
			Message: "GitHub refused this service's client id or client secret, so it cannot check who you are. Nothing was changed.",
			Next:    "Tell the service's operators: github.client_id and the client secret must be those of the GitHub App.",
		})
		return false
	case err != nil:
		a.githubUnreachable(w, log, err, "Exchanging the authorization code with GitHub failed", "The server could not check who you are with GitHub. Nothing was changed.")
		return false
	}
	ok, err := a.Installer.CanAccessInstallation(ctx, userToken, installationID)
	if err != nil {
		a.githubUnreachable(w, log, err, "Listing the installer's installations failed", "The server could not check which installations your GitHub account can access. Nothing was changed.")
		return false
	}
	if !ok {
		log.Warn().Msg("Installer cannot access the installation; bind refused")
		a.audit(r, store.AuditEvent{TeamID: t.ID, Actor: "team:" + t.Name, Action: "installation.bind_refused", SubjectType: "installation",
			SubjectID: strconv.FormatInt(installationID, 10), Detail: mustJSON(map[string]string{"error": "InstallationNotAccessible"})})
		a.page(w, http.StatusForbidden, page{
			Code:    "InstallationNotAccessible",
			Title:   "Your GitHub account cannot access this installation",
			Message: "The installation in the link is not one your GitHub account can access, so it cannot be connected to your team. Nothing was changed.",
			Next:    "Install the app on an organization or account you belong to, starting from a fresh install link.",
		})
		return false
	}
	return true
}

func (a *API) taken(w http.ResponseWriter, r *http.Request, t store.Team, installationID int64) {
	logger(r).Warn().Int64("installation_id", installationID).Str("team", t.Name).Msg("Installation is bound to another team; bind refused")
	a.audit(r, store.AuditEvent{TeamID: t.ID, Actor: "team:" + t.Name, Action: "installation.bind_refused", SubjectType: "installation",
		SubjectID: strconv.FormatInt(installationID, 10), Detail: mustJSON(map[string]string{"error": "InstallationTaken"})})
	a.page(w, http.StatusConflict, page{
		Code:    "InstallationTaken",
		Title:   "This installation belongs to another team",
		Message: "The app installation you chose is already connected to a different team. One installation serves one team. Nothing was changed.",
		Next:    "Ask that team to share access, or install the app on another organization or account.",
	})
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
	if _, err := a.Store.ReplaceInstallationRepos(r.Context(), installationID, repos); err != nil {
		return 0, err
	}
	return len(repos), nil
}

// page is a small HTML answer for a person in a browser.
type page struct {
	Code    string // stable code, shown small, for support
	Title   string
	Message string
	Next    string
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · kukie-gitops</title>
<style>
body{font-family:system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem;line-height:1.5;color:#1f2328}
h1{font-size:1.5rem}.next{background:#f6f8fa;border-radius:6px;padding:.75rem 1rem}.code{color:#59636e;font-size:.8rem}
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p>{{.Message}}</p>
{{if .Next}}<p class="next">{{.Next}}</p>{{end}}
{{if .Code}}<p class="code">Code: {{.Code}}</p>{{end}}
</body>
</html>
`))

// page writes p. The URL carries the state, so the answer must not leak it through
// a Referer, and must not be cached.
func (a *API) page(w http.ResponseWriter, status int, p page) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = pageTemplate.Execute(w, p)
}

// refusePage logs why a setup callback was refused and answers with p.
func (a *API) refusePage(w http.ResponseWriter, log zerolog.Logger, why string, status int, p page) {
	log.Warn().Msg(why)
	a.page(w, status, p)
}

// serverFailed logs err and answers that the server failed at the step message
// names, with next saying what the person can do.
func (a *API) serverFailed(w http.ResponseWriter, log zerolog.Logger, err error, logMsg, message, next string) {
	log.Error().Err(err).Msg(logMsg)
	a.page(w, http.StatusServiceUnavailable, page{Title: "Something went wrong", Message: message, Next: next})
}

// githubUnreachable logs err and answers that GitHub could not be asked what
// message names.
func (a *API) githubUnreachable(w http.ResponseWriter, log zerolog.Logger, err error, logMsg, message string) {
	log.Error().Err(err).Msg(logMsg)
	a.page(w, http.StatusBadGateway, page{
		Title:   "GitHub could not be reached",
		Message: message,
		Next:    "Try again in a few minutes with a fresh install link.",
	})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Only maps of plain values are passed; failing to encode one is a bug.
		panic(fmt.Sprintf("encode audit detail: %v", err))
	}
	return b
}
