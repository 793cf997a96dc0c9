package github_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/secret"
)

func userInstallations(t *testing.T, s *githubtest.Server, clientSecret secret.Secret) *github.UserInstallations {
	t.Helper()
	cfg := github.Config{AppID: s.AppID(), PrivateKey: s.PrivateKeyPEM(), APIURL: s.APIURL(), WebURL: s.URL(),
		ClientID: s.ClientID(), ClientSecret: clientSecret}
	u, err := github.NewUserInstallations(cfg, appClients(t, s, nil))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestNewUserInstallationsNeedsClientCredentials(t *testing.T) {
	cases := map[string]github.Config{
		"no client id":     {AppID: 1, ClientSecret: "s"},
		"no client secret": {AppID: 1, ClientID: "Iv1.x"},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := github.NewUserInstallations(cfg, nil); err == nil {
				t.Error("NewUserInstallations accepted a configuration without client credentials")
			}
		})
	}
}

func TestUserInstallationsChecksWhoCanAccessAnInstallation(t *testing.T) {
	ctx := context.Background()
	s := githubtest.New(t)
	var ids []int64
	// More installations than one page holds, so the check has to follow pages.
	for i := range 102 {
		org := fmt.Sprintf("org%03d", i)
		s.CreateRepo(t, org, "deploy", nil, "main")
		ids = append(ids, s.CreateInstallation(t, org, "deploy"))
	}
	s.AddUser("alice")
	for _, id := range ids[:101] {
		s.GrantInstallationAccess(t, "alice", id)
	}
	u := userInstallations(t, s, s.ClientSecret())

	token, err := u.ExchangeCode(ctx, secret.New(s.AuthorizationCode(t, "alice")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token.Reveal(), "ghu_") || fmt.Sprint(token) != "[redacted]" {
		t.Fatalf("token %v is not a redacted user token", token)
	}
	s.ResetRequestCounts()
	for name, tc := range map[string]struct {
		id   int64
		want bool
	}{
		"on the first page":   {ids[0], true},
		"on the second page":  {ids[100], true},
		"of another org":      {ids[101], false},
		"that does not exist": {987654321, false},
	} {
		t.Run(name, func(t *testing.T) {
			ok, err := u.CanAccessInstallation(ctx, token, tc.id)
			if err != nil || ok != tc.want {
				t.Errorf("CanAccessInstallation(%d) = %v, %v; want %v", tc.id, ok, err, tc.want)
			}
		})
	}
	if n := s.RequestCount("GET /user/installations"); n < 4 {
		t.Errorf("%d requests to GET /user/installations for four checks, want at least 4", n)
	}

	if _, err := u.CanAccessInstallation(ctx, secret.New("ghu_revoked"), ids[0]); !errors.Is(err, github.ErrUserTokenRejected) {
		t.Errorf("unknown token: %v, want ErrUserTokenRejected", err)
	}
}

func TestExchangeCodeRefusals(t *testing.T) {
	ctx := context.Background()
	s := githubtest.New(t)
	s.AddUser("alice")
	good := userInstallations(t, s, s.ClientSecret())
	used := s.AuthorizationCode(t, "alice")
	if _, err := good.ExchangeCode(ctx, secret.New(used)); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		u    *github.UserInstallations
		code string
		want error
	}{
		"used code":           {good, used, github.ErrBadVerificationCode},
		"forged code":         {good, "forged", github.ErrBadVerificationCode},
		"wrong client secret": {userInstallations(t, s, secret.New("wrong")), s.AuthorizationCode(t, "alice"), github.ErrIncorrectClientCredentials},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tok, err := tc.u.ExchangeCode(ctx, secret.New(tc.code))
			if !errors.Is(err, tc.want) || tok.IsSet() {
				t.Errorf("ExchangeCode = %v, %v; want %v and no token", tok, err, tc.want)
			}
		})
	}
}

func TestUserInstallationsAsksGitHubWhoCanReadARepository(t *testing.T) {
	ctx := context.Background()
	s := githubtest.New(t)
	s.CreateRepo(t, "acme", "deploy", nil, "main")
	s.CreateInstallation(t, "acme", "deploy")
	s.AddUser("alice")
	s.AddUser("mallory")
	s.SetPermission(t, "acme/deploy", "alice", githubtest.RoleTriage)
	u := userInstallations(t, s, s.ClientSecret())
	token := func(login string) secret.Secret {
		tok, err := u.ExchangeCode(ctx, secret.New(s.AuthorizationCode(t, login)))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	alice, mallory := token("alice"), token("mallory")
	if login, err := u.UserLogin(ctx, alice); err != nil || login != "alice" {
		t.Errorf("UserLogin = %q, %v", login, err)
	}
	a, errA := u.AuthenticatedUser(ctx, alice)
	m, errM := u.AuthenticatedUser(ctx, mallory)
	if errA != nil || errM != nil || a.Login != "alice" || m.Login != "mallory" || a.ID <= 0 || a.ID == m.ID {
		t.Errorf("AuthenticatedUser = %+v, %v and %+v, %v; want each their own id and login", a, errA, m, errM)
	}
	for _, tc := range []struct {
		name  string
		token secret.Secret
		repo  string
		want  bool
	}{
		{"a reader", alice, "acme/deploy", true},
		{"a reader, other case", alice, "ACME/Deploy", true},
		{"no role on a private repository", mallory, "acme/deploy", false},
		{"a repository that does not exist", alice, "acme/nothing", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := u.CanReadRepository(ctx, tc.token, tc.repo)
			if err != nil || got != tc.want {
				t.Errorf("CanReadRepository = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if _, err := u.CanReadRepository(ctx, secret.New("ghu_notatoken"), "acme/deploy"); !errors.Is(err, github.ErrUserTokenRejected) {
		t.Errorf("a token GitHub does not know: %v, want ErrUserTokenRejected", err)
	}
	if _, err := u.UserLogin(ctx, secret.New("ghu_notatoken")); !errors.Is(err, github.ErrUserTokenRejected) {
		t.Errorf("UserLogin with a token GitHub does not know: %v", err)
	}
	if _, err := u.CanReadRepository(ctx, alice, "deploy"); err == nil {
		t.Error("a name without owner was accepted")
	}
}

// TestRevokeTokenEndsTheToken: a revoked user access token is refused by GitHub from
// then on; revoking one GitHub no longer knows is no error.
func TestRevokeTokenEndsTheToken(t *testing.T) {
	ctx := context.Background()
	s := githubtest.New(t)
	s.AddUser("alice")
	u := userInstallations(t, s, s.ClientSecret())
	token, err := u.ExchangeCode(ctx, secret.New(s.AuthorizationCode(t, "alice")))
	if err != nil {
		t.Fatal(err)
	}
	if login, err := u.UserLogin(ctx, token); err != nil || login != "alice" {
		t.Fatalf("before revoking: %q, %v", login, err)
	}
	if err := u.RevokeToken(ctx, token); err != nil {
		t.Fatal(err)
	}
	if _, err := u.UserLogin(ctx, token); !errors.Is(err, github.ErrUserTokenRejected) {
		t.Errorf("a revoked token: %v, want ErrUserTokenRejected", err)
	}
	if err := u.RevokeToken(ctx, token); err != nil {
		t.Errorf("revoking again: %v", err)
	}
	if n := s.RequestCount("DELETE /applications/{client_id}/token"); n != 2 {
		t.Errorf("%d revocations sent, want 2", n)
	}
}
