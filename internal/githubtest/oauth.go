package githubtest

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/secret"
)

const (
	// authorizationCodeLifetime is how long GitHub accepts an authorization code.
	authorizationCodeLifetime = 10 * time.Minute
	oauthErrorsDoc            = "/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/"
	// userTokenPrefix marks user access tokens of a GitHub App, as GitHub's do.
	userTokenPrefix = "ghu_"
)

// oauthState is the App's side of GitHub's web application flow: the App's client
// credentials, the people who can authorize it, what they can access, and the codes
// and user access tokens they were given. Guarded by Server.mu.
type oauthState struct {
	clientID     string
	clientSecret string
	// access maps a lower-cased login to the installations the person can access.
	access map[string]map[int64]bool
	codes  map[string]*authorizationCode
	// userTokens maps a user access token to the lower-cased login it acts for.
	userTokens map[string]string
	// callbackURLs are the App's registered callback URLs (AddCallbackURL).
	callbackURLs []string
}

type authorizationCode struct {
	login     string
	expiresAt time.Time
}

func newOAuthState() (*oauthState, error) {
	id, err := randomToken(8)
	if err != nil {
		return nil, fmt.Errorf("generate oauth client id: %w", err)
	}
	sec, err := randomToken(20)
	if err != nil {
		return nil, fmt.Errorf("generate oauth client secret: %w", err)
	}
	return &oauthState{
		clientID:     "Iv1." + id,
		clientSecret: sec,
		access:       map[string]map[int64]bool{},
		codes:        map[string]*authorizationCode{},
		userTokens:   map[string]string{},
	}, nil
}

// ClientID is the App's OAuth client id ("Iv1.…"), as shown on the App's settings page.
func (s *Server) ClientID() string { return s.oauth.clientID }

// ClientSecret is the App's OAuth client secret.
func (s *Server) ClientSecret() secret.Secret { return secret.New(s.oauth.clientSecret) }

// AddUser creates the personal account login (nothing happens if it exists). A person
// needs an account to authorize the App (AuthorizationCode).
func (s *Server) AddUser(login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accountLocked(login, "User")
}

// GrantInstallationAccess lets the person login (created when new) access the
// installation, as owning or being able to access one of its repositories does on
// GitHub; GET /user/installations then lists it for their user access tokens. Access to
// an installation is not otherwise inferred: a test says who can see what.
func (s *Server) GrantInstallationAccess(t TB, login string, installationID int64) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if inst, ok := s.installations[installationID]; !ok || inst.deleted {
		t.Fatalf("grant access: installation %d not found", installationID)
	}
	s.grantAccessLocked(login, installationID)
}

// RevokeInstallationAccess takes the person's access to the installation away, as
// leaving its organization or losing access to its repositories does on GitHub: GET
// /user/installations no longer lists it for them.
func (s *Server) RevokeInstallationAccess(t TB, login string, installationID int64) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.oauth.access[strings.ToLower(login)], installationID)
}

// grantAccessLocked lets login (a user, created when new) access the installation.
func (s *Server) grantAccessLocked(login string, installationID int64) {
	s.accountLocked(login, "User")
	key := strings.ToLower(login)
	if s.oauth.access[key] == nil {
		s.oauth.access[key] = map[int64]bool{}
	}
	s.oauth.access[key][installationID] = true
}

// AuthorizationCode is the code GitHub appends to the App's callback URL once the
// person login (see AddUser) has authorized the App, e.g. during an installation with
// "Request user authorization (OAuth) during installation" on. It works once, for ten
// minutes of the test clock, with the App's client credentials.
func (s *Server) AuthorizationCode(t TB, login string) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	acc, ok := s.accounts[strings.ToLower(login)]
	if !ok || acc.kind != "User" {
		t.Fatalf("authorization code: %s is not a user; call AddUser first", login)
	}
	code, err := s.newAuthorizationCodeLocked(login)
	if err != nil {
		t.Fatalf("authorization code: %v", err)
	}
	return code
}

// newAuthorizationCodeLocked issues a one-time code for login.
func (s *Server) newAuthorizationCodeLocked(login string) (string, error) {
	code, err := randomToken(10)
	if err != nil {
		return "", err
	}
	s.oauth.codes[code] = &authorizationCode{login: strings.ToLower(login), expiresAt: s.clock.Now().Add(authorizationCodeLifetime)}
	return code, nil
}

