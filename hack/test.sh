#!/usr/bin/env bash
# The project's test command (`make test`). It provides the real components the tests
# need, then runs lint and every test with the race detector:
#   - a throwaway PostgreSQL (initdb into a temporary directory, pg_ctl on a free
#     loopback port, stopped and deleted on exit), exported as KUKIE_TEST_POSTGRES_URL;
#     Debian's postgresql is installed when its binaries are missing and we are root;
#   - a real kube-apiserver and etcd for envtest (hack/envtest-assets.sh), exported as
#     KUKIE_ENVTEST_ASSETS;
#   - Debian's chromium for the web page's browser test, installed when missing.
# Either one already set in the environment is used as is.
#
# Usage: hack/test.sh          lint, go test -race -count=1 ./..., then the end-to-end
#                              tests against a real Argo CD (hack/e2e.sh)
#        hack/test.sh bench    the benchmarks (go test -run '^$' -bench . ./...)
# With CI=true, a component that cannot be provided is an error instead of a warning
# (the tests that need it would fail anyway, rather than skip).
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-test}"
ci="${CI:-false}"

say() { echo "test.sh: $*" >&2; }
warn() {
  echo "" >&2
  echo "test.sh: WARNING: $*" >&2
  echo "" >&2
  if [[ "$ci" == "true" ]]; then
    echo "test.sh: CI=true, so this is an error" >&2
    exit 1
  fi
}

# ---------------------------------------------------------------- PostgreSQL

