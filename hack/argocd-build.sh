#!/usr/bin/env bash
# Builds a real Argo CD (the upstream multi-call binary: application-controller,
# repo-server, CLI, ...) and the kustomize and helm binaries its repo-server executes,
# from their Go modules into a per-user cache, once, and prints the directory that holds
# them. The first build takes 7-10 minutes on 2 cores; later calls only print the
# directory. A directory built before helm or the manifest client were part of it gets
# only those built.
#
# The directory contains:
#   argocd                          the multi-call binary
#   argocd-application-controller   symlink; the binary picks its role from its name
#   argocd-repo-server              symlink
#   argocd-git-ask-pass             symlink
#   kustomize                       the release built on this project's kustomize/api
#   helm                            the release Argo CD pins in its hack/tool-versions.sh
#   argocd-manifest-client          asks the repo-server for manifests over gRPC
#                                   (e2e/argocdharness/manifestclient, built against
#                                   Argo CD's own apiclient)
#   git-verify-wrapper.sh           from the Argo CD module, must be on the repo-server's PATH
#   crds/*.yaml                     Application, AppProject and ApplicationSet CRDs
#   VERSION                         the Argo CD version that was built
#
# Usage: hack/argocd-build.sh            -> prints the directory
# Env:   KUKIE_ARGOCD_VERSION            build only this version (no fallback)
#        KUKIE_ARGOCD_TOOLCHAIN          GOTOOLCHAIN for a version other than the two
#                                        below (default auto)
#
# The preferred version needs a newer Go than the project; the go command fetches that
# toolchain for this build only. When it cannot be built, the older release that builds
# with the project's Go is used instead.
set -euo pipefail

PREFERRED_VERSION="3.6.1"
PREFERRED_TOOLCHAIN="go1.27.3"
FALLBACK_VERSION="3.5.1"
FALLBACK_TOOLCHAIN="local"
# v3.5.1 pins gitops-engine to a pseudo-version the module proxy does not serve; this is
# the closest published commit of the same module.
FALLBACK_EXTRA_REPLACE="github.com/argoproj/argo-cd/gitops-engine=github.com/argoproj/argo-cd/gitops-engine@v0.0.0-20260914071520-c9c369efcc5b"

CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/kukie-gitops/argocd"
PROJECT_ROOT="$(cd "$(dirname "$0")/.." && pwd)"

# core_complete: the Argo CD build itself (the slow part) is there.
core_complete() {
  local dir="$1"
  [[ -x "$dir/argocd" && -x "$dir/kustomize" && -f "$dir/crds/application-crd.yaml" && -f "$dir/VERSION" ]]
}

complete() {
  local dir="$1"
  core_complete "$dir" && [[ -x "$dir/helm" && -x "$dir/argocd-manifest-client" ]]
}

if [[ -n "${KUKIE_ARGOCD_VERSION:-}" ]]; then
  candidates=("${KUKIE_ARGOCD_VERSION}")
else
  candidates=("$PREFERRED_VERSION" "$FALLBACK_VERSION")
fi

for v in "${candidates[@]}"; do
  if complete "$CACHE_ROOT/v$v"; then
    echo "$CACHE_ROOT/v$v"
    exit 0
  fi
done

mkdir -p "$CACHE_ROOT"
# One build at a time: the test harness and the e2e script may both ask for it.
exec 9>"$CACHE_ROOT/.build.lock"
flock 9
for v in "${candidates[@]}"; do
  if complete "$CACHE_ROOT/v$v"; then
    echo "$CACHE_ROOT/v$v"
    exit 0
  fi
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

# project_kustomize_api prints the sigs.k8s.io/kustomize/api version of this project.
project_kustomize_api() {
  go mod edit -json "$PROJECT_ROOT/go.mod" |
    jq -r '.Require[] | select(.Path == "sigs.k8s.io/kustomize/api") | .Version'
}

