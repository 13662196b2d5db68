package backfill

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/rs/zerolog"
)

// SchedulerConfig tunes a Scheduler.
type SchedulerConfig struct {
	// Quiet is BACKFILL_QUIET_PERIOD: a crawl with no delivery for this long
	// is reconciled (default 2 min).
	Quiet time.Duration
	// Tick is how often due crawls are looked for (default Quiet/10,
	// between 100 ms and 5 s).
	Tick time.Duration
	// Workers bounds the crawls reconciled at once (default 2).
	Workers int
	// Now is the clock quiet periods and due times are judged by (default
	// time.Now; the Reconciler's DueAt must come from the same clock).
	// Tick only paces how often it is read.
	Now func() time.Time
}

// Scheduler decides when jobs (crawls and batch scrapes) are reconciled:
// when a job has gone quiet (no delivery for Quiet), at once when its end
// is delivered (crawl.completed, crawl.failed, crawl.cancelled and their
// batch_scrape.* twins), again at the DueAt of a run that found the job
// still scraping or that failed, and on request (RunOnce). Jobs whose
// backfill is final (done, expired, denied) are not run again
// automatically.
//
// What it waits for survives a restart: the first delivery of a job creates
// its pending record in the StateStore, with the kind its event type names,
// and Run starts by scheduling every record that is not final.
type Scheduler struct {
	rec    *Reconciler
	states StateStore
	log    zerolog.Logger
	cfg    SchedulerConfig

	mu      sync.Mutex
	seen    map[string]time.Time // last delivery of crawls not yet run
	due     map[string]time.Time // crawls to run at a time
	final   map[string]bool
	touch   map[string]time.Time // first seen, record not yet created
	kinds   map[string]string    // job kinds learned from event types or records
	running map[string]bool
	wake    chan struct{}
	// passes counts the times Run looked for due crawls, so that a test
	// can tell the scheduler has looked since it moved the clock.
	passes atomic.Int64
}

