package githubtest

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-github/v62/github"
)

func noFollow(s *Server) *http.Client {
	c := *s.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func TestAuthorizeSendsTheBrowserBackWithACodeAndTheState(t *testing.T) {
	s := New(t)
	s.AddUser("alice")
	const callback = "https://kukie.example/auth/github/callback"
	s.AddCallbackURL(callback)
	c := noFollow(s)

	page, err := c.Get(s.URL() + "/login/oauth/authorize?" + url.Values{"client_id": {s.ClientID()},
		"redirect_uri": {callback}, "state": {"st8"}, "response_type": {"code"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != http.StatusOK || !strings.Contains(string(body), `name="state" value="st8"`) {
		t.Fatalf("authorize page: %d\n%s", page.StatusCode, body)
	}

	form := url.Values{"client_id": {s.ClientID()}, "redirect_uri": {callback}, "state": {"st8"}, "login": {"alice"}}
	res, err := c.PostForm(s.URL()+"/login/oauth/authorize", form)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	back, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusFound || err != nil || !strings.HasPrefix(back.String(), callback+"?") || back.Query().Get("state") != "st8" {
		t.Fatalf("authorize: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	// The code is alice's, once.
	tok := exchangeJSON(t, s, url.Values{"client_id": {s.ClientID()}, "client_secret": {s.ClientSecret().Reveal()}, "code": {back.Query().Get("code")}})
	user, _, err := apiClient(t, s, tok["access_token"]).Users.Get(ctx, "")
	if err != nil || user.GetLogin() != "alice" {
		t.Fatalf("GET /user with the token: %v %v", user, err)
	}
	if again := exchangeJSON(t, s, url.Values{"client_id": {s.ClientID()}, "client_secret": {s.ClientSecret().Reveal()}, "code": {back.Query().Get("code")}}); again["error"] != "bad_verification_code" {
		t.Errorf("second exchange of the code: %v", again)
	}
}

func TestAuthorizeRefusesWhatGitHubRefuses(t *testing.T) {
	s := New(t)
	s.AddUser("alice")
	const callback = "https://kukie.example/auth/github/callback"
	s.AddCallbackURL(callback)
	cases := map[string]struct {
		form   url.Values
		status int
	}{
		"unknown client":        {url.Values{"client_id": {"Iv1.other"}, "redirect_uri": {callback}, "login": {"alice"}}, http.StatusNotFound},
		"unregistered callback": {url.Values{"client_id": {s.ClientID()}, "redirect_uri": {"https://evil.example/cb"}, "login": {"alice"}}, http.StatusBadRequest},
		"no such user":          {url.Values{"client_id": {s.ClientID()}, "redirect_uri": {callback}, "login": {"nobody"}}, http.StatusUnprocessableEntity},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := noFollow(s).PostForm(s.URL()+"/login/oauth/authorize", tc.form)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.status || res.Header.Get("Location") != "" {
				t.Errorf("%d to %q, want %d and no redirect", res.StatusCode, res.Header.Get("Location"), tc.status)
			}
		})
	}
}

func TestUserTokenReadsOnlyWhatThePersonAndTheAppBothCan(t *testing.T) {
	s := New(t)
	s.CreateRepo(t, "acme", "deploy", nil, "main")
	s.CreateRepo(t, "acme", "other", nil, "main") // the App is not installed here
	s.CreateInstallation(t, "acme", "deploy")
	for _, login := range []string{"reader", "writer", "outsider"} {
		s.AddUser(login)
	}
	s.SetPermission(t, "acme/deploy", "reader", RoleRead)
	s.SetPermission(t, "acme/deploy", "writer", RoleWrite)
	s.SetPermission(t, "acme/other", "reader", RoleAdmin)
	token := func(login string) string {
		return exchangeJSON(t, s, url.Values{"client_id": {s.ClientID()}, "client_secret": {s.ClientSecret().Reveal()},
			"code": {s.AuthorizationCode(t, login)}})["access_token"]
	}
	cases := []struct {
		login, repo string
		pull, push  bool // want; neither: 404
	}{
		{"reader", "deploy", true, false},
		{"writer", "deploy", true, true},
		{"outsider", "deploy", false, false},
		{"reader", "other", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.login+" "+tc.repo, func(t *testing.T) {
			rp, _, err := apiClient(t, s, token(tc.login)).Repositories.Get(ctx, "acme", tc.repo)
			if !tc.pull {
				wantStatus(t, err, http.StatusNotFound)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p := rp.GetPermissions(); p["pull"] != tc.pull || p["push"] != tc.push {
				t.Errorf("permissions %v", p)
			}
		})
	}
	// A person's token does not write.
	_, _, err := apiClient(t, s, token("writer")).Git.CreateRef(ctx, "acme", "deploy",
		&github.Reference{Ref: github.String("refs/heads/x"), Object: &github.GitObject{SHA: github.String(strings.Repeat("0", 40))}})
	wantStatus(t, err, http.StatusForbidden)
}
