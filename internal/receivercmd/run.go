// Package receivercmd is the receiver binary: its command line and help,
// configuration from the environment, start-up in named steps
// (startup.go), graceful shutdown, and the one-off commands (`probe`,
// `redrive-rejected`). The HTTP side it serves is internal/receiver.
package receivercmd

import (
	"context"
	"fmt"
	"io"

	"github.com/crawlhouse/crawlhouse/internal/env"
	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/crawlhouse/crawlhouse/internal/ops"
	"github.com/crawlhouse/crawlhouse/internal/receiver"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
)

// Addrs are where a started receiver can be reached.
type Addrs struct {
	// HTTP is the bound listen address, e.g. "127.0.0.1:41234".
	HTTP string
	// NATS is the URL the receiver publishes to; with NATS_EMBEDDED=true,
	// the embedded server's (useful with a NATS_URL port of -1).
	NATS string
}

// Options are optional hooks of RunWithOptions, for tests and tools that
// start a receiver in process.
type Options struct {
	// Ready, when set, is called once the receiver accepts deliveries on
	// its listener (the stream may still be being created: see /readyz).
	// With RECEIVER_LISTEN=127.0.0.1:0 it is how a caller learns the port;
	// the same address is logged as {"message":"listening","addr":…}.
	Ready func(Addrs)
	// TuneRuntime applies the binary's runtime settings (the collector's
	// target and a soft memory limit from the container's, see runtime.go).
	// Run sets it; they are the process's, so tests leave it off.
	TuneRuntime bool
	// Tracing, when set, is the tracer provider instead of the one the
	// OTEL_* variables configure (tests: an in-memory exporter). The caller
	// shuts it down.
	Tracing *tracing.Provider
	// Publisher, when set, takes the deliveries instead of the JetStream
	// publisher (the connection and the stream are still set up). The load
	// generator passes one that acknowledges at once, to measure the HTTP
	// path alone: the floor under the receiver's cost per delivery.
	Publisher receiver.Publisher
}

// Run is the receiver binary: it reads its configuration through getenv,
// serves until ctx is done, then shuts down gracefully. args[1:] may be
// --help or --version, answered on stdout, or "probe URL", which GETs URL
// and fails unless it answers 2xx (ops.Probe). Logs go to stdout. A returned
// error is one line for the user: main prints it to stderr and exits
// with env.ExitCode (2 for a usage error, else 1).
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return RunWithOptions(ctx, args, getenv, stdout, stderr, Options{TuneRuntime: true})
}

// RunWithOptions is Run with hooks.
func RunWithOptions(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer, opts Options) error {
	// Every credential the environment holds is scrubbed from the logs and
	// from the returned error, whichever path (a library's error repeating
	// its input) carried it there; URLs are also redacted where logged.
	scrub := logs.NewScrubber(logs.Secrets(getenv))
	return scrub.Error(run(ctx, args, getenv, scrub.Writer(stdout), opts))
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, opts Options) error {
	if len(args) > 1 && args[1] == "probe" {
		// The container healthcheck (distroless: no shell, no curl).
		return ops.Probe(ctx, args[2:])
	}
	if len(args) > 1 && args[1] == "redrive-rejected" {
		return redriveRejected(ctx, args[2:], getenv, stdout)
	}
	if done, err := env.Args(args[min(1, len(args)):], "receiver", stdout, usage); done {
		return err
	}
	cfg, err := env.Checked(Load, getenv)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, getenv, stdout, opts)
}

// usage writes the --help text: what the receiver does and every variable
// with its default.
func usage(w io.Writer) {
	fmt.Fprint(w, `receiver: takes signed crawl.page webhook deliveries and stores them in JetStream.

Usage: receiver [--help | --version]
       receiver probe URL    exit 0 if GET URL answers 2xx within 2s, else 1 (container healthcheck)
       receiver redrive-rejected [--since 24h]
                             re-examine the quarantined refused deliveries with the current
                             configuration; archive what now verifies and validates, once

Configured by the environment:

`)
	_ = env.WriteTable(w, &Config{})
	fmt.Fprint(w, `
Endpoints: POST $WEBHOOK_PATH, GET /healthz, GET /readyz, GET /metrics.

`+env.ExitStatusHelp)
}
