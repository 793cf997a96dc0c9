# syntax=docker/dockerfile:1
# Build: docker build --build-arg VERSION=$(git describe --tags --always) -t kukie-gitops .
# Run:   docker run -p 8080:8080 \
#          -e KUKIE_DATABASE_URL=postgres://... -e KUKIE_GITHUB_APP_ID=... -e KUKIE_GITHUB_APP_SLUG=... \
#          -v /path/to/secrets:/var/run/secrets/kukie:ro \
#          -e KUKIE_GITHUB_PRIVATE_KEY_FILE=/var/run/secrets/kukie/private-key.pem \
#          -e KUKIE_GITHUB_WEBHOOK_SECRET_FILE=/var/run/secrets/kukie/webhook-secret \
#          -e KUKIE_ENCRYPTION_KEY_FILE=/var/run/secrets/kukie/encryption-key \
#          kukie-gitops
# Configuration and secrets are mounted or passed in at run time, never baked in.

FROM golang:1.26 AS build
WORKDIR /src
# Module and build caches in fixed places, kept between builds by cache mounts.
ENV GOMODCACHE=/go/pkg/mod GOCACHE=/go/build-cache
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/go/build-cache \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/kukie/kukie-gitops/service.Version=${VERSION}" -o /out/kukie-gitops .

# distroless/static: no shell, no package manager, CA certificates included, runs as
# uid 65532 (nonroot).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kukie-gitops /usr/local/bin/kukie-gitops
USER nonroot:nonroot
# Containers serve on all interfaces and start in the production profile, which
# refuses to run without a complete configuration (fail closed). A config file, if
# any, is mounted and named with KUKIE_CONFIG, e.g. /etc/kukie/config.yml.
ENV KUKIE_SERVER_ADDRESS=0.0.0.0:8080 \
    KUKIE_PROFILE=production
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/kukie-gitops"]
CMD ["serve"]
