package changes

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/changes/summary"
	"github.com/crawlhouse/crawlhouse/internal/claim"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/rs/zerolog"
)

// Store reads what a job changed, and the jobs seen lately, over what every
// replica archived; *query.Reader is one.
type Store interface {
	JobChanges(ctx context.Context, crawlID string, q query.ChangeQuery) (query.JobChanges, error)
	RecentJobs(ctx context.Context, since time.Time, limit int) ([]query.RecentJob, error)
}

var _ Store = (*query.Reader)(nil)

// Options tell a Summarizer how the sink finds a job complete.
type Options struct {
	// Backfill is true when the sink runs the backfill: a job is then
	// complete when Ended is called (its backfill done), and deliveries
	// only matter to the backfill.
	Backfill bool
	// Quiet is BACKFILL_QUIET_PERIOD: with the backfill off, a job with no
	// delivery for this long is complete.
	Quiet time.Duration
}

// recentWindow is how far back a starting Summarizer looks for jobs whose
// summary a stopped sink may not have sent; recentJobs bounds how many.
const (
	recentWindow = 24 * time.Hour
	recentJobs   = 1000
)

// Summarizer sends each complete job's change summary, once for all sink
// replicas. Observe and Ended mark jobs; Run sends their summaries when
// they are due.
type Summarizer struct {
	cfg    Config
	opts   Options
	store  Store
	claims claim.Claims
	pub    claim.Publisher
	client *http.Client
	log    zerolog.Logger
	sent   atomic.Uint64

	mu   sync.Mutex
	jobs map[string]*pending
	wake chan struct{}

	// CheckEvery is how often due jobs are looked for, and how soon a job
	// whose summary failed (ClickHouse or NATS away) is tried again.
	// Retries and RetryDelay are the webhook POST's, as alerts'.
	CheckEvery time.Duration
	Retries    int
	RetryDelay time.Duration
	// Now is the clock due times are judged by (default time.Now).
	Now func() time.Time
}

// pending is a job waiting for its summary.
type pending struct {
	last  time.Time // its newest delivery seen
	ended bool      // its end event seen
	due   time.Time // when to summarize; zero: as soon as Run looks
}

// New returns a Summarizer. pub may be nil (no NATS publishing) and client
// nil (a client with a 10 s timeout). Run must be running for summaries to
// go out.
func New(cfg Config, opts Options, store Store, claims claim.Claims, pub claim.Publisher, client *http.Client, log zerolog.Logger) (*Summarizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil || claims == nil {
		return nil, errors.New("changes: an archive reader and a claim store are required")
	}
	if opts.Quiet <= 0 {
		opts.Quiet = 2 * time.Minute
	}
	return &Summarizer{cfg: cfg, opts: opts, store: store, claims: claims, pub: pub, client: client,
		log: log.With().Str("component", "changes").Logger(), jobs: map[string]*pending{}, wake: make(chan struct{}, 1),
		CheckEvery: time.Second, Retries: 3, RetryDelay: time.Second, Now: time.Now}, nil
}

// Observe is told of every committed delivery of job crawlID. With the
// backfill off, it makes the job due Settle after its end event, or after
// the quiet period since its newest delivery; with the backfill on it does
// nothing (Ended does it). It never blocks.
func (s *Summarizer) Observe(crawlID, eventType string) {
	if s.opts.Backfill {
		return
	}
	now := s.Now()
	s.mu.Lock()
	p := s.jobs[crawlID]
	if p == nil {
		p = &pending{}
		s.jobs[crawlID] = p
	}
	p.last = now
	p.ended = p.ended || events.EndsJob(eventType)
	p.due = s.dueAt(p)
	s.mu.Unlock()
}

func (s *Summarizer) dueAt(p *pending) time.Time {
	if p.ended {
		return p.last.Add(s.cfg.Settle)
	}
	return p.last.Add(s.opts.Quiet)
}

// Ended tells the Summarizer that job crawlID is complete: its backfill
// read the finished job to its end. Its summary goes out at Run's next
// look. It never blocks.
func (s *Summarizer) Ended(crawlID string) {
	s.mu.Lock()
	s.jobs[crawlID] = &pending{}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Sent is the number of summaries this replica sent
// (crawlhouse_change_summaries_total).
func (s *Summarizer) Sent() uint64 { return s.sent.Load() }

// Run sends due summaries until ctx ends. It starts by looking again at the
// jobs of the last day a stopped sink may have left unsummarized (a job
// already summarized is claimed: nothing is sent twice).
func (s *Summarizer) Run(ctx context.Context) {
	s.recover(ctx)
	t := time.NewTicker(s.CheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
		}
		s.sendDue(ctx)
	}
}

