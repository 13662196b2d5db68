package sinkcmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/alert"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/backfill"
	"github.com/crawlhouse/crawlhouse/internal/backoff"
	"github.com/crawlhouse/crawlhouse/internal/changes"
	"github.com/crawlhouse/crawlhouse/internal/claim"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/sink"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// clients are what the sink holds before start-up: clients that need no
// server to be built, and the state /metrics and /readyz report while the
// sink waits for its dependencies.
type clients struct {
	cfg  Config
	opts Options
	log  zerolog.Logger
	// conn and store are ClickHouse; nc and js NATS (connecting in the
	// background until a server answers).
	conn  driver.Conn
	store *archive.Store
	nc    *nats.Conn
	js    jetstream.JetStream
	// reg is the registry served on /metrics.
	reg     prometheus.Registerer
	metrics *sink.Metrics
	stall   *sink.Stall
	// schema is what start-up made of the migrations, for /readyz.
	schema *schemaState
}

// running is the sink once start-up is through: every part built, none
// waiting for another.
type running struct {
	consumer *sink.Consumer
	alerter  *alert.Alerter
	changes  *changes.Summarizer
	// backfill is nil while CRAWL_API_URL is unset; backfillConn is its
	// NATS connection, to close once it has stopped.
	backfill     *backfill.Service
	backfillConn *nats.Conn
}

// startUp waits for the sink's dependencies, retrying with backoff until
// ctx is done (ctx.Err() then): NATS, the events stream and its body store,
// the dead-letter stream and its body store, the durable consumer, the KV
// buckets of the alert claims and the backfill, and ClickHouse with its
// migrations applied. Then it builds everything that runs on them at once.
// A dependency that is away delays the sink; it never ends it.
func startUp(ctx context.Context, c clients) (*running, error) {
	var p prepared
	err := retry(ctx, c.log, "start-up", func() (err error) {
		p, err = prepare(ctx, c)
		return err
	})
	if err != nil {
		return nil, err
	}
	r, err := build(c, p)
	if err != nil && p.backfillConn != nil {
		p.backfillConn.Close()
	}
	return r, err
}

// prepared is what one successful attempt of prepare made on the servers.
type prepared struct {
	source       jetstream.Consumer
	deadLetters  *delivery.DeadLetters
	alerter      *alert.Alerter
	changes      *changes.Summarizer
	backfill     *backfill.Service
	backfillConn *nats.Conn
}

// prepare is one attempt of start-up. Every step creates or updates to the
// same settings, so an attempt repeats the steps an earlier one did. The
// backfill comes last: it registers its metrics, which must happen once.
func prepare(ctx context.Context, c clients) (prepared, error) {
	var p prepared
	cfg := c.cfg
	_, err := schema.Migrate(ctx, c.conn, cfg.ArchiveConfig, c.log)
	if ctx.Err() == nil {
		c.schema.migrated(err)
	}
	if err != nil {
		return p, fmt.Errorf("migrate ClickHouse: %w", err)
	}
	if _, err := schema.ApplyRetention(ctx, c.conn, cfg.ArchiveConfig, cfg.RetentionConfig, c.log); err != nil {
		return p, fmt.Errorf("apply the retention: %w", err)
	}
	if _, err := stream.EnsureStream(ctx, c.js, cfg.StreamConfig); err != nil {
		return p, err
	}
	dl, err := delivery.NewDeadLetters(c.js, cfg.deadLetters().Route())
	if err != nil {
		return p, err
	}
	if err := stream.EnsureDeadLetterStream(ctx, c.js, cfg.deadLetters()); err != nil {
		return p, err
	}
	p.deadLetters = dl
	pipeline := cfg.pipeline(c.opts)
	p.source, err = c.js.CreateOrUpdateConsumer(ctx, cfg.StreamConfig.Stream, pipeline.ConsumerConfig())
	if err != nil {
		return p, fmt.Errorf("create or update consumer %s: %w", cfg.Consumer, err)
	}
	claims, err := claimsIn(stream.EnsureAlertClaims(ctx, c.js, cfg.AlertConfig.Window, cfg.StreamConfig.Replicas))
	if err != nil {
		return p, err
	}
	// The alerter before the backfill: failures the backfill records (their
	// webhooks were lost) wake it as delivered ones do.
	p.alerter, err = alert.New(cfg.AlertConfig, c.store.Lookups, claims, c.nc, nil, c.log)
	if err != nil {
		return p, err
	}
	p.alerter.Tracer = c.opts.Tracing.Tracer()
	// Change summaries are claimed once per job like alerts; with the
	// backfill on, a job is complete when its backfill is done.
	summaries, err := claimsIn(stream.EnsureChangeClaims(ctx, c.js, cfg.StreamConfig.Replicas))
	if err != nil {
		return p, err
	}
	jobs, err := query.NewReader(c.conn, cfg.ArchiveConfig)
	if err != nil {
		return p, err
	}
	p.changes, err = changes.New(cfg.ChangesConfig, changes.Options{Backfill: cfg.CrawlAPIURL != "", Quiet: cfg.BackfillQuietPeriod},
		jobs, summaries, c.nc, nil, c.log)
	if err != nil {
		return p, err
	}
	if cfg.CrawlAPIURL != "" {
		p.backfill, p.backfillConn, err = newBackfill(cfg, c.store, c.reg, c.log, p.alerter.Failed, p.changes.Ended, c.opts.Tracing.Tracer())
		if err != nil {
			return p, err
		}
	}
	return p, nil
}

