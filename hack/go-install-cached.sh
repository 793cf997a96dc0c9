#!/usr/bin/env bash
# Builds one Go command from the Go module proxy into a per-user cache, once, and
# prints the binary's path; the CLI scripts for the render benchmarks share it.
# Usage: hack/go-install-cached.sh NAME VERSION PACKAGE
#   NAME     the binary's name and the cache folder (kukie-gitops/NAME/VERSION)
#   PACKAGE  the command's import path, built at VERSION
set -euo pipefail

if [[ $# -ne 3 ]]; then
  echo "usage: hack/go-install-cached.sh NAME VERSION PACKAGE" >&2
  exit 2
fi
NAME="$1" VERSION="$2" PACKAGE="$3"
DEST="${XDG_CACHE_HOME:-$HOME/.cache}/kukie-gitops/${NAME}/${VERSION}"

if [[ -x "$DEST/$NAME" ]]; then
  echo "$DEST/$NAME"
  exit 0
fi
mkdir -p "$DEST"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# go install pkg@version builds outside any module; run it away from this one so
# its go.mod and GOFLAGS do not apply.
cd "$work"
GOFLAGS= CGO_ENABLED=0 GOBIN="$DEST" go install "${PACKAGE}@${VERSION}" >&2
"$DEST/$NAME" version >&2
echo "$DEST/$NAME"
