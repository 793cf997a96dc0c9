// Package service builds the kukie-gitops service in one place, New, in the order its
// parts need each other: the metrics registry, the GitHub App's client creator and
// identity, cluster access, the change pipeline, the webhook handlers and inbox, and
// then every route, listed in one table (Routes). It owns that wiring and the running
// of the background work (inbox workers, pipeline, notification deliveries, metrics
// listener).
//
// It holds no business logic, reads no flags or configuration files and validates no
// configuration: the caller (cmd's serve, the tests) hands it a configuration that
// config.Check has accepted for the caller's profile, and an open, migrated database. Profile rules
// (what production refuses) live in config only. Nothing here is global but Version,
// set at link time: two services in one process share nothing.
package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	changesapi "github.com/kukie/kukie-gitops/api/changes"
	"github.com/kukie/kukie-gitops/api/setup"
	"github.com/kukie/kukie-gitops/api/webhook"
	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/handler"
	"github.com/kukie/kukie-gitops/helmrepo"
	"github.com/kukie/kukie-gitops/internal/poll"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/mcp"
	"github.com/kukie/kukie-gitops/metrics"
	"github.com/kukie/kukie-gitops/notify"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/prcheck"
	"github.com/kukie/kukie-gitops/ratelimit"
	"github.com/kukie/kukie-gitops/render/helmexec"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
	"github.com/kukie/kukie-gitops/web"
)

// Version is this build's version, set when linking
// (-ldflags "-X github.com/kukie/kukie-gitops/service.Version=v1.2.3"). The service
// names itself with it to GitHub (User-Agent) and in its start log.
var Version = "dev"

// Service is the wired service. Handler serves its routes; Run (or Serve, which also
// listens) runs its background work.
type Service struct {
	log    zerolog.Logger
	server *server.Server
	inbox  *handler.Inbox
	// pipeline is the running pipeline, nil when it is unavailable (then
	// unavailable says why).
	pipeline    *plan.Pipeline
	unavailable *unavailablePipeline
	metrics     *metricsExposition
	notifier    *notify.Worker
	checks      prcheck.Pruner
	// clusters are the cluster client sets, closed once the background work that
	// follows clusters has stopped.
	clusters *kube.Clusters
	// pullSweeps is how often the pipeline's open pull requests are read.
	pullSweeps time.Duration
}

// Option adjusts New: for a test, or to hand it what the caller owns.
type Option func(*options)

type options struct {
	hooks            plan.Hooks
	watchRecheck     time.Duration
	helmWorkers      *helmexec.Pool
	kustomizeWorkers *helmexec.Pool
}

// WithHelmWorkers has the service report p's Helm worker processes on its
// metrics (p's observer becomes the service's). The pool stays the caller's to
// close: every render of the process shares it (render.SetHelmWorkers).
func WithHelmWorkers(p *helmexec.Pool) Option { return func(o *options) { o.helmWorkers = p } }

// WithKustomizeWorkers has the service report p's kustomize worker processes on
// its metrics; the caller made it the process's pool
// (render.SetKustomizeWorkers) and closes it.
func WithKustomizeWorkers(p *helmexec.Pool) Option {
	return func(o *options) { o.kustomizeWorkers = p }
}

// WithPipelineHooks passes hooks to the pipeline, so a test can stop a plan at a step
// as a crash would.
func WithPipelineHooks(h plan.Hooks) Option { return func(o *options) { o.hooks = h } }

// WithWatchRecheck bounds each watch request of the cluster informers to d
// (kube.Options.WatchRecheck), so a test meets revoked credentials within it.
func WithWatchRecheck(d time.Duration) Option { return func(o *options) { o.watchRecheck = d } }

// clusterOptions are the options of every cluster's client set: the operator's
// bounds from cfg, the read metrics, and a test's watch recheck (0: kube's default).
func clusterOptions(cfg config.Config, reads kube.ReadObserver, watchRecheck time.Duration) kube.Options {
	return kube.Options{Observer: reads, WatchRecheck: watchRecheck, MaxResponseBytes: cfg.Clusters.MaxResponseBytes}
}

