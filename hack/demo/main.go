// Command demo runs the whole kukie-gitops loop on one machine, without a GitHub App:
// the service (built by service.New, on SQLite), a simulated GitHub in the same
// process (internal/githubtest, backed by real git repositories), a sample manifest
// repository it writes itself, and the Kubernetes cluster of a kubeconfig the user
// points at (kind, k3d, minikube), where it creates what Argo CD would have: an
// Application and the Deployment it tracks. Without a kubeconfig it runs the service
// all the same and explains what the path decision needs a cluster for.
//
//	go run ./hack/demo                              # no cluster: the offline note
//	go run ./hack/demo -kubeconfig ~/.kube/config   # the full loop on your cluster
//
// It prints the URLs and curl commands to request a change and follow it, and stops
// (removing everything it made but the cluster's demo namespace) on Ctrl-C. It is a
// program of its own: the service binary never contains the simulated GitHub.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var opts options
	flag.StringVar(&opts.addr, "addr", "127.0.0.1:8080", "where the service listens (host:port; port 0 picks a free one)")
	flag.StringVar(&opts.kubeconfig, "kubeconfig", "", "kubeconfig of a cluster to run the loop against (kind, k3d, minikube); its current context is used. Empty: no cluster")
	flag.BoolVar(&opts.installCRD, "install-crd", false, "install Argo CD's Application CRD (this project's test copy) when the cluster has no Argo CD")
	flag.StringVar(&opts.dir, "dir", "", "directory for the database, logs, caches and the sample repository (default: a new temporary one, removed at exit)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "demo: unexpected arguments %v\n", flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

// run starts the demo, prints how to use it and serves until ctx ends.
func run(ctx context.Context, opts options, out io.Writer) error {
	d, err := start(ctx, opts)
	if err != nil {
		return err
	}
	defer d.close()
	d.printInstructions(out)
	select {
	case <-ctx.Done():
		fmt.Fprintln(out, "\nStopping.")
		return d.close()
	case <-d.done:
		if d.serveErr == nil || errors.Is(d.serveErr, context.Canceled) {
			return nil
		}
		return fmt.Errorf("the service stopped: %w", d.serveErr)
	}
}
