package receivercmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/crawlhouse/crawlhouse/internal/ops"
	"github.com/crawlhouse/crawlhouse/internal/receiver"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
	"github.com/crawlhouse/crawlhouse/internal/version"
	"github.com/crawlhouse/crawlhouse/internal/wal"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// serve starts the receiver in named steps (authentication, runtime,
// tracing, JetStream, publisher, HTTP side), serves until ctx is done, and
// shuts down gracefully. Each step's cleanup is deferred as it succeeds,
// so they run in reverse: the listener is drained first, the embedded
// server and last the tracer after everything that uses them.
func serve(ctx context.Context, cfg Config, getenv func(string) string, stdout io.Writer, opts Options) error {
	log := logs.New(cfg.LogConfig, stdout, "receiver")
	auth, err := receiver.NewAuth(cfg.Config, log)
	if err != nil {
		return err
	}
	if opts.TuneRuntime {
		rs := tuneRuntime(getenv)
		log.Info().Int("gc_percent", rs.GCPercent).Int64("memory_limit_bytes", rs.MemoryLimit).
			Msg("runtime: collector target and soft memory limit (0: GOGC/GOMEMLIMIT of the environment, or no container limit)")
	}
	tracer, err := startTracing(ctx, cfg, opts, log)
	if err != nil {
		return err
	}
	// Last of the deferred calls: the spans of the drained deliveries are
	// flushed.
	defer tracer.stop()
	js, err := connect(&cfg, log)
	if err != nil {
		return err
	}
	defer js.close()
	reg, metrics := ops.NewRegistry()
	pub, w, err := publisher(cfg, js, opts, reg, log)
	if err != nil {
		return err
	}
	if w != nil {
		// Closed after the deliveries in progress (deferred: runs after
		// the shutdown in listen); what it holds is replayed at the next
		// start.
		defer func() {
			if err := w.Close(); err != nil {
				log.Warn().Err(err).Msg("shutdown: close the write-ahead log")
			}
		}()
	}
	s := receiver.New(cfg.Config, auth, receiver.Deps{Log: log, Publisher: pub, JetStream: js.js,
		Registry: reg, Metrics: metrics, Tracer: tracer.p.Tracer()})
	// Stopped before the connection closes (deferred calls run last
	// first); what is still queued then is not kept.
	defer background(ctx, s.RunQuarantine)()
	defer background(ctx, func(ctx context.Context) { s.Prepare(ctx, w, js.pub) })()
	return listen(ctx, cfg, s, js, opts, log)
}

// background runs f in a goroutine until the returned stop is called,
// which cancels f's context and waits for it to return.
func background(ctx context.Context, f func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); f(ctx) }()
	return func() { cancel(); <-done }
}

// tracer is the tracer provider and how it is shut down.
type tracer struct {
	p    *tracing.Provider
	stop func()
}

// startTracing sets up the tracer provider: the one of opts, or the one
// the OTEL_* variables configure (off when they are unset).
func startTracing(ctx context.Context, cfg Config, opts Options, log zerolog.Logger) (tracer, error) {
	t := tracer{p: opts.Tracing, stop: func() {}}
	if t.p == nil {
		p, err := tracing.Setup(ctx, cfg.TracingConfig, "crawlhouse-receiver", version.String())
		if err != nil {
			return t, fmt.Errorf("config: %w", err)
		}
		t.p = p
		t.stop = func() {
			if err := p.Shutdown(ctx); err != nil {
				log.Warn().Err(err).Msg("shutdown: tracing: spans not exported")
			}
		}
	}
	if t.p.Enabled() {
		log.Info().Str("endpoint", logs.RedactURL(t.p.Where)).Msg("tracing on: spans exported over OTLP")
		tracing.HandleErrors(func(err error) { log.Warn().Err(err).Msg("tracing: spans not exported") })
	}
	return t, nil
}

// natsConn is the receiver's connection to JetStream, its publisher and,
// with NATS_EMBEDDED, the server it runs.
type natsConn struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	pub   *stream.Publisher
	close func()
}

