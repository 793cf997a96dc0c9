// Package cmd is the command line of kukie-gitops: one function per subcommand that
// reads its flags and the configuration, opens what it needs and calls the package
// that does the work (service.New for serve, render for plan, store for the
// administrative commands). The subcommands are one explicit table, commands.
//
// It owns flag parsing, exit codes and what a command prints. It must not hold the
// logic of a command (that lives in the packages it calls) nor wire the service
// (service.New does, for serve and the tests alike).
package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/logging"
	"github.com/kukie/kukie-gitops/service"
)

// command is one subcommand of the binary.
type command struct {
	Name    string
	Summary string
	// Run executes the subcommand with the arguments after its name and returns the
	// process exit code.
	Run func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// program is the command line. Its zero value is the binary's; tests set extraRoutes
// to probe the server serve runs.
type program struct {
	// extraRoutes, when set, mounts more routes beside the service's route table.
	extraRoutes func(*service.Service)
}

// commands is every subcommand, in the order usage lists them.
func (p program) commands() []command {
	return []command{
		{Name: "migrate", Summary: "apply pending database migrations, or show their status", Run: runMigrate},
		{Name: "plan", Summary: "plan and verify one change against a local manifest repository (offline)", Run: runPlan},
		{Name: "serve", Summary: "run the HTTP service (webhooks, API, health endpoints)", Run: p.runServe},
		{Name: "team", Summary: "manage teams: team create NAME | team list", Run: runTeam},
		{Name: "token", Summary: "manage team API tokens: token create --team NAME [--scope read,change,admin] | token list --team NAME | token revoke ID", Run: runToken},
		{Name: "version", Summary: "print the version, commit and Go version of this binary", Run: runVersion},
		{Name: "webhooks", Summary: "inspect and replay webhook deliveries: webhooks list [--state failed] | webhooks replay ID", Run: runWebhooks},
	}
}

// Main runs the command line args (os.Args[1:]) with SIGINT and SIGTERM cancelling
// the command's context, and returns the process exit code.
func Main(args []string) int { return program{}.main(args) }

func (p program) main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stderr := os.Stderr
	// Libraries (kustomize above all) print to os.Stderr and the standard logger;
	// their lines become log entries, through the logger each command picks.
	libs, err := logging.CaptureLibraryOutput(zerolog.New(stderr).With().Timestamp().Logger())
	if err != nil {
		fmt.Fprintf(stderr, "kukie-gitops: %v\n", err)
	} else {
		ctx = logging.WithLibraryOutput(ctx, libs)
	}
	code := p.run(ctx, args, os.Stdout, stderr)
	stop()
	if err := libs.Close(); err != nil {
		fmt.Fprintf(stderr, "kukie-gitops: %v\n", err)
	}
	return code
}

func (p program) run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	commands := p.commands()
	if len(args) == 0 {
		usage(stderr, commands)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout, commands)
		return 0
	}
	for _, c := range commands {
		if c.Name == args[0] {
			return c.Run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "kukie-gitops: unknown command %q\n\n", args[0])
	usage(stderr, commands)
	return 2
}

func usage(w io.Writer, commands []command) {
	fmt.Fprintln(w, "Usage: kukie-gitops <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'kukie-gitops <command> --help' for the flags of a command.")
}
