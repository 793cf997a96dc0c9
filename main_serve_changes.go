package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/palantir/go-githubapp/githubapp"

	changesapi "github.com/kukie/kukie-gitops/api/changes"
	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/handler"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/metrics"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
)

func init() {
	registerServeComponent(serveComponent{Name: "changes", Mount: mountChanges})
	for _, build := range []func(handler.Base) githubapp.EventHandler{
		func(b handler.Base) githubapp.EventHandler {
			return &handler.PullRequest{Base: b, Pipeline: changes.events(b)}
		},
		func(b handler.Base) githubapp.EventHandler {
			return &handler.Push{Base: b, Pipeline: changes.events(b)}
		},
		func(b handler.Base) githubapp.EventHandler {
			return &handler.CheckRun{Base: b, Pipeline: changes.events(b)}
		},
		func(b handler.Base) githubapp.EventHandler {
			return &handler.CheckSuite{Base: b, Pipeline: changes.events(b)}
		},
		func(b handler.Base) githubapp.EventHandler {
			return &handler.IssueComment{Base: b, Pipeline: changes.events(b), Access: handler.GitHubWriteAccess{Base: b}}
		},
	} {
		registerWebhookHandler(build)
	}
}

// changes connects the change pipeline to the rest of the service. The pipeline
// needs the App's client creator, which the github-app component builds after this
// component mounts its routes; the routes and handlers therefore reach the pipeline
// through this holder, which answers "GitHub is not configured" until it exists.
var changes = &changeWiring{}

type changeWiring struct {
	mu            sync.Mutex
	env           serveEnv
	clusters      plan.KubeClusters
	clustersBuilt bool
	pipeline      *plan.Pipeline
	buildErr      error
	built         bool
}

// errPipelineUnavailable is why the change pipeline does not run without a GitHub
// App; it says what to configure, for the log line and for API answers.
var errPipelineUnavailable = errors.New("no GitHub App is configured, and the change pipeline writes through one: " +
	"set github.app_id and github.private_key_file (or KUKIE_GITHUB_APP_ID and KUKIE_GITHUB_PRIVATE_KEY) and restart")

func mountChanges(ctx context.Context, env serveEnv) (func(context.Context) error, error) {
	changes.reset(env)
	clusters, err := changes.kubeClusters(env)
	if err != nil {
		return nil, err
	}
	api := &changesapi.API{Store: env.DB, Pipeline: lazyPipeline{}, Apps: clusters}
	api.Mount(env.Server)
	return func(ctx context.Context) error {
		p, buildErr := changes.state()
		if p == nil {
			// Expected in a development setup without an App: the service runs, and
			// the change API answers 503 pipeline_unavailable with the same reason. A
			// build that failed for another reason was logged as an error already.
			if buildErr == nil || errors.Is(buildErr, errPipelineUnavailable) {
				env.Logger.Warn().Str("reason", errPipelineUnavailable.Error()).Msg("Change pipeline not available")
			}
			<-ctx.Done()
			return nil
		}
		if err := p.Start(env.Logger.WithContext(ctx)); err != nil {
			return err
		}
		<-ctx.Done()
		p.Close()
		return nil
	}, nil
}

// reset starts the wiring of one serve run: nothing of an earlier run in this
// process (its database, clusters or pipeline) is reused.
func (w *changeWiring) reset(env serveEnv) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.env = env
	w.clusters, w.clustersBuilt = plan.KubeClusters{}, false
	w.pipeline, w.buildErr, w.built = nil, nil, false
}

// kubeClusters returns the process's access to registered clusters, built on first
// use: the pipeline, the change API and the repository suggestions share one
// registry, so one cluster has one client set, rate limit and read cache.
func (w *changeWiring) kubeClusters(env serveEnv) (plan.KubeClusters, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.clustersBuilt {
		return w.clusters, nil
	}
	box := &sealed.Box{}
	if env.Config.Encryption.Key.IsSet() {
		key, err := env.Config.EncryptionKey()
		if err != nil {
			return plan.KubeClusters{}, err
		}
		if box, err = sealed.New(key); err != nil {
			return plan.KubeClusters{}, err
		}
	}
	reads, err := metrics.NewCluster(env.Metrics)
	if err != nil {
		return plan.KubeClusters{}, err
	}
	w.clusters = plan.KubeClusters{DB: env.DB, Registry: kube.NewClusters(kube.Options{Observer: reads}), Credentials: box,
		InClusterTeams: env.Config.Clusters.InClusterTeams}
	w.clustersBuilt = true
	return w.clusters, nil
}

// events builds the pipeline the first time a handler is built (when the App's
// client creator exists) and returns what handlers drive.
func (w *changeWiring) events(b handler.Base) handler.Pipeline {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.built {
		w.built = true
		p, err := w.build(b)
		if err != nil && !errors.Is(err, errPipelineUnavailable) {
			w.env.Logger.Error().Err(err).Msg("Change pipeline not available")
		}
		w.pipeline, w.buildErr = p, err
	}
	return lazyPipeline{}
}

