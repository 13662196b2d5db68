package e2e_test

import (
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
)

// TestBackfillRecoversDroppedDeliveries is backfill's promise end to end: a
// crawl whose deliveries are 30% dropped (never sent, as when the sender
// gives up) ends with every successful page in ClickHouse once under FINAL,
// the delivered ones with origin webhook and the dropped ones with origin
// backfill, recovered from crawlsim's GET /v2/crawl/{id} in several chunks.
func TestBackfillRecoversDroppedDeliveries(t *testing.T) {
	const apiKey = "e2e-crawl-api-key"
	api := crawlsim.NewAPI(crawlsim.APIOptions{Key: apiKey, PageDocs: 7})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	p := newPipeline(t, "")
	url := p.startReceiver(t, nil)
	p.startSink(t, env{
		"CRAWL_API_URL":         "http://" + ln.Addr().String(),
		"CRAWL_API_KEY":         apiKey,
		"BACKFILL_QUIET_PERIOD": "2s",
	})

	crawl, err := crawlsim.NewCrawl(crawlsim.Options{Pages: 80, PageBytes: 1500, Faults: crawlsim.Faults{Drops: 0.3}, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	api.Add(crawl)
	sender, err := crawlsim.NewSender(crawlsim.SenderOptions{Target: url, Secret: secret, Concurrency: 8, RetryDelays: []time.Duration{200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	rep := sender.Send(context.Background(), crawl)
	if rep.Summary.Dropped != 24 || rep.Summary.Accepted != 56 {
		t.Fatalf("crawlsim sent %+v, want 24 dropped and 56 accepted", rep.Summary)
	}

	defer func() {
		if t.Failed() {
			rows, _ := p.conn.Query(context.Background(), "SELECT state, detail FROM "+p.db+".backfill_states WHERE crawl_id = ? ORDER BY updated_at", crawl.ID)
			for rows != nil && rows.Next() {
				var s, d string
				_ = rows.Scan(&s, &d)
				t.Logf("backfill state %s %s", s, d)
			}
			t.Logf("pages: %d, api requests %d", clickhousetest.TryCount(p.conn, "SELECT count() FROM "+p.db+".pages FINAL WHERE crawl_id = ?", crawl.ID), api.Requests())
		}
	}()
	waitFor(t, 60*time.Second, "every page archived", func() bool {
		return clickhousetest.TryCount(p.conn, "SELECT count() FROM "+p.db+".pages FINAL WHERE crawl_id = ? AND success", crawl.ID) == 80
	})
	byOrigin := map[string]uint64{}
	rows, err := p.conn.Query(context.Background(), "SELECT origin, count() FROM "+p.db+".pages FINAL WHERE crawl_id = ? GROUP BY origin", crawl.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var o string
		var n uint64
		if err := rows.Scan(&o, &n); err != nil {
			t.Fatal(err)
		}
		byOrigin[o] = n
	}
	rows.Close()
	if byOrigin["webhook"] != 56 || byOrigin["backfill"] != 24 {
		t.Errorf("pages by origin %v, want 56 webhook and 24 backfill", byOrigin)
	}
	for _, d := range rep.Deliveries {
		if d.Type != "crawl.page" || d.Outcome != crawlsim.OutcomeDropped {
			continue
		}
		if n := clickhousetest.Count(t, p.conn, "SELECT count() FROM "+p.db+".pages FINAL WHERE crawl_id = ? AND url = ? AND origin = 'backfill' AND webhook_id = toUUID('00000000-0000-0000-0000-000000000000')", crawl.ID, d.URL); n != 1 {
			t.Errorf("dropped page %s: %d backfill rows, want 1", d.URL, n)
		}
	}
	if n := clickhousetest.Count(t, p.conn, "SELECT count() FROM (SELECT url FROM "+p.db+".pages FINAL WHERE crawl_id = ? GROUP BY url HAVING count() > 1)", crawl.ID); n != 0 {
		t.Errorf("%d pages shown twice under FINAL", n)
	}
}

// TestBackfillKindFlag: `sink backfill -kind batch_scrape <id>` archives a
// batch scrape that sent no delivery as a batch scrape, against an API
// that, as the real one does, also answers the batch scrape's id under
// /v2/crawl/ (where, without -kind, the backfill reads it as a crawl).
func TestBackfillKindFlag(t *testing.T) {
	const apiKey = "e2e-crawl-api-key"
	api := crawlsim.NewAPI(crawlsim.APIOptions{Key: apiKey, PageDocs: 5})
	job, err := crawlsim.NewCrawl(crawlsim.Options{Kind: events.KindBatchScrape, Pages: 12, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	job.Finish(crawlapi.StatusCompleted)
	api.Add(job)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, crawlapi.JobPath(events.KindCrawl)); ok {
			r.URL.Path = crawlapi.JobPath(events.KindBatchScrape) + rest
		}
		api.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	p := newPipeline(t, "")
	e := maps.Clone(p.sinkEnv)
	e["CRAWL_API_URL"] = "http://" + ln.Addr().String()
	e["CRAWL_API_KEY"] = apiKey
	if err := sinkcmd.Run(t.Context(), []string{"sink", "migrate"}, e.get, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := sinkcmd.Run(t.Context(), []string{"sink", "backfill", "-kind", "batch_scrape", job.ID}, e.get, &out, &out); err != nil {
		t.Fatalf("sink backfill: %v\n%s", err, out.String())
	}
	if want := "pages fetched 12, inserted 12, already present 0"; !strings.Contains(out.String(), want) {
		t.Errorf("sink backfill printed %q, want %q", out.String(), want)
	}
	for kind, want := range map[string]uint64{events.KindBatchScrape: 12, events.KindCrawl: 0} {
		if n := clickhousetest.Count(t, p.conn, "SELECT count() FROM "+p.db+".pages FINAL WHERE crawl_id = ? AND job_kind = ?", job.ID, kind); n != want {
			t.Errorf("%d pages archived with job_kind %s, want %d", n, kind, want)
		}
	}
}
