package cmd

import (
	"context"
	"fmt"
	"io"

	"github.com/kukie/kukie-gitops/store"
)

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f commonFlags
	var status bool
	fs := newFlagSet("migrate", "migrate [flags]",
		"Applies the database migrations embedded in this binary that the configured database\n"+
			"has not seen yet, in order, each in its own transaction. 'serve' does the same at\n"+
			"start; run this before a rollout to migrate once, ahead of the new replicas.\n"+
			"Replicas migrating at the same time on PostgreSQL wait for each other.", stderr)
	f.register(fs, false)
	fs.BoolVar(&status, "status", false, "only list the migrations and whether each is applied")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		// "migrate status", "migrate up": the words of other migration tools.
		fmt.Fprintf(stderr, "kukie-gitops migrate: unexpected arguments %v: migrate takes flags only; "+
			"it applies every pending migration, and --status lists them without applying any\n", fs.Args())
		return 2
	}
	cfg, _, log, ok := loadConfig(f, stderr, nil)
	if !ok {
		return 1
	}
	db, err := store.Open(ctx, cfg.DatabaseURL().Reveal())
	if err != nil {
		fmt.Fprintf(stderr, "kukie-gitops migrate: %v\n", err)
		return 1
	}
	defer db.Close()
	if !status {
		applied, err := db.Migrate(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "kukie-gitops migrate: %v\n", err)
			return 1
		}
		log.Info().Ints("applied", applied).Str("database", string(db.Dialect())).Msg("Migrations applied")
	}
	statuses, err := db.MigrationStatuses(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "kukie-gitops migrate: %v\n", err)
		return 1
	}
	for _, s := range statuses {
		state := "pending"
		if s.Applied {
			state = "applied " + s.AppliedAt.Format("2006-01-02 15:04:05Z07:00")
		}
		fmt.Fprintf(stdout, "%04d_%s\t%s\n", s.Version, s.Name, state)
	}
	return 0
}