func (w *changeWiring) build(b handler.Base) (*plan.Pipeline, error) {
	if b.ClientCreator == nil {
		return nil, errPipelineUnavailable
	}
	env := w.env
	archives, err := github.NewArchiveCache(archiveCacheDir(env.Config.Pipeline), env.Config.Pipeline.ArchiveCacheBytes, github.DefaultArchiveLimits)
	if err != nil {
		return nil, err
	}
	// Before-renders are kept beside the archives, in a quarter of their budget: an
	// app's render is much smaller than its repository.
	renders, err := github.NewRenderCache(archiveCacheDir(env.Config.Pipeline), env.Config.Pipeline.ArchiveCacheBytes/4)
	if err != nil {
		return nil, err
	}
	observer, err := metrics.NewPipeline(env.Metrics)
	if err != nil {
		return nil, err
	}
	if err := env.Metrics.Register(metrics.CacheCollector{"archive": archives, "render": renders}); err != nil {
		return nil, fmt.Errorf("register cache metrics: %w", err)
	}
	renderMetrics, err := metrics.NewRender(env.Metrics)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	return plan.New(plan.Deps{
		Store:       env.DB,
		Clusters:    w.clusters,
		Renderer:    plan.RenderEngine{Renders: renders, Observer: renderMetrics},
		Repos:       github.Repos{Clients: b.ClientCreator, Archives: archives},
		Connections: plan.StoreConnections{DB: env.DB},
		Observer:    observer,
	}, pipelineConfig(env.Config, b.App.BotLogin(), host+"-"+store.NewID())), nil
}

// pipelineConfig is the pipeline's configuration from the service's (validated) one.
func pipelineConfig(cfg config.Config, botLogin, workerID string) plan.Config {
	return plan.Config{
		WorkerID:      workerID,
		ClaimTTL:      cfg.Pipeline.ClaimTTL,
		DeployTimeout: cfg.Pipeline.DeployTimeout,
		DeployPoll:    cfg.Pipeline.DeployPollInterval,
		PublicURL:     cfg.Server.PublicURL,
		BotLogin:      botLogin,
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

func (w *changeWiring) get() *plan.Pipeline {
	p, _ := w.state()
	return p
}

// state returns the pipeline, or why it could not be built.
func (w *changeWiring) state() (*plan.Pipeline, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pipeline, w.buildErr
}

// lazyPipeline forwards to the pipeline once it exists.
type lazyPipeline struct{}

func pipelineOrErr() (*plan.Pipeline, error) {
	if p := changes.get(); p != nil {
		return p, nil
	}
	return nil, &plan.Error{Code: plan.CodePipelineUnavailable, Reason: errPipelineUnavailable.Error()}
}

func (lazyPipeline) Submit(ctx context.Context, teamID, actor string, req plan.Request) (store.Plan, bool, error) {
	p, err := pipelineOrErr()
	if err != nil {
		return store.Plan{}, false, err
	}
	return p.Submit(ctx, teamID, actor, req)
}

func (lazyPipeline) Cancel(ctx context.Context, teamID, code string) (store.Plan, error) {
	p, err := pipelineOrErr()
	if err != nil {
		return store.Plan{}, err
	}
	return p.Cancel(ctx, teamID, code)
}

func (lazyPipeline) Retry(ctx context.Context, teamID, code string) (store.Plan, error) {
	p, err := pipelineOrErr()
	if err != nil {
		return store.Plan{}, err
	}
	return p.Retry(ctx, teamID, code)
}

func (lazyPipeline) Rollback(ctx context.Context, teamID, code, requestedBy, reason string) (store.Plan, error) {
	p, err := pipelineOrErr()
	if err != nil {
		return store.Plan{}, err
	}
	return p.Rollback(ctx, teamID, code, requestedBy, reason)
}

func (lazyPipeline) Decide(ctx context.Context, cluster plan.ClusterRef, target objref.Target) argocd.Decision {
	changes.mu.Lock()
	clusters := changes.clusters
	changes.mu.Unlock()
	return clusters.Decide(ctx, cluster, target)
}

func (lazyPipeline) PlanForPull(ctx context.Context, repo, branch string) (store.Plan, bool, error) {
	p, err := pipelineOrErr()
	if err != nil {
		return store.Plan{}, false, err
	}
	return p.PlanForPull(ctx, repo, branch)
}

func (lazyPipeline) PullClosed(ctx context.Context, repo, branch string, number int64, merged bool, mergeSHA string) error {
	p, err := pipelineOrErr()
	if err != nil {
		return err
	}
	return p.PullClosed(ctx, repo, branch, number, merged, mergeSHA)
}

func (lazyPipeline) HeadPushed(ctx context.Context, repo, branch, sha, sender string) error {
	p, err := pipelineOrErr()
	if err != nil {
		return err
	}
	return p.HeadPushed(ctx, repo, branch, sha, sender)
}

func (lazyPipeline) BasePushed(ctx context.Context, repo, branch, after string, changed []string) error {
	p, err := pipelineOrErr()
	if err != nil {
		return err
	}
	return p.BasePushed(ctx, repo, branch, after, changed)
}

func (lazyPipeline) Reverify(ctx context.Context, code string) error {
	p, err := pipelineOrErr()
	if err != nil {
		return err
	}
	return p.Reverify(ctx, code)
}

// ConnectionsRevoked implements handler.RevocationListener.
func (lazyPipeline) ConnectionsRevoked(ctx context.Context, revoked []store.RepoConnection, reason string) error {
	p := changes.get()
	if p == nil {
		return nil // no pipeline, no plans to stop
	}
	return p.ConnectionsRevoked(ctx, revoked, reason)
}
