package backfill

import (
	"context"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
)

// Config is what the sink's configuration gives the backfill.
type Config struct {
	// APIURL and APIKey are CRAWL_API_URL and CRAWL_API_KEY.
	APIURL string
	APIKey string
	// Quiet is BACKFILL_QUIET_PERIOD.
	Quiet time.Duration
	// Owner names this replica in leases (default: host name and pid).
	Owner string
	// FailuresRecorded, when set, is told of each job for which failures
	// whose webhooks were lost were recorded (the sink wakes its alerter
	// with it). It must not block.
	FailuresRecorded func(crawlID string)
	// Done, when set, is told of each job whose backfill is done (see
	// ReconcilerConfig.Done). It must not block.
	Done func(crawlID string)
	// Tracer, when set, traces each run (internal/tracing).
	Tracer trace.Tracer
}

// Service is the whole backfill as the sink runs it: fed every committed
// delivery (Observe), running the Scheduler (Run), answering one-off
// requests (Backfill). Its metrics are on the Registerer NewService was
// given.
type Service struct {
	sched *Scheduler
}

// NewService builds the client, the state on kv (the bucket
// stream.EnsureBackfillState made), the reconciler and the scheduler, and
// registers the metrics (crawlhouse_backfill_*) on reg. pages is the
// archive; mirror (optional) records states there. An error leaves reg as
// it was, so a caller retrying start-up may pass it again.
func NewService(cfg Config, kv jetstream.KeyValue, pages PageStore, mirror StateMirror, reg prometheus.Registerer, log zerolog.Logger) (*Service, error) {
	log = log.With().Str("component", "backfill").Logger()
	client, err := crawlapi.NewClient(crawlapi.ClientConfig{BaseURL: cfg.APIURL, Key: cfg.APIKey}, log)
	if err != nil {
		return nil, err
	}
	states, err := NewKVStore(kv, nil)
	if err != nil {
		return nil, err
	}
	// Registered after the client and the store; a later failure
	// unregisters them, so a retried start-up never meets its own earlier
	// registration.
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	rec, err := NewReconciler(NewPager(client, 0), pages, states, mirror, m, log, ReconcilerConfig{Owner: cfg.Owner, Revisit: cfg.Quiet, FailuresRecorded: cfg.FailuresRecorded, Done: cfg.Done, Tracer: cfg.Tracer})
	if err != nil {
		m.unregister(reg)
		return nil, err
	}
	sched, err := NewScheduler(rec, states, log, SchedulerConfig{Quiet: cfg.Quiet})
	if err != nil {
		m.unregister(reg)
		return nil, err
	}
	m.watch(sched)
	return &Service{sched: sched}, nil
}

// Observe is told of every committed delivery: any delivery restarts the
// job's quiet period, and its type's prefix (crawl., batch_scrape.) tells
// the job's kind, kept in the job's state so a restart reads the right
// endpoint; the end of a job (crawl.completed, crawl.failed,
// crawl.cancelled, batch_scrape.completed, batch_scrape.failed,
// batch_scrape.cancelled) triggers it now. It never blocks.
func (s *Service) Observe(crawlID, eventType string, at time.Time) {
	s.sched.Observe(crawlID, eventType, at)
}

// Run schedules reconciliations until ctx ends.
func (s *Service) Run(ctx context.Context) error { return s.sched.Run(ctx) }

// Backfill reconciles one job now, from its first page
// (`sink backfill [-kind crawl|batch_scrape] <crawl-id>`). kind, checked
// with ParseKind, is the operator's word for what the job is; "" reads it
// with the kind its state holds, else as a crawl and, when the API does
// not know it as one, as a batch scrape. The real API also answers a batch
// scrape's id as a crawl, so the operator's word is what archives a batch
// scrape that sent no delivery under its own kind.
func (s *Service) Backfill(ctx context.Context, crawlID, kind string) (Result, error) {
	k, err := ParseKind(kind)
	if err != nil {
		return Result{CrawlID: crawlID}, err
	}
	return s.sched.RunOnce(ctx, crawlID, k)
}
