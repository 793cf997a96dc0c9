#!/usr/bin/env bash
# Builds a real kube-apiserver and etcd from their Go modules into a per-user cache, once,
# and prints the directory that holds them (for envtest's BinaryAssetsDirectory).
# Usage: hack/envtest-assets.sh            -> prints the assets directory
set -euo pipefail

K8S_VERSION="${KUKIE_ENVTEST_K8S_VERSION:-1.37.2}"
ETCD_VERSION="${KUKIE_ENVTEST_ETCD_VERSION:-3.6.16}"
STAGING_VERSION="v0.${K8S_VERSION#1.}"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/kukie-gitops/envtest"
DEST="$CACHE_ROOT/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}"

if [[ -x "$DEST/kube-apiserver" && -x "$DEST/etcd" ]]; then
  echo "$DEST"
  exit 0
fi
mkdir -p "$DEST"
# Test binaries of several packages call this script at once; one builds, the others
# wait for it and find the result.
if command -v flock >/dev/null; then
  exec 9>"$CACHE_ROOT/.build.lock"
  flock 9
  if [[ -x "$DEST/kube-apiserver" && -x "$DEST/etcd" ]]; then
    echo "$DEST"
    exit 0
  fi
fi
work="$(mktemp -d)"
# Binaries are linked under a name of this run and renamed into place only when
# complete, so a failed or interrupted build never leaves a binary that looks usable.
partial="$$"
trap 'rm -rf "$work"; rm -f "$DEST"/*.partial."$partial"' EXIT
export GOFLAGS=-mod=mod
export GOWORK=off
export CGO_ENABLED=0

build_apiserver() {
  local mod="$work/apiserver"
  mkdir -p "$mod"
  cd "$mod"
  cat > go.mod <<GOMOD
module kukie.local/envtest/apiserver

go 1.26
GOMOD
  go mod edit -require="k8s.io/kubernetes@v${K8S_VERSION}" >&2
  # k8s.io/kubernetes replaces its staging modules with ./staging paths; a consumer must
  # pin each of them to the published version instead.
  go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" > dl.json
  local gomod
  gomod="$(sed -n 's/.*"GoMod": "\(.*\)",*/\1/p' dl.json | head -n1)"
  grep -E '^\s*k8s.io/[^ ]+ => \./staging/' "$gomod" | awk '{print $1}' | sort -u | while read -r m; do
    go mod edit -replace="$m=$m@${STAGING_VERSION}"
  done
  cat > tools.go <<'GO'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
  go mod tidy >&2
  local major="${K8S_VERSION%%.*}" minor
  minor="$(echo "$K8S_VERSION" | cut -d. -f2)"
  go build -trimpath -o "$DEST/kube-apiserver.partial.$partial" -ldflags "-s -w \
    -X k8s.io/component-base/version.gitVersion=v${K8S_VERSION} \
    -X k8s.io/component-base/version.gitMajor=${major} \
    -X k8s.io/component-base/version.gitMinor=${minor}" \
    k8s.io/kubernetes/cmd/kube-apiserver >&2
  mv "$DEST/kube-apiserver.partial.$partial" "$DEST/kube-apiserver"
}

build_etcd() {
  local mod="$work/etcd"
  mkdir -p "$mod"
  cd "$mod"
  cat > go.mod <<GOMOD
module kukie.local/envtest/etcd

go 1.26
GOMOD
  go mod edit -require="go.etcd.io/etcd/server/v3@v${ETCD_VERSION}" >&2
  cat > tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  go mod tidy >&2
  go build -trimpath -ldflags "-s -w" -o "$DEST/etcd.partial.$partial" go.etcd.io/etcd/server/v3 >&2
  mv "$DEST/etcd.partial.$partial" "$DEST/etcd"
}

[[ -x "$DEST/etcd" ]] || build_etcd
[[ -x "$DEST/kube-apiserver" ]] || build_apiserver
echo "$DEST"
