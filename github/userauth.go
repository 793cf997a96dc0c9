package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"golang.org/x/oauth2"

	"github.com/kukie/kukie-gitops/secret"
)

// Errors of the authorization code exchange, as GitHub names them.
var (
	// ErrBadVerificationCode: the code is wrong, expired or was already used.
	ErrBadVerificationCode = errors.New("github refused the authorization code (bad_verification_code): it is wrong, expired or was already used")
	// ErrIncorrectClientCredentials: the configured client id or secret is not the App's.
	ErrIncorrectClientCredentials = errors.New("github refused the app's client id or client secret (incorrect_client_credentials)")
	// ErrUserTokenRejected: GitHub did not accept the user access token.
	ErrUserTokenRejected = errors.New("github rejected the user access token")
)

// UserInstallations answers, for the installation setup callback, whether the person
// GitHub sent back can access an installation: the installation id on the callback is
// attacker-controlled, but the authorization code GitHub adds when the App requests
// user authorization during installation is not. The user access token it yields is
// only ever a secret.Secret held by the caller for the one check.
type UserInstallations struct {
	clients githubapp.ClientCreator
	oauth   oauth2.Config
	http    *http.Client
	timeout time.Duration
	// apiURL and userAgent serve the one request made as the App's OAuth client
	// itself (Basic auth with its client id and secret): revoking a token.
	apiURL, userAgent string
}

// NewUserInstallations needs cfg's ClientID and ClientSecret; user-token requests go
// through cc (its logging, metrics and user agent).
func NewUserInstallations(cfg Config, cc githubapp.ClientCreator) (*UserInstallations, error) {
	cfg = cfg.withDefaults()
	if cfg.ClientID == "" || !cfg.ClientSecret.IsSet() {
		return nil, errors.New("create GitHub user authorization: the app's client id and client secret are required")
	}
	return &UserInstallations{
		clients: cc,
		oauth: oauth2.Config{
			ClientID:     cfg.ClientID,
			ClientSecret: cfg.ClientSecret.Reveal(),
			Endpoint: oauth2.Endpoint{
				AuthURL:   cfg.WebURL + "/login/oauth/authorize",
				TokenURL:  cfg.WebURL + "/login/oauth/access_token",
				AuthStyle: oauth2.AuthStyleInParams,
			},
		},
		http: &http.Client{
			Timeout:   cfg.Timeout,
			Transport: jsonTokenTransport{base: http.DefaultTransport, userAgent: cfg.UserAgent},
		},
		timeout:   cfg.Timeout,
		apiURL:    cfg.APIURL,
		userAgent: cfg.UserAgent,
	}, nil
}

// RevokeToken makes a user access token unusable (DELETE
// /applications/{client_id}/token, authenticated as the App's OAuth client), so a
// copy of it, such as a stolen session cookie, is refused from then on. A token
// GitHub no longer knows (expired, revoked already) is revoked.
func (u *UserInstallations) RevokeToken(ctx context.Context, userToken secret.Secret) error {
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	basic := &gh.BasicAuthTransport{Username: u.oauth.ClientID, Password: u.oauth.ClientSecret}
	client, err := gh.NewClient(&http.Client{Transport: basic, Timeout: u.timeout}).WithEnterpriseURLs(u.apiURL, u.apiURL)
	if err != nil {
		return fmt.Errorf("revoke the user's token: %w", err)
	}
	client.UserAgent = u.userAgent
	if _, err := client.Authorizations.Revoke(ctx, u.oauth.ClientID, userToken.Reveal()); err != nil && !isStatus(err, http.StatusNotFound) {
		return fmt.Errorf("revoke the user's token: %w", err)
	}
	return nil
}

// ExchangeCode trades an authorization code for a user access token (one request,
// POST {web}/login/oauth/access_token). GitHub answers refusals with status 200 and an
// "error" field; the two a caller can act on come back as ErrBadVerificationCode and
// ErrIncorrectClientCredentials.
func (u *UserInstallations) ExchangeCode(ctx context.Context, code secret.Secret) (secret.Secret, error) {
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	tok, err := u.oauth.Exchange(context.WithValue(ctx, oauth2.HTTPClient, u.http), code.Reveal())
	if err != nil {
		var rerr *oauth2.RetrieveError
		if errors.As(err, &rerr) {
			switch rerr.ErrorCode {
			case "bad_verification_code":
				return "", fmt.Errorf("exchange authorization code: %w", ErrBadVerificationCode)
			case "incorrect_client_credentials":
				return "", fmt.Errorf("exchange authorization code: %w", ErrIncorrectClientCredentials)
			}
		}
		return "", fmt.Errorf("exchange authorization code: %w", err)
	}
	return secret.New(tok.AccessToken), nil
}

