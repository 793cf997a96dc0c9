package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"

	"github.com/kukie/kukie-gitops/secret"
)

// App is the GitHub App's identity, read once at startup with GET /app.
type App struct {
	ID   int64
	Slug string
	// HTMLURL is the App's public page ("https://github.com/apps/<slug>"); Enterprise
	// servers use their own path, so install links are built from it, never guessed.
	HTMLURL string
}

// BotLogin is the login under which GitHub shows the App's own actions; events whose
// sender has it were caused by this service and must not trigger it again.
func (a App) BotLogin() string { return a.Slug + "[bot]" }

// InstallURL is where a person installs the App; GitHub sends state back to the setup
// URL unchanged.
func (a App) InstallURL(state string) string {
	u := strings.TrimSuffix(a.HTMLURL, "/") + "/installations/new"
	if state == "" {
		return u
	}
	return u + "?state=" + url.QueryEscape(state)
}

// LoadApp reads the App's identity with an App JWT.
func LoadApp(ctx context.Context, cc githubapp.ClientCreator) (App, error) {
	client, err := cc.NewAppClient()
	if err != nil {
		return App{}, fmt.Errorf("read GitHub App: %w", err)
	}
	app, _, err := client.Apps.Get(ctx, "")
	if err != nil {
		return App{}, fmt.Errorf("read GitHub App: %w", err)
	}
	if app.GetSlug() == "" {
		return App{}, fmt.Errorf("read GitHub App: GitHub returned no slug")
	}
	return App{ID: app.GetID(), Slug: app.GetSlug(), HTMLURL: app.GetHTMLURL()}, nil
}

// Installation is what the service keeps of one installation of the App.
type Installation struct {
	ID           int64
	AccountLogin string
	AccountType  string // "Organization" or "User"
	Suspended    bool
}

// ErrInstallationNotFound means GitHub does not know the installation (never existed,
// deleted, or of another App).
var ErrInstallationNotFound = errors.New("installation not found")

// Installations talks to GitHub about the App's installations. Each method makes the
// requests its comment names and nothing else, so callers can reason about when the
// service reaches out to GitHub.
type Installations struct {
	Clients githubapp.ClientCreator
}

// Get confirms an installation with one App JWT request (GET /app/installations/{id}).
func (s Installations) Get(ctx context.Context, installationID int64) (Installation, error) {
	client, err := s.Clients.NewAppClient()
	if err != nil {
		return Installation{}, fmt.Errorf("read installation %d: %w", installationID, err)
	}
	inst, _, err := client.Apps.GetInstallation(ctx, installationID)
	if err != nil {
		if isNotFound(err) {
			return Installation{}, fmt.Errorf("read installation %d: %w", installationID, ErrInstallationNotFound)
		}
		return Installation{}, fmt.Errorf("read installation %d: %w", installationID, err)
	}
	return Installation{
		ID:           inst.GetID(),
		AccountLogin: inst.GetAccount().GetLogin(),
		AccountType:  inst.GetAccount().GetType(),
		Suspended:    inst.SuspendedAt != nil,
	}, nil
}

// HasRepository reports whether installation installationID can access repo, with
// one App JWT request (GET /repos/{owner}/{repo}/installation): GitHub answers 404
// when no installation of the App can, also when the App is installed on the owner
// but the repository is not among the installation's selected ones.
func (s Installations) HasRepository(ctx context.Context, installationID int64, repo Repo) (bool, error) {
	client, err := s.Clients.NewAppClient()
	if err != nil {
		return false, fmt.Errorf("read the installation of %s: %w", repo.FullName(), err)
	}
	inst, _, err := client.Apps.FindRepositoryInstallation(ctx, repo.Owner, repo.Name)
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the installation of %s: %w", repo.FullName(), err)
	}
	return inst.GetID() == installationID, nil
}

// RepoRef is one repository an installation can access.
type RepoRef struct {
	ID   int64
	Repo Repo
}

// Repositories lists every repository the installation can access (GET
// /installation/repositories, all pages, with an installation token).
func (s Installations) Repositories(ctx context.Context, installationID int64, webHost string) ([]RepoRef, error) {
	client, err := s.Clients.NewInstallationClient(installationID)
	if err != nil {
		return nil, fmt.Errorf("list repositories of installation %d: %w", installationID, err)
	}
	var out []RepoRef
	opts := &gh.ListOptions{PerPage: 100}
	for {
		page, res, err := client.Apps.ListRepos(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list repositories of installation %d: %w", installationID, err)
		}
		for _, r := range page.Repositories {
			owner, name, ok := strings.Cut(NormalizeFullName(r.GetFullName()), "/")
			if !ok {
				return nil, fmt.Errorf("list repositories of installation %d: malformed full name %q", installationID, r.GetFullName())
			}
			out = append(out, RepoRef{ID: r.GetID(), Repo: Repo{
				Host: webHost, Owner: owner, Name: name,
			}})
		}
		if res.NextPage == 0 {
			return out, nil
		}
		opts.Page = res.NextPage
	}
}

// Token is an installation access token. Its value is a secret.Secret so that it
// cannot reach a log line or an API listing by accident.
type Token struct {
	Value        secret.Secret
	ExpiresAt    time.Time
	Repository   string            // owner/name the token is limited to
	Permissions  map[string]string // as granted by GitHub
	Installation int64
}

// RepoTokenPermissions is what an agent may do with a token: read and write files,
// open and update pull requests. Nothing else.
var RepoTokenPermissions = map[string]string{"contents": "write", "pull_requests": "write"}

// MintRepoToken asks GitHub (one App JWT request, POST
// /app/installations/{id}/access_tokens) for a token limited to one repository with
// RepoTokenPermissions. GitHub gives such tokens one hour.
func (s Installations) MintRepoToken(ctx context.Context, installationID int64, repo Repo) (Token, error) {
	client, err := s.Clients.NewAppClient()
	if err != nil {
		return Token{}, fmt.Errorf("mint token for %s: %w", repo.FullName(), err)
	}
	write := "write"
	tok, _, err := client.Apps.CreateInstallationToken(ctx, installationID, &gh.InstallationTokenOptions{
		Repositories: []string{repo.Name},
		Permissions:  &gh.InstallationPermissions{Contents: &write, PullRequests: &write},
	})
	if err != nil {
		if isNotFound(err) {
			return Token{}, fmt.Errorf("mint token for %s: %w", repo.FullName(), ErrInstallationNotFound)
		}
		return Token{}, fmt.Errorf("mint token for %s: %w", repo.FullName(), err)
	}
	if tok.GetToken() == "" {
		return Token{}, fmt.Errorf("mint token for %s: GitHub returned no token", repo.FullName())
	}
	granted := map[string]string{}
	if p := tok.GetPermissions(); p != nil {
		if v := p.GetContents(); v != "" {
			granted["contents"] = v
		}
		if v := p.GetPullRequests(); v != "" {
			granted["pull_requests"] = v
		}
		if v := p.GetMetadata(); v != "" {
			granted["metadata"] = v
		}
	}
	return Token{
		Value:        secret.New(tok.GetToken()),
		ExpiresAt:    tok.GetExpiresAt().Time,
		Repository:   repo.FullName(),
		Permissions:  granted,
		Installation: installationID,
	}, nil
}

func isNotFound(err error) bool { return isStatus(err, http.StatusNotFound) }
