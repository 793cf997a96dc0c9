#!/usr/bin/env bash
# Lint (`make lint`, also run by `make test`): go vet, gofmt, go.mod tidiness and
# the scripts' executable mode in git (hack/script-modes.sh).
# Changes nothing; fails listing what to fix.
set -euo pipefail
cd "$(dirname "$0")/.."

status=0

echo "lint: go vet ./..." >&2
go vet ./... || status=1
echo "lint: go vet -tags e2e ./e2e/..." >&2
go vet -tags e2e ./e2e/... || status=1

echo "lint: gofmt -l" >&2
unformatted="$(find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -print0 | xargs -0 gofmt -l)"
if [[ -n "$unformatted" ]]; then
  echo "lint: these files need gofmt -w:" >&2
  echo "$unformatted" >&2
  status=1
fi

echo "lint: go mod tidy -diff" >&2
if ! go mod tidy -diff; then
  echo "lint: go.mod/go.sum are not tidy; run go mod tidy" >&2
  status=1
fi

echo "lint: script modes" >&2
hack/script-modes.sh || status=1

exit "$status"
