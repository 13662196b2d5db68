package backfill

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
	"github.com/google/uuid"
)

// failureRows returns, per URL of the job, the raw failures rows (no
// FINAL, so a repeated insert shows) and their webhook ids.
func (r *rig) failureRows(crawlID string) map[string][]string {
	r.t.Helper()
	res, err := r.conn.Query(context.Background(),
		"SELECT url, toString(webhook_id) FROM "+r.db+".failures WHERE crawl_id = ? ORDER BY url",
		uuid.MustParse(crawlID))
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Close()
	out := map[string][]string{}
	for res.Next() {
		var u, hook string
		if err := res.Scan(&u, &hook); err != nil {
			r.t.Fatal(err)
		}
		out[u] = append(out[u], hook)
	}
	return out
}

// countPaths serves the simulator behind a handler that counts requests by
// path prefix, so a test can tell which endpoints the backfill used.
type countPaths struct {
	next                 http.Handler
	crawl, batch, errors atomic.Int64
}

func (c *countPaths) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case strings.HasSuffix(req.URL.Path, "/errors"):
		c.errors.Add(1)
	case strings.HasPrefix(req.URL.Path, "/v2/crawl/"):
		c.crawl.Add(1)
	case strings.HasPrefix(req.URL.Path, "/v2/batch/scrape/"):
		c.batch.Add(1)
	}
	c.next.ServeHTTP(w, req)
}

func (r *rig) countRequests() *countPaths {
	c := &countPaths{next: r.sim}
	srv := httptestServer(c)
	r.t.Cleanup(srv.Close)
	r.simURL = srv.URL
	return c
}

// A batch scrape is backfilled from GET /v2/batch/scrape/{id}: its pages
// and, from its errors endpoint, its failures, none of which any webhook
// brought. Given its kind the run reads only the batch endpoints; not given
// it (an explicit run with no record), the run finds it after the crawl
// endpoint says 404, and keeps the kind in the record.
func TestBatchScrapeBackfilled(t *testing.T) {
	t.Parallel()
	r := newRig(t, crawlsim.APIOptions{PageDocs: 7})
	paths := r.countRequests()
	rec, states := r.reconciler("replica-1", nil, ReconcilerConfig{})
	ctx := context.Background()

	for _, kind := range []string{events.KindBatchScrape, ""} {
		b := r.newCrawl(crawlsim.Options{Kind: events.KindBatchScrape, Pages: 30,
			Faults: crawlsim.Faults{Failures: 0.1, DroppedFailures: 0.1}})
		b.Finish(crawlapi.StatusCompleted)
		crawlReads := paths.crawl.Load()
		res, err := rec.ReconcileJob(ctx, b.ID, kind, false)
		if err != nil || res.State != StateDone || res.Kind != events.KindBatchScrape || res.Inserted != 24 || res.FailuresRecorded != 6 {
			t.Fatalf("kind %q: %+v %v", kind, res, err)
		}
		if kind != "" && paths.crawl.Load() != crawlReads {
			t.Fatalf("kind given: %d requests went to /v2/crawl/", paths.crawl.Load()-crawlReads)
		}
		r.assertComplete(b)
		failures := r.failureRows(b.ID)
		for _, u := range b.FailedURLs() {
			if len(failures[u]) != 1 {
				t.Fatalf("kind %q: %s has %d failure rows", kind, u, len(failures[u]))
			}
		}
		// Every row the backfill wrote says it is a batch scrape's.
		var rows, batchRows uint64
		if err := r.conn.QueryRow(ctx, "SELECT (SELECT count() FROM "+r.db+".pages WHERE crawl_id = ?) + (SELECT count() FROM "+r.db+".failures WHERE crawl_id = ?), "+
			"(SELECT countIf(job_kind = 'batch_scrape') FROM "+r.db+".pages WHERE crawl_id = ?) + (SELECT countIf(job_kind = 'batch_scrape') FROM "+r.db+".failures WHERE crawl_id = ?)",
			uuid.MustParse(b.ID), uuid.MustParse(b.ID), uuid.MustParse(b.ID), uuid.MustParse(b.ID)).Scan(&rows, &batchRows); err != nil || rows == 0 || rows != batchRows {
			t.Fatalf("kind %q: %d rows, %d of job_kind batch_scrape (%v)", kind, rows, batchRows, err)
		}
		st, _, _ := states.Get(ctx, b.ID)
		if st.Kind != events.KindBatchScrape || st.State != StateDone || st.FailuresRecorded != 6 {
			t.Fatalf("kind %q: record %+v", kind, st)
		}
	}
	if paths.batch.Load() == 0 || paths.errors.Load() != 2 {
		t.Fatalf("%d batch status and %d errors requests", paths.batch.Load(), paths.errors.Load())
	}
}