// New builds the service on db (open and migrated) from cfg (validated). It calls
// GitHub once (GET /app) when an App is configured, to learn the App's identity.
func New(ctx context.Context, cfg config.Config, db *store.DB, logger zerolog.Logger, opts ...Option) (*Service, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	ctx = logger.WithContext(ctx)
	s := &Service{log: logger, pullSweeps: cfg.Pipeline.PullSweepInterval}

	// 1. Metrics: one registry every part records on; GET /metrics exposes it.
	registry, err := newRegistry()
	if err != nil {
		return nil, err
	}
	if err := registry.Register(metrics.StoreCollector{Store: db}); err != nil {
		return nil, fmt.Errorf("register store metrics: %w", err)
	}
	if o.helmWorkers != nil {
		helmMetrics, err := metrics.NewHelmWorkers(registry, o.helmWorkers)
		if err != nil {
			return nil, err
		}
		o.helmWorkers.SetObserver(helmMetrics)
	}
	if o.kustomizeWorkers != nil {
		kustomizeMetrics, err := metrics.NewKustomizeWorkers(registry, o.kustomizeWorkers)
		if err != nil {
			return nil, err
		}
		o.kustomizeWorkers.SetObserver(kustomizeMetrics)
	}
	s.metrics = newMetricsExposition(ctx, registry, cfg.Metrics.Address)

	// 2. GitHub: the App's client creator and identity, or none in a dev run without
	// an App.
	gh, err := connectGitHub(ctx, cfg, registry)
	if err != nil {
		return nil, err
	}

	// 3. Cluster access: one credentials box and one registry of cluster clients,
	// shared by the cluster API, the repository suggestions and the pipeline, so one
	// cluster has one client set, rate limit and read cache.
	credentials, err := credentialsBox(cfg)
	if err != nil {
		return nil, err
	}
	if !cfg.Encryption.Key.IsSet() {
		logger.Warn().Msg("No encryption key configured: clusters can be registered in-cluster only, not by kubeconfig")
	}
	if len(cfg.Clusters.InClusterTeams) > 0 {
		logger.Warn().Strs("teams", cfg.Clusters.InClusterTeams).
			Msg("In-cluster access is on: these teams may reach this cluster with the service's own service account")
	}
	if cfg.Clusters.AllowInsecureTLS {
		logger.Warn().Msg("Kubeconfigs without TLS verification are accepted (clusters.allow_insecure_tls): their credentials go to whoever answers at their server's address")
	}
	reads, err := metrics.NewCluster(registry)
	if err != nil {
		return nil, err
	}
	s.clusters = kube.NewClusters(clusterOptions(cfg, reads, o.watchRecheck))
	clusters := clusteraccess.Clusters{DB: db, Registry: s.clusters, Credentials: credentials,
		InClusterTeams: cfg.Clusters.InClusterTeams, AllowInsecureTLS: cfg.Clusters.AllowInsecureTLS}
	// A watch whose credentials the cluster refuses looks in the store for newer
	// ones, which another replica may have taken from the team.
	s.clusters.SetAccessSource(clusters.AccessByID)

	// 4. The change pipeline, or the one stand-in that says why it does not run, and
	// the checks of pull requests the pipeline did not open, through the same
	// repository snapshots.
	var pipeline Pipeline
	var checks handler.PullChecker
	var checker *prcheck.Checker
	if gh.clients == nil {
		s.unavailable = &unavailablePipeline{clusters: clusters, reason: errNoGitHubApp}
		pipeline = s.unavailable
	} else if s.pipeline, checker, err = newPipeline(cfg, db, clusters, gh, registry, o.hooks); err != nil {
		// The service still serves everything else, and the change API says it
		// cannot take changes; the error itself (paths of this host) goes only to the
		// operator's log.
		logger.Error().Err(err).Msg("Change pipeline not available")
		s.unavailable = &unavailablePipeline{clusters: clusters, reason: errPipelineNotBuilt}
		pipeline = s.unavailable
	} else {
		pipeline, checks = s.pipeline, checker
	}

	// 5. Webhook handlers, one per event family, and the inbox that feeds them.
	if !cfg.GitHub.WebhookSecret.IsSet() {
		logger.Warn().Msg("No webhook secret configured: every webhook delivery is refused (503)")
	}
	base := handler.Base{ClientCreator: gh.clients, Store: db, App: gh.app, WebHost: gh.webHost, Revocations: pipeline}
	inboxMetrics, err := metrics.NewInbox(registry)
	if err != nil {
		return nil, err
	}
	// Superseded checks are kept as long as the deliveries that started them.
	s.checks = prcheck.Pruner{Store: db, Retention: cfg.Webhooks.Retention, Interval: time.Hour}
	s.inbox, err = handler.NewInbox(db, handler.InboxOptions{Retention: cfg.Webhooks.Retention, Outcome: inboxMetrics.Outcome},
		&handler.Installation{Base: base},
		&handler.InstallationRepositories{Base: base},
		&handler.PullRequest{Base: base, Pipeline: pipeline, Checks: checks},
		&handler.Push{Base: base, Pipeline: pipeline, Checks: checks},
		&handler.CheckRun{Base: base, Pipeline: pipeline, Checks: checks},
		&handler.CheckSuite{Base: base, Pipeline: pipeline, Checks: checks},
		&handler.MergeGroup{Base: base, Checks: checks},
		&handler.IssueComment{Base: base, Pipeline: pipeline, Access: handler.GitHubWriteAccess{Base: base}},
	)
	if err != nil {
		return nil, err
	}

	// 6. The HTTP server and every route.
	var devTeam *store.Team
	if cfg.Auth.DevTeam != "" {
		t, err := db.EnsureTeam(ctx, cfg.Auth.DevTeam)
		if err != nil {
			return nil, fmt.Errorf("dev team: %w", err)
		}
		devTeam = &t
		logger.Warn().Str("team", t.Name).Msg("INSECURE: dev authentication is on; requests without a token act as this team")
	}
	httpMetrics, err := metrics.NewHTTP(registry)
	if err != nil {
		return nil, err
	}
	perClient, err := ratelimit.New("requests from this address", int(cfg.RateLimits.ClientPerMinute), int(cfg.RateLimits.ClientBurst))
	if err != nil {
		return nil, err
	}
	teamChanges, err := ratelimit.New("changes for this team", int(cfg.RateLimits.TeamChangesPerMinute), int(cfg.RateLimits.TeamChangesBurst))
	if err != nil {
		return nil, err
	}
	teamRepository, err := ratelimit.New("repository reads for this team", int(cfg.RateLimits.TeamRepositoryPerMinute), int(cfg.RateLimits.TeamRepositoryBurst))
	if err != nil {
		return nil, err
	}
	teamClusterReads, err := ratelimit.New("cluster reads for this team", int(cfg.RateLimits.TeamClusterReadsPerMinute), int(cfg.RateLimits.TeamClusterReadsBurst))
	if err != nil {
		return nil, err
	}
	teamAdmin, err := ratelimit.New("administrative calls for this team", int(cfg.RateLimits.TeamAdminPerMinute), int(cfg.RateLimits.TeamAdminBurst))
	if err != nil {
		return nil, err
	}
	s.server, err = server.New(server.Config{
		Address:           cfg.Server.Address,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		ReadTimeout:       cfg.Server.ReadTimeout,
		WriteTimeout:      cfg.Server.WriteTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		ShutdownTimeout:   cfg.Server.ShutdownTimeout,
		DrainDelay:        cfg.Server.DrainDelay,
		MaxBodyBytes:      cfg.Server.MaxBodyBytes,
		HSTS:              strings.HasPrefix(cfg.Server.PublicURL, "https://"),
		TrustForwardedFor: cfg.Server.TrustForwardedFor,
	}, server.Deps{
		Logger:    logger,
		Auth:      db,
		DevTeam:   devTeam,
		Ready:     s.readiness(db),
		Requests:  httpMetrics,
		PerClient: perClient,
	})
	if err != nil {
		return nil, err
	}
	changes := &changesapi.API{Store: db, Pipeline: pipeline, Apps: clusters, ChangeLimit: teamChanges,
		RepositoryLimit: teamRepository, ClusterReadLimit: teamClusterReads}
	notificationMetrics, err := metrics.NewNotifications(registry)
	if err != nil {
		return nil, err
	}
	s.notifier = &notify.Worker{Store: db, Credentials: credentials, AllowPrivateNetworks: cfg.Notifications.AllowPrivateNetworks,
		Retention: cfg.Notifications.Retention, Outcome: notificationMetrics.Outcome}
	pages, err := newPages(cfg, db, gh)
	if err != nil {
		return nil, err
	}
	routes(s.server, s.metrics,
		&webhook.Receiver{Store: db, Secret: cfg.GitHub.WebhookSecret, Inbox: s.inbox},
		&setup.API{
			Store:            db,
			GitHub:           gh.installations,
			Installer:        gh.installer,
			App:              gh.app,
			WebHost:          gh.webHost,
			Credentials:      credentials,
			InClusterTeams:   cfg.Clusters.InClusterTeams,
			AllowInsecureTLS: cfg.Clusters.AllowInsecureTLS,
			AppRepos:         setup.ApplicationRepos{Clusters: clusters},
			Access:           clusters,
			AdminLimit:       teamAdmin,
		},
		changes,
		mcp.New(mcp.Deps{Changes: changes, Trees: pipeline, Version: Version}),
		&notify.API{Store: db, Credentials: credentials, AllowHTTP: cfg.Notifications.AllowHTTP,
			AllowPrivateNetworks: cfg.Notifications.AllowPrivateNetworks},
		pages)
	return s, nil
}