func (s *Summarizer) recover(ctx context.Context) {
	jobs, err := s.store.RecentJobs(ctx, s.Now().Add(-recentWindow), recentJobs)
	if err != nil {
		s.log.Warn().Err(err).Msg("recent jobs not read; summaries a stopped sink left unsent are not looked for")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range jobs {
		if _, ok := s.jobs[j.CrawlID]; ok {
			continue
		}
		switch {
		case s.opts.Backfill && j.BackfillState == "done":
			s.jobs[j.CrawlID] = &pending{}
		case !s.opts.Backfill:
			p := &pending{last: j.LastDeliveryAt, ended: events.EndsJob(j.LastEvent)}
			p.due = s.dueAt(p)
			s.jobs[j.CrawlID] = p
		}
	}
}

func (s *Summarizer) sendDue(ctx context.Context) {
	now := s.Now()
	var due []string
	dueAt := map[string]time.Time{}
	s.mu.Lock()
	for id, p := range s.jobs {
		if !now.Before(p.due) {
			due = append(due, id)
			dueAt[id] = p.due
			delete(s.jobs, id)
		}
	}
	s.mu.Unlock()
	// In the order they fell due, then by id, so that a pass is
	// reproducible.
	slices.SortFunc(due, func(a, b string) int {
		return cmp.Or(dueAt[a].Compare(dueAt[b]), strings.Compare(a, b))
	})
	for _, id := range due {
		again, err := s.summarize(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn().Err(err).Str("crawl_id", id).Msg("change summary failed; trying again")
			again = now.Add(s.CheckEvery)
		}
		if again.IsZero() {
			continue
		}
		s.mu.Lock()
		if _, ok := s.jobs[id]; !ok {
			s.jobs[id] = &pending{due: again}
		}
		s.mu.Unlock()
	}
}

// summarize reads the job's changes and, unless filtered out, claims and
// sends its summary (claim.Channel.Send): again is when to try again, zero
// when the summary needs nothing more (sent, or filtered out). A failed
// delivery returns its error with the claim released: the next try, by
// this replica or another, sends the summary to the destinations it
// missed. The summary is built again at each try.
func (s *Summarizer) summarize(ctx context.Context, crawlID string) (again time.Time, err error) {
	jc, err := s.store.JobChanges(ctx, crawlID, query.ChangeQuery{URLPatterns: s.cfg.URLPatterns, MaxURLs: s.cfg.MaxURLs})
	if err != nil {
		return time.Time{}, err
	}
	log := s.log.With().Str("crawl_id", crawlID).Logger()
	if s.cfg.OnlyWhenChanged && !jc.Something() {
		log.Debug().Msg("nothing changed in the job; no change summary (CHANGES_ONLY_WHEN_CHANGED)")
		return time.Time{}, nil
	}
	ch := claim.Channel{Name: "change summary", Subject: Subject, WebhookURL: s.cfg.WebhookURL, Pub: s.pub, Client: s.client, Retries: s.Retries, RetryDelay: s.RetryDelay}
	sum := summary.Of(jc, s.cfg.URLPatterns, s.Now())
	body, err := summary.Encode(sum, ch.MaxBody())
	if err != nil {
		// It can never go out (URL patterns longer than a NATS message):
		// not claimed, not tried again.
		log.Error().Err(err).Msg("change summary not sent")
		return time.Time{}, nil
	}
	sent, err := ch.Send(ctx, s.claims, crawlID, body, log)
	if err != nil {
		return time.Time{}, err
	}
	if sent.Now {
		s.sent.Add(1)
		log.Info().Uint64(events.ChangeNew, sum.New).Uint64(events.ChangeChanged, sum.Changed).Uint64(events.ChangeRemoved, sum.Removed).Uint64(events.ChangeSame, sum.Same).Int("bytes", len(body)).Msg("change summary")
	}
	// Busy: another replica is sending it; look again when its hold ends,
	// in case it was stopped midway.
	return sent.Busy, nil
}
