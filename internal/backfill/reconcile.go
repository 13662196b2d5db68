package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/backoff"
	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// PageStore is the archive as the backfill needs it; internal/archive's
// Store implements it.
type PageStore interface {
	// ExistingURLs reports which urls of the crawl are already archived,
	// in any form (delivered or backfilled, successful or failed): those
	// are never inserted again, so a second run changes nothing.
	ExistingURLs(ctx context.Context, crawlID string, urls []string) (map[string]bool, error)
	// InsertBackfill archives docs of the job (kind: events.KindCrawl or
	// events.KindBatchScrape) with origin "backfill" and returns how many
	// pages it inserted.
	InsertBackfill(ctx context.Context, crawlID, kind string, docs []events.Document) (int, error)
	// InsertBackfillFailures archives failed scrapes the errors endpoint
	// listed, each a failed Document (metadata.sourceURL and
	// metadata.error), as failures and failed pages of origin "backfill",
	// and returns how many it inserted.
	InsertBackfillFailures(ctx context.Context, crawlID, kind string, failed []events.Document) (int, error)
	// RecordBlockedURLs keeps the robots-blocked URLs of the job apart from
	// failures (no alert counts them) and returns how many were new.
	RecordBlockedURLs(ctx context.Context, crawlID string, urls []string) (int, error)
}

// StateMirror records a crawl's backfill state where operators look (the
// archive's crawls table); internal/archive's Writer (and so its Store)
// implements it.
// Optional: the StateStore is the source of truth.
type StateMirror interface {
	SetBackfillState(ctx context.Context, crawlID, state, detail string) error
}

// ReconcilerConfig tunes a Reconciler.
type ReconcilerConfig struct {
	// Owner names this replica in leases (default: host name and pid). Two
	// replicas must not share it; a restarted replica keeping its name takes
	// its own lease back at once.
	Owner string
	// LeaseTTL is how long a lease lasts without renewal; each stored chunk
	// renews it (default 2 min). A replica that dies mid-run blocks the
	// crawl at most this long.
	LeaseTTL time.Duration
	// BatchSize is the most pages per insert (default 500).
	BatchSize int
	// Revisit is the wait before reading a crawl that was still scraping
	// again (default 2 min).
	Revisit time.Duration
	// RetryFailed caps the wait before retrying a run that failed (default
	// 5 min). The wait starts at 10 s and doubles with each failure in a
	// row: most failures are a short outage of ClickHouse or the API, and
	// the missing pages should not wait minutes for a blip.
	RetryFailed time.Duration
	// Now is the clock DueAt is set by (default time.Now); the scheduler
	// must share it.
	Now func() time.Time
	// FailuresRecorded, when set, is told of a job for which a run recorded
	// failures from the errors endpoint (failures whose webhooks were
	// lost), after they are archived: alerting counts them too. It must not
	// block.
	FailuresRecorded func(crawlID string)
	// Done, when set, is told of a job whose run ended in StateDone, after
	// its state is mirrored: the finished job is archived to its end (the
	// sink then sends its change summary). It must not block.
	Done func(crawlID string)
	// Tracer, when set, makes a span of each run (internal/tracing).
	Tracer trace.Tracer
}

// Result is what one run did.
type Result struct {
	CrawlID string
	// Kind is the job's kind as the run knew or found it ("" when no
	// endpoint answered).
	Kind string
	// State is the crawl's backfill state after the run (State*).
	State string
	// APIStatus is the crawl's status as the API last reported it.
	APIStatus string
	// Fetched, Inserted and Present count this run's documents.
	Fetched, Inserted, Present int
	// FailuresRecorded counts the failed scrapes of the errors endpoint
	// this run recorded; RobotsBlocked the robots-blocked URLs listed.
	FailuresRecorded, RobotsBlocked int
	// DueAt is when the crawl should be run again (zero: not needed).
	DueAt time.Time
}

// Reconciler brings a crawl's archived pages up to what the API has.
type Reconciler struct {
	pager  *Pager
	pages  PageStore
	states StateStore
	mirror StateMirror
	m      *Metrics
	log    zerolog.Logger
	cfg    ReconcilerConfig
}