func (s *Server) oauthRoutes() []route {
	return []route{
		{pattern: "POST /login/oauth/access_token",
			doc:     "/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-user-access-token-for-a-github-app",
			handler: s.handleAccessToken},
		{pattern: "GET /user/installations",
			doc:     "/apps/installations#list-app-installations-accessible-to-the-user-access-token",
			handler: s.handleUserInstallations},
		{pattern: "DELETE /applications/{client_id}/token",
			doc:     "/apps/oauth-applications#delete-an-app-token",
			handler: s.handleDeleteAppToken},
	}
}

// handleDeleteAppToken revokes a user access token, as GitHub does for the App's own
// client (Basic auth with its client id and secret): 204, or 404 for a token GitHub
// does not know.
func (s *Server) handleDeleteAppToken(w http.ResponseWriter, r *http.Request) {
	id, secretText, ok := r.BasicAuth()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok || id != s.oauth.clientID || secretText != s.oauth.clientSecret || r.PathValue("client_id") != s.oauth.clientID {
		writeError(w, r, http.StatusNotFound, "Not Found")
		return
	}
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.AccessToken == "" {
		writeError(w, r, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	if _, known := s.oauth.userTokens[body.AccessToken]; !known {
		writeError(w, r, http.StatusNotFound, "Not Found")
		return
	}
	delete(s.oauth.userTokens, body.AccessToken)
	w.WriteHeader(http.StatusNoContent)
}

// handleAccessToken exchanges an authorization code for a user access token. Like
// GitHub, it answers every outcome with 200: a failure is an "error" field, in JSON
// when the client asks for it with Accept, else form-encoded.
func (s *Server) handleAccessToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.writeOAuth(w, r, url.Values{"error": {"invalid_request"}, "error_description": {"The request body could not be parsed."}})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Form.Get("client_id") != s.oauth.clientID || r.Form.Get("client_secret") != s.oauth.clientSecret {
		s.writeOAuth(w, r, url.Values{
			"error":             {"incorrect_client_credentials"},
			"error_description": {"The client_id and/or client_secret passed are incorrect."},
			"error_uri":         {oauthErrorsDoc + "#incorrect-client-credentials"},
		})
		return
	}
	code, ok := s.oauth.codes[r.Form.Get("code")]
	// A code works once: it is spent by the first exchange that names the right client.
	delete(s.oauth.codes, r.Form.Get("code"))
	if !ok || !s.clock.Now().Before(code.expiresAt) {
		s.writeOAuth(w, r, url.Values{
			"error":             {"bad_verification_code"},
			"error_description": {"The code passed is incorrect or expired."},
			"error_uri":         {oauthErrorsDoc + "#bad-verification-code"},
		})
		return
	}
	value, err := randomAlnum(36)
	if err != nil {
		http.Error(w, fmt.Sprintf("generate token: %v", err), http.StatusInternalServerError)
		return
	}
	token := userTokenPrefix + value
	s.oauth.userTokens[token] = code.login
	s.writeOAuth(w, r, url.Values{"access_token": {token}, "token_type": {"bearer"}, "scope": {""}})
}

// writeOAuth answers the token endpoint in the format the Accept header asks for.
func (s *Server) writeOAuth(w http.ResponseWriter, r *http.Request, v url.Values) {
	if acceptsJSON(r.Header.Get("Accept")) {
		out := make(map[string]string, len(v))
		for k := range v {
			out[k] = v.Get(k)
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	w.Header().Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(v.Encode()))
}

func acceptsJSON(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "application/json" {
			return true
		}
	}
	return false
}

// handleUserInstallations lists the App's installations the user access token's person
// can access: {"total_count", "installations"}, paginated with Link headers.
func (s *Server) handleUserInstallations(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw := credentials(r)
	switch {
	case raw == "":
		writeError(w, r, http.StatusUnauthorized, "Requires authentication")
		return
	case isJWT(raw), s.tokens[raw] != nil:
		writeError(w, r, http.StatusForbidden, "You must authenticate with an access token authorized to a GitHub App in order to list installations")
		return
	}
	login, ok := s.oauth.userTokens[raw]
	if !ok {
		writeError(w, r, http.StatusUnauthorized, "Bad credentials")
		return
	}
	var out []*github.Installation
	for _, inst := range s.sortedInstallationsLocked() {
		if !inst.deleted && s.oauth.access[login][inst.id] {
			out = append(out, s.installationJSON(inst))
		}
	}
	start, end := paginate(w, r, len(out))
	writeJSON(w, http.StatusOK, map[string]any{
		"total_count":   len(out),
		"installations": nonNil(out[start:end]),
	})
}
