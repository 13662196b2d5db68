package backfill

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
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
	// KV configures the state bucket (default CRAWL_BACKFILL).
	KV KVConfig
}

// Service is the whole backfill as the sink runs it: fed every committed
// delivery (Observe), running the Scheduler (Run), answering one-off
// requests (Backfill) and exposing its metrics (WriteMetrics).
type Service struct {
	sched *Scheduler
	m     *Metrics
}

// NewService builds the client, the KV state, the reconciler and the
// scheduler. pages is the archive; mirror (optional) records states there.
func NewService(ctx context.Context, cfg Config, js jetstream.JetStream, pages PageStore, mirror StateMirror, log zerolog.Logger) (*Service, error) {
	if js == nil {
		return nil, errors.New("backfill: needs JetStream for its state")
	}
	log = log.With().Str("component", "backfill").Logger()
	client, err := NewClient(ClientConfig{BaseURL: cfg.APIURL, Key: cfg.APIKey}, log)
	if err != nil {
		return nil, err
	}
	states, err := NewKVStore(ctx, js, cfg.KV)
	if err != nil {
		return nil, err
	}
	m := NewMetrics()
	rec, err := NewReconciler(NewPager(client, 0), pages, states, mirror, m, log, ReconcilerConfig{Owner: cfg.Owner, Revisit: cfg.Quiet})
	if err != nil {
		return nil, err
	}
	sched, err := NewScheduler(rec, states, log, SchedulerConfig{Quiet: cfg.Quiet})
	if err != nil {
		return nil, err
	}
	return &Service{sched: sched, m: m}, nil
}

// Observe is told of every committed delivery: any delivery restarts the
// crawl's quiet period; crawl.completed and crawl.failed trigger it now.
// It never blocks.
func (s *Service) Observe(crawlID, eventType string, at time.Time) {
	s.sched.Seen(crawlID, at)
	s.sched.Event(crawlID, eventType)
}

// Run schedules reconciliations until ctx ends.
func (s *Service) Run(ctx context.Context) error { return s.sched.Run(ctx) }

// Backfill reconciles one crawl now, from its first page
// (`sink backfill <crawl-id>`).
func (s *Service) Backfill(ctx context.Context, crawlID string) (Result, error) {
	return s.sched.RunOnce(ctx, crawlID)
}

// WriteMetrics writes crawlhouse_backfill_* in the Prometheus text format.
func (s *Service) WriteMetrics(w io.Writer) { s.m.Write(w) }