// claimsIn is the claims kept in a bucket stream.Ensure*Claims made.
func claimsIn(kv jetstream.KeyValue, err error) (*claim.KVClaims, error) {
	if err != nil {
		return nil, err
	}
	return claim.NewKV(kv)
}

// build makes the observers and the consumer on what prepare made.
func build(c clients, p prepared) (*running, error) {
	alerter := p.alerter
	// crawlhouse_alerts_total is the alerter's count, read at scrape time.
	raised := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "crawlhouse_alerts_total",
		Help: "Alerts raised for crawls whose failures reached the threshold.",
	}, func() float64 { return float64(alerter.Raised()) })
	if err := c.reg.Register(raised); err != nil {
		return nil, fmt.Errorf("alert metrics: %w", err)
	}
	summarized := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "crawlhouse_change_summaries_total",
		Help: "Change summaries this sink sent (one per complete job across all sinks).",
	}, func() float64 { return float64(p.changes.Sent()) })
	if err := c.reg.Register(summarized); err != nil {
		c.reg.Unregister(raised)
		return nil, fmt.Errorf("change summary metrics: %w", err)
	}
	lag := lagCollector(c)
	if err := c.reg.Register(lag); err != nil {
		c.reg.Unregister(raised)
		c.reg.Unregister(summarized)
		return nil, fmt.Errorf("lag metrics: %w", err)
	}
	observers := []sink.Observer{alertObserver{alerter}, changesObserver{p.changes}}
	if p.backfill != nil {
		observers = append(observers, backfillObserver{p.backfill})
	}
	var writer sink.BatchWriter = c.store
	if c.opts.WrapBatchWriter != nil {
		writer = c.opts.WrapBatchWriter(writer)
	}
	consumer, err := sink.NewConsumer(c.cfg.pipeline(c.opts), sink.Deps{
		Source:      p.source,
		Bodies:      delivery.NewBodies(c.js, c.cfg.StreamConfig.BodyBucket()),
		DeadLetters: p.deadLetters,
		Writer:      writer,
		Observers:   observers,
		Metrics:     c.metrics,
		Stall:       c.stall,
		Log:         c.log,
		Tracer:      c.opts.Tracing.Tracer(),
	})
	if err != nil {
		c.reg.Unregister(raised)
		c.reg.Unregister(summarized)
		c.reg.Unregister(lag)
		return nil, err
	}
	return &running{consumer: consumer, alerter: alerter, changes: p.changes, backfill: p.backfill, backfillConn: p.backfillConn}, nil
}

// startUpBackoff is the wait between start-up attempts: 500 ms doubling to
// 30 s, so a dependency that returns is noticed soon without hammering one
// that stays away.
var startUpBackoff = backoff.Exponential{First: 500 * time.Millisecond, Max: 30 * time.Second}

// retry runs f until it succeeds, ctx is done (ctx.Err() then) or it
// meets an unsupported ClickHouse release (that error then), on
// startUpBackoff.
func retry(ctx context.Context, log zerolog.Logger, what string, f func() error) error {
	return backoff.Retry(ctx, startUpBackoff, f, func(_ int, err error, wait time.Duration) bool {
		// A ClickHouse release outside the supported range stays one until
		// an operator changes it: the sink stops and says so.
		if errors.Is(err, archive.ErrUnsupportedServer) {
			return false
		}
		log.Warn().Err(err).Dur("retry_in", wait).Msg(what + " failed; retrying")
		return true
	})
}
