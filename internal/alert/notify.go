package alert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/claim"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Store counts a crawl's failures since a time, over what every replica
// archived; *archive.Lookups is one.
type Store interface {
	RecentFailures(ctx context.Context, crawlID string, since time.Time) (archive.Recent, error)
}

var _ Store = (*archive.Lookups)(nil)

// Alerter checks crawls with new failures and sends the alerts they raise.
type Alerter struct {
	cfg    Config
	store  Store
	claims claim.Claims
	pub    claim.Publisher
	client *http.Client
	log    zerolog.Logger
	raised atomic.Uint64

	mu    sync.Mutex
	dirty map[string]bool // crawls with failures not checked yet
	wake  chan struct{}
	// quiet remembers crawls this replica saw claimed, until when: no need
	// to count them again before the claim expires.
	quiet map[string]time.Time

	// Retries is how many times a failed POST is retried; RetryDelay the
	// first wait, doubled each time. CheckEvery is how often crawls whose
	// check failed (ClickHouse or NATS away) are checked again.
	Retries    int
	RetryDelay time.Duration
	CheckEvery time.Duration
	// Tracer, when set, makes a span of each alert sent (internal/tracing).
	Tracer trace.Tracer
}

// New returns an Alerter. pub may be nil (no NATS publishing) and client nil
// (a client with a 10 s timeout). Run must be running for alerts to go out.
func New(cfg Config, store Store, claims claim.Claims, pub claim.Publisher, client *http.Client, log zerolog.Logger) (*Alerter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil || claims == nil {
		return nil, errors.New("alert: a failure store and a claim store are required")
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Alerter{
		cfg:        cfg,
		store:      store,
		claims:     claims,
		pub:        pub,
		client:     client,
		log:        log,
		dirty:      map[string]bool{},
		wake:       make(chan struct{}, 1),
		quiet:      map[string]time.Time{},
		Retries:    3,
		RetryDelay: time.Second,
		CheckEvery: 2 * time.Second,
	}, nil
}

// Failed tells the Alerter that a failed page of the job crawlID was
// committed to the archive (the count itself is read from the archive). It
// never blocks: it only marks the crawl for a check.
func (a *Alerter) Failed(crawlID string) {
	a.mu.Lock()
	if until, ok := a.quiet[crawlID]; !ok || time.Now().After(until) {
		a.dirty[crawlID] = true
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Raised is the number of alerts this replica sent (crawlhouse_alerts_total).
func (a *Alerter) Raised() uint64 { return a.raised.Load() }

// Run checks marked crawls and sends their alerts until ctx ends.
func (a *Alerter) Run(ctx context.Context) {
	t := time.NewTicker(a.CheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		case <-t.C:
		}
		a.checkAll(ctx)
	}
}

func (a *Alerter) checkAll(ctx context.Context) {
	a.mu.Lock()
	crawls := make([]string, 0, len(a.dirty))
	for id := range a.dirty {
		crawls = append(crawls, id)
	}
	clear(a.dirty)
	now := time.Now()
	for id, until := range a.quiet {
		if now.After(until) {
			delete(a.quiet, id)
		}
	}
	a.mu.Unlock()
	for _, id := range crawls {
		if err := a.check(ctx, id); err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Warn().Err(err).Str("crawl_id", id).Msg("alert check failed; trying again")
			a.mu.Lock()
			a.dirty[id] = true
			a.mu.Unlock()
		}
	}
}

// check counts a crawl's failures in the window and, at the threshold,
// claims and sends its alert.
func (a *Alerter) check(ctx context.Context, crawlID string) error {
	now := time.Now()
	r, err := a.store.RecentFailures(ctx, crawlID, now.Add(-a.cfg.Window))
	if err != nil {
		return err
	}
	if r.Failures < a.cfg.Threshold {
		return nil
	}
	al := newAlert(a.cfg, crawlID, r, now)
	ctx, span := tracing.Start(ctx, a.Tracer, "alert", al.CrawlID)
	sent, err := a.send(ctx, al)
	outcome := outcomeOf(err)
	if err == nil && !sent.Now {
		outcome = "skipped" // sent, or being sent, by another replica
	}
	tracing.End(span, outcome, err, attribute.Int("crawlhouse.failures", al.Failures))
	if err != nil {
		return err // released: checked again, and sent to what it missed
	}
	quiet := now.Add(a.cfg.Window)
	if !sent.Busy.IsZero() {
		quiet = sent.Busy // another replica is sending it: see that it did
	}
	a.mu.Lock()
	a.quiet[crawlID] = quiet
	a.mu.Unlock()
	if sent.Now {
		a.raised.Add(1)
	}
	return nil
}

// send claims and delivers one alert (claim.Channel.Send).
func (a *Alerter) send(ctx context.Context, al Alert) (claim.Sent, error) {
	body, err := json.Marshal(al)
	if err != nil {
		return claim.Sent{}, fmt.Errorf("encode alert: %w", err)
	}
	log := a.log.With().Str("crawl_id", al.CrawlID).Int("failures", al.Failures).Logger()
	ch := claim.Channel{Name: "alert", Subject: Subject, WebhookURL: a.cfg.WebhookURL, Pub: a.pub, Client: a.client, Retries: a.Retries, RetryDelay: a.RetryDelay}
	sent, err := ch.Send(ctx, a.claims, al.CrawlID, body, log)
	if sent.Now {
		log.Warn().Str("last_url", al.LastURL).Str("last_error", al.LastError).Msg("alert: crawl page failures reached the threshold")
	}
	return sent, err
}

func outcomeOf(err error) string {
	if err != nil {
		return "failed"
	}
	return "sent"
}
