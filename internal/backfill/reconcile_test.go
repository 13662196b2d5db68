package backfill

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
)

// rig is a backfill against real parts: the crawl simulator as the API,
// JetStream for state, ClickHouse through internal/archive for pages.
type rig struct {
	t       *testing.T
	sim     *crawlsim.API
	simURL  string
	writer  *archive.Store
	conn    driver.Conn
	db      string
	js      *jetStream
	metrics *Metrics
	reg     *prometheus.Registry
	logs    *logtest.Buffer
	// clock is the time of the leases, due times and the scheduler: tests
	// move it, so no outcome depends on how fast the machine is.
	clock *fakeClock
}

func newRig(t *testing.T, api crawlsim.APIOptions) *rig {
	t.Helper()
	if api.Key == "" {
		api.Key = testKey
	}
	r := &rig{t: t, sim: crawlsim.NewAPI(api), js: startJetStream(t), clock: newFakeClock()}
	r.metrics, r.reg = newTestMetrics(t)
	srv := startSimHandler(t, r.sim)
	r.simURL = srv
	r.writer, r.conn, r.db = startArchive(t)
	return r
}

func startSimHandler(t *testing.T, api *crawlsim.API) string {
	t.Helper()
	srv := httptestServer(api)
	t.Cleanup(srv.Close)
	return srv.URL
}