pg_bindir() {
  local dir
  if dir="$(dirname "$(command -v initdb 2>/dev/null)" 2>/dev/null)" && [[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then
    echo "$dir"
    return 0
  fi
  # Debian keeps the server binaries off PATH, per major version.
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then
      echo "$dir"
      return 0
    fi
  done
  return 1
}

install_postgres() {
  if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    return 1
  fi
  say "installing Debian's postgresql (initdb/pg_ctl not found)"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
}

# free_port prints a loopback TCP port nobody listens on right now.
free_port() {
  local port i
  for i in $(seq 1 50); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
  return 1
}

PG_DIR=""
PG_BIN=""
PG_USER=""

# as_pg_user runs a command as the unprivileged owner of the cluster: initdb and
# postgres refuse to run as root.
as_pg_user() {
  if [[ -z "$PG_USER" ]]; then
    "$@"
  elif command -v runuser >/dev/null 2>&1; then
    runuser -u "$PG_USER" -- "$@"
  else
    su -s /bin/sh "$PG_USER" -c "$(printf '%q ' "$@")"
  fi
}

stop_postgres() {
  if [[ -n "$PG_DIR" && -d "$PG_DIR" ]]; then
    if [[ -f "$PG_DIR/data/postmaster.pid" ]]; then
      as_pg_user "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$PG_DIR"
  fi
}

start_postgres() {
  if ! PG_BIN="$(pg_bindir)"; then
    install_postgres || true
    if ! PG_BIN="$(pg_bindir)"; then
      warn "PostgreSQL (initdb, pg_ctl) is not installed and cannot be installed here (need root and apt-get).
  The PostgreSQL store tests will be SKIPPED. Install the postgresql package to run them."
      return 0
    fi
  fi
  if [[ "$(id -u)" -eq 0 ]]; then
    if id postgres >/dev/null 2>&1; then PG_USER=postgres; else PG_USER=nobody; fi
  fi
  PG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/kukie-pg.XXXXXX")"
  trap stop_postgres EXIT
  if [[ -n "$PG_USER" ]]; then
    chown "$PG_USER" "$PG_DIR"
  fi
  # The temporary directory may sit under a path the unprivileged user cannot
  # enter; run from inside it.
  (cd "$PG_DIR" && as_pg_user "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres -A trust -E UTF8 --locale=C --no-sync >"$PG_DIR/initdb.log" 2>&1) || {
    cat "$PG_DIR/initdb.log" >&2
    warn "initdb failed; the PostgreSQL store tests will be SKIPPED"
    return 0
  }
  local port attempt
  for attempt in 1 2 3 4 5; do
    port="$(free_port)"
    # Durability settings off: this cluster lives for one test run.
    if (cd "$PG_DIR" && as_pg_user "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/postgres.log" -w -t 60 \
      -o "-p $port -k $PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
      start >/dev/null); then
      export KUKIE_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
      say "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (data in $PG_DIR, removed on exit)"
      return 0
    fi
    say "pg_ctl start on port $port failed (attempt $attempt); retrying on another port"
  done
  cat "$PG_DIR/postgres.log" >&2 || true
  warn "PostgreSQL did not start; the PostgreSQL store tests will be SKIPPED"
}

if [[ -n "${KUKIE_TEST_POSTGRES_URL:-}" ]]; then
  say "using PostgreSQL from KUKIE_TEST_POSTGRES_URL"
else
  start_postgres
fi

# ---------------------------------------------------------------- envtest assets

if [[ -n "${KUKIE_ENVTEST_ASSETS:-}" ]]; then
  say "using envtest assets from KUKIE_ENVTEST_ASSETS=$KUKIE_ENVTEST_ASSETS"
else
  say "building envtest assets (kube-apiserver, etcd; cached after the first run)"
  if assets="$(bash hack/envtest-assets.sh)"; then
    export KUKIE_ENVTEST_ASSETS="$assets"
    say "envtest assets in $KUKIE_ENVTEST_ASSETS"
  else
    warn "hack/envtest-assets.sh failed; tests that need a Kubernetes API server will be SKIPPED"
  fi
fi

# ---------------------------------------------------------------- Chromium

# The web page's browser test runs a headless Chromium; Debian's chromium is installed
# when it is missing and we are root. The test fails without it, never skips.
if ! command -v chromium >/dev/null 2>&1; then
  if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's chromium (for the web page's browser test)"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2
  else
    warn "chromium is not installed and cannot be installed here (need root and apt-get).
  The web page's browser test will FAIL. Install the chromium package to run it."
  fi
fi

# ---------------------------------------------------------------- lint and tests

case "$mode" in
  test)
    bash hack/lint.sh
    say "go test -race -count=1 ./..."
    # A package's binary may run an hour: the plan package's tests took 27 minutes
    # on a loaded machine (load 20 on two cores), close to the 30 minutes it had.
    go test -race -count=1 -timeout 60m ./...
    # The end-to-end scenarios against a real Argo CD (hack/e2e.sh builds it once and
    # caches it). KUKIE_E2E=off leaves them out of a quick local run; CI always runs them.
    if [[ "${KUKIE_E2E:-on}" == "off" && "$ci" != "true" ]]; then
      warn "KUKIE_E2E=off: the end-to-end tests against a real Argo CD were NOT run (make e2e runs them)"
    else
      say "end-to-end tests against a real Argo CD (hack/e2e.sh)"
      bash hack/e2e.sh
    fi
    ;;
  bench)
    # The render benchmarks compare a full plan with two runs of the kustomize CLI
    # (what a person would do by hand); the CLI is built once into the cache.
    if kustomize_bin="$(bash hack/kustomize-cli.sh)"; then
      export KUKIE_KUSTOMIZE_BIN="$kustomize_bin"
    else
      warn "hack/kustomize-cli.sh failed; the render benchmarks run without the CLI comparison"
    fi
    # The Helm benchmarks compare with two "helm template" runs the same way.
    if helm_bin="$(bash hack/helm-cli.sh)"; then
      export KUKIE_HELM_BIN="$helm_bin"
    else
      warn "hack/helm-cli.sh failed; the Helm benchmarks run without the CLI comparison"
    fi
    say "go test -run '^\$' -bench . -benchmem ./..."
    go test -run '^$' -bench . -benchmem -timeout 30m ./...
    ;;
  *)
    echo "usage: hack/test.sh [test|bench]" >&2
    exit 2
    ;;
esac
