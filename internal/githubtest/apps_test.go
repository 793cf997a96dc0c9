package githubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
)

func appConfig(s *Server) githubapp.Config {
	var c githubapp.Config
	c.V3APIURL = s.APIURL()
	c.App.IntegrationID = s.AppID()
	c.App.PrivateKey = s.PrivateKeyPEM().Reveal()
	c.App.WebhookSecret = s.WebhookSecret().Reveal()
	return c
}

func TestGoGithubappClientsWork(t *testing.T) {
	s := New(t)
	s.CreateRepo(t, "acme", "deploy", map[string]string{"README.md": "hello\n"}, "main")
	s.CreateRepo(t, "acme", "other", map[string]string{"README.md": "other\n"}, "main")
	instID := s.CreateInstallation(t, "acme", "deploy")

	cc, err := githubapp.NewDefaultCachingClientCreator(appConfig(s))
	if err != nil {
		t.Fatalf("client creator: %v", err)
	}
	appClient, err := cc.NewAppClient()
	if err != nil {
		t.Fatalf("app client: %v", err)
	}
	app, _, err := appClient.Apps.Get(ctx, "")
	if err != nil {
		t.Fatalf("get app: %v", err)
	}
	if app.GetSlug() != s.AppSlug() || app.GetID() != s.AppID() || app.GetName() == "" {
		t.Errorf("app = %s/%d/%q, want %s/%d", app.GetSlug(), app.GetID(), app.GetName(), s.AppSlug(), s.AppID())
	}
	inst, _, err := appClient.Apps.GetInstallation(ctx, instID)
	if err != nil {
		t.Fatalf("get installation: %v", err)
	}
	if inst.GetAccount().GetLogin() != "acme" || inst.GetAppID() != s.AppID() || inst.GetPermissions().GetContents() != PermWrite {
		t.Errorf("installation = %+v", inst)
	}
	_, _, err = appClient.Apps.GetInstallation(ctx, 999999)
	wantStatus(t, err, http.StatusNotFound)

	instClient, err := cc.NewInstallationClient(instID)
	if err != nil {
		t.Fatalf("installation client: %v", err)
	}
	repo, _, err := instClient.Repositories.Get(ctx, "acme", "deploy")
	if err != nil {
		t.Fatalf("get repo through ghinstallation: %v", err)
	}
	if repo.GetDefaultBranch() != "main" || repo.GetFullName() != "acme/deploy" || !repo.GetPrivate() {
		t.Errorf("repo = %s default %s private %v", repo.GetFullName(), repo.GetDefaultBranch(), repo.GetPrivate())
	}
	_, _, err = instClient.Repositories.Get(ctx, "acme", "other")
	wantStatus(t, err, http.StatusNotFound)

	repos, _, err := instClient.Apps.ListRepos(ctx, nil)
	if err != nil {
		t.Fatalf("list installation repos: %v", err)
	}
	if repos.GetTotalCount() != 1 || repos.Repositories[0].GetFullName() != "acme/deploy" {
		t.Errorf("installation repositories = %d %v", repos.GetTotalCount(), repos.Repositories)
	}
	if n := s.RequestCount("POST /app/installations/{installation_id}/access_tokens"); n != 1 {
		t.Errorf("access token requests = %d, want 1 (ghinstallation caches the token)", n)
	}
}

