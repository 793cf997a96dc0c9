package cmd

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/kukie/kukie-gitops/service"
)

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "version", "Prints the version, the VCS commit it was built from and the Go version.", stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	commit, modified := "unknown", false
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if modified {
		commit += " (modified)"
	}
	fmt.Fprintf(stdout, "kukie-gitops %s\ncommit: %s\ngo: %s %s/%s\n", service.Version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