# kustomize_release_for_api prints the newest kustomize CLI release built on the given
# kustomize/api version (the two are released together).
kustomize_release_for_api() {
  local api="$1" v
  if [[ -z "$api" || "$api" == "null" ]]; then
    echo "argocd-build: sigs.k8s.io/kustomize/api is not required by $PROJECT_ROOT/go.mod" >&2
    return 1
  fi
  for v in $(go list -m -versions sigs.k8s.io/kustomize/kustomize/v5 | tr ' ' '\n' | tail -n +2 | sort -rV); do
    local gomod
    gomod="$(go mod download -json "sigs.k8s.io/kustomize/kustomize/v5@$v" | jq -r '.GoMod')"
    if [[ "$(go mod edit -json "$gomod" | jq -r '.Require[] | select(.Path == "sigs.k8s.io/kustomize/api") | .Version')" == "$api" ]]; then
      echo "$v"
      return 0
    fi
  done
  echo "argocd-build: no kustomize release uses sigs.k8s.io/kustomize/api $api" >&2
  return 1
}

MODULE="github.com/argoproj/argo-cd/v3"

# prepare_module VERSION TOOLCHAIN [EXTRA_REPLACE...] makes a module in $mod that
# requires Argo CD VERSION with its replace directives, and sets upstream_dir to Argo
# CD's source in the module cache.
prepare_module() {
  local version="$1" toolchain="$2"
  shift 2
  mod="$work/argocd-$version"
  rm -rf "$mod"
  mkdir -p "$mod"
  cd "$mod"
  export GOTOOLCHAIN="$toolchain"

  local module="$MODULE"
  go mod download -json "$module@v$version" > dl.json
  local upstream_mod
  upstream_mod="$(jq -r '.GoMod' dl.json)"
  upstream_dir="$(jq -r '.Dir' dl.json)"
  if [[ "$upstream_dir" == "null" || ! -d "$upstream_dir" ]]; then
    echo "argocd-build: download of $module@v$version failed: $(jq -r '.Error' dl.json)" >&2
    return 1
  fi
  local go_directive
  go_directive="$(go mod edit -json "$upstream_mod" | jq -r '.Go')"
  cat > go.mod <<GOMOD
module kukie.local/argocd

go ${go_directive}
GOMOD
  go mod edit -require="$module@v$version"
  # Argo CD pins k8s.io/* (and a few others) with replace directives, which only apply in
  # its own module; a consumer has to repeat them. Directory replaces point into its own
  # repository and are left out.
  go mod edit -json "$upstream_mod" |
    jq -r '.Replace[]? | select(.New.Version != null) |
           "\(.Old.Path)\(if .Old.Version then "@" + .Old.Version else "" end)=\(.New.Path)@\(.New.Version)"' |
    while read -r r; do go mod edit -replace="$r"; done
  local extra
  for extra in "$@"; do
    go mod edit -replace="$extra"
  done
  go get "$module/cmd@v$version" >&2
}

