package setup

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/textcut"
)

// setup answers GitHub's redirect after an installation, GET
// /github/setup?installation_id=&setup_action=&state=&code=. Every parameter is
// attacker-controlled, so the order of the steps in run matters: the state is
// checked and consumed first, with no call to GitHub; then local checks refuse a
// callback without an authorization code and installations bound to another team;
// only then is GitHub asked, first who the person is, who must be the one GitHub's
// signed installation "created" webhook names as its installer (or as the member
// whose request an owner approved) and must be able to access it (a valid state of
// one's own team must not bind somebody else's installation, nor one a fellow member
// of the organization installed), then to confirm the installation. The binding is
// written afterwards in its own short transaction: no transaction is held while
// GitHub answers.
//
// Each step either passes or returns a *pageError carrying the page that says why
// the callback stopped there; this handler renders whichever page comes back.
func (a *API) setup(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c := &callback{
		a: a, r: r,
		action: q.Get("setup_action"), rawID: q.Get("installation_id"),
		state: secret.New(q.Get("state")), code: secret.New(q.Get("code")),
	}
	c.log = logger(r).With().Str("setup_action", clipParam(c.action)).Str("installation_id_param", clipParam(c.rawID)).Logger()
	status, p, err := c.run()
	if err != nil {
		var pe *pageError
		if !errors.As(err, &pe) {
			// Every step answers with a pageError; anything else is a bug, and the
			// person still gets a page rather than a blank answer.
			pe = c.serverFailed(err, "Setup callback failed", "The server failed to handle the link. Nothing was changed.", "Try again with a fresh install link.")
		}
		status, p = pe.status, pe.page
	}
	a.page(w, status, p)
}

// pageError stops the setup callback: the status and page to answer with. Whatever
// it reports has been logged (and audited) where it was found.
type pageError struct {
	status int
	page   page
}

func (e *pageError) Error() string {
	return fmt.Sprintf("setup callback stopped (%d): %s", e.status, e.page.Title)
}

// callback is one setup callback on its way through the steps; each step adds what
// it learned (the team, the installation id) for the next and for the log.
type callback struct {
	a     *API
	r     *http.Request
	log   zerolog.Logger
	state secret.Secret
	code  secret.Secret

	action, rawID  string
	team           store.Team
	installationID int64
	// user is the person GitHub sent back, once the code is exchanged.
	user github.User
}

// run takes the steps in order and returns the page of a callback that went
// through, or the error of the step that stopped it.
func (c *callback) run() (int, page, error) {
	if !c.a.appConfigured() {
		// A state made while an App was configured stays valid for its next run:
		// it is not consumed by a callback that could confirm nothing.
		return 0, page{}, c.refuse("Setup callback refused: "+ErrGitHubNotConfigured.Error(), http.StatusServiceUnavailable, page{
			Title:   "This service has no GitHub App configured",
			Message: "The installation cannot be bound to a team until the service's operator configures its GitHub App. Nothing was changed.",
			Next:    "Ask the operator to set github.app_id and github.private_key_file and restart the service, then install from a fresh install link.",
		})
	}
	if err := c.consumeState(); err != nil {
		return 0, page{}, err
	}
	if c.action == "request" {
		return c.recordRequest()
	}
	if err := c.knownAction(); err != nil {
		return 0, page{}, err
	}
	if err := c.parseInstallationID(); err != nil {
		return 0, page{}, err
	}
	if err := c.requireCode(); err != nil {
		return 0, page{}, err
	}
	if err := c.notBoundElsewhere(); err != nil {
		return 0, page{}, err
	}
	if err := c.installerCanAccess(); err != nil {
		return 0, page{}, err
	}
	inst, err := c.confirmInstallation()
	if err != nil {
		return 0, page{}, err
	}
	bound, err := c.bind(inst)
	if err != nil {
		return 0, page{}, err
	}
	return http.StatusOK, c.boundPage(inst, bound), nil
}

