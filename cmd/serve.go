package cmd

import (
	"context"
	"fmt"
	"io"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/internal/gcstart"
	"github.com/kukie/kukie-gitops/logging"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/render/helmexec"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/service"
)

func (p program) runServe(ctx context.Context, args []string, _, stderr io.Writer) int {
	// The service runs for days: its collector paces by GOGC from the start,
	// not by the start-up heap of a short command.
	gcstart.Restore()
	var f commonFlags
	var addr string
	fs := newFlagSet("serve", "serve [flags]",
		"Runs the HTTP service: GitHub webhooks, the team API, /healthz, /readyz and /metrics.\n"+
			"With no configuration it starts in the dev profile on SQLite (./kukie.db) at "+server.DefaultAddress+",\n"+
			"applying database migrations first. SIGTERM or SIGINT stops it gracefully: it stops\n"+
			"accepting connections, lets in-flight requests finish, then closes the database.", stderr)
	f.register(fs, true)
	fs.StringVar(&addr, "addr", "", "listen address host:port (default "+server.DefaultAddress+", or server.address)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kukie-gitops serve: unexpected arguments %v\n", fs.Args())
		return 2
	}
	cfg, profile, log, ok := loadConfig(f, stderr, func(c *config.Config) {
		if addr != "" {
			c.Server.Address = addr
		}
	})
	if !ok {
		return 1
	}
	ctx = log.WithContext(ctx)
	logging.LibraryOutputFrom(ctx).Use(log)
	log.Info().Str("profile", string(profile)).Object("config", cfg).Msg("Starting kukie-gitops " + service.Version)
	if err := p.serve(ctx, cfg, profile, log); err != nil {
		log.Error().Err(err).Msg("Stopped with an error")
		return 1
	}
	log.Info().Msg("Stopped")
	return 0
}

// serve opens the database, builds the service and serves until ctx is cancelled;
// the database is closed only after the service has stopped all its work.
func (p program) serve(ctx context.Context, cfg config.Config, profile config.Profile, log zerolog.Logger) error {
	db, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := db.Close(); err != nil {
			log.Error().Err(err).Msg("Closing the database failed")
		}
	}()
	if profile == config.Production {
		n, err := db.CountActiveAPITokens(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			log.Warn().Msg("No API tokens exist: every API request will be refused; create one with 'kukie-gitops token create --team NAME'")
		}
	}
	// Before the service renders anything: its renders take the configured
	// bound, and its Helm renders, from whichever part of it, share the
	// configured workers.
	defer render.SetTimeout(render.CurrentTimeout())
	render.SetTimeout(cfg.Render.Timeout)
	helmWorkers := helmexec.New(helmexec.Config{Workers: int(cfg.Render.HelmWorkers), MemoryBytes: cfg.Render.HelmWorkerMemory})
	render.SetHelmWorkers(helmWorkers)
	// Its workers end with the service; a later render starts a default pool.
	defer render.SetHelmWorkers(nil)
	// Kustomize builds likewise, in workers of their own size.
	kustomizeWorkers := helmexec.New(helmexec.Config{Workers: int(cfg.Render.KustomizeWorkers), MemoryBytes: cfg.Render.KustomizeWorkerMemory})
	render.SetKustomizeWorkers(kustomizeWorkers)
	defer render.SetKustomizeWorkers(nil)
	svc, err := service.New(ctx, cfg, db, log, service.WithHelmWorkers(helmWorkers), service.WithKustomizeWorkers(kustomizeWorkers))
	if err != nil {
		return err
	}
	if p.extraRoutes != nil {
		p.extraRoutes(svc)
	}
	return svc.Serve(ctx)
}