// reconciler builds a reconciler as a sink replica named owner would.
func (r *rig) reconciler(owner string, pages PageStore, cfg ReconcilerConfig) (*Reconciler, *KVStore) {
	r.t.Helper()
	log, buf := logtest.WithoutSecret(r.t, testKey)
	r.logs = buf
	client := newTestClient(r.t, r.simURL, nil)
	states := newKVStore(r.t, r.js.connect(r.t), r.clock.now)
	if pages == nil {
		pages = r.writer
	}
	cfg.Owner = owner
	if cfg.Now == nil {
		cfg.Now = r.clock.now
	}
	rec, err := NewReconciler(NewPager(client, 0), pages, states, r.writer, r.metrics, log, cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	return rec, states
}

// deliver archives pages of the crawl as the webhook path would.
func (r *rig) deliver(c *crawlsim.Crawl, pick func(*crawlsim.Page) bool) int {
	r.t.Helper()
	var rows archive.Rows
	for _, p := range c.Pages {
		if !pick(p) {
			continue
		}
		ev, err := events.DecodeAccepted(p.Body)
		if err != nil {
			r.t.Fatal(err)
		}
		rs, err := archive.EventRows(ev, p.Body, time.Now())
		if err != nil {
			r.t.Fatal(err)
		}
		rows.Add(rs)
	}
	if err := r.writer.Insert(context.Background(), rows); err != nil {
		r.t.Fatal(err)
	}
	return len(rows.Pages)
}

// pages returns, per URL of the crawl, the raw row count (no FINAL, so a
// duplicate insert shows) and the origin of the newest row.
func (r *rig) pages(crawlID string) (rows map[string]int, origin map[string]string) {
	r.t.Helper()
	res, err := r.conn.Query(context.Background(),
		"SELECT url, count(), argMax(origin, received_at) FROM "+r.db+".pages WHERE crawl_id = ? GROUP BY url",
		uuid.MustParse(crawlID))
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Close()
	rows, origin = map[string]int{}, map[string]string{}
	for res.Next() {
		var u, o string
		var n uint64
		if err := res.Scan(&u, &n, &o); err != nil {
			r.t.Fatal(err)
		}
		rows[u], origin[u] = int(n), o
	}
	return rows, origin
}

// assertComplete checks that every successful page of the crawl is archived
// exactly once (one row: no duplicate insert), and returns the origins.
func (r *rig) assertComplete(c *crawlsim.Crawl) map[string]string {
	r.t.Helper()
	rows, origin := r.pages(c.ID)
	for _, u := range c.SuccessfulURLs() {
		if rows[u] != 1 {
			r.t.Fatalf("%s has %d rows", u, rows[u])
		}
	}
	return origin
}

func (r *rig) newCrawl(o crawlsim.Options) *crawlsim.Crawl {
	c := simCrawl(r.t, o)
	r.sim.Add(c)
	return c
}

func TestReconcileInsertsOnlyMissing(t *testing.T) {
	t.Parallel()
	r := newRig(t, crawlsim.APIOptions{PageDocs: 9})
	c := r.newCrawl(crawlsim.Options{Pages: 120, Faults: crawlsim.Faults{Failures: 0.1, Drops: 0.4}})
	c.Finish(crawlapi.StatusCompleted)
	delivered := r.deliver(c, func(p *crawlsim.Page) bool { return !p.Has(crawlsim.FaultDrop) })
	rec, states := r.reconciler("replica-1", nil, ReconcilerConfig{BatchSize: 7})

	res, err := rec.Reconcile(context.Background(), c.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	successfulDelivered := delivered - 12
	if res.State != StateDone || res.Fetched != 108 || res.Inserted != 48 || res.Present != successfulDelivered || res.APIStatus != crawlapi.StatusCompleted {
		t.Fatalf("result %+v", res)
	}
	origin := r.assertComplete(c)
	for _, p := range c.Pages {
		want := archive.OriginWebhook
		if p.Has(crawlsim.FaultDrop) {
			want = archive.OriginBackfill
		}
		if p.Success && origin[p.URL] != want {
			t.Fatalf("%s origin %s, want %s", p.URL, origin[p.URL], want)
		}
	}
	st, _, _ := states.Get(context.Background(), c.ID)
	if st.State != StateDone || st.Inserted != 48 || st.Owner != "" || st.Cursor != "" {
		t.Fatalf("state %+v", st)
	}
	wantSeries(t, r.reg,
		`crawlhouse_backfill_pages_total{result="inserted"} 48`,
		`crawlhouse_backfill_pages_total{result="fetched"} 108`,
		`crawlhouse_backfill_runs_total{state="done"} 1`,
	)
	ac, err := r.writer.Crawl(context.Background(), c.ID)
	if err != nil || ac.BackfillState != StateDone {
		t.Fatalf("archive crawl row %+v %v", ac, err)
	}

	// An explicit run reads everything again and inserts nothing.
	res, err = rec.Reconcile(context.Background(), c.ID, true)
	if err != nil || res.Inserted != 0 || res.Present != 108 {
		t.Fatalf("second run %+v %v", res, err)
	}
	r.assertComplete(c)
}

// killAfter is the archive, except that the run's goroutine dies right after
// the n-th insert, before the cursor is saved: a sink killed mid-backfill.
// runtime.Goexit skips the rest of Reconcile (no release, no state write),
// as a crash would.
type killAfter struct {
	*archive.Store
	n       int32
	inserts atomic.Int32
}

func (k *killAfter) InsertBackfill(ctx context.Context, crawlID, kind string, docs []events.Document) (int, error) {
	n, err := k.Writer.InsertBackfill(ctx, crawlID, kind, docs)
	if k.inserts.Add(1) == k.n {
		runtime.Goexit()
	}
	return n, err
}

func TestRestartDuringBackfillResumesWithoutDuplicates(t *testing.T) {
	t.Parallel()
	r := newRig(t, crawlsim.APIOptions{PageDocs: 10})
	c := r.newCrawl(crawlsim.Options{Pages: 100})
	c.Finish(crawlapi.StatusCompleted)
	r.deliver(c, func(p *crawlsim.Page) bool { return p.Index%5 == 0 })

	crashing, _ := r.reconciler("replica-1", &killAfter{Store: r.writer, n: 4}, ReconcilerConfig{LeaseTTL: 2 * time.Second})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		crashing.Reconcile(context.Background(), c.ID, false)
		t.Error("the crashing run returned")
	}()
	wg.Wait()
	readsBefore := c.Reads()

	// The dead replica's lease holds the crawl until it expires.
	next, states := r.reconciler("replica-2", nil, ReconcilerConfig{LeaseTTL: 2 * time.Second})
	if _, err := next.Reconcile(context.Background(), c.ID, false); !errors.Is(err, ErrLeased) {
		t.Fatalf("while the lease holds: %v", err)
	}
	st, _, _ := states.Get(context.Background(), c.ID)
	if st.State != StateRunning || !strings.HasSuffix(st.Cursor, "skip=30") {
		t.Fatalf("state left by the crash %+v", st)
	}
	r.clock.add(3 * time.Second)
	res, err := next.Reconcile(context.Background(), c.ID, false)
	if err != nil || res.State != StateDone {
		t.Fatalf("resumed run %+v %v", res, err)
	}
	// It resumed at the saved cursor (skip=30): the chunk inserted before
	// the crash (pages 30-39) is read again and its 8 backfilled pages are
	// found present with the 14 delivered ones of pages 30-99.
	if res.Fetched != 70 || res.Inserted != 48 || res.Present != 22 || c.Reads()-readsBefore != 7 {
		t.Fatalf("resumed run %+v after %d reads", res, c.Reads()-readsBefore)
	}
	r.assertComplete(c)
}

// A graceful stop saves the cursor and releases the lease: the restarted
// replica resumes at once.
func TestStopDuringBackfillResumes(t *testing.T) {
	t.Parallel()
	r := newRig(t, crawlsim.APIOptions{PageDocs: 10})
	c := r.newCrawl(crawlsim.Options{Pages: 60})
	c.Finish(crawlapi.StatusCompleted)
	ctx, cancel := context.WithCancel(context.Background())
	stopping := &cancelAfter{Store: r.writer, n: 2, cancel: cancel}
	rec, _ := r.reconciler("replica-1", stopping, ReconcilerConfig{})
	res, err := rec.Reconcile(ctx, c.ID, false)
	if !errors.Is(err, context.Canceled) || res.State != StatePending {
		t.Fatalf("stopped run %+v %v", res, err)
	}
	rec2, _ := r.reconciler("replica-1-restarted", nil, ReconcilerConfig{})
	res, err = rec2.Reconcile(context.Background(), c.ID, false)
	if err != nil || res.State != StateDone || res.Inserted+res.Present != 60-10 && res.Inserted+res.Present != 60-20 {
		t.Fatalf("resumed %+v %v", res, err)
	}
	r.assertComplete(c)
}

type cancelAfter struct {
	*archive.Store
	n       int32
	inserts atomic.Int32
	cancel  func()
}

func (k *cancelAfter) InsertBackfill(ctx context.Context, crawlID, kind string, docs []events.Document) (int, error) {
	n, err := k.Writer.InsertBackfill(ctx, crawlID, kind, docs)
	if k.inserts.Add(1) == k.n {
		k.cancel()
	}
	return n, err
}

func TestReconcileOutcomes(t *testing.T) {
	t.Parallel()
	r := newRig(t, crawlsim.APIOptions{PageDocs: 10})

	t.Run("unauthorized", func(t *testing.T) {
		c := r.newCrawl(crawlsim.Options{Pages: 3})
		log, buf := logtest.WithoutSecret(t, testKey)
		client, _ := crawlapi.NewClient(crawlapi.ClientConfig{BaseURL: r.simURL, Key: "wrong-" + testKey}, log)
		states := newKVStore(t, r.js.connect(t), nil)
		m, reg := newTestMetrics(t)
		rec, _ := NewReconciler(NewPager(client, 0), r.writer, states, nil, m, log, ReconcilerConfig{Owner: "x"})
		res, err := rec.Reconcile(context.Background(), c.ID, false)
		if !errors.Is(err, crawlapi.ErrUnauthorized) || res.State != StateDenied {
			t.Fatalf("%+v %v", res, err)
		}
		wantSeries(t, reg, `crawlhouse_backfill_runs_total{state="denied"} 1`)
		if !strings.Contains(buf.String(), "refused CRAWL_API_KEY (401/403)") || strings.Contains(buf.String(), "wrong-"+testKey) {
			t.Fatalf("log:\n%s", buf.String())
		}
	})

	t.Run("expired", func(t *testing.T) {
		c := r.newCrawl(crawlsim.Options{Pages: 3})
		c.Finish(crawlapi.StatusCompleted)
		c.Expire()
		rec, states := r.reconciler("x", nil, ReconcilerConfig{})
		res, err := rec.Reconcile(context.Background(), c.ID, false)
		if !errors.Is(err, crawlapi.ErrNotFound) || res.State != StateExpired {
			t.Fatalf("%+v %v", res, err)
		}
		st, _, _ := states.Get(context.Background(), c.ID)
		if st.State != StateExpired || !strings.Contains(st.LastError, "Job not found") {
			t.Fatalf("state %+v", st)
		}
	})

	t.Run("scraping revisited", func(t *testing.T) {
		c := r.newCrawl(crawlsim.Options{Pages: 40})
		c.Scrape(25)
		rec, _ := r.reconciler("x", nil, ReconcilerConfig{Revisit: time.Minute})
		res, err := rec.Reconcile(context.Background(), c.ID, false)
		if err != nil || res.State != StateScraping || res.Inserted != 25 || !res.DueAt.Equal(r.clock.now().Add(time.Minute)) {
			t.Fatalf("first %+v %v", res, err)
		}
		c.Finish(crawlapi.StatusCompleted)
		res, err = rec.Reconcile(context.Background(), c.ID, false)
		if err != nil || res.State != StateDone || res.Inserted != 15 || res.Present != 0 {
			t.Fatalf("revisit %+v %v", res, err)
		}
		r.assertComplete(c)
	})

	t.Run("two replicas at once", func(t *testing.T) {
		c := r.newCrawl(crawlsim.Options{Pages: 50})
		c.Finish(crawlapi.StatusCompleted)
		a, _ := r.reconciler("a", nil, ReconcilerConfig{})
		b, _ := r.reconciler("b", nil, ReconcilerConfig{})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, rec := range []*Reconciler{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = rec.Reconcile(context.Background(), c.ID, false)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			// One is refused, unless the first finished before the second
			// started (which then found everything present).
			if err != nil && !errors.Is(err, ErrLeased) {
				t.Fatal(err)
			}
		}
		r.assertComplete(c)
	})

	t.Run("not a uuid", func(t *testing.T) {
		rec, _ := r.reconciler("x", nil, ReconcilerConfig{})
		if _, err := rec.Reconcile(context.Background(), "../x", false); err == nil {
			t.Fatal("accepted")
		}
	})
}