func TestAccessTokenResponseAndNarrowing(t *testing.T) {
	s := New(t)
	s.CreateRepo(t, "acme", "a", map[string]string{"x": "1"}, "main")
	s.CreateRepo(t, "acme", "b", map[string]string{"x": "1"}, "main")
	s.CreateRepo(t, "acme", "uninstalled", map[string]string{"x": "1"}, "main")
	instID := s.CreateInstallation(t, "acme", "a", "b")
	appClient := appJWTClient(t, s)

	tok, _, err := appClient.Apps.CreateInstallationToken(ctx, instID, &github.InstallationTokenOptions{
		Repositories: []string{"a"},
		Permissions:  &github.InstallationPermissions{Contents: ptr(PermRead)},
	})
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	wantExpiry := s.Clock().Now().Add(time.Hour)
	if got := tok.GetExpiresAt().Time; got.Before(wantExpiry.Add(-2*time.Second)) || got.After(wantExpiry.Add(2*time.Second)) {
		t.Errorf("expires_at = %v, want about %v", got, wantExpiry)
	}
	if len(tok.Repositories) != 1 || tok.Repositories[0].GetName() != "a" {
		t.Errorf("repositories = %v, want [a]", tok.Repositories)
	}
	if p := tok.GetPermissions(); p.GetContents() != PermRead || p.GetMetadata() != PermRead || p.GetPullRequests() != "" {
		t.Errorf("permissions = %+v, want contents:read metadata:read only", p)
	}
	if len(tok.GetToken()) != 40 || tok.GetToken()[:4] != "ghs_" {
		t.Errorf("token %q does not look like an installation token", tok.GetToken())
	}

	tests := map[string]struct {
		opts *github.InstallationTokenOptions
		id   int64
		want int
	}{
		"repository outside the installation": {opts: &github.InstallationTokenOptions{Repositories: []string{"uninstalled"}}, id: instID, want: http.StatusUnprocessableEntity},
		"unknown repository id":               {opts: &github.InstallationTokenOptions{RepositoryIDs: []int64{123}}, id: instID, want: http.StatusUnprocessableEntity},
		"permission beyond the grant":         {opts: &github.InstallationTokenOptions{Permissions: &github.InstallationPermissions{Administration: ptr(PermWrite)}}, id: instID, want: http.StatusUnprocessableEntity},
		"higher level than granted":           {opts: &github.InstallationTokenOptions{Permissions: &github.InstallationPermissions{Metadata: ptr(PermWrite)}}, id: instID, want: http.StatusUnprocessableEntity},
		"unknown installation":                {id: 77, want: http.StatusNotFound},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, err := appClient.Apps.CreateInstallationToken(ctx, tc.id, tc.opts)
			wantStatus(t, err, tc.want)
		})
	}

	t.Run("suspended installation", func(t *testing.T) {
		s.SuspendInstallation(t, instID)
		defer s.UnsuspendInstallation(t, instID)
		_, _, err := appClient.Apps.CreateInstallationToken(ctx, instID, nil)
		wantStatus(t, err, http.StatusForbidden)
	})
}

// appJWTClient is a go-github client authenticated as the App with a fresh JWT.
func appJWTClient(t *testing.T, s *Server) *github.Client {
	t.Helper()
	now := time.Now()
	return apiClient(t, s, signJWT(t, s, jwt.RegisteredClaims{
		Issuer:    strconv.FormatInt(s.AppID(), 10),
		IssuedAt:  jwt.NewNumericDate(now.Add(-30 * time.Second)),
		ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute)),
	}, nil))
}

func signJWT(t *testing.T, s *Server, claims jwt.Claims, key *rsa.PrivateKey) string {
	t.Helper()
	if key == nil {
		var err error
		key, err = jwt.ParseRSAPrivateKeyFromPEM([]byte(s.PrivateKeyPEM().Reveal()))
		if err != nil {
			t.Fatalf("parse app key: %v", err)
		}
	}
	v, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(key)
	if err != nil {
		t.Fatalf("sign jwt: %v", err)
	}
	return v
}

func TestAppJWTVerification(t *testing.T) {
	s := New(t)
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	iss := strconv.FormatInt(s.AppID(), 10)
	valid := func(mutate func(c *jwt.RegisteredClaims)) jwt.RegisteredClaims {
		c := jwt.RegisteredClaims{Issuer: iss, IssuedAt: jwt.NewNumericDate(now.Add(-30 * time.Second)), ExpiresAt: jwt.NewNumericDate(now.Add(9 * time.Minute))}
		if mutate != nil {
			mutate(&c)
		}
		return c
	}
	tests := map[string]struct {
		token string
		want  int
	}{
		"valid":          {token: signJWT(t, s, valid(nil), nil), want: http.StatusOK},
		"other key":      {token: signJWT(t, s, valid(nil), otherKey), want: http.StatusUnauthorized},
		"wrong issuer":   {token: signJWT(t, s, valid(func(c *jwt.RegisteredClaims) { c.Issuer = "1" }), nil), want: http.StatusUnauthorized},
		"expired":        {token: signJWT(t, s, valid(func(c *jwt.RegisteredClaims) { c.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Second)) }), nil), want: http.StatusUnauthorized},
		"exp too far":    {token: signJWT(t, s, valid(func(c *jwt.RegisteredClaims) { c.ExpiresAt = jwt.NewNumericDate(now.Add(20 * time.Minute)) }), nil), want: http.StatusUnauthorized},
		"no iat":         {token: signJWT(t, s, valid(func(c *jwt.RegisteredClaims) { c.IssuedAt = nil }), nil), want: http.StatusUnauthorized},
		"not a jwt":      {token: "ghs_notajwt", want: http.StatusUnauthorized},
		"HS256 with pem": {token: hmacJWT(t, s, valid(nil)), want: http.StatusUnauthorized},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, err := apiClient(t, s, tc.token).Apps.Get(ctx, "")
			if tc.want == http.StatusOK {
				if err != nil {
					t.Fatalf("valid JWT refused: %v", err)
				}
				return
			}
			wantStatus(t, err, tc.want)
		})
	}
}