// NewScheduler returns a Scheduler; start it with Run.
func NewScheduler(rec *Reconciler, states StateStore, log zerolog.Logger, cfg SchedulerConfig) (*Scheduler, error) {
	if rec == nil || states == nil {
		return nil, errors.New("backfill: scheduler needs a reconciler and a state store")
	}
	if cfg.Quiet <= 0 {
		cfg.Quiet = 2 * time.Minute
	}
	if cfg.Tick <= 0 {
		cfg.Tick = min(max(cfg.Quiet/10, 100*time.Millisecond), 5*time.Second)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Scheduler{rec: rec, states: states, log: log, cfg: cfg,
		seen: map[string]time.Time{}, due: map[string]time.Time{}, final: map[string]bool{},
		touch: map[string]time.Time{}, kinds: map[string]string{}, running: map[string]bool{}, wake: make(chan struct{}, 1)}, nil
}

// Seen records a delivery of the crawl at time at. It is cheap and never
// blocks: the sink calls it for every message.
func (s *Scheduler) Seen(crawlID string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.final[crawlID] {
		return
	}
	if _, ok := s.seen[crawlID]; !ok {
		if _, ok := s.due[crawlID]; !ok {
			s.touch[crawlID] = at
		}
	}
	if at.After(s.seen[crawlID]) {
		s.seen[crawlID] = at
	}
}

// Observe is told of a delivery of type eventType of job crawlID at time
// at: it restarts the job's quiet period, learns the job's kind from the
// type's prefix, and makes the job due at once when the type ends it. It
// is cheap and never blocks: the sink calls it for every message.
func (s *Scheduler) Observe(crawlID, eventType string, at time.Time) {
	s.learnKind(crawlID, events.KindOf(eventType))
	s.Seen(crawlID, at)
	s.Event(crawlID, eventType)
}

func (s *Scheduler) learnKind(crawlID, kind string) {
	if kind == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.final[crawlID] {
		s.kinds[crawlID] = kind
	}
}

// Event reacts to a job lifecycle event: the end of a crawl or a batch
// scrape (completed, failed, cancelled) makes the job due at once; other
// types are ignored.
func (s *Scheduler) Event(crawlID, eventType string) {
	if !events.EndsJob(eventType) {
		return
	}
	s.learnKind(crawlID, events.KindOf(eventType))
	s.mu.Lock()
	if !s.final[crawlID] {
		delete(s.seen, crawlID)
		s.due[crawlID] = time.Time{}
	}
	s.mu.Unlock()
	s.poke()
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// RunOnce reconciles a job now, from its first page, whatever its state
// (`sink backfill <crawl-id>`): of kind when given (events.KindCrawl,
// events.KindBatchScrape), else with the kind its record holds, else
// trying a crawl, then a batch scrape. It does not need Run.
func (s *Scheduler) RunOnce(ctx context.Context, crawlID, kind string) (Result, error) {
	return s.rec.ReconcileJob(ctx, crawlID, kind, true)
}

func (s *Scheduler) kindOf(crawlID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kinds[crawlID]
}

type finished struct {
	res Result
	err error
}

// Run schedules crawls until ctx ends, then waits for the runs in progress
// (which stop at their next request and save their cursor).
func (s *Scheduler) Run(ctx context.Context) error {
	if recs, err := s.states.List(ctx); err != nil {
		s.log.Warn().Err(err).Msg("backfill state not listed; only new crawls are scheduled")
	} else {
		s.mu.Lock()
		for _, r := range recs {
			if Final(r.State) {
				s.final[r.CrawlID] = true
			} else {
				s.due[r.CrawlID] = r.DueAt
				if r.Kind != "" && s.kinds[r.CrawlID] == "" {
					s.kinds[r.CrawlID] = r.Kind
				}
			}
		}
		s.mu.Unlock()
	}

	results := make(chan finished)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(s.cfg.Tick)
	defer tick.Stop()
	for {
		s.touchNew(ctx)
		due := s.dueNow(s.cfg.Now())
		s.passes.Add(1)
		for _, id := range due {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := s.rec.ReconcileJob(ctx, id, s.kindOf(id), false)
				results <- finished{res, err}
			}()
		}
		select {
		case <-ctx.Done():
			go func() {
				for range results {
				}
			}()
			wg.Wait()
			close(results)
			return nil
		case f := <-results:
			s.done(f)
		case <-tick.C:
		case <-s.wake:
		}
	}
}

// touchNew creates the pending records of crawls first seen since the last
// call, so that a restart still reconciles them.
func (s *Scheduler) touchNew(ctx context.Context) {
	s.mu.Lock()
	batch := s.touch
	s.touch = map[string]time.Time{}
	kinds := make(map[string]string, len(batch))
	for id := range batch {
		kinds[id] = s.kinds[id]
	}
	s.mu.Unlock()
	for id, at := range batch {
		if err := s.states.Touch(ctx, id, kinds[id], at.Add(s.cfg.Quiet)); err != nil {
			s.log.Warn().Err(err).Str("crawl_id", id).Msg("backfill state not created")
		}
	}
}

// dueNow picks the crawls to start now, within the free workers.
func (s *Scheduler) dueNow(now time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	free := s.cfg.Workers - len(s.running)
	var out []string
	pick := func(id string) {
		out = append(out, id)
		s.running[id] = true
		delete(s.seen, id)
		delete(s.due, id)
		free--
	}
	for id, at := range s.due {
		if free <= 0 {
			return out
		}
		if !s.running[id] && !at.After(now) {
			pick(id)
		}
	}
	for id, last := range s.seen {
		if free <= 0 {
			return out
		}
		if !s.running[id] && now.Sub(last) >= s.cfg.Quiet {
			pick(id)
		}
	}
	return out
}

func (s *Scheduler) done(f finished) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := f.res.CrawlID
	delete(s.running, id)
	switch {
	case errors.Is(f.err, ErrLeased):
		// Another replica runs it; look again after a quiet period in case
		// it dies.
		s.due[id] = s.cfg.Now().Add(s.cfg.Quiet)
	case Final(f.res.State):
		s.final[id] = true
		delete(s.seen, id)
		delete(s.kinds, id)
	case f.res.State == StatePending && f.err != nil:
		// Interrupted by shutdown: the next start resumes it.
	default:
		// scraping, failed, or lease lost: run again when due, or after a
		// quiet period when the run set no time.
		at := f.res.DueAt
		if at.IsZero() {
			at = s.cfg.Now().Add(s.cfg.Quiet)
		}
		s.due[id] = at
	}
}
