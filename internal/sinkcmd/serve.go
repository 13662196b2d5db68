package sinkcmd

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/ops"
	"github.com/crawlhouse/crawlhouse/internal/sink"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/version"
	"github.com/rs/zerolog"
)

// serve is `sink`: it serves the endpoints at once, then waits for the
// dependencies (startUp) and consumes until ctx is done.
func serve(ctx context.Context, cfg Config, log zerolog.Logger, opts Options) error {
	// The collector's target is the process's: the consuming sink is the
	// work of its process (the other commands are short and keep Go's).
	debug.SetGCPercent(cfg.GCPercent)
	if cfg.MemoryLimit > 0 {
		debug.SetMemoryLimit(cfg.MemoryLimit)
	}
	conn, err := archive.OpenWithSettings(cfg.ArchiveConfig, opts.ClickHouseSettings)
	if err != nil {
		return err
	}
	defer conn.Close()
	store, err := archive.NewStore(conn, cfg.ArchiveConfig)
	if err != nil {
		return err
	}
	nc, js, err := stream.Connect(cfg.StreamConfig, "crawlhouse-sink", log)
	if err != nil {
		return err
	}
	defer nc.Close()

	// Each sink has its own registry (no globals: several sinks run in one
	// test process); the pipeline's series exist from the start, the
	// alerter's and the backfill's once start-up has built them.
	reg, metricsHandler := ops.NewRegistry()
	stall := sink.NewStall(nil)
	schema := newSchemaState()
	metrics, err := sink.NewMetrics(reg, stall)
	if err != nil {
		return err
	}
	if cfg.CrawlAPIURL == "" {
		log.Info().Msg("CRAWL_API_URL is not set: backfill is off")
	}

	// A stalled consumer is not ready even while both dependencies answer
	// (a page ClickHouse will not take, a revoked grant): nothing is being
	// archived, and the answer says why. Nor is a sink whose migrations
	// are not applied yet, or cannot be.
	ready := func(ctx context.Context) map[string]error {
		return map[string]error{
			"jetstream":  stream.Ready(ctx, js, cfg.StreamConfig),
			"clickhouse": store.Ping(ctx),
			"migrations": schema.Err(),
			"consumer":   stall.Err(),
		}
	}
	served, shutdown, err := listen(cfg, ops.Handler(metricsHandler, ready, 3*time.Second), log, opts)
	if err != nil {
		return err
	}
	defer shutdown()

	r, err := startUp(ctx, clients{cfg: cfg, opts: opts, log: log, conn: conn, store: store, nc: nc, js: js,
		reg: reg, metrics: metrics, stall: stall, schema: schema})
	if err != nil {
		if ctx.Err() != nil {
			// Stopped while waiting for the dependencies: nothing was
			// consumed, and a stop is a clean exit.
			return nil
		}
		return err
	}
	err = r.run(ctx, cfg, log, served)
	_ = nc.Drain() // before the deferred closes

	return err
}

// listen serves handler on SINK_LISTEN in the background: served receives
// the server's end, shutdown stops it. opts.Ready learns the bound address.
func listen(cfg Config, handler http.Handler, log zerolog.Logger, opts Options) (served <-chan error, shutdown func(), err error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	hs := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
	}
	end := make(chan error, 1)
	go func() { end <- hs.Serve(ln) }()
	log.Info().Str("addr", ln.Addr().String()).Str("version", version.String()).Msg("listening")
	if opts.Ready != nil {
		opts.Ready(ln.Addr().String())
	}
	return end, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}, nil
}

// run consumes until ctx is done or the HTTP server fails (served), with
// the alerter and the backfill beside the consumer, then shuts them down in
// order: the consumer finishes its batch, the queued alerts are sent, the
// backfill stops.
func (r *running) run(ctx context.Context, cfg Config, log zerolog.Logger, served <-chan error) (err error) {
	// runCtx ends with ctx, or when the HTTP server fails.
	runCtx, stopRunning := context.WithCancel(ctx)
	defer stopRunning()

	var wg sync.WaitGroup
	bgCtx, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	wg.Go(func() { r.alerter.Run(bgCtx) })
	wg.Go(func() { r.changes.Run(bgCtx) })
	if r.backfill != nil {
		wg.Go(func() {
			defer r.backfillConn.Close()
			if err := r.backfill.Run(runCtx); err != nil && runCtx.Err() == nil {
				log.Error().Err(err).Msg("backfill stopped")
			}
		})
	}
	log.Info().Str("consumer", cfg.Consumer).Str("stream", cfg.StreamConfig.Stream).Int("batch_size", cfg.BatchSize).Msg("consuming")
	done := make(chan struct{})
	go func() { defer close(done); r.consumer.Run(runCtx) }()

	select {
	case err = <-served:
		err = fmt.Errorf("serve: %w", err)
		stopRunning()
		<-done
	case <-done:
	}
	// Graceful shutdown: the consumer finished its batch; send the queued
	// alerts and let the backfill stop. serve then drains NATS and closes
	// the HTTP server and ClickHouse.
	log.Info().Msg("shutting down")
	stopBg()
	wg.Wait()
	return err
}
