package githubtest

import (
	"html/template"
	"net/http"
	"net/url"
	"strings"
)

// The browser half of GitHub's web application flow: GET /login/oauth/authorize shows
// the page where a person authorizes the App, and submitting it sends the browser to
// the App's redirect_uri with a one-time code and the App's state, as GitHub does once
// the person is signed in. The fake has no passwords: the page asks which existing
// user (AddUser) is signed in, so a browser test can sign in as anyone it created.

const webFlowDoc = "/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-user-access-token-for-a-github-app#using-the-web-application-flow-to-generate-a-user-access-token"

// AddCallbackURL registers a callback URL on the App, as on its settings page. GitHub
// sends a browser only to a redirect_uri that equals one of them; the authorize page
// refuses any other.
func (s *Server) AddCallbackURL(u string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oauth.callbackURLs = append(s.oauth.callbackURLs, u)
}

func (s *Server) webFlowRoutes() []route {
	return []route{
		{pattern: "GET /login/oauth/authorize", doc: webFlowDoc, handler: s.handleAuthorizePage},
		{pattern: "POST /login/oauth/authorize", doc: webFlowDoc, handler: s.handleAuthorize},
		{pattern: "GET /user", doc: "/users/users#get-the-authenticated-user", handler: s.handleAuthenticatedUser},
	}
}

var authorizePage = template.Must(template.New("authorize").Parse(`<!doctype html>
<html><head><title>Authorize application</title></head>
<body>
<h1>Authorize {{.App}}</h1>
{{if .Problem}}<p id="problem">{{.Problem}}</p>{{end}}
<form method="post" action="/login/oauth/authorize">
<input type="hidden" name="client_id" value="{{.ClientID}}">
<input type="hidden" name="redirect_uri" value="{{.RedirectURI}}">
<input type="hidden" name="state" value="{{.State}}">
<label>Signed in as <input id="login" name="login" value="{{.Login}}"></label>
<button id="authorize" type="submit">Authorize</button>
</form>
</body></html>
`))

type authorizeView struct {
	App, ClientID, RedirectURI, State, Login, Problem string
}

// authorizeRequestLocked checks the App's part of an authorize request (client_id and
// redirect_uri, from the query or the form) and answers GitHub's error page when it
// is wrong.
func (s *Server) authorizeRequestLocked(w http.ResponseWriter, r *http.Request) (authorizeView, bool) {
	v := authorizeView{App: appSlug, ClientID: r.Form.Get("client_id"), RedirectURI: r.Form.Get("redirect_uri"),
		State: r.Form.Get("state"), Login: r.Form.Get("login")}
	if v.ClientID != s.oauth.clientID {
		http.Error(w, "The client_id is not associated with an application.", http.StatusNotFound)
		return v, false
	}
	registered := false
	for _, u := range s.oauth.callbackURLs {
		registered = registered || u == v.RedirectURI
	}
	if !registered {
		// GitHub shows this on its own page: it never sends the browser to an
		// unregistered address.
		http.Error(w, "The redirect_uri is not associated with this application.", http.StatusBadRequest)
		return v, false
	}
	return v, true
}

func (s *Server) handleAuthorizePage(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad query", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	v, ok := s.authorizeRequestLocked(w, r)
	s.mu.Unlock()
	if ok {
		s.writeAuthorizePage(w, http.StatusOK, v)
	}
}

func (s *Server) writeAuthorizePage(w http.ResponseWriter, status int, v authorizeView) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = authorizePage.Execute(w, v)
}

// handleAuthorize is the person pressing "Authorize": a code for them, then the
// browser back to the App with the code and the App's state unchanged.
func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.authorizeRequestLocked(w, r)
	if !ok {
		return
	}
	acc, exists := s.accounts[strings.ToLower(v.Login)]
	if !exists || acc.kind != "User" {
		v.Problem = "Incorrect username."
		s.writeAuthorizePage(w, http.StatusUnprocessableEntity, v)
		return
	}
	code, err := s.newAuthorizationCodeLocked(acc.login)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	back, err := url.Parse(v.RedirectURI)
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	q := back.Query()
	q.Set("code", code)
	if v.State != "" {
		q.Set("state", v.State)
	}
	back.RawQuery = q.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// handleAuthenticatedUser is GET /user for a user access token.
func (s *Server) handleAuthenticatedUser(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	user := s.userOfTokenLocked(credentials(r))
	if user == nil {
		writeError(w, r, http.StatusUnauthorized, "Requires authentication")
		return
	}
	writeJSON(w, http.StatusOK, s.userJSON(user))
}

// userOfTokenLocked is the person a user access token acts for, nil when raw is not
// one.
func (s *Server) userOfTokenLocked(raw string) *account {
	login, ok := s.oauth.userTokens[raw]
	if !ok {
		return nil
	}
	return s.accounts[login]
}

// userCanReadLocked is GitHub's rule for a GitHub App's user access token: it reaches
// what both the person and the App can reach, so the repository must be readable by
// the person and in one of the App's live installations.
func (s *Server) userCanReadLocked(user *account, rp *repo) bool {
	if rp.roleLocked(user) == RoleNone {
		return false
	}
	for _, inst := range s.installations {
		if !inst.deleted && inst.suspendedAt == nil && inst.repoIDs[rp.id] {
			return true
		}
	}
	return false
}
