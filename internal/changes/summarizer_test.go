package changes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/changes"
	"github.com/crawlhouse/crawlhouse/internal/changes/summary"
	"github.com/crawlhouse/crawlhouse/internal/claim"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

func TestMain(m *testing.M) { clickhousetest.RunMain(m) }

// world is what the summaries of every sink replica share: the archive (a
// real ClickHouse database), JetStream (a real server, for the claims) and
// the summaries sent, as the NATS subject and the webhook saw them.
type world struct {
	w   *archive.Store
	r   *query.Reader
	js  jetstream.JetStream
	nc  *nats.Conn
	url string

	mu        sync.Mutex
	published map[string][]summary.Job
	posted    map[string][]summary.Job
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldOn(t, streamtest.Start(t))
}

// newWorldOn is newWorld with the JetStream server at natsURL.
func newWorldOn(t *testing.T, natsURL string) *world {
	t.Helper()
	addr, db := clickhousetest.NewDatabase(t)
	cfg := archive.Config{Addr: addr, Database: db, User: "default"}
	conn, err := archive.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := schema.Migrate(context.Background(), conn, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	w, err := archive.NewStore(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := query.NewReader(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc, js := streamtest.Connect(t, natsURL)
	wd := &world{w: w, r: r, js: js, nc: nc, published: map[string][]summary.Job{}, posted: map[string][]summary.Job{}}
	sub, err := nc.Subscribe(changes.Subject, func(m *nats.Msg) { wd.record(t, wd.published, m.Data) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	hook := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var body json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		wd.record(t, wd.posted, body)
	}))
	t.Cleanup(hook.Close)
	wd.url = hook.URL + "/hooks/T0/secret"
	return wd
}

func (wd *world) record(t *testing.T, into map[string][]summary.Job, body []byte) {
	var s summary.Job
	if err := json.Unmarshal(body, &s); err != nil {
		t.Errorf("summary %s: %v", body, err)
		return
	}
	wd.mu.Lock()
	into[s.CrawlID] = append(into[s.CrawlID], s)
	wd.mu.Unlock()
}

// sent returns the summaries of crawlID published and posted so far.
func (wd *world) sent(crawlID string) (published, posted []summary.Job) {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	return slices.Clone(wd.published[crawlID]), slices.Clone(wd.posted[crawlID])
}

// waitSent waits until crawlID's summary was both published and posted.
func (wd *world) waitSent(t *testing.T, crawlID string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		published, posted := wd.sent(crawlID)
		if len(published) > 0 && len(posted) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no summary of job %s (published %d, posted %d)", crawlID, len(published), len(posted))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// replica is one sink replica's Summarizer, running until the test ends or
// stop is called.
func (wd *world) replica(t *testing.T, cfg changes.Config, opts changes.Options) (s *changes.Summarizer, stop func()) {
	t.Helper()
	return wd.replicaWith(t, cfg, opts, wd.nc)
}

// replicaWith is replica publishing on pub.
func (wd *world) replicaWith(t *testing.T, cfg changes.Config, opts changes.Options, pub *nats.Conn) (s *changes.Summarizer, stop func()) {
	t.Helper()
	kv, err := stream.EnsureChangeClaims(context.Background(), wd.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := claim.NewKV(kv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.WebhookURL = wd.url
	s, err = changes.New(cfg, opts, wd.r, claims, pub, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	s.CheckEvery, s.RetryDelay = 20*time.Millisecond, 10*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return s, stop
}

func (wd *world) deliver(t *testing.T, crawlID, url, markdown string, status int, at time.Time) {
	t.Helper()
	body := fmt.Sprintf(`{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":%q,"metadata":{"url":%q,"statusCode":%d}}],"metadata":{"scope":"docs","limit":100}}`,
		crawlID, uuid.NewString(), markdown, url, status)
	if url == "" {
		body = fmt.Sprintf(`{"success":true,"type":"crawl.completed","id":%q,"webhookId":%q,"data":[],"metadata":{"scope":"docs","limit":100}}`, crawlID, uuid.NewString())
	}
	wd.insert(t, body, at)
}

// insert archives the delivery body as the sink does, received at `at`.
func (wd *world) insert(t *testing.T, body string, at time.Time) {
	t.Helper()
	ev, err := events.DecodeAccepted([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := archive.EventRows(ev, []byte(body), at)
	if err != nil {
		t.Fatal(err)
	}
	if err := wd.w.Insert(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

const (
	first  = "0193b000-0000-7000-8000-000000000001"
	second = "0193b000-0000-7000-8000-000000000002"
	// Markers sort after the jobs: a replica summarizes the jobs due with a
	// marker before the marker.
	marker1 = "ffffffff-0000-4000-8000-000000000001"
	marker2 = "ffffffff-0000-4000-8000-000000000002"
	marker3 = "ffffffff-0000-4000-8000-000000000003"
)

// archiveRecrawl archives a complete crawl of a site and its complete
// recrawl, backfilled to the end, with one page edited, one answering 404,
// one gone, one added and one the same.
func (wd *world) archiveRecrawl(t *testing.T) {
	t.Helper()
	now := time.Now().UTC()
	for i, u := range []string{"a", "b", "c", "d"} {
		wd.deliver(t, first, "https://docs.test/"+u, "page "+u, 200, now.Add(-2*time.Hour+time.Duration(i)*time.Second))
	}
	wd.deliver(t, first, "", "", 0, now.Add(-time.Hour))
	wd.deliver(t, second, "https://docs.test/a", "page a", 200, now)
	wd.deliver(t, second, "https://docs.test/b", "page b, edited", 200, now)
	wd.deliver(t, second, "https://docs.test/c", "Not found", 404, now)
	wd.deliver(t, second, "https://docs.test/e", "page e", 200, now)
	wd.deliver(t, second, "", "", 0, now)
	for _, id := range []string{first, second} {
		if err := wd.w.SetBackfillState(context.Background(), id, "done", "kind=crawl api_status=completed"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSummaryOnce: two replicas told that the same job is complete send one
// summary, on the subject and at the webhook, with the job's counts and
// URLs; a replica started afterwards (a restart) looks at the day's jobs
// again and sends none of them twice.
func TestSummaryOnce(t *testing.T) {
	t.Parallel()
	wd := newWorld(t)
	wd.archiveRecrawl(t)
	cfg := changes.Config{MaxURLs: 10}
	opts := changes.Options{Backfill: true}
	r1, stop1 := wd.replica(t, cfg, opts)
	r2, stop2 := wd.replica(t, cfg, opts)
	for _, r := range []*changes.Summarizer{r1, r2} {
		r.Ended(second)
	}
	r1.Ended(marker1)
	r2.Ended(marker2)
	wd.waitSent(t, marker1)
	wd.waitSent(t, marker2)

	want := summary.Job{CrawlID: second, Kind: "crawl", Scope: "docs", Complete: true, New: 1, Changed: 1, Same: 1, Removed: 2,
		ChangedURLs: []string{"https://docs.test/b"}, RemovedURLs: []string{"https://docs.test/c", "https://docs.test/d"}}
	check := func(when string) {
		t.Helper()
		published, posted := wd.sent(second)
		if len(published) != 1 || len(posted) != 1 {
			t.Fatalf("%s: %d summaries published and %d posted, want one each", when, len(published), len(posted))
		}
		for _, got := range []summary.Job{published[0], posted[0]} {
			if got.Text == "" || got.SummarizedAt.IsZero() {
				t.Errorf("%s: summary without text or time: %+v", when, got)
			}
			got.Text, got.SummarizedAt = "", time.Time{}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: summary %+v, want %+v", when, got, want)
			}
		}
	}
	check("two replicas")
	// Each replica started by looking at the day's jobs whose backfill is
	// done: first was summarized too, once.
	if n := r1.Sent() + r2.Sent(); n != 4 {
		t.Errorf("the replicas sent %d summaries, want 4 (the two jobs' and a marker each)", n)
	}
	checkFirst := func(when string) {
		t.Helper()
		if published, posted := wd.sent(first); len(published) != 1 || len(posted) != 1 || published[0].New != 4 {
			t.Errorf("%s: the first job's summaries %+v (posted %d), want one of 4 new pages", when, published, len(posted))
		}
	}
	checkFirst("two replicas")

	// A restart: both stopped, a new replica looks at the day's jobs again,
	// both claimed already.
	stop1()
	stop2()
	r3, _ := wd.replica(t, cfg, opts)
	r3.Ended(marker3)
	wd.waitSent(t, marker3)
	check("after a restart")
	checkFirst("after a restart")
	if n := r3.Sent(); n != 1 {
		t.Errorf("the restarted replica sent %d summaries, want 1 (its marker)", n)
	}
}

// TestSummaryWithoutBackfill: with the backfill off, a job's end event
// makes its summary due after the settle time; a job with no end event
// waits for its quiet period; only-when-changed sends nothing for a job in
// which nothing changed.
func TestSummaryWithoutBackfill(t *testing.T) {
	t.Parallel()
	wd := newWorld(t)
	wd.archiveRecrawl(t)
	const unchanged = "0193b000-0000-7000-8000-000000000003"
	now := time.Now().UTC()
	wd.deliver(t, unchanged, "https://docs.test/a", "page a", 200, now)
	wd.deliver(t, marker1, "https://docs.test/marker", "a new page", 200, now)
	r, _ := wd.replica(t, changes.Config{MaxURLs: 10, OnlyWhenChanged: true}, changes.Options{Quiet: time.Hour})
	r.Observe(second, "crawl.page")
	r.Observe(second, "crawl.completed") // settle 0: due at once
	r.Observe(first, "crawl.page")       // quiet for an hour first
	// first's summary was claimed by no one: the recovery of the recent
	// jobs saw first and second ended (their last event), so it may send
	// first too; unchanged has no end event and waits for its quiet period.
	r.Observe(unchanged, "crawl.completed")
	r.Observe(marker1, "crawl.completed")
	wd.waitSent(t, marker1)
	if published, posted := wd.sent(second); len(published) != 1 || len(posted) != 1 || published[0].Changed != 1 {
		t.Errorf("the recrawl: published %+v, posted %d; want one summary with one changed page", published, len(posted))
	}
	if published, posted := wd.sent(unchanged); len(published)+len(posted) != 0 {
		t.Errorf("a job where nothing changed got a summary with CHANGES_ONLY_WHEN_CHANGED: %+v", published)
	}
}
