// Package web serves the pages a person opens from GitHub: one server-rendered page
// per change (its check run's details link), with its request, decision, warnings,
// git diff, per-app cluster diff, history and deployment state, and one per check of
// a pull request the service did not open (the details link of its kukie/render and
// kukie/policy runs), with the pull request, the outcome, the policy's findings at
// their manifest lines, what was not checked, the changed files, the whole masked
// cluster diff per app and the earlier checks of the pull request. Plain HTML from
// html/template with one embedded stylesheet; nothing needs JavaScript.
//
// A person signs in with GitHub through the App's OAuth client (the web application
// flow): the OAuth state is bound to the browser by a sealed cookie, and the session
// is a sealed, expiring cookie holding their login and user access token. A page is
// shown only when GitHub, asked with that person's token, says they can read the
// repository of its change or check; anyone else, like a page that does not exist,
// gets the same "not found or no access" page, so a page never tells who may not read
// it that the change or check exists.
//
// Each signed-in person's pages are limited (Deps.PageLimit, by login), since each
// asks GitHub with their token; past it the answer is 429 with Retry-After and a
// page saying when to come back.
//
// The package only reads: changes and checks from the store, access from GitHub; at
// sign-out it has GitHub revoke the person's token, so a copy of the session cookie
// stops working. It must not
// show a Secret value (diffs are render's, masked, and a Secret's diff is reduced to
// the fields that change), nor log or render a user's token or an authorization code.
package web

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/prcheck"
	"github.com/kukie/kukie-gitops/ratelimit"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
)

// Paths of the pages.
const (
	// ChangePathPrefix + code is a change's page, the check run's details link.
	ChangePathPrefix = plan.ChangePagePath
	// CheckPathPrefix + id is the page of a check of a pull request the service did
	// not open, that check run's details link.
	CheckPathPrefix = prcheck.CheckPagePath
	// CallbackPath is where GitHub sends the browser back after sign-in; the App
	// needs it among its callback URLs.
	CallbackPath = "/auth/github/callback"
	signOutPath  = "/auth/signout"
	stylePath    = "/assets/style.css"
)

// ChangeURL is the page of the change code on the service at publicURL.
func ChangeURL(publicURL, code string) string {
	return strings.TrimSuffix(publicURL, "/") + ChangePathPrefix + url.PathEscape(code)
}

// SignIn is the App's OAuth client: *github.UserInstallations.
type SignIn interface {
	AuthCodeURL(state, redirectURI string) string
	ExchangeCode(ctx context.Context, code secret.Secret) (secret.Secret, error)
	UserLogin(ctx context.Context, userToken secret.Secret) (string, error)
	CanReadRepository(ctx context.Context, userToken secret.Secret, fullName string) (bool, error)
	// RevokeToken makes a person's token unusable, at sign-out.
	RevokeToken(ctx context.Context, userToken secret.Secret) error
}

// Plans is what the pages read from the store.
type Plans interface {
	PlanByCode(ctx context.Context, code string) (store.Plan, error)
	PlanEvents(ctx context.Context, code string) ([]store.PlanEvent, error)
}

// Checks is what the check pages read from the store.
type Checks interface {
	PullCheckByID(ctx context.Context, id string) (store.PullCheck, error)
	PullChecksOf(ctx context.Context, repo, key string) ([]store.PullCheck, error)
}

// Deps is what the pages need.
type Deps struct {
	Plans Plans
	// Checks serves the check pages; without it they are not found.
	Checks Checks
	// SignIn is nil when the App's client id and secret are not configured; the
	// pages then say that sign-in is not set up.
	SignIn SignIn
	// PublicURL is server.public_url, the base of the callback URL; without it the
	// pages say that sign-in is not set up.
	PublicURL string
	// SessionKey seals the cookies (32 bytes, see SessionKey); required with SignIn.
	SessionKey []byte
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// PageLimit, when set, limits how often each signed-in person (by login) may
	// open change and check pages, each of which asks GitHub with their token
	// whether they may read its repository.
	PageLimit *ratelimit.Limiter
}

// Pages serves the web pages.
type Pages struct {
	plans     Plans
	checks    Checks
	signIn    SignIn
	publicURL string
	secure    bool
	sealer    sealer
	// origins refuses a cross-site POST (a form of another site signing a person
	// out), by the browser's Sec-Fetch-Site or Origin.
	origins *http.CrossOriginProtection
	now     func() time.Time
	// unavailable says why sign-in cannot work, "" when it can.
	unavailable string
	pages       *template.Template
	pageLimit   *ratelimit.Limiter
}

//go:embed templates/*.html style.css
var assets embed.FS