// consumeState checks and consumes the one-time state, which names the team; no
// call to GitHub comes before it.
func (c *callback) consumeState() error {
	ctx := c.r.Context()
	if !c.state.IsSet() && c.action == "update" {
		return c.updatedOnGitHub()
	}
	if !c.state.IsSet() {
		return c.refuse("Setup callback without state refused", http.StatusBadRequest, page{
			Title:   "This installation link cannot be used",
			Message: "The link you followed has no state, so it cannot be matched to a team. Nothing was changed.",
			Next:    "Ask your team for a fresh install link (POST /api/v1/installations/state) and open it within ten minutes.",
		})
	}
	teamID, err := c.a.Store.ConsumeInstallState(ctx, c.state)
	if errors.Is(err, store.ErrInstallStateInvalid) {
		return c.refuse("Setup callback with an invalid state refused", http.StatusBadRequest, page{
			Title:   "This installation link has expired or was already used",
			Message: "Install links work once and for ten minutes. Nothing was changed.",
			Next:    "Ask your team for a fresh install link and open it right away.",
		})
	}
	if err != nil {
		return c.serverFailed(err, "Consuming install state failed", "The server could not check the link. Nothing was changed.", "Try again in a minute.")
	}
	t, err := c.a.Store.TeamByID(ctx, teamID)
	if err != nil {
		return c.serverFailed(err, "Reading team of install state failed", "The server could not read your team. Nothing was changed.", "Try again with a fresh install link.")
	}
	c.team = t
	c.log = c.log.With().Str("team", t.Name).Logger()
	return nil
}

// updatedOnGitHub answers the redirect GitHub makes after an installation's
// settings were saved there (the App's setup_on_update), as when an owner gives it
// another repository: it carries no state, since it did not start from an install
// link. It changes nothing and asks GitHub nothing, for anyone may send it; the
// installation's own webhook tells the service what changed. Telling the owner the
// link cannot be used would send them for an install link they do not need. The
// page says nothing of the installation, whose id in the link is the caller's.
func (c *callback) updatedOnGitHub() error {
	c.log.Info().Msg("Setup callback of an installation updated on GitHub, without state; nothing to do")
	return &pageError{status: http.StatusOK, page: page{
		Title: "The installation's settings are saved on GitHub",
		Message: "GitHub saved the change to the app's installation. This link carries no install state of a team, so it changes nothing here: " +
			"for an installation connected to a team, the service learns of its repositories from GitHub's own notice.",
		Next: "Nothing more is needed. To connect the installation to a team, open a fresh install link of that team (POST /api/v1/installations/state).",
	}}
}

// recordRequest records setup_action=request: an organization owner must approve
// the installation before it can be bound.
func (c *callback) recordRequest() (int, page, error) {
	t := c.team
	if _, err := c.a.Store.RecordInstallationRequest(c.r.Context(), t.ID); err != nil {
		return 0, page{}, c.serverFailed(err, "Recording installation request failed", "The request could not be recorded.", "Try again with a fresh install link.")
	}
	c.a.audit(c.r, store.AuditEvent{TeamID: t.ID, Actor: "team:" + t.Name, Action: "installation.requested", SubjectType: "team", SubjectID: t.ID})
	c.log.Info().Msg("Installation requested; waiting for an organization owner")
	return http.StatusAccepted, page{
		Title:   "Waiting for approval",
		Message: fmt.Sprintf("Your request to install the app for team %s was sent to the organization's owners.", t.Name),
		Next:    "Once an owner approves it, create a new install link and open it to finish connecting the installation to your team.",
	}, nil
}

// knownAction refuses a setup step other than install and update.
func (c *callback) knownAction() error {
	switch c.action {
	case "install", "update":
		return nil
	}
	return &pageError{status: http.StatusBadRequest, page: page{
		Title:   "Unknown setup step",
		Message: fmt.Sprintf("GitHub sent the setup step %+q, which this service does not know. Nothing was changed.", clipParam(c.action)),
		Next:    "Start again from a fresh install link.",
	}}
}

