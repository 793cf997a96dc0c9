#!/usr/bin/env bash
# Builds the helm CLI at the version Argo CD's repo server runs (the Helm SDK
# version this project renders with, helm.sh/helm/v4 in go.mod) from the Go module
# proxy into a per-user cache, once, and prints the binary's path. The render
# benchmarks compare a Helm plan with two "helm template" runs of it.
# Usage: hack/helm-cli.sh            -> prints the path of the helm binary
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSION="${KUKIE_HELM_VERSION:-$(cd "$ROOT" && go list -m -f '{{.Version}}' helm.sh/helm/v4)}"
exec bash "$ROOT/hack/go-install-cached.sh" helm "$VERSION" helm.sh/helm/v4/cmd/helm