// NewReconciler returns a Reconciler. mirror may be nil.
func NewReconciler(pager *Pager, pages PageStore, states StateStore, mirror StateMirror, m *Metrics, log zerolog.Logger, cfg ReconcilerConfig) (*Reconciler, error) {
	if pager == nil || pages == nil || states == nil || m == nil {
		return nil, errors.New("backfill: reconciler needs a pager, a page store, a state store and metrics")
	}
	if cfg.Owner == "" {
		host, _ := os.Hostname()
		cfg.Owner = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 2 * time.Minute
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.Revisit <= 0 {
		cfg.Revisit = 2 * time.Minute
	}
	if cfg.RetryFailed <= 0 {
		cfg.RetryFailed = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Reconciler{pager: pager, pages: pages, states: states, mirror: mirror, m: m, log: log, cfg: cfg}, nil
}

// Reconcile is ReconcileJob of a job whose kind the record knows, else that
// is tried as a crawl, then as a batch scrape.
func (r *Reconciler) Reconcile(ctx context.Context, crawlID string, restart bool) (Result, error) {
	return r.ReconcileJob(ctx, crawlID, "", restart)
}

// ReconcileJob runs a job's backfill: it takes the job's lease (or returns
// ErrLeased), reads the job's status from the saved cursor (from the first
// page when restart is true, as for an explicit `sink backfill`), and for
// each chunk inserts the pages the archive does not hold, then saves the
// cursor and counts. A crash between an insert and the save re-reads that
// chunk on the next run, whose pages are then present: nothing is inserted
// twice. Once a terminal job was read to its end, its errors endpoint is
// read and the failed scrapes the archive lacks are recorded (once per URL:
// a recorded failure is present for the next run), and its robots-blocked
// URLs kept apart; an API without that endpoint (404) simply adds none.
// The run ends in a state: done, scraping (revisit at DueAt), expired,
// denied, failed (retry at DueAt), or pending when ctx ended.
//
// kind (events.KindCrawl, events.KindBatchScrape) says which endpoints the
// job has; "" takes the record's, and when the record has none either, the
// job is read as a crawl and, if the API does not know it as one, as a
// batch scrape.
// The kind that answered is saved in the record.
//
// The returned error is the cause of an expired, denied or failed state,
// ErrLeased, or ErrLeaseLost; Result is meaningful in every case.
func (r *Reconciler) ReconcileJob(ctx context.Context, crawlID, kind string, restart bool) (Result, error) {
	ctx, span := tracing.Start(ctx, r.cfg.Tracer, "backfill run", crawlID)
	res, err := r.reconcileJob(ctx, crawlID, kind, restart)
	tracing.End(span, res.State, err,
		attribute.String("crawlhouse.job_kind", res.Kind), attribute.Bool("crawlhouse.restart", restart),
		attribute.Int("crawlhouse.fetched", res.Fetched), attribute.Int("crawlhouse.inserted", res.Inserted),
		attribute.Int("crawlhouse.present", res.Present))
	return res, err
}

// reconcileJob is ReconcileJob without its span: begin the run, walk the
// job's status, record its errors once it was read to its end, decide the
// state the run ends in, and finish (release the lease, mirror the state).
func (r *Reconciler) reconcileJob(ctx context.Context, crawlID, kind string, restart bool) (Result, error) {
	res := Result{CrawlID: crawlID}
	log := r.log.With().Str("crawl_id", crawlID).Logger()
	lease, rec, err := r.begin(ctx, log, crawlID, kind, restart)
	if err != nil {
		res.State = rec.State
		return res, err
	}
	walk, werr := r.walk(ctx, log, lease, &rec, &res)
	res.Kind = rec.Kind
	if werr == nil && walk.Finished {
		werr = r.recordErrors(ctx, log, crawlID, rec.Kind, &res, &rec)
	}
	res.APIStatus = walk.Status
	if walk.Status != "" {
		rec.APIStatus, rec.Total = walk.Status, walk.Total
	}
	if errors.Is(werr, ErrLeaseLost) {
		log.Warn().Msg("backfill lease lost to another replica; stopping without saving")
		res.State = StateRunning
		return res, werr
	}
	r.endState(ctx, log, &rec, walk, werr)
	res.State, res.DueAt = rec.State, rec.DueAt
	r.m.addRun(rec.State)
	r.finish(ctx, log, lease, rec, res, walk)
	return res, werr
}

// begin checks crawlID and kind, takes the job's lease and saves its
// record as running: kind (when given) replaces the record's, and a cursor
// of the other kind's endpoint or restart sends the run to the first page.
// On error the record is what the store holds (its state for the Result).
func (r *Reconciler) begin(ctx context.Context, log zerolog.Logger, crawlID, kind string, restart bool) (*Lease, Record, error) {
	if _, err := uuid.Parse(crawlID); err != nil {
		return nil, Record{}, fmt.Errorf("crawl id %q is not a UUID", crawlID)
	}
	if kind != "" && kind != events.KindCrawl && kind != events.KindBatchScrape {
		return nil, Record{}, fmt.Errorf("job kind %q is neither %s nor %s", kind, events.KindCrawl, events.KindBatchScrape)
	}
	lease, rec, err := r.states.Acquire(ctx, crawlID, r.cfg.Owner, r.cfg.LeaseTTL)
	if err != nil {
		return nil, rec, err
	}
	if kind != "" && kind != rec.Kind {
		if rec.Kind != "" {
			// The cursor is a page of the other endpoint.
			rec.Cursor = ""
		}
		rec.Kind = kind
	}
	if restart {
		rec.Cursor = ""
	}
	rec.Runs++
	rec.State, rec.LastError, rec.DueAt = StateRunning, "", time.Time{}
	if err := r.states.Save(ctx, lease, rec, r.cfg.LeaseTTL); err != nil {
		return nil, Record{}, err
	}
	r.setMirror(ctx, log, crawlID, StateRunning, "")
	// The cursor is part of a URL the API wrote; only its skip is logged.
	log.Info().Str("kind", rec.Kind).Bool("resume", rec.Cursor != "").Int("skip", crawlapi.SkipOf(rec.Cursor)).Int("run", rec.Runs).Msg("backfill started")
	return lease, rec, nil
}

// walk reads the job's status from rec's cursor, storing each chunk's
// missing pages and saving the cursor and counts after it (in rec and
// res). A job of unknown kind is read as a crawl and, if the API does not
// know it as one, as a batch scrape; rec keeps the kind that answered.
func (r *Reconciler) walk(ctx context.Context, log zerolog.Logger, lease *Lease, rec *Record, res *Result) (Walk, error) {
	crawlID := res.CrawlID
	walkAs := func(kind string) (Walk, error) {
		return r.pager.WalkJob(ctx, kind, crawlID, rec.Cursor, func(ctx context.Context, c Chunk) error {
			f, ins, pres, err := r.store(ctx, crawlID, kind, c.Docs)
			res.Fetched += f
			res.Inserted += ins
			res.Present += pres
			rec.Fetched += int64(f)
			rec.Inserted += int64(ins)
			rec.Present += int64(pres)
			if err != nil {
				return err
			}
			rec.Kind = kind
			rec.Cursor, rec.APIStatus, rec.Total = c.Cursor, c.Status, c.Total
			return r.states.Save(ctx, lease, *rec, r.cfg.LeaseTTL)
		})
	}
	if rec.Kind != "" {
		return walkAs(rec.Kind)
	}
	walk, err := walkAs(events.KindCrawl)
	if errors.Is(err, crawlapi.ErrNotFound) && walk.Requests == 0 {
		log.Info().Msg("the crawl API does not know the job as a crawl; reading it as a batch scrape")
		walk, err = walkAs(events.KindBatchScrape)
	}
	return walk, err
}

// endState sets the state the run ends in from how the walk (and the
// errors' recording) ended, werr: done, scraping, pending (ctx ended),
// denied, expired or failed, with the due time of the next run and the
// error.
func (r *Reconciler) endState(ctx context.Context, log zerolog.Logger, rec *Record, walk Walk, werr error) {
	now := r.cfg.Now()
	switch {
	case werr == nil && walk.Finished:
		rec.State, rec.Cursor = StateDone, ""
	case werr == nil:
		rec.State, rec.DueAt = StateScraping, now.Add(r.cfg.Revisit)
	case ctx.Err() != nil:
		// Shutting down: the cursor is saved; the next start resumes.
		rec.State, rec.DueAt = StatePending, now
	case errors.Is(werr, crawlapi.ErrUnauthorized):
		rec.State = StateDenied
		log.Error().Err(werr).Msg("crawl API refused CRAWL_API_KEY (401/403): backfill of this crawl stopped; fix the key, then run `sink backfill <crawl-id>`")
	case errors.Is(werr, crawlapi.ErrNotFound):
		rec.State = StateExpired
		log.Warn().Err(werr).Msg("crawl API no longer has this crawl (results expire 24 h after the crawl): backfill ended as expired")
	default:
		rec.Failures++
		rec.State, rec.DueAt = StateFailed, now.Add(retryWait(rec.Failures, r.cfg.RetryFailed))
		if errors.Is(werr, crawlapi.ErrForeignNext) {
			log.Error().Err(werr).Msg("crawl API sent a next link to another host; not followed, the key stays with CRAWL_API_URL")
		} else {
			log.Error().Err(werr).Msg("backfill failed; retrying later")
		}
	}
	if werr != nil {
		rec.LastError = werr.Error()
	}
	if rec.State != StateFailed {
		rec.Failures = 0
	}
}

// finish saves rec and releases the lease, mirrors the state with the
// run's counts, and logs the run's end.
func (r *Reconciler) finish(ctx context.Context, log zerolog.Logger, lease *Lease, rec Record, res Result, walk Walk) {
	// Release even when ctx ended, so that a graceful restart resumes at
	// once instead of waiting for the lease to expire.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.states.Release(rctx, lease, rec); err != nil {
		log.Warn().Err(err).Msg("backfill state not saved")
	}
	detail := fmt.Sprintf("kind=%s fetched=%d inserted=%d present=%d failures_recorded=%d robots_blocked=%d api_status=%s",
		rec.Kind, rec.Fetched, rec.Inserted, rec.Present, rec.FailuresRecorded, rec.RobotsBlocked, rec.APIStatus)
	if rec.LastError != "" {
		detail += " error=" + rec.LastError
	}
	r.setMirror(rctx, log, res.CrawlID, rec.State, detail)
	if rec.State == StateDone && r.cfg.Done != nil {
		r.cfg.Done(res.CrawlID)
	}
	log.Info().Str("state", rec.State).Str("kind", rec.Kind).Str("api_status", res.APIStatus).Int("fetched", res.Fetched).
		Int("inserted", res.Inserted).Int("present", res.Present).Int("failures_recorded", res.FailuresRecorded).
		Int("robots_blocked", res.RobotsBlocked).Int("requests", walk.Requests).Msg("backfill run ended")
}

// store inserts the documents of one chunk the archive lacks, in batches.
func (r *Reconciler) store(ctx context.Context, crawlID, kind string, docs []events.Document) (fetched, inserted, present int, err error) {
	fetched = len(docs)
	r.m.addPages(ResultFetched, fetched)
	if fetched == 0 {
		return
	}
	urls := make([]string, 0, len(docs))
	byURL := make(map[string]bool, len(docs))
	var candidates []events.Document
	for _, d := range docs {
		u := d.Metadata.PageURL()
		if u == "" {
			r.m.addPages(ResultSkipped, 1)
			continue
		}
		if byURL[u] {
			// The same URL twice in one chunk: one row is enough.
			present++
			continue
		}
		byURL[u] = true
		urls = append(urls, u)
		candidates = append(candidates, d)
	}
	have, err := r.pages.ExistingURLs(ctx, crawlID, urls)
	if err != nil {
		return fetched, 0, present, fmt.Errorf("archived pages of crawl %s: %w", crawlID, err)
	}
	var missing []events.Document
	for _, d := range candidates {
		if have[d.Metadata.PageURL()] {
			present++
		} else {
			missing = append(missing, d)
		}
	}
	r.m.addPages(ResultPresent, present)
	for start := 0; start < len(missing); start += r.cfg.BatchSize {
		batch := missing[start:min(start+r.cfg.BatchSize, len(missing))]
		n, err := r.pages.InsertBackfill(ctx, crawlID, kind, batch)
		inserted += n
		r.m.addPages(ResultInserted, n)
		if err != nil {
			return fetched, inserted, present, fmt.Errorf("insert backfilled pages of crawl %s: %w", crawlID, err)
		}
	}
	return fetched, inserted, present, nil
}

// recordErrors reads the job's errors endpoint and records the failed
// scrapes whose URL the archive does not hold in any form (their webhook was
// lost: a delivered failure, a page, or a failure recorded by an earlier run
// is present), and the robots-blocked URLs apart. An API without the
// endpoint answers 404: no failures to add, not an error.
func (r *Reconciler) recordErrors(ctx context.Context, log zerolog.Logger, crawlID, kind string, res *Result, rec *Record) error {
	page, err := r.pager.api.Errors(ctx, crawlID, crawlapi.ErrorsRef(kind, crawlID))
	if errors.Is(err, crawlapi.ErrNotFound) {
		log.Info().Msg("crawl API has no errors endpoint for this job (404); no failed scrapes to add")
		return nil
	}
	if err != nil {
		return err
	}
	r.m.addPages(ResultSkipped, page.Skipped)
	if page.RobotsBlockedCut > 0 {
		log.Warn().Int("recorded", len(page.RobotsBlocked)).Int("left_out", page.RobotsBlockedCut).
			Msg("the errors endpoint listed more robots-blocked URLs than are recorded; the rest are left out (counted as skipped)")
	}
	res.RobotsBlocked, rec.RobotsBlocked = len(page.RobotsBlocked), len(page.RobotsBlocked)
	r.m.addPages(ResultRobotsBlocked, len(page.RobotsBlocked))
	if len(page.RobotsBlocked) > 0 {
		if _, err := r.pages.RecordBlockedURLs(ctx, crawlID, page.RobotsBlocked); err != nil {
			return fmt.Errorf("robots-blocked urls of crawl %s: %w", crawlID, err)
		}
	}
	if len(page.Errors) == 0 {
		return nil
	}
	urls := make([]string, len(page.Errors))
	for i, e := range page.Errors {
		urls[i] = e.URL
	}
	have, err := r.pages.ExistingURLs(ctx, crawlID, urls)
	if err != nil {
		return fmt.Errorf("archived pages of crawl %s: %w", crawlID, err)
	}
	var missing []events.Document
	for _, e := range page.Errors {
		if have[e.URL] {
			continue
		}
		doc, err := failedDocument(e)
		if err != nil {
			r.m.addPages(ResultSkipped, 1)
			continue
		}
		missing = append(missing, doc)
	}
	for start := 0; start < len(missing); start += r.cfg.BatchSize {
		batch := missing[start:min(start+r.cfg.BatchSize, len(missing))]
		n, err := r.pages.InsertBackfillFailures(ctx, crawlID, kind, batch)
		res.FailuresRecorded += n
		rec.FailuresRecorded += int64(n)
		r.m.addPages(ResultFailed, n)
		if n > 0 && r.cfg.FailuresRecorded != nil {
			r.cfg.FailuresRecorded(crawlID)
		}
		if err != nil {
			return fmt.Errorf("record failed scrapes of crawl %s: %w", crawlID, err)
		}
	}
	return nil
}

// failedDoc is a failed scrape as a failed page delivery carries it, a
// Document holding only metadata, plus the error and the scrape's id.
type failedDoc struct {
	Metadata failedMeta `json:"metadata"`
}

type failedMeta struct {
	SourceURL string `json:"sourceURL"`
	ScrapeID  string `json:"scrapeId,omitempty"`
	Error     string `json:"error"`
}

func failedDocument(e crawlapi.ScrapeError) (events.Document, error) {
	var d events.Document
	b, err := json.Marshal(failedDoc{Metadata: failedMeta{SourceURL: e.URL, ScrapeID: e.ID, Error: e.Error}})
	if err != nil {
		return d, err
	}
	err = json.Unmarshal(b, &d)
	return d, err
}

func (r *Reconciler) setMirror(ctx context.Context, log zerolog.Logger, crawlID, state, detail string) {
	if r.mirror == nil {
		return
	}
	if err := r.mirror.SetBackfillState(ctx, crawlID, state, detail); err != nil {
		log.Warn().Err(err).Msg("backfill state not recorded in the archive")
	}
}

// retryWait is 10 s doubled for each earlier failure in a row, at most
// limit.
func retryWait(failures int, limit time.Duration) time.Duration {
	return backoff.Exponential{First: 10 * time.Second, Max: limit}.Delay(failures)
}