func (c *callback) parseInstallationID() error {
	id, err := strconv.ParseInt(c.rawID, 10, 64)
	if err != nil || id <= 0 {
		return &pageError{status: http.StatusBadRequest, page: page{
			Title:   "This installation link is incomplete",
			Message: fmt.Sprintf("The installation id %+q is not a valid number. Nothing was changed.", clipParam(c.rawID)),
			Next:    "Start again from a fresh install link.",
		}}
	}
	c.installationID = id
	c.log = c.log.With().Int64("installation_id", id).Logger()
	return nil
}

// requireCode refuses a callback without GitHub's authorization code when the
// installer is to be checked: without it, who came back cannot be known.
func (c *callback) requireCode() error {
	if c.a.Installer == nil || c.code.IsSet() {
		return nil
	}
	return c.refuse("Setup callback without an authorization code refused", http.StatusBadRequest, page{
		Code:    "authorization_code_missing",
		Title:   "GitHub did not say who installed the app",
		Message: "The link has no authorization code from GitHub, so the server cannot check that your GitHub account can access this installation. Nothing was changed.",
		Next:    "Start again from a fresh install link and authorize the app when GitHub asks.",
	})
}

// notBoundElsewhere refuses a known foreign installation before GitHub is asked
// anything.
func (c *callback) notBoundElsewhere() error {
	existing, err := c.a.Store.InstallationByGitHubID(c.r.Context(), c.installationID)
	switch {
	case err == nil && existing.TeamID != c.team.ID:
		return c.taken()
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return c.serverFailed(err, "Reading installation binding failed", "The server could not check the installation. Nothing was changed.", "Try again with a fresh install link.")
	}
	return nil
}

// installerCanAccess exchanges the callback's authorization code for a user access
// token and checks that its person can access the installation. The token lives in
// this call only: it is neither stored nor logged. Without an installer check (a dev
// run without the App's client credentials) it passes, loudly.
func (c *callback) installerCanAccess() error {
	if c.a.Installer == nil {
		c.log.Warn().Msg("INSECURE: binding without checking that the installer can access the installation; " +
			"set github.client_id and the client secret to check it")
		return nil
	}
	ctx := c.r.Context()
	userToken, err := c.a.Installer.ExchangeCode(ctx, c.code)
	switch {
	case errors.Is(err, github.ErrBadVerificationCode):
		c.log.Warn().Err(err).Msg("Setup callback with an authorization code GitHub refused")
		return &pageError{status: http.StatusBadRequest, page: page{
			Code:    "bad_verification_code",
			Title:   "GitHub did not accept the authorization code",
			Message: "The authorization code in the link is wrong, has expired or was already used. Nothing was changed.",
			Next:    "Start again from a fresh install link and open it right away.",
		}}
	case errors.Is(err, github.ErrIncorrectClientCredentials):
		c.log.Error().Err(err).Msg("GitHub refused the app's client credentials; installations cannot be bound until they are fixed")
		return &pageError{status: http.StatusInternalServerError, page: page{
			Code:    "incorrect_client_credentials",
			Title:   "This service is misconfigured",
			Message: "GitHub refused this service's client id or client secret, so it cannot check who you are. Nothing was changed.",
			Next:    "Tell the service's operators: github.client_id and the client secret must be those of the GitHub App.",
		}}
	case err != nil:
		return c.githubUnreachable(err, "Exchanging the authorization code with GitHub failed", "The server could not check who you are with GitHub. Nothing was changed.")
	}
	user, err := c.a.Installer.AuthenticatedUser(ctx, userToken)
	if err != nil {
		return c.githubUnreachable(err, "Reading the installer's GitHub account failed", "The server could not check who you are with GitHub. Nothing was changed.")
	}
	c.user = user
	c.log = c.log.With().Int64("github_user_id", user.ID).Str("github_user", user.Login).Logger()
	if err := c.installedByUser(); err != nil {
		return err
	}
	ok, err := c.a.Installer.CanAccessInstallation(ctx, userToken, c.installationID)
	if err != nil {
		return c.githubUnreachable(err, "Listing the installer's installations failed", "The server could not check which installations your GitHub account can access. Nothing was changed.")
	}
	if !ok {
		c.log.Warn().Msg("Installer cannot access the installation; bind refused")
		c.auditBindRefused("InstallationNotAccessible")
		return &pageError{status: http.StatusForbidden, page: page{
			Code:    "InstallationNotAccessible",
			Title:   "Your GitHub account cannot access this installation",
			Message: "The installation in the link is not one your GitHub account can access, so it cannot be connected to your team. Nothing was changed.",
			Next:    "Install the app on an organization or account you belong to, starting from a fresh install link.",
		}}
	}
	return nil
}