// parsePages parses the page templates. New does, not the package's
// initialisation: every process of the binary initialises this package, and
// the commands that serve no page (the offline plan above all, whose whole
// process is a few tens of milliseconds) should not pay for parsing them.
func parsePages() (*template.Template, error) {
	return template.New("").Funcs(template.FuncMap{
		"diffLines": diffLines,
		"when":      func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	}).ParseFS(assets, "templates/*.html")
}

// New builds the pages.
func New(d Deps) (*Pages, error) {
	pages, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("web pages: templates: %w", err)
	}
	p := &Pages{plans: d.Plans, checks: d.Checks, signIn: d.SignIn, publicURL: strings.TrimSuffix(d.PublicURL, "/"), now: d.Now,
		origins: http.NewCrossOriginProtection(), pageLimit: d.PageLimit, pages: pages}
	if p.now == nil {
		p.now = time.Now
	}
	switch {
	case d.SignIn == nil:
		p.unavailable = "Sign-in with GitHub is not set up: the service needs the GitHub App's client id and client secret."
	case p.publicURL == "":
		p.unavailable = "Sign-in with GitHub is not set up: the service needs its public URL (server.public_url)."
	default:
		u, err := url.Parse(p.publicURL)
		if err != nil {
			return nil, fmt.Errorf("web pages: public url: %w", err)
		}
		p.secure = u.Scheme == "https"
		// Behind a proxy the request's Host may not be the public one the browser
		// names as the Origin of the service's own sign-out button.
		if err := p.origins.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
			return nil, fmt.Errorf("web pages: public url: %w", err)
		}
		if p.sealer, err = newSealer(d.SessionKey); err != nil {
			return nil, fmt.Errorf("web pages: %w", err)
		}
	}
	return p, nil
}

// routes are the pages' routes.
func (p *Pages) routes() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		"GET " + ChangePathPrefix + "{code}": p.change,
		"GET " + CheckPathPrefix + "{id}":    p.check,
		"GET " + CallbackPath:                p.callback,
		"POST " + signOutPath:                p.signOut,
		"GET " + stylePath:                   p.style,
	}
}

// Mount adds the pages' routes to srv. None takes a team token: the pages have their
// own sign-in. The sign-in callback (which has GitHub exchange the code for a token)
// and sign-out (which has GitHub revoke it) are limited per client address, since
// anyone may call them. The change and check pages are limited per signed-in person
// (Deps.PageLimit) rather than per address, so colleagues behind one proxy do not
// hold one another back; without a session they only send the browser to sign in,
// which reads nothing and asks GitHub nothing, and the sign-in then comes back
// through the callback's limit.
func (p *Pages) Mount(srv *server.Server) {
	for pattern, h := range p.routes() {
		if pattern == "GET "+CallbackPath || pattern == "POST "+signOutPath {
			srv.HandleFunc(pattern, h, server.LimitPerClient())
			continue
		}
		srv.HandleFunc(pattern, h)
	}
}

// ServeHTTP serves the pages' routes alone, without the server's middleware.
func (p *Pages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mux := http.NewServeMux()
	for pattern, h := range p.routes() {
		mux.HandleFunc(pattern, h)
	}
	mux.ServeHTTP(w, r)
}

// change serves a change's page to a person who may read its repository.
func (p *Pages) change(w http.ResponseWriter, r *http.Request) {
	s, ok := p.session(w, r)
	if !ok || !p.allowPage(w, s) {
		return
	}
	ctx := r.Context()
	pl, err := p.plans.PlanByCode(ctx, r.PathValue("code"))
	if errors.Is(err, store.ErrNotFound) {
		p.notFound(w)
		return
	}
	if err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Msg("Read the change for its page")
		p.message(w, http.StatusInternalServerError, "Something went wrong", "The change could not be read; try again.")
		return
	}
	if pl.Repo == "" {
		// A change refused before it reached a repository: no one can be shown to
		// read it, and its team's people use the API.
		p.notFound(w)
		return
	}
	if !p.mayRead(w, r, s, pl.Repo) {
		return
	}
	events, err := p.plans.PlanEvents(ctx, pl.Code)
	if err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Msg("Read the change's history for its page")
		p.message(w, http.StatusInternalServerError, "Something went wrong", "The change's history could not be read; try again.")
		return
	}
	p.render(w, http.StatusOK, "change.html", changePage(pl, events, s.Login))
}