// readiness is what /readyz checks: the database answers (on a connection of
// its own, so a pool busy with work is a warning, not a failure), every migration is
// applied, and the change pipeline runs unless no App is configured (a replica
// whose pipeline could not be built takes no changes and checks no pull request
// until it is fixed and restarted, so it must not be counted in a rollout).
// GitHub is not asked: it is another system, and a replica could not do better
// than its peers without it; an outage there would only take every replica out
// at once.
func (s *Service) readiness(db *store.DB) []server.Check {
	checks := []server.Check{
		{Name: "database", Check: db.PingReady, Warn: db.PoolBusy},
		{Name: "migrations", Check: db.SchemaReady},
	}
	if s.unavailable != nil && errors.Is(s.unavailable.reason, errPipelineNotBuilt) {
		checks = append(checks, server.Check{Name: "pipeline", Check: func(context.Context) error { return errPipelineNotBuilt }})
	}
	return checks
}

// newPages builds the web pages, signing people in through the App's OAuth client
// when it is configured (the pages say sign-in is not set up otherwise).
func newPages(cfg config.Config, db *store.DB, gh gitHub) (*web.Pages, error) {
	pageLimit, err := ratelimit.New("pages for this person", int(cfg.RateLimits.UserPagesPerMinute), int(cfg.RateLimits.UserPagesBurst))
	if err != nil {
		return nil, err
	}
	deps := web.Deps{Plans: db, Checks: db, PublicURL: cfg.Server.PublicURL, PageLimit: pageLimit}
	if gh.userAuth != nil {
		key, err := web.SessionKey(cfg.GitHub.ClientSecret)
		if err != nil {
			return nil, err
		}
		deps.SignIn, deps.SessionKey = gh.userAuth, key
	}
	return web.New(deps)
}

