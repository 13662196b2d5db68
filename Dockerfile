# syntax=docker/dockerfile:1
#
# crawlhouse images: one Dockerfile, one target per binary.
#
#   docker build --target receiver -t crawlhouse/receiver .
#   docker build --target sink     -t crawlhouse/sink .
#   docker build --target reader   -t crawlhouse/reader .
#   docker build --target crawlsim -t crawlhouse/crawlsim .
#
# VERSION and COMMIT are stamped into the binaries (`receiver --version`) and
# into the OCI labels; `make` passes the same values as its build target:
#   --build-arg VERSION=$(git describe --tags --always --dirty) --build-arg COMMIT=$(git rev-parse --short HEAD)
#
# The binaries are static (CGO_ENABLED=0), so the runtime images are
# distroless/static: CA certificates, tzdata and a passwd entry for the
# unprivileged user 65532 ("nonroot"), and no shell or package manager. Health
# checks therefore call the binary itself (`receiver probe URL`).

ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first, so that a code change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS TARGETARCH
ARG VERSION=dev
ARG COMMIT=none
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/crawlhouse/crawlhouse/internal/version.Version=${VERSION} -X github.com/crawlhouse/crawlhouse/internal/version.Commit=${COMMIT}" \
      -o /out/ ./cmd/receiver ./cmd/sink ./cmd/reader ./cmd/crawlsim

FROM gcr.io/distroless/static-debian12:nonroot AS runtime
ARG VERSION=dev
ARG COMMIT=none
LABEL org.opencontainers.image.source="https://github.com/crawlhouse/crawlhouse" \
      org.opencontainers.image.url="https://github.com/crawlhouse/crawlhouse" \
      org.opencontainers.image.documentation="https://github.com/crawlhouse/crawlhouse/blob/main/docs/deployment.md" \
      org.opencontainers.image.vendor="crawlhouse" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
USER 65532:65532
WORKDIR /home/nonroot

# receiver: takes the crawl API's webhooks and persists them in JetStream.
FROM runtime AS receiver
LABEL org.opencontainers.image.title="crawlhouse receiver" \
      org.opencontainers.image.description="Verifies crawl.page webhooks and persists them in NATS JetStream before answering 2xx"
COPY --from=build /out/receiver /usr/local/bin/receiver
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/receiver"]

# sink: consumes JetStream into ClickHouse, backfills, alerts.
FROM runtime AS sink
LABEL org.opencontainers.image.title="crawlhouse sink" \
      org.opencontainers.image.description="Archives crawled pages from NATS JetStream into ClickHouse, with backfill and failure alerts"
COPY --from=build /out/sink /usr/local/bin/sink
EXPOSE 9090
ENTRYPOINT ["/usr/local/bin/sink"]

# reader: the read API of the archive (search, pages, jobs, changes, exports).
FROM runtime AS reader
LABEL org.opencontainers.image.title="crawlhouse reader" \
      org.opencontainers.image.description="Read-only HTTP API over the ClickHouse crawl archive: search, pages and history, jobs, changes feed, exports"
COPY --from=build /out/reader /usr/local/bin/reader
EXPOSE 8090
ENTRYPOINT ["/usr/local/bin/reader"]

# crawlsim: the crawl API simulator for demos and load tests.
FROM runtime AS crawlsim
LABEL org.opencontainers.image.title="crawlhouse crawlsim" \
      org.opencontainers.image.description="Simulated crawl API: serves crawl status and sends signed crawl.page webhooks"
COPY --from=build /out/crawlsim /usr/local/bin/crawlsim
ENTRYPOINT ["/usr/local/bin/crawlsim"]
