# crawlhouse — build, test, benchmark and run the pipeline.
# `make run` and `make test` are all a fresh machine with Go needs: the local
# ClickHouse is fetched into a cache outside the repo by scripts/clickhouse.sh.

GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo none)
LDFLAGS := -s -w -X github.com/crawlhouse/crawlhouse/internal/version.Version=$(VERSION) -X github.com/crawlhouse/crawlhouse/internal/version.Commit=$(COMMIT)

.PHONY: build browser test bench bench-archive run fuzz soak vet clean

build:
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

vet:
	$(GO) vet ./...

# Chromium (the Debian package) for the web pages' browser tests; `make test`
# installs it first.
browser:
	scripts/browser.sh

# Every test, against a real JetStream (embedded in the test processes), a
# real ClickHouse (one shared local instance for the whole run) and a real
# browser (headless Chromium).
test:
	scripts/test.sh

bench:
	scripts/bench.sh

# The archive at scale: 20000 pages by default (part of `make bench`);
# BENCH_ARCHIVE_PAGES=100000 or 1000000 for the figures in docs/benchmarks.md.
bench-archive:
	scripts/bench-archive.sh

# run.sh builds the binaries itself, saying how far the build is (the first
# one compiles every dependency: minutes).
run:
	GO='$(GO)' BIN='$(BIN)' BUILD_LDFLAGS='$(LDFLAGS)' scripts/run.sh

fuzz:
	scripts/fuzz.sh

soak: build
	scripts/soak.sh

clean:
	rm -rf $(BIN) var