// routes mounts every route of Routes on srv: each API mounts its own, with the
// scope each needs, and server.New has mounted the health endpoints.
func routes(srv *server.Server, m *metricsExposition, hooks *webhook.Receiver, app *setup.API, changes *changesapi.API, tools *mcp.Server, notifications *notify.API, pages *web.Pages) {
	hooks.Mount(srv)
	app.Mount(srv)
	changes.Mount(srv)
	tools.Mount(srv)
	notifications.Mount(srv)
	pages.Mount(srv)
	if m.address == "" {
		srv.Handle("GET "+MetricsPath, m.handler)
	}
}

// Handler serves every route of the service, with the server's middleware.
func (s *Service) Handler() http.Handler { return s.server.Handler() }

// Handle mounts one more route beside the route table, with the server's middleware
// (tests mount probes this way).
func (s *Service) Handle(pattern string, h http.Handler, opts ...server.RouteOption) {
	s.server.Handle(pattern, h, opts...)
}

// Serve runs the service on its configured address: the background work, and the
// HTTP server until ctx is cancelled. Then the server stops accepting connections and
// drains in-flight requests, and only after that is background work stopped and
// waited for, so the caller may close the database once Serve returns.
func (s *Service) Serve(ctx context.Context) error {
	stop, err := s.start(ctx)
	if err != nil {
		return err
	}
	err = s.server.Run(ctx)
	// The server may also have failed to start; background work stops either way.
	stop()
	return err
}