// connect starts the embedded server (NATS_EMBEDDED; cfg.URL becomes its
// client URL) and connects to JetStream. A publish made while disconnected
// fails at once instead of waiting in the reconnect buffer, to be stored
// after the sender got its 503.
func connect(cfg *Config, log zerolog.Logger) (natsConn, error) {
	natsOpts := []nats.Option{nats.ReconnectBufSize(-1)}
	var writes *stream.WriteGroup
	stopServer := func() {}
	if cfg.Embedded {
		srv, err := stream.StartEmbedded(cfg.StreamConfig, stream.EmbeddedConfig{StoreDir: cfg.StoreDir, SyncAlways: cfg.SyncAlways, SyncInterval: cfg.SyncInterval})
		if err != nil {
			return natsConn{}, err
		}
		stopServer = func() {
			srv.Shutdown()
			srv.WaitForShutdown()
		}
		cfg.URL = srv.ClientURL()
		natsOpts = append(natsOpts, nats.InProcessServer(srv))
		log.Info().Str("url", logs.RedactURL(cfg.URL)).Str("store_dir", cfg.StoreDir).Bool("sync_always", cfg.SyncAlways).
			Dur("sync_interval", cfg.SyncInterval).Msg("embedded JetStream started")
		if !cfg.SyncAlways && cfg.WALDir == "" {
			log.Warn().Msg("NATS_SYNC_ALWAYS=false without RECEIVER_WAL_DIR: a power loss can take deliveries already answered 2xx")
		}
	} else {
		writes = stream.NewWriteGroup(2 * time.Second)
		natsOpts = append(natsOpts, writes.Options()...)
	}
	nc, js, err := stream.Connect(cfg.StreamConfig, "crawlhouse-receiver", log, natsOpts...)
	if err != nil {
		stopServer()
		return natsConn{}, err
	}
	groupCommit, _ := cfg.GroupCommitOn() // checked by Validate
	log.Info().Bool("group_commit", groupCommit).Str("setting", cfg.GroupCommit).Msg("publisher")
	pub := stream.NewPublisher(nc, js, cfg.StreamConfig, stream.PublisherOptions{GroupCommit: groupCommit, Writes: writes})
	return natsConn{nc: nc, js: js, pub: pub, close: func() {
		pub.Close()
		nc.Close()
		stopServer()
	}}, nil
}

// publisher is what takes the deliveries: the one of opts, or the
// JetStream publisher, behind the write-ahead log when RECEIVER_WAL_DIR is
// set (w, nil otherwise; the caller closes it).
func publisher(cfg Config, js natsConn, opts Options, reg prometheus.Registerer, log zerolog.Logger) (_ receiver.Publisher, w *wal.WAL, _ error) {
	if opts.Publisher != nil {
		return opts.Publisher, nil, nil
	}
	if cfg.WALDir == "" {
		return js.pub, nil, nil
	}
	wo := wal.Options{Dir: cfg.WALDir, MaxBytes: cfg.WALMaxBytes,
		CommitDelay: cfg.WALCommitDelay, CommitSiblings: cfg.WALCommitSiblings,
		Registerer: reg, Logger: log}
	if cfg.Embedded && !cfg.SyncAlways {
		// An entry leaves the log only once the store holding its copy
		// has been synced after its PubAck.
		wo.StreamSync = stream.NewStoreSyncer(cfg.StoreDir).Sync
	}
	w, err := wal.Open(wo)
	if err != nil {
		return nil, nil, err
	}
	log.Info().Str("dir", cfg.WALDir).Bool("syncs_the_store", wo.StreamSync != nil).Int64("max_bytes", cfg.WALMaxBytes).
		Dur("commit_delay", cfg.WALCommitDelay).Int("commit_siblings", cfg.WALCommitSiblings).Msg("write-ahead log open")
	return receiver.Durable(js.pub, w), w, nil
}

// listen serves s on RECEIVER_LISTEN until ctx is done, then shuts down
// gracefully: it stops taking connections, lets every delivery in progress
// finish (each waits at most RECEIVER_PUBLISH_TIMEOUT for its PubAck), then
// closes the publisher and drains the connection; the embedded server
// stops last (deferred by serve).
func listen(ctx context.Context, cfg Config, s *receiver.Server, js natsConn, opts Options, log zerolog.Logger) error {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: min(10*time.Second, cfg.ReadTimeout),
		// Headers and body; a body still arriving then is answered 408
		// (the receiver's readBody).
		ReadTimeout: cfg.ReadTimeout,
		// The answer follows the body and the PubAck.
		WriteTimeout:   cfg.ReadTimeout + cfg.PublishTimeout + 5*time.Second,
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: maxHeaderBytes,
		// net/http's own complaints (TLS handshakes, accept errors) go to
		// the structured log, not to stderr.
		ErrorLog: logs.HTTPServerLog(log),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	addrs := Addrs{HTTP: ln.Addr().String(), NATS: cfg.URL}
	log.Info().Str("addr", addrs.HTTP).Str("path", cfg.Path).Str("nats", logs.RedactURL(addrs.NATS)).
		Strs("signature_headers", cfg.SignatureHeaders()).Strs("trusted_proxies", cfg.TrustedProxies).Str("version", version.String()).Msg("listening")
	if opts.Ready != nil {
		opts.Ready(addrs)
	}

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down: draining deliveries in progress")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.PublishTimeout+5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Error().Err(err).Msg("shutdown: deliveries still in progress were cut")
	}
	js.pub.Close()
	if err := js.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		log.Warn().Err(err).Msg("shutdown: drain NATS connection")
	}
	log.Info().Msg("stopped")
	return nil
}

// maxHeaderBytes bounds a request's headers; a sender's are a few hundred
// bytes. Larger (or endlessly repeated) headers are answered 431 by net/http.
const maxHeaderBytes = 64 << 10
