package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/logging"
	"github.com/kukie/kukie-gitops/metrics"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
)

func init() {
	register(command{
		Name:    "serve",
		Summary: "run the HTTP service (webhooks, API, health endpoints)",
		Run:     runServe,
	})
}

// serveEnv is what a serve component gets to wire itself in.
type serveEnv struct {
	Config  config.Config
	Profile config.Profile
	DB      *store.DB
	Server  *server.Server
	Logger  zerolog.Logger
	// Metrics is the registry GET /metrics exposes; components register what they
	// record on it instead of on a process-wide default.
	Metrics *prometheus.Registry
}

// serveComponent is a feature that mounts routes on the server and may run work in
// the background (such as webhook inbox workers) until shutdown. Features register
// one from their own main_serve_<feature>.go file with registerServeComponent, so
// this file does not change when features are added.
type serveComponent struct {
	Name string
	// Mount adds routes. A non-nil background function is started after all
	// components are mounted and must return once its context is cancelled; the
	// database is closed only after it has.
	Mount func(ctx context.Context, env serveEnv) (background func(ctx context.Context) error, err error)
}

var serveComponents []serveComponent

func registerServeComponent(c serveComponent) { serveComponents = append(serveComponents, c) }

// commonFlags are the flags every command that reads the configuration accepts.
type commonFlags struct {
	configPath string
	profile    string
	logFormat  string
	logLevel   string
}

