#!/usr/bin/env bash
# Builds the kustomize CLI whose api module matches the one this project renders
# with (sigs.k8s.io/kustomize/api v0.21.2 is required by kustomize/v5 v5.8.2) from
# the Go module proxy into a per-user cache, once, and prints the binary's path.
# The render benchmarks compare a full plan with two runs of it.
# Usage: hack/kustomize-cli.sh            -> prints the path of the kustomize binary
set -euo pipefail

exec bash "$(dirname "$0")/go-install-cached.sh" kustomize "${KUKIE_KUSTOMIZE_VERSION:-v5.8.2}" sigs.k8s.io/kustomize/kustomize/v5