// CanAccessInstallation reports whether the user access token's person can access the
// installation: it is among GET /user/installations (every page, user token).
func (u *UserInstallations) CanAccessInstallation(ctx context.Context, userToken secret.Secret, installationID int64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	client, err := u.clients.NewTokenClient(userToken.Reveal())
	if err != nil {
		return false, fmt.Errorf("list the user's installations: %w", err)
	}
	opts := &gh.ListOptions{PerPage: 100}
	for {
		page, res, err := client.Apps.ListUserInstallations(ctx, opts)
		if err != nil {
			if isStatus(err, http.StatusUnauthorized) {
				return false, fmt.Errorf("list the user's installations: %w", ErrUserTokenRejected)
			}
			return false, fmt.Errorf("list the user's installations: %w", err)
		}
		for _, inst := range page {
			if inst.GetID() == installationID {
				return true, nil
			}
		}
		if res.NextPage == 0 {
			return false, nil
		}
		opts.Page = res.NextPage
	}
}

// jsonTokenTransport asks the token endpoint for JSON (GitHub answers form-encoded
// otherwise) and names the service in GitHub's logs.
type jsonTokenTransport struct {
	base      http.RoundTripper
	userAgent string
}

func (t jsonTokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Accept", "application/json")
	r.Header.Set("User-Agent", t.userAgent)
	return t.base.RoundTrip(r)
}

// AuthCodeURL is GitHub's authorize page for the App, where a browser goes to sign a
// person in: GitHub sends it back to redirectURI (one of the App's callback URLs)
// with a code and state unchanged.
func (u *UserInstallations) AuthCodeURL(state, redirectURI string) string {
	c := u.oauth
	c.RedirectURL = redirectURI
	return c.AuthCodeURL(state)
}

// User is a GitHub user as their own user access token shows them.
type User struct {
	// ID never changes; a login can be renamed and then taken by somebody else.
	ID    int64
	Login string
}

// AuthenticatedUser is the user access token's person (GET /user).
func (u *UserInstallations) AuthenticatedUser(ctx context.Context, userToken secret.Secret) (User, error) {
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	client, err := u.clients.NewTokenClient(userToken.Reveal())
	if err != nil {
		return User{}, fmt.Errorf("read the signed-in user: %w", err)
	}
	user, _, err := client.Users.Get(ctx, "")
	if err != nil {
		if isStatus(err, http.StatusUnauthorized) {
			return User{}, fmt.Errorf("read the signed-in user: %w", ErrUserTokenRejected)
		}
		return User{}, fmt.Errorf("read the signed-in user: %w", err)
	}
	if user.GetID() <= 0 || user.GetLogin() == "" {
		return User{}, errors.New("read the signed-in user: GitHub's answer has no id or login")
	}
	return User{ID: user.GetID(), Login: user.GetLogin()}, nil
}

// UserLogin is the login of the user access token's person (GET /user).
func (u *UserInstallations) UserLogin(ctx context.Context, userToken secret.Secret) (string, error) {
	user, err := u.AuthenticatedUser(ctx, userToken)
	return user.Login, err
}

// CanReadRepository reports whether the user access token's person can read the
// repository ("owner/name"), as GitHub itself decides: GET /repos/{owner}/{repo}
// with their token. A GitHub App's user token reaches only what both the person and
// the App can, and GitHub answers 404 for a repository it does not reach; the
// answer's permissions.pull then says whether the person may read it.
func (u *UserInstallations) CanReadRepository(ctx context.Context, userToken secret.Secret, fullName string) (bool, error) {
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || name == "" {
		return false, fmt.Errorf("check read access: %q is not owner/name", fullName)
	}
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	client, err := u.clients.NewTokenClient(userToken.Reveal())
	if err != nil {
		return false, fmt.Errorf("check read access to %s: %w", fullName, err)
	}
	repo, _, err := client.Repositories.Get(ctx, owner, name)
	switch {
	case isStatus(err, http.StatusNotFound):
		return false, nil
	case isStatus(err, http.StatusUnauthorized):
		return false, fmt.Errorf("check read access to %s: %w", fullName, ErrUserTokenRejected)
	case err != nil:
		return false, fmt.Errorf("check read access to %s: %w", fullName, err)
	}
	return repo.GetPermissions()["pull"], nil
}

// isStatus reports whether err is GitHub's answer with that status.
func isStatus(err error, status int) bool {
	var rerr *gh.ErrorResponse
	return errors.As(err, &rerr) && rerr.Response != nil && rerr.Response.StatusCode == status
}