// Addr is the address the HTTP server listens on once Serve does; nil before.
func (s *Service) Addr() net.Addr { return s.server.Addr() }

// Run runs the background work (webhook inbox workers, the pipeline, the metrics
// listener when metrics.address is set) until ctx is cancelled, and returns once all
// of it has stopped. For callers that serve Handler themselves.
func (s *Service) Run(ctx context.Context) error {
	stop, err := s.start(ctx)
	if err != nil {
		return err
	}
	<-ctx.Done()
	stop()
	return nil
}

// start starts the background work and returns the function that stops it and waits
// for it. A metrics address that cannot be listened on stops the start.
func (s *Service) start(ctx context.Context) (stop func(), err error) {
	ctx = s.log.WithContext(ctx)
	type task struct {
		name string
		run  func(context.Context) error
	}
	background := []task{
		{"webhook inbox", func(ctx context.Context) error { s.inbox.Run(ctx); return nil }},
		{"change pipeline", s.runPipeline},
		{"pull request sweep", s.runPullSweep},
		{"notifications", func(ctx context.Context) error { s.notifier.Run(ctx); return nil }},
		{"pull check pruning", func(ctx context.Context) error { s.checks.Run(ctx); return nil }},
	}
	if s.metrics.address != "" {
		serveMetrics, err := s.metrics.listen(ctx)
		if err != nil {
			return nil, err
		}
		background = append(background, task{"metrics listener", serveMetrics})
	}
	bgCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, t := range background {
		wg.Go(func() {
			if err := t.run(bgCtx); err != nil && !errors.Is(err, context.Canceled) {
				s.log.Error().Err(err).Str("component", t.name).Msg("Background work stopped with an error")
			}
		})
	}
	return func() {
		cancel()
		wg.Wait()
		// The pipeline's follows have ended; the informers readers still hold (for
		// a while after their last read) and any still starting end here.
		s.clusters.Close()
	}, nil
}

// runPipeline runs the pipeline until ctx is cancelled.
func (s *Service) runPipeline(ctx context.Context) error {
	if s.pipeline == nil {
		// Expected in a development setup without an App: the service runs, and the
		// change API answers 503 pipeline_unavailable with the same reason. A build
		// that failed for another reason was logged as an error already.
		if errors.Is(s.unavailable.reason, errNoGitHubApp) {
			s.log.Warn().Str("reason", errNoGitHubApp.Error()).Msg("Change pipeline not available")
		}
		<-ctx.Done()
		return nil
	}
	if err := s.pipeline.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	s.pipeline.Close()
	return nil
}

// runPullSweep reads the open pull requests of the pipeline's plans every
// pipeline.pull_sweep_interval, from the start (a restart catches up on the events
// it missed while down), until ctx is cancelled. The replicas share the reads
// through the store, so starting together reads nothing twice.
func (s *Service) runPullSweep(ctx context.Context) error {
	if s.pipeline == nil {
		<-ctx.Done() // runPipeline says why
		return nil
	}
	poll.Loop{
		Interval:  s.pullSweeps,
		Failed:    "Sweep of open pull requests failed",
		Recovered: "Sweep of open pull requests works again",
	}.Run(ctx, func(ctx context.Context) error {
		res, err := s.pipeline.SweepPulls(ctx, time.Now())
		if err != nil {
			return err
		}
		ev := zerolog.Ctx(ctx).Debug()
		if res.Found > 0 || res.Failed > 0 || res.RateLimited > 0 {
			ev = zerolog.Ctx(ctx).Info()
		}
		ev.Int("open", res.Open).Int("found", res.Found).Int("failed", res.Failed).Int("rate_limited", res.RateLimited).
			Msg("Open pull requests swept")
		return nil
	})
	return nil
}

