package cmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/logging"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
)

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
	fs.StringVar(&f.logLevel, "log-level", "", "trace, debug, info, warn or error (default info, or log.level of the configuration)")
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
