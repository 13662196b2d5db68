// Package receiver is the crawlhouse receiver: an HTTP server that
// takes signed crawl.page webhook deliveries, checks and validates them, and
// answers 2xx only once JetStream has stored them.
package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/backoff"
	"github.com/crawlhouse/crawlhouse/internal/env"
	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/crawlhouse/crawlhouse/internal/ops"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
	"github.com/crawlhouse/crawlhouse/internal/version"
	"github.com/crawlhouse/crawlhouse/internal/wal"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
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
	Publisher Publisher
}

// Run is the receiver binary: it reads its configuration through getenv,
// serves until ctx is done, then shuts down gracefully. args[1:] may be
// --help or --version, answered on stdout, or "probe URL", which GETs URL
// and fails unless it answers 2xx (ops.Probe). Logs go to stdout. A returned
// error is one line for the user: main prints it to stderr and exits 1.
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
	for _, a := range args[min(1, len(args)):] {
		switch a {
		case "-h", "-help", "--help", "help":
			usage(stdout)
			return nil
		case "-version", "--version", "version":
			fmt.Fprintln(stdout, "receiver", version.String())
			return nil
		default:
			return fmt.Errorf("unknown argument %q (try --help)", a)
		}
	}
	cfg, err := env.Checked(Load, getenv)
	if err != nil {
		return err
	}
	log := logs.New(cfg.LogConfig, stdout, "receiver")
	verifier, err := cfg.verifier()
	if err != nil {
		return fmt.Errorf("config: WEBHOOK_SECRETS: %w", err)
	}
	if opts.TuneRuntime {
		rs := tuneRuntime(getenv)
		log.Info().Int("gc_percent", rs.GCPercent).Int64("memory_limit_bytes", rs.MemoryLimit).
			Msg("runtime: collector target and soft memory limit (0: GOGC/GOMEMLIMIT of the environment, or no container limit)")
	}
	tracer := opts.Tracing
	if tracer == nil {
		if tracer, err = tracing.Setup(ctx, cfg.TracingConfig, "crawlhouse-receiver", version.String()); err != nil {
			return fmt.Errorf("config: %w", err)
		}
		// Last of the deferred calls: the spans of the drained deliveries
		// are flushed.
		defer func() {
			if err := tracer.Shutdown(ctx); err != nil {
				log.Warn().Err(err).Msg("shutdown: tracing: spans not exported")
			}
		}()
	}
	if tracer.Enabled() {
		log.Info().Str("endpoint", logs.RedactURL(tracer.Where)).Msg("tracing on: spans exported over OTLP")
		tracing.HandleErrors(func(err error) { log.Warn().Err(err).Msg("tracing: spans not exported") })
	}
	if cfg.AllowUnsigned {
		log.Warn().Msg("WEBHOOK_ALLOW_UNSIGNED=true: deliveries without a signature are accepted (development only)")
	}
	tokens, err := newTokenAuth(cfg)
	if err != nil {
		return fmt.Errorf("config: WEBHOOK_TOKENS: %w", err)
	}
	if tokens != nil {
		// Said at every start while it is on: the token does not bind the
		// body, so anyone who sees one delivery can forge others.
		log.Warn().Str("header", tokens.header).Int("tokens", len(cfg.tokens())).Strs("sources", cfg.TokenSources).
			Msg("WEBHOOK_TOKENS set: deliveries without a signature are accepted with a shared token; it does not bind the body, so serve the receiver over TLS only and prefer signed senders (docs/reliability.md)")
	}

	var natsOpts []nats.Option
	// A publish made while disconnected fails at once instead of waiting
	// in the reconnect buffer, to be stored after the sender got its 503.
	natsOpts = append(natsOpts, nats.ReconnectBufSize(-1))
	if cfg.Embedded {
		srv, err := stream.StartEmbedded(cfg.StreamConfig, stream.EmbeddedConfig{StoreDir: cfg.StoreDir, SyncAlways: cfg.SyncAlways, SyncInterval: cfg.SyncInterval})
		if err != nil {
			return err
		}
		defer func() {
			srv.Shutdown()
			srv.WaitForShutdown()
		}()
		cfg.URL = srv.ClientURL()
		natsOpts = append(natsOpts, nats.InProcessServer(srv))
		log.Info().Str("url", logs.RedactURL(cfg.URL)).Str("store_dir", cfg.StoreDir).Bool("sync_always", cfg.SyncAlways).
			Dur("sync_interval", cfg.SyncInterval).Msg("embedded JetStream started")
		if !cfg.SyncAlways && cfg.WALDir == "" {
			log.Warn().Msg("NATS_SYNC_ALWAYS=false without RECEIVER_WAL_DIR: a power loss can take deliveries already answered 2xx")
		}
	} else {
		natsOpts = append(natsOpts, stream.WriteThrough())
	}
	nc, js, err := stream.Connect(cfg.StreamConfig, "crawlhouse-receiver", log, natsOpts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	groupCommit, _ := cfg.groupCommit() // checked by Validate
	log.Info().Bool("group_commit", groupCommit).Str("setting", cfg.GroupCommit).Msg("publisher")
	pub := stream.NewPublisher(nc, js, cfg.StreamConfig, stream.PublisherOptions{GroupCommit: groupCommit})
	defer pub.Close()

	s := newServer(cfg, log, verifier, pub, js)
	s.tokens = tokens
	if cfg.Quarantine {
		s.quarantine = newQuarantine(cfg.QuarantineConfig, cfg.Replicas, log, s.metrics.registry)
		qctx, stopQuarantine := context.WithCancel(ctx)
		qdone := make(chan struct{})
		go func() { defer close(qdone); s.quarantine.run(qctx, js) }()
		// Stopped before the connection closes (deferred calls run last
		// first); what is still queued then is not kept.
		defer func() { stopQuarantine(); <-qdone }()
	}
	var w *wal.WAL
	if opts.Publisher != nil {
		s.pub = opts.Publisher
	} else if cfg.WALDir != "" {
		wo := wal.Options{Dir: cfg.WALDir, MaxBytes: cfg.WALMaxBytes,
			CommitDelay: cfg.WALCommitDelay, CommitSiblings: cfg.WALCommitSiblings,
			Registerer: s.metrics.registry, Logger: log}
		if cfg.Embedded && !cfg.SyncAlways {
			// An entry leaves the log only once the store holding its copy
			// has been synced after its PubAck.
			wo.StreamSync = stream.NewStoreSyncer(cfg.StoreDir).Sync
		}
		w, err = wal.Open(wo)
		if err != nil {
			return err
		}
		// Closed after the deliveries in progress (deferred: runs after
		// the shutdown below); what it holds is replayed at the next start.
		defer func() {
			if err := w.Close(); err != nil {
				log.Warn().Err(err).Msg("shutdown: close the write-ahead log")
			}
		}()
		s.pub = &durablePublisher{pub: pub, wal: w}
		log.Info().Str("dir", cfg.WALDir).Bool("syncs_the_store", wo.StreamSync != nil).Int64("max_bytes", cfg.WALMaxBytes).
			Dur("commit_delay", cfg.WALCommitDelay).Int("commit_siblings", cfg.WALCommitSiblings).Msg("write-ahead log open")
	}
	senders, _ := cfg.traceTrustedSenders() // checked by Validate
	s.traces = tracing.Deliveries{Tracer: tracer.Tracer(), TrustedSenders: senders}
	ensureCtx, stopEnsure := context.WithCancel(ctx)
	defer stopEnsure()
	go func() {
		s.ensureStream(ensureCtx, js)
		if w == nil || ensureCtx.Err() != nil {
			s.ready.Store(ensureCtx.Err() == nil)
			return
		}
		// Ready once the log's leftovers are back in the stream; trimming
		// starts only then (see wal.WAL.Replay).
		if err := s.replayWAL(ensureCtx, w, pub); err != nil {
			return // ctx is done
		}
		s.ready.Store(true)
		w.Run(ensureCtx, walTrimEvery, log)
	}()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	e := s.routes()
	hs := &http.Server{
		Handler:           e,
		ReadHeaderTimeout: min(10*time.Second, cfg.ReadTimeout),
		// Headers and body; a body still arriving then is answered 408
		// (server.readBody).
		ReadTimeout: cfg.ReadTimeout,
		// The answer follows the body and the PubAck.
		WriteTimeout:   cfg.ReadTimeout + cfg.PublishTimeout + 5*time.Second,
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: maxHeaderBytes,
		// net/http's own complaints (TLS handshakes, accept errors) go to
		// the structured log, not to stderr.
		ErrorLog: stdlog.New(logWriter{log}, "", 0),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	addrs := Addrs{HTTP: ln.Addr().String(), NATS: cfg.URL}
	log.Info().Str("addr", addrs.HTTP).Str("path", cfg.Path).Str("nats", logs.RedactURL(addrs.NATS)).
		Strs("signature_headers", s.sigHeaders).Strs("trusted_proxies", cfg.TrustedProxies).Str("version", version.String()).Msg("listening")
	if opts.Ready != nil {
		opts.Ready(addrs)
	}

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// Graceful shutdown: stop taking connections, let every delivery in
	// progress finish (each waits at most RECEIVER_PUBLISH_TIMEOUT for its
	// PubAck), then close the publisher and the connection, and last the
	// embedded server (deferred above).
	log.Info().Msg("shutting down: draining deliveries in progress")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.PublishTimeout+5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Error().Err(err).Msg("shutdown: deliveries still in progress were cut")
	}
	pub.Close()
	if err := nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		log.Warn().Err(err).Msg("shutdown: drain NATS connection")
	}
	log.Info().Msg("stopped")
	return nil
}