// check serves the page of a pull request's check to a person who may read its
// repository.
func (p *Pages) check(w http.ResponseWriter, r *http.Request) {
	s, ok := p.session(w, r)
	if !ok || !p.allowPage(w, s) {
		return
	}
	ctx := r.Context()
	if p.checks == nil {
		p.notFound(w)
		return
	}
	c, err := p.checks.PullCheckByID(ctx, r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		p.notFound(w)
		return
	}
	if err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Msg("Read the check for its page")
		p.message(w, http.StatusInternalServerError, "Something went wrong", "The check could not be read; try again.")
		return
	}
	if !p.mayRead(w, r, s, c.Repo) {
		return
	}
	history, err := p.checks.PullChecksOf(ctx, c.Repo, c.Key)
	if err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Msg("Read the pull request's checks for a check's page")
		p.message(w, http.StatusInternalServerError, "Something went wrong", "The pull request's checks could not be read; try again.")
		return
	}
	v, err := checkPage(c, history, s.Login)
	if err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Str("check", c.ID).Msg("Read the check's stored result")
		p.message(w, http.StatusInternalServerError, "Something went wrong", "The check's result could not be read.")
		return
	}
	p.render(w, http.StatusOK, "check.html", v)
}

// session is the signed-in person of r; without a live session it starts a
// sign-in (or says sign-in is not set up) and reports false.
func (p *Pages) session(w http.ResponseWriter, r *http.Request) (session, bool) {
	if p.unavailable != "" {
		p.message(w, http.StatusServiceUnavailable, "Sign-in unavailable", p.unavailable)
		return session{}, false
	}
	var s session
	if !p.open(r, sessionCookie, &s) || !p.now().Before(s.Expires) {
		p.startSignIn(w, r)
		return session{}, false
	}
	return s, true
}

// allowPage takes one of the person's pages (Deps.PageLimit), before the store or
// GitHub is asked anything; past the limit it has answered 429 with Retry-After and
// a page saying when to come back.
func (p *Pages) allowPage(w http.ResponseWriter, s session) bool {
	var refused *ratelimit.RefusedError
	if err := p.pageLimit.Allow(s.Login); errors.As(err, &refused) {
		w.Header().Set("Retry-After", strconv.Itoa(refused.RetryAfterSeconds()))
		p.message(w, http.StatusTooManyRequests, "Too many pages", fmt.Sprintf(
			"You opened more of this service's pages than it shows one person at a time (%d at once, %d a minute). Open this page again in %d s.",
			refused.Burst, refused.PerMinute, refused.RetryAfterSeconds()))
		return false
	}
	return true
}

// mayRead reports whether GitHub says the person of s can read repo; otherwise it
// has answered: not found, a new sign-in for a token GitHub refuses, or an error.
func (p *Pages) mayRead(w http.ResponseWriter, r *http.Request, s session, repo string) bool {
	ok, err := p.signIn.CanReadRepository(r.Context(), secret.New(s.Token), repo)
	switch {
	case errors.Is(err, github.ErrUserTokenRejected):
		// Revoked, or expired before the session: sign in again.
		p.startSignIn(w, r)
		return false
	case err != nil:
		zerolog.Ctx(r.Context()).Error().Err(err).Str("repo", repo).Msg("Ask GitHub whether the person can read the repository")
		p.message(w, http.StatusBadGateway, "GitHub did not answer", "GitHub could not be asked whether you can read this repository; try again.")
		return false
	case !ok:
		p.notFound(w)
		return false
	}
	return true
}

// startSignIn sends the browser to GitHub with a new state, remembered in the state
// cookie with the page to come back to.
func (p *Pages) startSignIn(w http.ResponseWriter, r *http.Request) {
	state, err := randomState()
	if err == nil {
		var sealed string
		if sealed, err = p.sealer.seal(stateCookie, signIn{State: state, ReturnTo: r.URL.Path, Expires: p.now().Add(stateLifetime)}); err == nil {
			http.SetCookie(w, p.cookie(stateCookie, sealed, p.now().Add(stateLifetime)))
			http.SetCookie(w, p.cookie(sessionCookie, "", time.Time{}))
			// Each answer of a sign-in sets the browser's own cookies: no cache on the
			// way may keep it for another.
			w.Header().Set("Cache-Control", "no-store")
			http.Redirect(w, r, p.signIn.AuthCodeURL(state, p.publicURL+CallbackPath), http.StatusSeeOther)
			return
		}
	}
	zerolog.Ctx(r.Context()).Error().Err(err).Msg("Start a sign-in")
	p.message(w, http.StatusInternalServerError, "Something went wrong", "The sign-in could not be started; try again.")
}

