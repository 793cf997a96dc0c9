// Command kukie-gitops is a GitHub App that turns change requests from a chat assistant
// into verified pull requests on Argo CD manifest repositories and follows each change
// until it runs in the cluster.
//
// This file only hands the command line to package cmd, which holds the subcommands
// (serve, plan, migrate, team, token, webhooks, version) in one table; serve builds
// the service with service.New.
package main

import (
	"os"

	"github.com/kukie/kukie-gitops/cmd"
)

func main() { os.Exit(cmd.Main(os.Args[1:])) }