// walTrimEvery is how often the write-ahead log is trimmed, each time
// after one sync of the stream's store: often enough that the log holds
// about a memtable's worth at peak, rare enough that those syncs cost
// little beside the log's own.
const walTrimEvery = 100 * time.Millisecond

// maxHeaderBytes bounds a request's headers; a sender's are a few hundred
// bytes. Larger (or endlessly repeated) headers are answered 431 by net/http.
const maxHeaderBytes = 64 << 10

// logWriter turns net/http's log lines into warnings.
type logWriter struct{ log zerolog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Warn().Str("source", "net/http").Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}

// ensureStream creates or updates the stream and its object store, retrying
// until it succeeds: JetStream may come up after the receiver. Deliveries
// meanwhile answer 503 and /readyz says not ready.
func (s *server) ensureStream(ctx context.Context, js jetstream.JetStream) {
	schedule := backoff.Exponential{First: 250 * time.Millisecond, Max: 5 * time.Second}
	err := backoff.Retry(ctx, schedule, func() error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := stream.EnsureStream(cctx, js, s.cfg.StreamConfig)
		return err
	}, func(_ int, err error, wait time.Duration) bool {
		s.log.Warn().Err(err).Dur("retry_in", wait).Msg("stream not created yet")
		return true
	})
	if err != nil {
		return // ctx is done
	}
	s.ensured.Store(true)
	s.log.Info().Str("stream", s.cfg.Stream).Strs("subjects", s.cfg.Subjects()).Msg("stream ready")
}
