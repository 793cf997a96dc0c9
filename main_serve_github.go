package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/kukie/kukie-gitops/api/setup"
	"github.com/kukie/kukie-gitops/api/webhook"
	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/handler"
	"github.com/kukie/kukie-gitops/metrics"
	"github.com/kukie/kukie-gitops/store/sealed"
)

func init() {
	registerServeComponent(serveComponent{Name: "github-app", Mount: mountGitHubApp})
}

// webhookHandlers build the event handlers the inbox dispatches to. Features add
// theirs with registerWebhookHandler from their own main_serve_<feature>.go.
var webhookHandlers = []func(handler.Base) githubapp.EventHandler{
	func(b handler.Base) githubapp.EventHandler { return &handler.Installation{Base: b} },
	func(b handler.Base) githubapp.EventHandler { return &handler.InstallationRepositories{Base: b} },
}

func registerWebhookHandler(h func(handler.Base) githubapp.EventHandler) {
	webhookHandlers = append(webhookHandlers, h)
}

// mountGitHubApp wires the GitHub App core: the client creator and the App's
// identity (read once with GET /app), the setup callback, webhook receiver, cluster,
// repository and token endpoints, and the webhook inbox workers.
func mountGitHubApp(ctx context.Context, env serveEnv) (func(context.Context) error, error) {
	cfg := env.Config
	log := env.Logger

	credentials := &sealed.Box{}
	if cfg.Encryption.Key.IsSet() {
		key, err := cfg.EncryptionKey()
		if err != nil {
			return nil, err
		}
		if credentials, err = sealed.New(key); err != nil {
			return nil, err
		}
	} else {
		if env.Profile == config.Production {
			return nil, errors.New("no encryption key for stored credentials; refusing to start in production")
		}
		log.Warn().Msg("No encryption key configured: clusters can be registered in-cluster only, not by kubeconfig")
	}
	if len(cfg.Clusters.InClusterTeams) > 0 {
		log.Warn().Strs("teams", cfg.Clusters.InClusterTeams).
			Msg("In-cluster access is on: these teams may reach this cluster with the service's own service account")
	}
	if !cfg.GitHub.WebhookSecret.IsSet() {
		log.Warn().Msg("No webhook secret configured: every webhook delivery is refused (503)")
	}

	ghCfg := github.Config{
		AppID:        cfg.GitHub.AppID,
		PrivateKey:   cfg.GitHub.PrivateKey,
		APIURL:       cfg.GitHub.APIURL,
		GraphQLURL:   cfg.GitHub.GraphQLURL,
		WebURL:       cfg.GitHub.WebURL,
		UserAgent:    github.DefaultUserAgent + "/" + version,
		ClientID:     cfg.GitHub.ClientID,
		ClientSecret: cfg.GitHub.ClientSecret,
		Timeout:      cfg.GitHub.RequestTimeout,
	}
	webHost, err := ghCfg.WebHost()
	if err != nil {
		return nil, err
	}
	clusters, err := changes.kubeClusters(env)
	if err != nil {
		return nil, err
	}
	api := &setup.API{
		Store:          env.DB,
		WebHost:        webHost,
		Credentials:    credentials,
		InClusterTeams: cfg.Clusters.InClusterTeams,
		AppRepos:       setup.ApplicationRepos{Clusters: clusters},
	}
	base := handler.Base{Store: env.DB, WebHost: webHost, Revocations: lazyPipeline{}}

	if cfg.GitHub.AppID == 0 || !cfg.GitHub.PrivateKey.IsSet() {
		if env.Profile == config.Production {
			return nil, errors.New("the GitHub App id and private key are required in production")
		}
		log.Warn().Msg("No GitHub App configured: installation, repository and token endpoints answer that GitHub is not configured")
		api.GitHub = unconfiguredGitHub{}
	} else {
		cc, err := github.NewClientCreator(ghCfg, env.Metrics)
		if err != nil {
			return nil, err
		}
		app, err := github.LoadApp(ctx, cc)
		if err != nil {
			return nil, fmt.Errorf("identify the GitHub App (GET /app): %w", err)
		}
		if cfg.GitHub.AppSlug != "" && cfg.GitHub.AppSlug != app.Slug {
			log.Warn().Str("configured", cfg.GitHub.AppSlug).Str("github", app.Slug).Msg("Configured app slug differs from GitHub's; using GitHub's")
		}
		log.Info().Int64("app_id", app.ID).Str("bot", app.BotLogin()).Msg("GitHub App identified")
		api.GitHub = github.Installations{Clients: cc}
		api.App = app
		if cfg.GitHub.UserAuthorization() {
			if api.Installer, err = github.NewUserInstallations(ghCfg, cc); err != nil {
				return nil, err
			}
		} else {
			if env.Profile == config.Production {
				return nil, errors.New("the GitHub App's client id and client secret are required in production")
			}
			log.Warn().Msg("INSECURE: no GitHub App client id and secret configured: the setup callback binds installations " +
				"without checking that the installer can access them; anyone with an install link could bind another's installation")
		}
		base.ClientCreator, base.App = cc, app
	}

	handlers := make([]githubapp.EventHandler, len(webhookHandlers))
	for i, build := range webhookHandlers {
		handlers[i] = build(base)
	}
	inboxMetrics, err := metrics.NewInbox(env.Metrics)
	if err != nil {
		return nil, err
	}
	inbox, err := handler.NewInbox(env.DB, handler.InboxOptions{Retention: cfg.Webhooks.Retention, Outcome: inboxMetrics.Outcome}, handlers...)
	if err != nil {
		return nil, err
	}
	api.Mount(env.Server)
	(&webhook.Receiver{Store: env.DB, Secret: cfg.GitHub.WebhookSecret, Inbox: inbox}).Mount(env.Server)
	return func(ctx context.Context) error {
		inbox.Run(ctx)
		return nil
	}, nil
}

// unconfiguredGitHub stands in for GitHub in a dev run without an App.
type unconfiguredGitHub struct{}

var errGitHubUnconfigured = errors.New("no GitHub App is configured (github.app_id and the private key)")

func (unconfiguredGitHub) Get(context.Context, int64) (github.Installation, error) {
	return github.Installation{}, errGitHubUnconfigured
}

func (unconfiguredGitHub) Repositories(context.Context, int64, string) ([]github.RepoRef, error) {
	return nil, errGitHubUnconfigured
}

func (unconfiguredGitHub) MintRepoToken(context.Context, int64, github.Repo) (github.Token, error) {
	return github.Token{}, errGitHubUnconfigured
}
