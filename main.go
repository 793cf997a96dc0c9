// Command kukie-gitops is a GitHub App that turns change requests from a chat assistant
// into verified pull requests on Argo CD manifest repositories and follows each change
// until it runs in the cluster.
//
// Subcommands live in main_<name>.go files and register themselves in init, so each
// one can be read (and tested) on its own.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/logging"
)

// command is one subcommand of the binary.
type command struct {
	Name    string
	Summary string
	// Run executes the subcommand with the arguments after its name and returns the
	// process exit code.
	Run func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.Name]; dup {
		panic("duplicate subcommand " + c.Name)
	}
	commands[c.Name] = c
}

func main() {
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
	code := run(ctx, os.Args[1:], os.Stdout, stderr)
	stop()
	if err := libs.Close(); err != nil {
		fmt.Fprintf(stderr, "kukie-gitops: %v\n", err)
	}
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "kukie-gitops: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return c.Run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: kukie-gitops <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].Summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'kukie-gitops <command> --help' for the flags of a command.")
}
