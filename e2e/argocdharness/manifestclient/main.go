//go:build ignore

// Command argocd-manifest-client asks an Argo CD repo server for the manifests of one
// request over its gRPC API (RepoServerService.GenerateManifest, the call the
// application controller and kubechecks make) and prints the answer.
//
// It is built by hack/argocd-build.sh inside Argo CD's own module, with Argo CD's
// toolchain and its generated apiclient types, and is no part of this module (hence
// the ignore constraint): Argo CD's module needs a newer Go and its own replace
// directives, so the e2e harness runs this program instead of linking the client.
//
// Usage: argocd-manifest-client -addr 127.0.0.1:8081 < request.json > response.json
//
// The request is an apiclient.ManifestRequest as JSON (its fields' JSON names, the
// source as an Application's spec.source); unknown fields are refused so that a
// misspelt field fails instead of being dropped. The response is the
// apiclient.ManifestResponse as JSON. A failed call exits 1 with the gRPC status on
// stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/argoproj/argo-cd/v3/reposerver/apiclient"
	utiltls "github.com/argoproj/argo-cd/v3/util/tls"
)

func main() {
	addr := flag.String("addr", "", "repo server address (host:port), plaintext")
	timeout := flag.Duration("timeout", 2*time.Minute, "deadline of the call")
	flag.Parse()
	if err := run(*addr, *timeout); err != nil {
		fmt.Fprintf(os.Stderr, "argocd-manifest-client: %v\n", err)
		os.Exit(1)
	}
}

func run(addr string, timeout time.Duration) error {
	if addr == "" {
		return fmt.Errorf("-addr is required")
	}
	var req apiclient.ManifestRequest
	dec := json.NewDecoder(os.Stdin)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	conn, err := apiclient.NewConnection(addr, int(timeout.Seconds()), &utiltls.Configuration{DisableTLS: true})
	if err != nil {
		return fmt.Errorf("connect to %s: %w", addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := apiclient.NewRepoServerServiceClient(conn).GenerateManifest(ctx, &req)
	if err != nil {
		return fmt.Errorf("generate manifest: %w", err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(resp); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	return nil
}
