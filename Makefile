# kukie-gitops. `make test` is the test command (see README).
BIN     ?= bin/kukie-gitops
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: build test bench lint e2e run clean

## build: a static binary in $(BIN)
build:
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/kukie/kukie-gitops/service.Version=$(VERSION)" -o $(BIN) .

## test: lint, then every test with -race against a throwaway PostgreSQL and a real kube-apiserver
test:
	hack/test.sh

## bench: the benchmarks, with the same databases as test
bench:
	hack/test.sh bench

## lint: go vet, gofmt, go mod tidy check, scripts executable in git
lint:
	hack/lint.sh

## e2e: end-to-end tests against a real Argo CD (slow the first time)
e2e:
	hack/e2e.sh

## run: serve locally with zero configuration (dev profile, SQLite ./kukie.db)
run:
	go run . serve --log-format console

clean:
	rm -rf bin
