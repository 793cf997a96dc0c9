#!/usr/bin/env bash
# Runs the end-to-end tests (build tag e2e, package ./e2e/...) against a real Argo CD:
# application controller and repo server built by hack/argocd-build.sh, the kube-apiserver
# and etcd built by hack/envtest-assets.sh, and redis-server from the system.
#
# Cold, the two builds take about 10 minutes each on 2 cores; both are cached per user.
# The tests themselves take about a minute.
# Env: KUKIE_E2E_RUN      passed to go test -run (default: all scenarios)
#      KUKIE_E2E_TIMEOUT  go test -timeout (default 20m)
#      KUKIE_E2E_LOG_DIR  keep the logs of Redis, repo server and controller here
#      KUKIE_E2E_NETNS=off  stay in the host network namespace (default: a private one
#                           when run as root)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
  if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "e2e: installing redis-server" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >&2
  else
    echo "e2e: redis-server is required; install it (apt-get install redis-server)" >&2
    exit 1
  fi
fi

start=$SECONDS
KUKIE_ENVTEST_ASSETS="${KUKIE_ENVTEST_ASSETS:-$(bash hack/envtest-assets.sh)}"
KUKIE_ARGOCD_DIR="${KUKIE_ARGOCD_DIR:-$(bash hack/argocd-build.sh)}"
export KUKIE_ENVTEST_ASSETS KUKIE_ARGOCD_DIR
echo "e2e: assets ready after $((SECONDS - start))s (argo cd $(cat "$KUKIE_ARGOCD_DIR/VERSION"))" >&2

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The service under test, built here: the tests may run without network access.
export KUKIE_E2E_SERVICE_BIN="$work/kukie-gitops"
go build -o "$KUKIE_E2E_SERVICE_BIN" .

args=(-tags e2e -race -count=1 -v -timeout "${KUKIE_E2E_TIMEOUT:-20m}")
if [[ -n "${KUKIE_E2E_RUN:-}" ]]; then
  args+=(-run "$KUKIE_E2E_RUN")
fi
out="$work/go-test.log"
set +e
go test "${args[@]}" ./e2e/... 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
set -e
echo
echo "e2e: measurements"
grep -E 'argo cd .* started in|argo cd memory|e2e: ' "$out" | sed 's/^ *//' || true
exit "$rc"