// register adds the flags to fs. Commands that only touch the database (migrate,
// team, token) go without --profile: they validate with the dev profile's checks,
// which is all they need.
func (f *commonFlags) register(fs *flag.FlagSet, withProfile bool) {
	fs.StringVar(&f.configPath, "config", os.Getenv("KUKIE_CONFIG"), "path of the YAML configuration file (env KUKIE_CONFIG); none means defaults and environment only")
	f.profile = string(config.Dev)
	if withProfile {
		fs.StringVar(&f.profile, "profile", envOr("KUKIE_PROFILE", string(config.Dev)), "dev or production (env KUKIE_PROFILE); production refuses to start without a complete, safe configuration")
	}
	fs.StringVar(&f.logFormat, "log-format", "", "json or console (default json, or log.format of the configuration)")
	fs.StringVar(&f.logLevel, "log-level", "", "trace, debug, info, warn or error (default info)")
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// newFlagSet makes a flag set whose --help says what the command does.
func newFlagSet(name, usage, description string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kukie-gitops %s\n\n%s\n", usage, description)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintf(fs.Output(), "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args and turns -h into exit code 0 and other errors into 2.
func parseFlags(fs *flag.FlagSet, args []string) (exit int, ok bool) {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0, false
	}
	if err != nil {
		return 2, false
	}
	return 0, true
}

// loadConfig reads and validates the configuration for the chosen profile and
// builds the logger it asks for. Problems are written to stderr.
func loadConfig(f commonFlags, stderr io.Writer, adjust func(*config.Config)) (config.Config, config.Profile, zerolog.Logger, bool) {
	nop := zerolog.Nop()
	profile, err := config.ParseProfile(f.profile)
	if err != nil {
		fmt.Fprintf(stderr, "kukie-gitops: %v\n", err)
		return config.Config{}, "", nop, false
	}
	// Problems with single values are reported below with every validation problem;
	// a file that does not read or decode leaves nothing to validate.
	cfg, loadErr := config.Load(f.configPath, config.OSEnv)
	var valueProblems *config.LoadError
	if loadErr != nil && !errors.As(loadErr, &valueProblems) {
		fmt.Fprintf(stderr, "kukie-gitops: configuration: %v\n", loadErr)
		return config.Config{}, "", nop, false
	}
	if f.logFormat != "" {
		cfg.Log.Format = f.logFormat
	}
	if f.logLevel != "" {
		cfg.Log.Level = f.logLevel
	}
	if adjust != nil {
		adjust(&cfg)
	}
	if err := config.Check(cfg, profile, loadErr); err != nil {
		fmt.Fprintf(stderr, "kukie-gitops: %v\n", err)
		return config.Config{}, "", nop, false
	}
	log, err := logging.New(stderr, cfg.Log.Format, cfg.Log.Level)
	if err != nil {
		fmt.Fprintf(stderr, "kukie-gitops: %v\n", err)
		return config.Config{}, "", nop, false
	}
	if unknown := config.UnknownEnv(os.Environ()); len(unknown) > 0 {
		log.Warn().Strs("variables", unknown).Msg("Ignoring unknown KUKIE_ environment variables; check their spelling")
	}
	return cfg, profile, log, true
}

// openStore opens the configured database and applies pending migrations. With an
// encryption key, plans keep the edited files' contents sealed (plan.EditSealer).
func openStore(ctx context.Context, cfg config.Config, log zerolog.Logger) (*store.DB, error) {
	db, err := store.Open(ctx, cfg.DatabaseURL().Reveal())
	if err != nil {
		return nil, err
	}
	if cfg.Encryption.Key.IsSet() {
		box, err := encryptionBox(cfg)
		if err != nil {
			_ = db.Close()
			return nil, err
		}
		db.SealPlanPayloads(plan.EditSealer{Box: box})
	}
	applied, err := db.Migrate(ctx)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	log.Info().Str("database", string(db.Dialect())).Ints("applied_migrations", applied).Msg("Database ready")
	return db, nil
}

// encryptionBox is the box of the configured encryption key (which must be set).
func encryptionBox(cfg config.Config) (*sealed.Box, error) {
	key, err := cfg.EncryptionKey()
	if err != nil {
		return nil, err
	}
	return sealed.New(key)
}

func runServe(ctx context.Context, args []string, _, stderr io.Writer) int {
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
	log.Info().Str("profile", string(profile)).Interface("config", cfg).Msg("Starting kukie-gitops " + version)
	if err := serve(ctx, cfg, profile, log); err != nil {
		log.Error().Err(err).Msg("Stopped with an error")
		return 1
	}
	log.Info().Msg("Stopped")
	return 0
}

func serve(ctx context.Context, cfg config.Config, profile config.Profile, log zerolog.Logger) error {
	db, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := db.Close(); err != nil {
			log.Error().Err(err).Msg("Closing the database failed")
		}
	}()

	var devTeam *store.Team
	if cfg.Auth.DevTeam != "" {
		// Validate already refused this outside the dev profile; checked again here
		// because starting with dev auth in production must be impossible.
		if profile != config.Dev {
			return fmt.Errorf("dev authentication is not allowed in profile %s", profile)
		}
		t, err := db.EnsureTeam(ctx, cfg.Auth.DevTeam)
		if err != nil {
			return fmt.Errorf("dev team: %w", err)
		}
		devTeam = &t
		log.Warn().Str("team", t.Name).Msg("INSECURE: dev authentication is on; requests without a token act as this team")
	}
	if profile == config.Production {
		n, err := db.CountActiveAPITokens(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			log.Warn().Msg("No API tokens exist: every API request will be refused; create one with 'kukie-gitops token create --team NAME'")
		}
	}

	srv, err := server.New(server.Config{
		Address:           cfg.Server.Address,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		ReadTimeout:       cfg.Server.ReadTimeout,
		WriteTimeout:      cfg.Server.WriteTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		ShutdownTimeout:   cfg.Server.ShutdownTimeout,
		MaxBodyBytes:      cfg.Server.MaxBodyBytes,
	}, server.Deps{
		Logger:  log,
		Auth:    db,
		DevTeam: devTeam,
		Ready: []server.Check{
			{Name: "database", Check: db.PingContext},
			{Name: "migrations", Check: db.CheckSchema},
		},
	})
	if err != nil {
		return err
	}

	registry, serveMetricsApart, releaseMetrics, err := mountMetrics(ctx, cfg, srv)
	if err != nil {
		return err
	}
	if err := registry.Register(metrics.StoreCollector{Store: db}); err != nil {
		return fmt.Errorf("register store metrics: %w", err)
	}
	// Closing a listener the metrics server already closed is harmless.
	defer releaseMetrics()
	env := serveEnv{Config: cfg, Profile: profile, DB: db, Server: srv, Logger: log, Metrics: registry}
	var background []func(context.Context) error
	var names []string
	if serveMetricsApart != nil {
		background, names = append(background, serveMetricsApart), append(names, "metrics listener")
	}
	for _, c := range serveComponents {
		bg, err := c.Mount(ctx, env)
		if err != nil {
			return fmt.Errorf("start %s: %w", c.Name, err)
		}
		if bg != nil {
			background = append(background, bg)
			names = append(names, c.Name)
		}
	}
	bgCtx, stopBackground := context.WithCancel(ctx)
	defer stopBackground()
	var wg sync.WaitGroup
	for i, bg := range background {
		wg.Go(func() {
			if err := bg(bgCtx); err != nil && !errors.Is(err, context.Canceled) {
				log.Error().Err(err).Str("component", names[i]).Msg("Background work stopped with an error")
			}
		})
	}
	err = srv.Run(ctx)
	// Stop background work too (the server may also have failed to start) and wait
	// for it before the deferred Close, so nothing uses a closed database.
	stopBackground()
	wg.Wait()
	return err
}
