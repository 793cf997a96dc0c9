package cmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/store"
)

// adminStore loads the configuration and opens the (migrated) database for an
// administrative command.
func adminStore(ctx context.Context, f commonFlags, stderr io.Writer) (*store.DB, bool) {
	cfg, _, log, ok := loadConfig(f, stderr, nil)
	if !ok {
		return nil, false
	}
	if log.GetLevel() == zerolog.InfoLevel {
		// Keep the routine startup lines out of an admin command's output unless
		// debug logging was asked for.
		log = log.Level(zerolog.WarnLevel)
	}
	db, err := openStore(ctx, cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "kukie-gitops: %v\n", err)
		return nil, false
	}
	return db, true
}

// errUsage is returned by an administrative subcommand's argument check when the
// arguments do not fit the command: its usage text is printed instead of an error.
var errUsage = errors.New("usage")

// openAdminCommand parses an administrative subcommand's arguments (the common
// flags plus any the caller registered on fs), runs check on them and opens the
// database. When ok is false the command has reported why and exits with code.
func openAdminCommand(ctx context.Context, fs *flag.FlagSet, args []string, check func() error, stderr io.Writer) (db *store.DB, code int, ok bool) {
	var f commonFlags
	f.register(fs, false)
	if code, ok := parseFlags(fs, args); !ok {
		return nil, code, false
	}
	switch err := check(); {
	case errors.Is(err, errUsage):
		fs.Usage()
		return nil, 2, false
	case err != nil:
		fmt.Fprintf(stderr, "kukie-gitops %s: %v\n", fs.Name(), err)
		return nil, 2, false
	}
	db, ok = adminStore(ctx, f, stderr)
	if !ok {
		return nil, 1, false
	}
	return db, 0, true
}

// argCount is the argument check of a subcommand taking exactly n positional
// arguments.
func argCount(fs *flag.FlagSet, n int) func() error {
	return func() error {
		if fs.NArg() != n {
			return errUsage
		}
		return nil
	}
}

func runTeam(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "Usage:\n  kukie-gitops team create NAME [flags]   create a team (lower-case letters, digits, '-')\n  kukie-gitops team list [flags]          list teams\n\nRun 'kukie-gitops team create --help' for the flags.")
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "create":
		fs := newFlagSet("team create", "team create NAME [flags]", "Creates a team. API tokens are then made with 'token create --team NAME'.", stderr)
		db, code, ok := openAdminCommand(ctx, fs, args[1:], func() error {
			if err := argCount(fs, 1)(); err != nil {
				return err
			}
			return store.ValidateTeamName(fs.Arg(0))
		}, stderr)
		if !ok {
			return code
		}
		defer db.Close()
		name := fs.Arg(0)
		team, err := db.CreateTeam(ctx, name)
		if errors.Is(err, store.ErrConflict) {
			fmt.Fprintf(stderr, "kukie-gitops team create: team %s already exists\n", name)
			return 1
		}
		if err != nil {
			fmt.Fprintf(stderr, "kukie-gitops team create: %v\n", err)
			return 1
		}
		if err := db.RecordOperatorAction(ctx, team.ID, "team.create", "team", team.ID, map[string]string{"name": name}); err != nil {
			fmt.Fprintf(stderr, "kukie-gitops team create: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "created team %s (id %s)\n", team.Name, team.ID)
		return 0
	case "list":
		fs := newFlagSet("team list", "team list [flags]", "Lists all teams.", stderr)
		db, code, ok := openAdminCommand(ctx, fs, args[1:], func() error { return nil }, stderr)
		if !ok {
			return code
		}
		defer db.Close()
		teams, err := db.ListTeams(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "kukie-gitops team list: %v\n", err)
			return 1
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tID\tCREATED")
		for _, t := range teams {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.ID, t.CreatedAt.Format(time.RFC3339))
		}
		_ = tw.Flush()
		return 0
	default:
		fmt.Fprintf(stderr, "kukie-gitops team: unknown subcommand %q (want create or list)\n", args[0])
		return 2
	}
}

