// Package readercmd is the reader binary: its command line and help,
// configuration from the environment, start-up in named steps and graceful
// shutdown. The HTTP side it serves is internal/reader.
//
// The read API is a binary of its own, not a sink subcommand: it keeps no
// state, so it scales on its own behind a load balancer; it needs only
// read-only ClickHouse credentials, where the sink needs NATS and the
// rights to write; and a slow export or a burst of searches never shares
// a process with the archiving path.
package readercmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/env"
	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/crawlhouse/crawlhouse/internal/ops"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/crawlhouse/crawlhouse/internal/reader/web"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
	"github.com/crawlhouse/crawlhouse/internal/version"
	"github.com/rs/zerolog"
)

// Options are optional hooks of RunWithOptions, for tests and tools that
// start a reader in process.
type Options struct {
	// Ready, when set, is called with the bound listen address once the
	// reader serves (with READER_LISTEN=127.0.0.1:0, how a caller learns
	// the port).
	Ready func(addr string)
	// Tracing, when set, is the tracer provider instead of the one the
	// OTEL_* variables configure. The caller shuts it down.
	Tracing *tracing.Provider
}

// Run is the reader binary: it reads its configuration through getenv,
// serves until ctx is done, then shuts down gracefully. args[1:] may be
// --help or --version, or "probe URL" (the container healthcheck). Logs go
// to stdout. A returned error is one line for the user.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return RunWithOptions(ctx, args, getenv, stdout, stderr, Options{})
}

// RunWithOptions is Run with hooks.
func RunWithOptions(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer, opts Options) error {
	// The tokens, the cursor key and ClickHouse's password are scrubbed
	// from every log line and from the returned error.
	scrub := logs.NewScrubber(logs.Secrets(getenv))
	return scrub.Error(run(ctx, args, getenv, scrub.Writer(stdout), opts))
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, opts Options) error {
	if len(args) > 1 && args[1] == "probe" {
		return ops.Probe(ctx, args[2:])
	}
	if done, err := env.Args(args[min(1, len(args)):], "reader", stdout, usage); done {
		return err
	}
	cfg, err := env.Checked(Load, getenv)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, stdout, opts)
}

func usage(w io.Writer) {
	fmt.Fprint(w, `reader: the read API of the crawl archive (search, pages, history, diffs, jobs,
the changes feed, exports), read-only, from ClickHouse. docs/read-api.md.

Usage: reader [--help | --version]
       reader probe URL    exit 0 if GET URL answers 2xx within 2s, else 1 (container healthcheck)

Configured by the environment:

`)
	_ = env.WriteTable(w, &Config{})
	fmt.Fprint(w, `
Endpoints: GET /v1/... (Authorization: Bearer <token>), GET /openapi.json, GET /healthz, GET /readyz, GET /metrics.

`+env.ExitStatusHelp)
}

// serve starts the reader in named steps (logger, tracing, ClickHouse,
// the pages, the API, the listener), serves until ctx is done and shuts down: the
// listener drains first, the connection and the tracer close after it.
func serve(ctx context.Context, cfg Config, stdout io.Writer, opts Options) error {
	log := logs.New(cfg.LogConfig, stdout, "reader")
	if cfg.OpenAccess {
		log.Warn().Msg("READER_OPEN_ACCESS=true: anyone who reaches the port reads the whole archive")
	}
	if strings.TrimSpace(cfg.CursorKey) == "" {
		log.Warn().Msg("READER_CURSOR_KEY unset: cursors are signed with a key of this process; another replica or a restart refuses them")
	}
	provider, stopTracing, err := startTracing(ctx, cfg, opts, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	conn, err := archive.Open(cfg.ArchiveConfig)
	if err != nil {
		return err
	}
	defer conn.Close()
	base, err := query.NewReader(conn, cfg.ArchiveConfig)
	if err != nil {
		return err
	}
	r, err := base.WithReadOptions(cfg.ReadOptions())
	if err != nil {
		return err
	}
	reg, metrics := ops.NewRegistry()
	// Ready means a ClickHouse that answers and that the archive runs on:
	// version() is the ping.
	ping := func(ctx context.Context) error { return archive.CheckServerVersion(ctx, conn) }
	pages, err := webPages(cfg, r, log)
	if err != nil {
		return err
	}
	api, err := reader.New(cfg.Config, reader.Deps{Log: log, Archive: r, Ping: ping, Registry: reg, Metrics: metrics, Tracer: provider.Tracer(), Pages: pages})
	if err != nil {
		return err
	}
	return listen(ctx, cfg, api, opts, log)
}

// webPages are the web pages over the API's archive, signed in with the
// API's tokens.
func webPages(cfg Config, a reader.Archive, log zerolog.Logger) (*web.Server, error) {
	opts := web.Options{Base: web.DefaultBase, Logger: log}
	tokens, err := cfg.Config.TokenChecker()
	if err != nil {
		return nil, err
	}
	if tokens != nil {
		opts.Tokens = tokens
	}
	return web.New(a, opts)
}

func startTracing(ctx context.Context, cfg Config, opts Options, log zerolog.Logger) (*tracing.Provider, func(), error) {
	if opts.Tracing != nil {
		return opts.Tracing, func() {}, nil
	}
	p, err := tracing.Setup(ctx, cfg.TracingConfig, "crawlhouse-reader", version.String())
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	if p.Enabled() {
		log.Info().Str("endpoint", logs.RedactURL(p.Where)).Msg("tracing on: spans exported over OTLP")
		tracing.HandleErrors(func(err error) { log.Warn().Err(err).Msg("tracing: spans not exported") })
	}
	return p, func() {
		if err := p.Shutdown(context.Background()); err != nil {
			log.Warn().Err(err).Msg("shutdown: tracing: spans not exported")
		}
	}, nil
}

// listen serves api until ctx is done, then lets the requests in progress
// finish (an export at most 30 s more: its client sees a cut transfer).
func listen(ctx context.Context, cfg Config, api *reader.Server, opts Options, log zerolog.Logger) error {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	hs := &http.Server{
		Handler:           api.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// No WriteTimeout: an export streams for as long as
		// READER_EXPORT_MAX_TIME lets ClickHouse run it.
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       logs.HTTPServerLog(log),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info().Str("addr", ln.Addr().String()).Str("clickhouse", logs.RedactURL(cfg.Addr)).Str("database", cfg.Database).
		Bool("open_access", cfg.OpenAccess).Str("version", version.String()).Msg("listening")
	if opts.Ready != nil {
		opts.Ready(ln.Addr().String())
	}
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down: finishing requests in progress")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn().Err(err).Msg("shutdown")
	} else if err != nil {
		log.Warn().Msg("shutdown: requests still in progress were cut")
	}
	log.Info().Msg("stopped")
	return nil
}