// installedByUser requires the person GitHub sent back to be who created the
// installation, as its signed "created" webhook says: anyone who can see one of an
// organization's repositories can access its installation, and must not be able to
// bind it to their own team.
func (c *callback) installedByUser() error {
	installer, err := c.installer()
	if errors.Is(err, store.ErrNotFound) {
		c.log.Warn().Msg("No installation webhook names the installer yet; bind refused")
		c.auditBindRefused("InstallerUnknown")
		return &pageError{status: http.StatusConflict, page: page{
			Code:  "InstallerUnknown",
			Title: "GitHub has not said who installed the app yet",
			Message: "An installation is connected only for the person GitHub names as its installer, and GitHub's notice of this installation " +
				"has not reached the service. Nothing was changed.",
			Next: "Wait a minute, then open a fresh install link and save the installation's settings again. " +
				"An installation made before this service received GitHub's webhooks must be installed again.",
		}}
	}
	if err != nil {
		return c.serverFailed(err, "Reading the installation's installer failed", "The server could not check who installed the app. Nothing was changed.", "Try again with a fresh install link.")
	}
	if !installer.Installed(c.user.ID) {
		c.log.Warn().Int64("installer_id", installer.SenderID).Msg("The person is not who installed the installation; bind refused")
		c.auditBindRefused("NotTheInstaller")
		return &pageError{status: http.StatusForbidden, page: page{
			Code:  "NotTheInstaller",
			Title: "Only the person who installed the app can connect it",
			Message: fmt.Sprintf("GitHub says somebody other than you (%s) installed the app on this account. An installation is connected to a team "+
				"by the person who installed it, or by the member whose request an owner approved; access to its repositories is not enough. Nothing was changed.",
				c.user.Login),
			Next: "Ask the person who installed the app to open a fresh install link of your team, or install the app on an account you administer.",
		}}
	}
	return nil
}

// installerPoll is how often installer looks for the installation's "created" webhook.
const installerPoll = 200 * time.Millisecond

// installer is who created the installation, waiting up to InstallerWait for the
// webhook that says so to be handled.
func (c *callback) installer() (store.Installer, error) {
	ctx := c.r.Context()
	wait := c.a.InstallerWait
	if wait == 0 {
		wait = DefaultInstallerWait
	}
	deadline := time.Now().Add(wait)
	for {
		in, err := c.a.Store.InstallerOf(ctx, c.installationID)
		if !errors.Is(err, store.ErrNotFound) || !time.Now().Add(installerPoll).Before(deadline) {
			return in, err
		}
		t := time.NewTimer(installerPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return in, err
		case <-t.C:
		}
	}
}

// confirmInstallation asks GitHub, with the App's own credentials, for the
// installation and its account.
func (c *callback) confirmInstallation() (github.Installation, error) {
	inst, err := c.a.GitHub.Get(c.r.Context(), c.installationID)
	if errors.Is(err, github.ErrInstallationNotFound) {
		return github.Installation{}, c.refuse("Setup callback for an installation GitHub does not know", http.StatusNotFound, page{
			Title:   "GitHub does not know this installation",
			Message: "The installation was not found for this app; it may have been removed. Nothing was changed.",
			Next:    "Install the app again from a fresh install link.",
		})
	}
	if err != nil {
		return github.Installation{}, c.githubUnreachable(err, "Confirming installation with GitHub failed", "The installation could not be confirmed with GitHub. Nothing was changed.")
	}
	return inst, nil
}