// credentialsBox is the box sealing stored cluster credentials: the configured
// encryption key's, or an empty box that refuses to seal without one.
func credentialsBox(cfg config.Config) (*sealed.Box, error) {
	if !cfg.Encryption.Key.IsSet() {
		return &sealed.Box{}, nil
	}
	key, err := cfg.EncryptionKey()
	if err != nil {
		return nil, err
	}
	return sealed.New(key)
}

// newPipeline builds the change pipeline over the App's clients, with its archive and
// render caches, and the checks of pull requests it does not open, through which it
// publishes kukie/policy on its own heads.
func newPipeline(cfg config.Config, db *store.DB, clusters clusteraccess.Clusters, gh gitHub, registry *prometheus.Registry, hooks plan.Hooks) (*plan.Pipeline, *prcheck.Checker, error) {
	archives, err := cache.NewArchives(archiveCacheDir(cfg.Pipeline), cfg.Pipeline.ArchiveCacheBytes, cache.DefaultArchiveLimits)
	if err != nil {
		return nil, nil, err
	}
	repos := github.Repos{Clients: gh.clients, Archives: archives}
	// Before-renders are kept beside the archives, in a quarter of their budget: an
	// app's render is much smaller than its repository.
	renders, err := cache.NewRenders(archiveCacheDir(cfg.Pipeline), cfg.Pipeline.ArchiveCacheBytes/4)
	if err != nil {
		return nil, nil, err
	}
	observer, err := metrics.NewPipeline(registry)
	if err != nil {
		return nil, nil, err
	}
	if err := registry.Register(metrics.CacheCollector{"archive": archives, "render": renders}); err != nil {
		return nil, nil, fmt.Errorf("register cache metrics: %w", err)
	}
	renderMetrics, err := metrics.NewRender(registry)
	if err != nil {
		return nil, nil, err
	}
	checks := &prcheck.Checker{GitHub: repos, Connections: prcheck.StoreConnections{DB: db}, Applications: clusterApplications{clusters},
		Capabilities: clusterApplications{clusters}, Destinations: clusters, Records: db, PublicURL: cfg.Server.PublicURL, DryRun: clusters}
	host, _ := os.Hostname()
	return plan.New(plan.Deps{
		Store:       db,
		Clusters:    clusters,
		Renderer:    cache.RenderEngine{Renders: renders, Observer: renderMetrics, Charts: helmrepo.New()},
		Repos:       repos,
		Connections: clusteraccess.Connections{DB: db},
		Policy:      checks,
		Observer:    observer,
		Hooks:       hooks,
	}, pipelineConfig(cfg, gh.app.BotLogin(), host+"-"+store.NewID())), checks, nil
}

// pipelineConfig is the pipeline's configuration from the service's (validated) one.
func pipelineConfig(cfg config.Config, botLogin, workerID string) plan.Config {
	return plan.Config{
		WorkerID:          workerID,
		ClaimTTL:          cfg.Pipeline.ClaimTTL,
		DeployTimeout:     cfg.Pipeline.DeployTimeout,
		DeployPoll:        cfg.Pipeline.DeployPollInterval,
		PublicURL:         cfg.Server.PublicURL,
		BotLogin:          botLogin,
		PullSweepInterval: cfg.Pipeline.PullSweepInterval,
	}
}

// archiveCacheDir is pipeline.cache_dir, or kukie-gitops in the user's cache
// directory (the temporary directory when there is none, as for a user without a
// home).
func archiveCacheDir(p config.Pipeline) string {
	if p.CacheDir != "" {
		return p.CacheDir
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "kukie-gitops")
}

// clusterApplications reads a team's cluster's Applications and capabilities
// for the pull request checks through the pipeline's cluster access.
type clusterApplications struct{ clusters clusteraccess.Clusters }

func (c clusterApplications) Applications(ctx context.Context, teamID, cluster string) ([]argocd.Application, error) {
	return c.clusters.Applications(ctx, clusteraccess.Ref{TeamID: teamID, Name: cluster})
}

func (c clusterApplications) Capabilities(ctx context.Context, teamID, cluster string) (kube.Capabilities, error) {
	return c.clusters.Capabilities(ctx, clusteraccess.Ref{TeamID: teamID, Name: cluster})
}