// callback finishes a sign-in: the state must be the one this browser was sent
// with (else someone else's sign-in is being planted on it: login CSRF), then the
// code becomes the person's token, kept only in the sealed session cookie.
func (p *Pages) callback(w http.ResponseWriter, r *http.Request) {
	if p.unavailable != "" {
		p.message(w, http.StatusServiceUnavailable, "Sign-in unavailable", p.unavailable)
		return
	}
	var pending signIn
	state := r.URL.Query().Get("state")
	if !p.open(r, stateCookie, &pending) || !p.now().Before(pending.Expires) || state == "" ||
		subtle.ConstantTimeCompare([]byte(state), []byte(pending.State)) != 1 {
		http.SetCookie(w, p.cookie(stateCookie, "", time.Time{}))
		p.message(w, http.StatusBadRequest, "Sign-in not completed",
			"This sign-in was not started in this browser, or it took too long. Open the page you wanted again to sign in.")
		return
	}
	// The state is spent whatever happens next.
	http.SetCookie(w, p.cookie(stateCookie, "", time.Time{}))
	if e := r.URL.Query().Get("error"); e != "" {
		p.message(w, http.StatusForbidden, "Sign-in not completed", "GitHub did not sign you in"+oauthErrorCode(e)+".")
		return
	}
	ctx := r.Context()
	token, err := p.signIn.ExchangeCode(ctx, secret.New(r.URL.Query().Get("code")))
	if errors.Is(err, github.ErrBadVerificationCode) {
		p.message(w, http.StatusBadRequest, "Sign-in not completed", "GitHub refused the sign-in code: it expired or was used already. Open the page again to sign in.")
		return
	}
	var login string
	if err == nil {
		login, err = p.signIn.UserLogin(ctx, token)
	}
	if err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Msg("Finish a sign-in with GitHub")
		p.message(w, http.StatusBadGateway, "Sign-in not completed", "GitHub could not complete the sign-in; try again.")
		return
	}
	expires := p.now().Add(SessionLifetime)
	sealed, err := p.sealer.seal(sessionCookie, session{Login: login, Token: token.Reveal(), Expires: expires})
	if err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Msg("Seal a session")
		p.message(w, http.StatusInternalServerError, "Something went wrong", "The sign-in could not be completed; try again.")
		return
	}
	http.SetCookie(w, p.cookie(sessionCookie, sealed, expires))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, localPath(pending.ReturnTo), http.StatusSeeOther)
}

// oauthErrorCode is " (code)" when e has the shape of an OAuth error code
// (access_denied, redirect_uri_mismatch, application_suspended: lower-case
// letters and underscores), else nothing: the parameter comes from the address
// bar, so any other text, of any length, is not GitHub's and is not shown.
func oauthErrorCode(e string) string {
	if len(e) > maxOAuthErrorCode {
		return ""
	}
	for _, c := range e {
		if (c < 'a' || c > 'z') && c != '_' {
			return ""
		}
	}
	return " (" + e + ")"
}

// maxOAuthErrorCode bounds a shown error code; GitHub's are under 30 characters.
const maxOAuthErrorCode = 64

// localPath is path when it names a page of this service, else the root: a return
// address never leads off the site.
func localPath(path string) string {
	if (strings.HasPrefix(path, ChangePathPrefix) || strings.HasPrefix(path, CheckPathPrefix)) && !strings.ContainsAny(path, "\\?#") {
		return path
	}
	return "/"
}

func (p *Pages) signOut(w http.ResponseWriter, r *http.Request) {
	if err := p.origins.Check(r); err != nil {
		p.message(w, http.StatusForbidden, "Not signed out", "Signing out takes the sign-out button of this service's own pages.")
		return
	}
	// The session is a cookie the service keeps no record of: a copy of it (a
	// stolen one) would work until it expires, unless GitHub no longer takes its
	// token.
	var s session
	if p.unavailable == "" && p.open(r, sessionCookie, &s) && s.Token != "" {
		if err := p.signIn.RevokeToken(r.Context(), secret.New(s.Token)); err != nil {
			zerolog.Ctx(r.Context()).Error().Err(err).Str("login", s.Login).Msg("Revoke the token of a signed-out session")
		}
	}
	http.SetCookie(w, p.cookie(sessionCookie, "", time.Time{}))
	p.message(w, http.StatusOK, "Signed out", "You are signed out of this service. GitHub keeps you signed in there.")
}

func (p *Pages) style(w http.ResponseWriter, _ *http.Request) {
	css, err := assets.ReadFile("style.css")
	if err != nil {
		http.Error(w, "no stylesheet", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_, _ = w.Write(css)
}

// notFound is the one answer for a page that does not exist and one the person may
// not read.
func (p *Pages) notFound(w http.ResponseWriter) {
	p.message(w, http.StatusNotFound, "Not found", "This page does not exist, or your GitHub account cannot read its repository.")
}

type messagePage struct{ Title, Text string }

func (p *Pages) message(w http.ResponseWriter, status int, title, text string) {
	p.render(w, status, "message.html", messagePage{Title: title, Text: text})
}

// render writes a page. Pages are private: never cached, never framed, no scripts,
// no referrer sent on.
func (p *Pages) render(w http.ResponseWriter, status int, name string, data any) {
	var b strings.Builder
	if err := p.pages.ExecuteTemplate(&b, name, data); err != nil {
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}
