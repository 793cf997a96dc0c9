#!/usr/bin/env bash
# Builds the helm CLI at the version Argo CD's repo server runs (the Helm SDK
# version this project renders with, helm.sh/helm/v4 in go.mod) from the Go module
# proxy into a per-user cache, once, and prints the binary's path. The render
# benchmarks compare a Helm plan with two "helm template" runs of it.
# Usage: hack/helm-cli.sh            -> prints the path of the helm binary
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSION="${KUKIE_HELM_VERSION:-$(cd "$ROOT" && go list -m -f '{{.Version}}' helm.sh/helm/v4)}"
DEST="${XDG_CACHE_HOME:-$HOME/.cache}/kukie-gitops/helm/${VERSION}"

if [[ -x "$DEST/helm" ]]; then
  echo "$DEST/helm"
  exit 0
fi
mkdir -p "$DEST"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# go install pkg@version builds outside any module; run it away from this one so
# its go.mod and GOFLAGS do not apply.
cd "$work"
GOFLAGS= CGO_ENABLED=0 GOBIN="$DEST" go install "helm.sh/helm/v4/cmd/helm@${VERSION}" >&2
"$DEST/helm" version >&2
echo "$DEST/helm"