# build VERSION TOOLCHAIN [EXTRA_REPLACE...] builds everything into the cache.
build() {
  local version="$1" toolchain="$2"
  local dest="$CACHE_ROOT/v$version"
  local module="$MODULE"
  prepare_module "$@"
  mkdir -p "$dest/crds"
  go build -trimpath -o "$dest/argocd.tmp" \
    -ldflags "-s -w -X $module/common.version=$version" \
    "$module/cmd" >&2

  # The repo-server runs kustomize as a program. Build the release that links the same
  # sigs.k8s.io/kustomize/api as this project, so Argo CD renders exactly what the
  # service's own render step computes (and the release Argo CD ships can need module
  # versions the proxy does not serve).
  local kustomize_version
  kustomize_version="$(kustomize_release_for_api "$(project_kustomize_api)")"
  GOBIN="$mod/bin" go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kustomize/kustomize/v5@$kustomize_version" >&2
  install -m 0755 "$mod/bin/kustomize" "$dest/kustomize"

  install -m 0644 "$upstream_dir"/manifests/crds/*-crd.yaml "$dest/crds/"
  install -m 0755 "$upstream_dir/hack/git-verify-wrapper.sh" "$dest/git-verify-wrapper.sh"
  mv "$dest/argocd.tmp" "$dest/argocd"
  local role
  for role in argocd-application-controller argocd-repo-server argocd-git-ask-pass; do
    ln -sfn argocd "$dest/$role"
  done
  build_extras_in_module "$dest"
  echo "$version" > "$dest/VERSION"
}

# build_extras VERSION TOOLCHAIN [EXTRA_REPLACE...] adds helm and the manifest client
# to a cache directory whose Argo CD is already built.
build_extras() {
  prepare_module "$@"
  build_extras_in_module "$CACHE_ROOT/v$1"
}

# build_extras_in_module DEST builds helm and the manifest client from the module
# prepare_module made.
build_extras_in_module() {
  local dest="$1"
  # The repo-server runs helm as a program (helm template, helm dependency build).
  # Build the release Argo CD pins, through the same cached go install as the
  # project's helm CLI script.
  local helm_version
  helm_version="$(sed -n 's/^HELM_VERSION=\([0-9][0-9.]*\)$/\1/p' "$upstream_dir/hack/tool-versions.sh")"
  if [[ -z "$helm_version" ]]; then
    echo "argocd-build: no HELM_VERSION in $upstream_dir/hack/tool-versions.sh" >&2
    return 1
  fi
  local helm_bin
  helm_bin="$(bash "$PROJECT_ROOT/hack/go-install-cached.sh" helm "v$helm_version" "helm.sh/helm/v${helm_version%%.*}/cmd/helm")"
  install -m 0755 "$helm_bin" "$dest/helm"

  # The harness's gRPC client, linked against Argo CD's generated apiclient here
  # because Argo CD's module cannot be a dependency of the project (see the program).
  # Its ignore constraint keeps it out of the project; here it is dropped (a build
  # tag would apply to every package of the build).
  mkdir -p "$mod/manifestclient"
  sed '/^\/\/go:build ignore$/d' "$PROJECT_ROOT/e2e/argocdharness/manifestclient/main.go" > "$mod/manifestclient/main.go"
  go build -trimpath -ldflags "-s -w" -o "$dest/argocd-manifest-client" ./manifestclient >&2
}

# build_settings VERSION sets toolchain and extra for that version.
build_settings() {
  case "$1" in
    "$PREFERRED_VERSION") toolchain="$PREFERRED_TOOLCHAIN"; extra=() ;;
    "$FALLBACK_VERSION") toolchain="$FALLBACK_TOOLCHAIN"; extra=("$FALLBACK_EXTRA_REPLACE") ;;
    *) toolchain="${KUKIE_ARGOCD_TOOLCHAIN:-auto}"; extra=() ;;
  esac
}

# A cached Argo CD that lacks only the binaries added later gets just those.
for v in "${candidates[@]}"; do
  if core_complete "$CACHE_ROOT/v$v"; then
    build_settings "$v"
    start=$SECONDS
    set +e
    (set -e; build_extras "$v" "$toolchain" "${extra[@]}")
    rc=$?
    set -e
    if [[ $rc -eq 0 ]] && complete "$CACHE_ROOT/v$v"; then
      echo "argocd-build: added helm and the manifest client to Argo CD v$v in $((SECONDS - start))s" >&2
      echo "$CACHE_ROOT/v$v"
      exit 0
    fi
    # The Argo CD build stays: what failed is only what this step builds.
    echo "argocd-build: helm or the manifest client for Argo CD v$v did not build after $((SECONDS - start))s" >&2
    exit 1
  fi
done

for v in "${candidates[@]}"; do
  build_settings "$v"
  start=$SECONDS
  # errexit is ignored inside an if condition, so run the build as a plain command.
  set +e
  (set -e; build "$v" "$toolchain" "${extra[@]}")
  rc=$?
  set -e
  if [[ $rc -eq 0 ]]; then
    echo "argocd-build: built Argo CD v$v in $((SECONDS - start))s" >&2
    echo "$CACHE_ROOT/v$v"
    exit 0
  fi
  echo "argocd-build: Argo CD v$v did not build after $((SECONDS - start))s" >&2
  rm -rf "$CACHE_ROOT/v$v"
done
echo "argocd-build: no Argo CD version could be built" >&2
exit 1
