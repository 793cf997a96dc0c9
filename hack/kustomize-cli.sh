#!/usr/bin/env bash
# Builds the kustomize CLI whose api module matches the one this project renders
# with (sigs.k8s.io/kustomize/api v0.21.2 is required by kustomize/v5 v5.8.2) from
# the Go module proxy into a per-user cache, once, and prints the binary's path.
# The render benchmarks compare a full plan with two runs of it.
# Usage: hack/kustomize-cli.sh            -> prints the path of the kustomize binary
set -euo pipefail

VERSION="${KUKIE_KUSTOMIZE_VERSION:-v5.8.2}"
DEST="${XDG_CACHE_HOME:-$HOME/.cache}/kukie-gitops/kustomize/${VERSION}"

if [[ -x "$DEST/kustomize" ]]; then
  echo "$DEST/kustomize"
  exit 0
fi
mkdir -p "$DEST"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# go install pkg@version builds outside any module; run it away from this one so
# its go.mod and GOFLAGS do not apply.
cd "$work"
GOFLAGS= CGO_ENABLED=0 GOBIN="$DEST" go install "sigs.k8s.io/kustomize/kustomize/v5@${VERSION}" >&2
"$DEST/kustomize" version >&2
echo "$DEST/kustomize"