func hmacJWT(t *testing.T, s *Server, claims jwt.Claims) string {
	t.Helper()
	v, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(s.PrivateKeyPEM().Reveal()))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestInstallationTokenEnforcement(t *testing.T) {
	s := New(t)
	s.CreateRepo(t, "acme", "a", map[string]string{"x": "1"}, "main")
	s.CreateRepo(t, "acme", "b", map[string]string{"x": "1"}, "main")
	s.CreateRepo(t, "acme", "c", map[string]string{"x": "1"}, "main")
	instID := s.CreateInstallation(t, "acme", "a", "b")

	scopedToA := s.InstallationToken(t, instID, []string{"a"}, nil).Reveal()
	readOnly := s.InstallationToken(t, instID, nil, map[string]string{"contents": PermRead}).Reveal()
	full := s.InstallationToken(t, instID, nil, nil).Reveal()

	tests := map[string]struct {
		token string
		repo  string
		write bool
		want  int
	}{
		"scoped token reads its repo":        {token: scopedToA, repo: "a", want: http.StatusOK},
		"scoped token writes its repo":       {token: scopedToA, repo: "a", write: true, want: http.StatusOK},
		"scoped token on another repo":       {token: scopedToA, repo: "b", want: http.StatusNotFound},
		"token on a repo not installed":      {token: full, repo: "c", want: http.StatusNotFound},
		"read-only token reads":              {token: readOnly, repo: "b", want: http.StatusOK},
		"read-only token writes":             {token: readOnly, repo: "b", write: true, want: http.StatusForbidden},
		"unknown token":                      {token: "ghs_000000000000000000000000000000000000", repo: "a", want: http.StatusUnauthorized},
		"anonymous on a private repo":        {token: "", repo: "a", want: http.StatusNotFound},
		"anonymous write on a private repo":  {token: "", repo: "a", write: true, want: http.StatusNotFound},
		"full token on an installed repo":    {token: full, repo: "b", write: true, want: http.StatusOK},
		"full token reads an installed repo": {token: full, repo: "a", want: http.StatusOK},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := apiClient(t, s, tc.token)
			var err error
			if tc.write {
				_, _, err = c.Git.CreateBlob(ctx, "acme", tc.repo, &github.Blob{Content: ptr("x"), Encoding: ptr("utf-8")})
			} else {
				_, _, err = c.Repositories.Get(ctx, "acme", tc.repo)
			}
			if tc.want == http.StatusOK {
				if err != nil {
					t.Fatalf("want success, got %v", err)
				}
				return
			}
			er := wantStatus(t, err, tc.want)
			if tc.want == http.StatusUnauthorized && er.Message != "Bad credentials" {
				t.Errorf("message = %q, want Bad credentials", er.Message)
			}
		})
	}

	t.Run("token expires after an hour on the test clock", func(t *testing.T) {
		c := apiClient(t, s, full)
		s.Clock().Advance(59 * time.Minute)
		if _, _, err := c.Repositories.Get(ctx, "acme", "a"); err != nil {
			t.Fatalf("token refused before expiry: %v", err)
		}
		s.Clock().Advance(2 * time.Minute)
		_, _, err := c.Repositories.Get(ctx, "acme", "a")
		if er := wantStatus(t, err, http.StatusUnauthorized); er.Message != "Bad credentials" {
			t.Errorf("message = %q", er.Message)
		}
	})

	t.Run("removed repository is no longer visible", func(t *testing.T) {
		tok := s.InstallationToken(t, instID, nil, nil).Reveal()
		s.RemoveInstallationRepos(t, instID, "b")
		_, _, err := apiClient(t, s, tok).Repositories.Get(ctx, "acme", "b")
		wantStatus(t, err, http.StatusNotFound)
	})

	t.Run("deleted installation revokes tokens", func(t *testing.T) {
		tok := s.InstallationToken(t, instID, nil, nil).Reveal()
		s.DeleteInstallation(t, instID)
		_, _, err := apiClient(t, s, tok).Repositories.Get(ctx, "acme", "a")
		wantStatus(t, err, http.StatusUnauthorized)
	})
}

func TestRequestCounting(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"x": "1"})
	if n := s.TotalRequests(); n != 0 {
		t.Fatalf("test helpers made %d HTTP requests, want 0", n)
	}
	for i := 0; i < 3; i++ {
		if _, _, err := c.Repositories.Get(ctx, "acme", "deploy"); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = c.Client().Get(s.URL() + "/no/such/thing/here")
	if n := s.RequestCount("GET /repos/{owner}/{repo}"); n != 3 {
		t.Errorf("repo gets = %d, want 3", n)
	}
	if n := s.RequestCount(unmatchedEndpoint); n != 1 {
		t.Errorf("unmatched = %d, want 1", n)
	}
	if n := s.TotalRequests(); n != 4 {
		t.Errorf("total = %d, want 4", n)
	}
	s.ResetRequestCounts()
	if n := s.TotalRequests(); n != 0 {
		t.Errorf("total after reset = %d", n)
	}
}