func runToken(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "Usage:\n  kukie-gitops token create --team NAME [--name LABEL] [--scope LIST]   make a token; it is printed once\n  kukie-gitops token list --team NAME                    list a team's tokens (never their values)\n  kukie-gitops token revoke ID                           make a token unusable\n\nRun 'kukie-gitops token create --help' for the flags.")
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var teamName, label, scopeList string
	// teamGiven is the argument check of the subcommands acting on one team.
	teamGiven := func(fs *flag.FlagSet) func() error {
		return func() error {
			if teamName == "" {
				return errUsage
			}
			return argCount(fs, 0)()
		}
	}
	sub := args[0]
	switch sub {
	case "create":
		fs := newFlagSet("token create", "token create --team NAME [--name LABEL] [--scope LIST] [flags]",
			"Creates an API token for a team and prints it once on standard output. Only its\n"+
				"SHA-256 is stored: a lost token cannot be shown again; revoke it and make another.\n"+
				"Scopes: read (apps, decisions, changes), change (request, cancel, retry, roll\n"+
				"back changes), admin (clusters, repository connections, installations,\n"+
				"repository tokens). None implies another.", stderr)
		fs.StringVar(&teamName, "team", "", "team the token acts as (required)")
		fs.StringVar(&label, "name", "", "label to tell tokens apart, e.g. the client using it")
		fs.StringVar(&scopeList, "scope", "read,change,admin", "comma-separated scopes the token has: read, change, admin")
		var scopes store.Scopes
		db, code, ok := openAdminCommand(ctx, fs, args[1:], func() error {
			if err := teamGiven(fs)(); err != nil {
				return err
			}
			var err error
			scopes, err = store.ParseScopes(scopeList)
			return err
		}, stderr)
		if !ok {
			return code
		}
		defer db.Close()
		team, err := db.TeamByName(ctx, teamName)
		if errors.Is(err, store.ErrNotFound) {
			fmt.Fprintf(stderr, "kukie-gitops token create: no team %s; create it with 'kukie-gitops team create %s'\n", teamName, teamName)
			return 1
		}
		if err != nil {
			fmt.Fprintf(stderr, "kukie-gitops token create: %v\n", err)
			return 1
		}
		tok, clear, err := db.CreateAPIToken(ctx, team.ID, label, scopes...)
		if err != nil {
			fmt.Fprintf(stderr, "kukie-gitops token create: %v\n", err)
			return 1
		}
		if err := db.RecordOperatorAction(ctx, team.ID, "token.create", "api_token", tok.ID, map[string]string{"name": label, "scopes": tok.Scopes.String()}); err != nil {
			fmt.Fprintf(stderr, "kukie-gitops token create: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "Created token %s for team %s with scopes %s. It is shown once; store it now.\n", tok.ID, team.Name, tok.Scopes)
		fmt.Fprintln(stdout, clear.Reveal())
		return 0
	case "list":
		fs := newFlagSet("token list", "token list --team NAME [flags]", "Lists a team's tokens: id, label, scopes, created, revoked. Token values are never shown.", stderr)
		fs.StringVar(&teamName, "team", "", "team whose tokens to list (required)")
		db, code, ok := openAdminCommand(ctx, fs, args[1:], teamGiven(fs), stderr)
		if !ok {
			return code
		}
		defer db.Close()
		team, err := db.TeamByName(ctx, teamName)
		if err != nil {
			fmt.Fprintf(stderr, "kukie-gitops token list: %v\n", err)
			return 1
		}
		tokens, err := db.ListAPITokens(ctx, team.ID)
		if err != nil {
			fmt.Fprintf(stderr, "kukie-gitops token list: %v\n", err)
			return 1
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tSCOPES\tCREATED\tREVOKED")
		for _, t := range tokens {
			revoked := "-"
			if !t.RevokedAt.IsZero() {
				revoked = t.RevokedAt.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Scopes, t.CreatedAt.Format(time.RFC3339), revoked)
		}
		_ = tw.Flush()
		return 0
	case "revoke":
		fs := newFlagSet("token revoke", "token revoke ID [flags]", "Revokes a token by its id (see 'token list'); requests using it get 401 from then on.", stderr)
		db, code, ok := openAdminCommand(ctx, fs, args[1:], argCount(fs, 1), stderr)
		if !ok {
			return code
		}
		defer db.Close()
		tok, err := db.RevokeAPIToken(ctx, fs.Arg(0))
		if errors.Is(err, store.ErrNotFound) {
			fmt.Fprintf(stderr, "kukie-gitops token revoke: no token with id %s\n", fs.Arg(0))
			return 1
		}
		if err != nil {
			fmt.Fprintf(stderr, "kukie-gitops token revoke: %v\n", err)
			return 1
		}
		if err := db.RecordOperatorAction(ctx, tok.TeamID, "token.revoke", "api_token", tok.ID, nil); err != nil {
			fmt.Fprintf(stderr, "kukie-gitops token revoke: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "revoked token %s (at %s)\n", tok.ID, tok.RevokedAt.Format(time.RFC3339))
		return 0
	default:
		fmt.Fprintf(stderr, "kukie-gitops token: unknown subcommand %q (want create, list or revoke)\n", sub)
		return 2
	}
}
