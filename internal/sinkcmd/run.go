// Package sinkcmd is the sink binary: its command line and help, its
// configuration, the start-up that waits for NATS and ClickHouse, applies
// the migrations and the retention, and then wires the pipeline
// (internal/sink) to its dependencies and its observers (the alerter, the
// backfill, the change summaries), the operational endpoints (/healthz,
// /readyz, /metrics, served through internal/ops), and the one-off commands
// `migrate`, `backfill <crawl-id>`, `redrive`, `status <crawl-id>`,
// `diff <url>`, `delete` (takedowns) and `probe <url>`. cmd/sink only calls
// Run.
package sinkcmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/env"
	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/crawlhouse/crawlhouse/internal/ops"
	"github.com/crawlhouse/crawlhouse/internal/sink"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
	"github.com/crawlhouse/crawlhouse/internal/version"
)

// Options are optional hooks of RunWithOptions.
type Options struct {
	// Ready, when set, is called with the bound address of SINK_LISTEN
	// once the sink serves it (SINK_LISTEN=127.0.0.1:0 picks a port).
	Ready func(addr string)
	// AckWait overrides the consumer's ack wait (tests that kill a sink
	// want its messages back sooner than 30 s).
	AckWait time.Duration
	// WrapBatchWriter, when set, wraps the archive the pipeline inserts
	// batches into (tests: an insert that commits and then never returns
	// its answer, as a sink dying before its acks would leave it).
	WrapBatchWriter func(sink.BatchWriter) sink.BatchWriter
	// ClickHouseSettings are set on every query of the sink's ClickHouse
	// connection (tests: a low max_memory_usage).
	ClickHouseSettings map[string]any
	// Tracing, when set, is the tracer provider instead of the one the
	// OTEL_* variables configure (tests: an in-memory exporter). The caller
	// shuts it down.
	Tracing *tracing.Provider
}

// Run is the sink binary: `sink` (migrate, then consume until ctx is done),
// `sink migrate`, `sink backfill <crawl-id>`, `sink redrive`, each with
// --help, `sink probe <url>` and `sink --version`. Configuration comes
// through getenv; the sink logs to stdout, a command run by hand to stderr,
// its output going to stdout. A returned error is
// one line for the user: main prints it to stderr and exits
// with env.ExitCode (2 for a usage error, else 1).
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return RunWithOptions(ctx, args, getenv, stdout, stderr, Options{})
}

// RunWithOptions is Run with hooks. The sink logs to stdout; a command
// run by hand (migrate, backfill, status, diff, redrive, delete) logs to
// stderr, so that its output on stdout (--json) stays clean, in the console
// format when stderr is a terminal and LOG_FORMAT is unset.
func RunWithOptions(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, opts Options) (err error) {
	// Credentials are scrubbed from the logs and the returned error,
	// whichever path carried them there (see logs.Scrubber).
	scrub := logs.NewScrubber(logs.Secrets(getenv))
	rawStderr := stderr
	stdout, stderr = scrub.Writer(stdout), scrub.Writer(stderr)
	defer func() { err = scrub.Error(err) }()
	// "probe URL" is the container healthcheck: no configuration needed.
	if len(args) > 1 && args[1] == "probe" {
		return ops.Probe(ctx, args[2:])
	}
	cmd, rest, help, err := parseArgs(args)
	if err != nil {
		return env.Usage(err)
	}
	if help {
		usage(stdout, cmd)
		return nil
	}
	if cmd == "version" {
		fmt.Fprintln(stdout, "sink", version.String())
		return nil
	}
	cfg, err := env.Checked(Load, getenv)
	if err != nil {
		return err
	}
	log := logs.New(cfg.LogConfig, stdout, "sink")
	if cmd != "" {
		log = logs.New(logs.ForHumans(cfg.LogConfig, getenv, rawStderr), stderr, "sink")
	}
	if opts.Tracing == nil && (cmd == "" || cmd == "backfill") {
		// Only the commands that make spans start an exporter.
		tp, err := tracing.Setup(ctx, cfg.TracingConfig, "crawlhouse-sink", version.String())
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		defer func() {
			if err := tp.Shutdown(ctx); err != nil {
				log.Warn().Err(err).Msg("shutdown: tracing: spans not exported")
			}
		}()
		if tp.Enabled() {
			log.Info().Str("endpoint", logs.RedactURL(tp.Where)).Msg("tracing on: spans exported over OTLP")
			tracing.HandleErrors(func(err error) { log.Warn().Err(err).Msg("tracing: spans not exported") })
		}
		opts.Tracing = tp
	}
	switch cmd {
	case "migrate":
		return runMigrate(ctx, cfg, stdout, log)
	case "redrive":
		return runRedrive(ctx, cfg, stdout, log)
	case "backfill":
		return runBackfill(ctx, cfg, rest, stdout, log, opts.Tracing.Tracer())
	case "status":
		return runStatus(ctx, cfg, rest, stdout, log)
	case "diff":
		return runDiff(ctx, cfg, rest, stdout)
	case "delete":
		return runDelete(ctx, cfg, rest, getenv, stdout, log)
	}
	return serve(ctx, cfg, log, opts)
}