// bind writes the binding; the unique installation id makes a second team's
// concurrent bind fail as taken.
func (c *callback) bind(inst github.Installation) (store.Installation, error) {
	t := c.team
	bound, err := c.a.Store.BindInstallation(c.r.Context(), t.ID, store.BoundInstallation{
		InstallationID: inst.ID, AccountLogin: inst.AccountLogin, AccountType: inst.AccountType, Suspended: inst.Suspended,
	})
	if errors.Is(err, store.ErrInstallationTaken) {
		return store.Installation{}, c.taken()
	}
	if err != nil {
		return store.Installation{}, c.serverFailed(err, "Binding installation failed", "The installation could not be saved. Nothing was changed.", "Try again with a fresh install link.")
	}
	c.a.audit(c.r, store.AuditEvent{TeamID: t.ID, Actor: "team:" + t.Name, Action: "installation.bound", SubjectType: "installation",
		SubjectID: strconv.FormatInt(inst.ID, 10), Detail: mustJSON(map[string]any{"account": inst.AccountLogin, "setup_action": c.action, "installer": c.user.Login})})
	c.log.Info().Str("account", inst.AccountLogin).Msg("Installation bound to team")
	return bound, nil
}

// boundPage reads the installation's repositories and says what is now connected.
// The binding stands on its own; the repository list is refreshed after it and,
// should this fail, again when a repository is connected.
func (c *callback) boundPage(inst github.Installation, bound store.Installation) page {
	t := c.team
	note := ""
	if n, err := c.a.refreshRepos(c.r, inst.ID); err != nil {
		c.log.Warn().Err(err).Msg("Reading the installation's repositories failed")
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
	return p
}

func (c *callback) taken() *pageError {
	// The request's logger, not the callback's: this line names the installation
	// and the team itself.
	logger(c.r).Warn().Int64("installation_id", c.installationID).Str("team", c.team.Name).Msg("Installation is bound to another team; bind refused")
	c.auditBindRefused("InstallationTaken")
	return &pageError{status: http.StatusConflict, page: page{
		Code:    "InstallationTaken",
		Title:   "This installation belongs to another team",
		Message: "The app installation you chose is already connected to a different team. One installation serves one team. Nothing was changed.",
		Next:    "Ask that team to share access, or install the app on another organization or account.",
	}}
}

func (c *callback) auditBindRefused(code string) {
	t := c.team
	c.a.audit(c.r, store.AuditEvent{TeamID: t.ID, Actor: "team:" + t.Name, Action: "installation.bind_refused", SubjectType: "installation",
		SubjectID: strconv.FormatInt(c.installationID, 10), Detail: mustJSON(map[string]string{"error": code})})
}

// refuse logs why the callback was refused and returns the page saying so.
func (c *callback) refuse(why string, status int, p page) *pageError {
	c.log.Warn().Msg(why)
	return &pageError{status: status, page: p}
}

// serverFailed logs err and returns the page saying that the server failed at the
// step message names, with next saying what the person can do.
func (c *callback) serverFailed(err error, logMsg, message, next string) *pageError {
	c.log.Error().Err(err).Msg(logMsg)
	return &pageError{status: http.StatusServiceUnavailable, page: page{Title: "Something went wrong", Message: message, Next: next}}
}

// githubUnreachable logs err and returns the page saying that GitHub could not be
// asked what message names.
func (c *callback) githubUnreachable(err error, logMsg, message string) *pageError {
	c.log.Error().Err(err).Msg(logMsg)
	return &pageError{status: http.StatusBadGateway, page: page{
		Title:   "GitHub could not be reached",
		Message: message,
		Next:    "Try again in a few minutes with a fresh install link.",
	}}
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
	return fmt.Sprintf("%s (%d bytes)", textcut.Cut(s, maxParamEcho), len(s))
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