// Failures come from the errors endpoint once per URL, however many times
// the job is backfilled: a failure whose webhook arrived keeps its one
// delivered row, a failure whose webhook was dropped gets one row of origin
// backfill, and a second run records nothing. Robots-blocked URLs are
// queryable in blocked_urls and are neither failures nor pages, so
// RecentFailures (what alerts count) and crawls.failures count the failed
// pages exactly.
func TestErrorsRecordedOncePerURL(t *testing.T) {
	t.Parallel()
	r := newRig(t, crawlsim.APIOptions{PageDocs: 9})
	c := r.newCrawl(crawlsim.Options{Pages: 60, RobotsBlocked: 4,
		Faults: crawlsim.Faults{Failures: 0.1, DroppedFailures: 0.1, Drops: 0.2}})
	c.Finish(crawlapi.StatusCompleted)
	r.deliver(c, func(p *crawlsim.Page) bool { return !p.Has(crawlsim.FaultDrop) })
	// The alerter is told of the job whenever lost failures are recorded.
	var told []string
	rec, states := r.reconciler("replica-1", nil, ReconcilerConfig{BatchSize: 4,
		FailuresRecorded: func(id string) { told = append(told, id) }})
	ctx := context.Background()

	for run, want := range []int{6, 0, 0} {
		res, err := rec.Reconcile(ctx, c.ID, run > 0)
		if err != nil || res.State != StateDone || res.FailuresRecorded != want || res.RobotsBlocked != 4 || res.Inserted != []int{12, 0, 0}[run] {
			t.Fatalf("run %d: %+v %v", run+1, res, err)
		}
		if len(told) != 2 || told[0] != c.ID || told[1] != c.ID {
			// 6 failures in batches of 4: two inserts, two calls; none later.
			t.Fatalf("run %d: FailuresRecorded told %v", run+1, told)
		}
		failures := r.failureRows(c.ID)
		if len(failures) != 12 {
			t.Fatalf("run %d: failures of %d URLs, want 12", run+1, len(failures))
		}
		rows, origin := r.pages(c.ID)
		for _, p := range c.Pages {
			if p.Success {
				continue
			}
			hooks := failures[p.URL]
			wantHook, wantOrigin := p.WebhookID, archive.OriginWebhook
			if p.Has(crawlsim.FaultDrop) {
				wantHook, wantOrigin = uuid.Nil.String(), archive.OriginBackfill
			}
			if len(hooks) != 1 || hooks[0] != wantHook || rows[p.URL] != 1 || origin[p.URL] != wantOrigin {
				t.Fatalf("run %d: failed %s: failure rows %v, %d page rows of origin %s", run+1, p.URL, hooks, rows[p.URL], origin[p.URL])
			}
		}
		for _, u := range c.RobotsBlocked {
			if failures[u] != nil || rows[u] != 0 {
				t.Fatalf("run %d: robots-blocked %s is a failure or a page", run+1, u)
			}
		}
		recent, err := r.writer.RecentFailures(ctx, c.ID, time.Now().Add(-time.Hour))
		if err != nil || recent.Failures != 12 {
			t.Fatalf("run %d: RecentFailures %+v %v, want 12", run+1, recent, err)
		}
		ac, err := r.writer.Crawl(ctx, c.ID)
		if err != nil || ac.Failures != 12 {
			t.Fatalf("run %d: crawls row %+v %v", run+1, ac, err)
		}
		blocked, err := r.writer.BlockedURLs(ctx, c.ID)
		if err != nil || !slices.Equal(blocked, sorted(c.RobotsBlocked)) {
			t.Fatalf("run %d: blocked %v %v, want %v", run+1, blocked, err, c.RobotsBlocked)
		}
	}
	r.assertComplete(c)
	st, _, _ := states.Get(ctx, c.ID)
	if st.FailuresRecorded != 6 || st.RobotsBlocked != 4 || st.Kind != events.KindCrawl {
		t.Fatalf("record %+v", st)
	}
	wantSeries(t, r.reg, `crawlhouse_backfill_pages_total{result="failed"} 6`,
		`crawlhouse_backfill_pages_total{result="robots_blocked"} 12`)
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// An API without the errors endpoint (its route answers 404) is backfilled
// as before: every page recovered, the run done without error, no failure
// invented, and one request to the missing endpoint per run (a 404 there is
// not retried).
func TestBackfillWithoutErrorsEndpoint(t *testing.T) {
	t.Parallel()
	r := newRig(t, crawlsim.APIOptions{PageDocs: 10, NoErrorsEndpoint: true})
	paths := r.countRequests()
	c := r.newCrawl(crawlsim.Options{Pages: 40, Faults: crawlsim.Faults{Drops: 0.25, DroppedFailures: 0.1}})
	c.Finish(crawlapi.StatusCompleted)
	r.deliver(c, func(p *crawlsim.Page) bool { return !p.Has(crawlsim.FaultDrop) })
	rec, states := r.reconciler("replica-1", nil, ReconcilerConfig{})

	res, err := rec.Reconcile(context.Background(), c.ID, false)
	if err != nil || res.State != StateDone || res.Inserted != 10 || res.FailuresRecorded != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	r.assertComplete(c)
	if n := len(r.failureRows(c.ID)); n != 0 {
		t.Fatalf("%d failures recorded", n)
	}
	if paths.errors.Load() != 1 {
		t.Fatalf("%d requests to the missing errors endpoint, want 1", paths.errors.Load())
	}
	st, _, _ := states.Get(context.Background(), c.ID)
	if st.State != StateDone || st.LastError != "" {
		t.Fatalf("record %+v", st)
	}
	if !strings.Contains(r.logs.String(), "no errors endpoint") {
		t.Fatalf("log:\n%s", r.logs.String())
	}
}

// A cancelled job is terminal for backfill: crawl.cancelled (and
// batch_scrape.cancelled) makes it due at once, the walk ends although the
// API keeps a next link on a cancelled job, and the pages its cancellation
// stopped are recorded as failures from the errors endpoint.
func TestCancelledJobIsTerminal(t *testing.T) {
	t.Parallel()
	r := newRig(t, crawlsim.APIOptions{PageDocs: 4})
	rec, states := r.reconciler("replica-1", nil, ReconcilerConfig{})
	s, _ := runScheduler(t, rec, states, SchedulerConfig{Quiet: time.Hour, Tick: 10 * time.Millisecond, Now: r.clock.now})

	for _, kind := range []string{events.KindCrawl, events.KindBatchScrape} {
		c := r.newCrawl(crawlsim.Options{Kind: kind, Pages: 12, Cancel: true, CancelAfter: 5})
		c.Cancel()
		s.Observe(c.ID, kind+".started", r.clock.now())
		waitState(t, states, c.ID, StatePending)
		waitPasses(t, s, 3)
		wantState(t, states, c.ID, StatePending)

		s.Observe(c.ID, kind+".cancelled", r.clock.now())
		st := waitState(t, states, c.ID, StateDone)
		if st.Kind != kind || st.APIStatus != crawlapi.StatusCancelled || st.Inserted != 5 || st.FailuresRecorded != 7 {
			t.Fatalf("%s: record %+v", kind, st)
		}
		r.assertComplete(c)
		failures := r.failureRows(c.ID)
		if len(failures) != 7 {
			t.Fatalf("%s: %d failures, want the 7 cancelled pages", kind, len(failures))
		}
		var reason string
		if err := r.conn.QueryRow(context.Background(), "SELECT any(error) FROM "+r.db+".failures WHERE crawl_id = ?", uuid.MustParse(c.ID)).Scan(&reason); err != nil || reason != crawlsim.CancelledError {
			t.Fatalf("%s: failure reason %q %v", kind, reason, err)
		}
	}
}

// The kind a delivery's type names is kept in the job's record, so a
// restarted scheduler, knowing nothing in memory, reads a batch scrape at
// its own endpoint without first asking the crawl endpoint.
func TestKindSurvivesRestart(t *testing.T) {
	t.Parallel()
	const quiet = 2 * time.Minute
	r := newRig(t, crawlsim.APIOptions{})
	paths := r.countRequests()
	b := r.newCrawl(crawlsim.Options{Kind: events.KindBatchScrape, Pages: 8, Faults: crawlsim.Faults{DroppedFailures: 0.25}})
	b.Finish(crawlapi.StatusCompleted)

	rec, states := r.reconciler("replica-1", nil, ReconcilerConfig{})
	s, stop := runScheduler(t, rec, states, SchedulerConfig{Quiet: quiet, Tick: 10 * time.Millisecond, Now: r.clock.now})
	s.Observe(b.ID, "batch_scrape.page", r.clock.now())
	if st := waitState(t, states, b.ID, StatePending); st.Kind != events.KindBatchScrape {
		t.Fatalf("pending record %+v", st)
	}
	stop()

	r.js.restart(t)
	rec2, states2 := r.reconciler("replica-1", nil, ReconcilerConfig{})
	s2, _ := runScheduler(t, rec2, states2, SchedulerConfig{Quiet: quiet, Tick: 10 * time.Millisecond, Now: r.clock.now})
	waitPasses(t, s2, 2)
	r.clock.add(quiet)
	st := waitState(t, states2, b.ID, StateDone)
	if st.Kind != events.KindBatchScrape || st.Inserted != 6 || st.FailuresRecorded != 2 {
		t.Fatalf("record %+v", st)
	}
	if paths.crawl.Load() != 0 || paths.batch.Load() == 0 {
		t.Fatalf("%d crawl and %d batch status requests", paths.crawl.Load(), paths.batch.Load())
	}
	r.assertComplete(b)
}
