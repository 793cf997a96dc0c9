package service

import (
	"context"
	"fmt"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/api/setup"
	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/plan"
)

// gitHub is the service's side of GitHub: the App's clients and identity, or, in a
// dev run without an App, nil clients and endpoints that say GitHub is not
// configured.
type gitHub struct {
	// clients is nil without an App.
	clients       githubapp.ClientCreator
	app           github.App
	webHost       string
	installations setup.GitHubApps
	// installer is nil without the App's client credentials.
	installer setup.InstallerCheck
	// userAuth is the App's OAuth client, nil without its client credentials: the
	// installer check and the web pages' sign-in.
	userAuth *github.UserInstallations
}

// connectGitHub builds the App's client creator and reads the App's identity
// (GET /app) when an App is configured.
func connectGitHub(ctx context.Context, cfg config.Config, registry *prometheus.Registry) (gitHub, error) {
	log := zerolog.Ctx(ctx)
	ghCfg := github.Config{
		AppID:        cfg.GitHub.AppID,
		PrivateKey:   cfg.GitHub.PrivateKey,
		APIURL:       cfg.GitHub.APIURL,
		GraphQLURL:   cfg.GitHub.GraphQLURL,
		WebURL:       cfg.GitHub.WebURL,
		UserAgent:    github.DefaultUserAgent + "/" + Version,
		ClientID:     cfg.GitHub.ClientID,
		ClientSecret: cfg.GitHub.ClientSecret,
		Timeout:      cfg.GitHub.RequestTimeout,
	}
	webHost, err := ghCfg.WebHost()
	if err != nil {
		return gitHub{}, err
	}
	gh := gitHub{webHost: webHost}
	if cfg.GitHub.AppID == 0 || !cfg.GitHub.PrivateKey.IsSet() {
		log.Warn().Msg("No GitHub App configured (github.app_id and the private key): install links, installations, repository " +
			"connections, repository tokens and the setup callback answer 503 " + setup.CodeGitHubNotConfigured + ", and changes 503 " + plan.CodePipelineUnavailable)
		gh.installations = unconfiguredGitHub{}
		return gh, nil
	}
	cc, err := github.NewClientCreator(ghCfg, registry)
	if err != nil {
		return gitHub{}, err
	}
	app, err := github.LoadApp(ctx, cc)
	if err != nil {
		return gitHub{}, fmt.Errorf("identify the GitHub App (GET /app): %w", err)
	}
	if cfg.GitHub.AppSlug != "" && cfg.GitHub.AppSlug != app.Slug {
		log.Warn().Str("configured", cfg.GitHub.AppSlug).Str("github", app.Slug).Msg("Configured app slug differs from GitHub's; using GitHub's")
	}
	log.Info().Int64("app_id", app.ID).Str("bot", app.BotLogin()).Msg("GitHub App identified")
	gh.clients, gh.app, gh.installations = cc, app, github.Installations{Clients: cc}
	if cfg.GitHub.UserAuthorization() {
		if gh.userAuth, err = github.NewUserInstallations(ghCfg, cc); err != nil {
			return gitHub{}, err
		}
		gh.installer = gh.userAuth
	} else {
		log.Warn().Msg("INSECURE: no GitHub App client id and secret configured: the setup callback binds installations " +
			"without checking that the installer can access them; anyone with an install link could bind another's installation")
	}
	return gh, nil
}

// unconfiguredGitHub stands in for GitHub in a dev run without an App.
type unconfiguredGitHub struct{}

// errGitHubUnconfigured is setup's answer; the endpoints that would call these
// refuse before they do.
var errGitHubUnconfigured = setup.ErrGitHubNotConfigured

func (unconfiguredGitHub) Get(context.Context, int64) (github.Installation, error) {
	return github.Installation{}, errGitHubUnconfigured
}

func (unconfiguredGitHub) Repositories(context.Context, int64, string) ([]github.RepoRef, error) {
	return nil, errGitHubUnconfigured
}

func (unconfiguredGitHub) MintRepoToken(context.Context, int64, github.Repo) (github.Token, error) {
	return github.Token{}, errGitHubUnconfigured
}
