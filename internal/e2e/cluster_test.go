package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// TestClusterArchive runs the pipeline against a real two-shard ClickHouse
// cluster: crawlsim → receiver → the sink binary with CLICKHOUSE_CLUSTER,
// writing through the Distributed tables as on a production cluster. The
// schema is the per-node DDL ON CLUSTER would run (schema.MigrateNodes:
// ON CLUSTER and Replicated* need a Keeper, which clickhouse-local lacks);
// the sink's own start-up migration finds it recorded and runs none.
//
// It checks that every page is archived once under FINAL through either
// node (duplicates and backfilled pages included), with rows on both
// shards; that failures, the crawls view and alerts count each failed page
// once; that the queries of docs/search.md answer through each node as on
// one server holding the same rows. Then the shard the sink is not
// connected to stops: the sink's inserts (in the foreground on a cluster)
// fail, and it holds them, stalled and not ready, dead-lettering nothing;
// once the shard is back every page sent meanwhile is archived.
func TestClusterArchive(t *testing.T) {
	t.Parallel()
	const apiKey = "cluster-crawl-api-key"
	ctx := context.Background()

	c := clickhousetest.StartCluster(t, 2)
	cfg := archive.Config{Addr: c.Addr(0), Database: "crawl", User: "default", Cluster: c.Name}
	nodes := c.OpenAll(t)
	if _, err := schema.MigrateNodes(ctx, nodes, cfg, schema.NodeOptions{}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	// The sink's default retention, as ON CLUSTER would set it: the sink
	// finds it applied and runs no DDL.
	if _, err := schema.ApplyRetentionNodes(ctx, nodes, cfg, schema.NodeOptions{}, schema.Retention{KeepVersions: 2, FailureDays: 180}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}

	api := crawlsim.NewAPI(crawlsim.APIOptions{Key: apiKey, PageDocs: 7})
	apiURL := serveHTTP(t, api)
	var alertsMu sync.Mutex
	var alerts []map[string]any
	hookURL := serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&m)
		alertsMu.Lock()
		alerts = append(alerts, m)
		alertsMu.Unlock()
	}))

	natsURL := streamtest.Start(t)
	webhookURL := (&pipeline{natsURL: natsURL}).startReceiver(t, nil)
	sink := startSinkBinary(t, map[string]string{
		"NATS_URL":                natsURL,
		"CLICKHOUSE_ADDR":         c.Addr(0),
		"CLICKHOUSE_DATABASE":     cfg.Database,
		"CLICKHOUSE_CLUSTER":      c.Name,
		"SINK_BATCH_WAIT":         "100ms",
		"CRAWL_API_URL":           apiURL,
		"CRAWL_API_KEY":           apiKey,
		"BACKFILL_QUIET_PERIOD":   "2s",
		"ALERT_WEBHOOK_URL":       hookURL,
		"ALERT_FAILURE_THRESHOLD": "3",
		"ALERT_WINDOW":            "10m",
		"SINK_MAX_DELIVER":        "2",
		"LOG_LEVEL":               "warn",
	})
	waitFor(t, 2*time.Minute, "the sink ready", func() bool { return sink.readyz() == http.StatusOK })

	// Crawl A: duplicates, drops (found by backfill) and failed pages.
	crawlA, err := crawlsim.NewCrawl(crawlsim.Options{Pages: 60, PageBytes: 800, Faults: crawlsim.Faults{Duplicates: 0.2, Drops: 0.2, Failures: 0.1}, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	api.Add(crawlA)
	repA := send(t, webhookURL, crawlA)
	delivered, dropped := map[string]bool{}, 0
	for _, d := range repA.Deliveries {
		if d.Type != "crawl.page" {
			continue
		}
		switch d.Outcome {
		case crawlsim.OutcomeAccepted:
			delivered[d.URL] = true
		case crawlsim.OutcomeDropped:
			if d.Success {
				dropped++
			}
		}
	}
	s := repA.Summary
	if s.Failed < 3 || dropped == 0 || s.Duplicated == 0 {
		t.Fatalf("crawlsim sent %+v: want at least 3 failed pages (the alert threshold), a drop and a duplicate", s)
	}
	for i, conn := range nodes {
		waitFor(t, 2*time.Minute, fmt.Sprintf("crawl A archived, read through shard %d", i+1), func() bool {
			return clickhousetest.TryCount(conn, "SELECT count() FROM crawl.pages FINAL WHERE crawl_id = ? AND success", crawlA.ID) == uint64(s.Successful) &&
				clickhousetest.TryCount(conn, "SELECT count() FROM crawl.pages FINAL WHERE crawl_id = ? AND origin = 'backfill'", crawlA.ID) == uint64(dropped)
		})
	}
	for i, conn := range nodes {
		if n := clickhousetest.Count(t, conn, "SELECT count() FROM (SELECT url FROM crawl.pages FINAL WHERE crawl_id = ? GROUP BY url HAVING count() > 1)", crawlA.ID); n != 0 {
			t.Errorf("through shard %d: %d pages shown twice under FINAL", i+1, n)
		}
		if n := clickhousetest.Count(t, conn, "SELECT count() FROM crawl.pages_local WHERE crawl_id = ?", crawlA.ID); n == 0 {
			t.Errorf("shard %d holds no page row of crawl A: the rows are not sharded", i+1)
		}
		if n := clickhousetest.Count(t, conn, "SELECT count(DISTINCT url) FROM crawl.failures FINAL WHERE crawl_id = ? AND reason != 'cancelled'", crawlA.ID); n != uint64(s.Failed) {
			t.Errorf("through shard %d: %d failed URLs, want %d", i+1, n, s.Failed)
		}
		w, err := archive.NewLookups(conn, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var got archive.Crawl
		waitFor(t, time.Minute, "crawls counts crawl A", func() bool {
			got, err = w.Crawl(ctx, crawlA.ID)
			return err == nil && got.PagesBackfilled == uint64(dropped)
		})
		if got.PagesReceived != uint64(len(delivered)) || got.PagesBackfilled != uint64(dropped) || got.Failures != uint64(s.Failed) || got.LastEvent != "crawl.completed" {
			t.Errorf("crawls through shard %d: %+v; want %d received, %d backfilled, %d failures, last event crawl.completed",
				i+1, got, len(delivered), dropped, s.Failed)
		}
	}

	// The fixtures docs/search.md's queries are written for, delivered
	// through the receiver: a page (twice), a failed page, and the page
	// again in a later crawl with its text changed.
	page := readFile(t, "../../testdata/fixtures/crawl-page.json")
	later := strings.Replace(string(page), "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c", "a3c1e2d4-5b6f-4a7c-8d9e-0f1a2b3c4d5e", 1)
	later = strings.Replace(later, "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "0a1b2c3d-4e5f-4a6b-8c7d-000000000002", 1)
	later = strings.Replace(later, "This domain is for use in illustrative examples.", "This domain is for use in documentation examples.", 1)
	// And an extraction and a monitor check, kept as whole events.
	extract := readFile(t, "../../testdata/fixtures/firecrawl-extract/0002-extract.completed.body")
	monitor := readFile(t, "../../testdata/fixtures/firecrawl-monitor/0004-monitor.page.body")
	for _, body := range [][]byte{page, page, readFile(t, "../../testdata/fixtures/crawl-page-failed.json"), []byte(later), extract, monitor} {
		if code, _ := deliver(t, webhookURL, body); code != http.StatusOK {
			t.Fatalf("fixture delivery answered %d", code)
		}
	}
	// And a URL robots.txt blocked, as backfill records it.
	if w, err := archive.NewWriter(nodes[0], cfg); err != nil {
		t.Fatal(err)
	} else if _, err := w.RecordBlockedURLs(context.Background(), "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c", []string{"https://example.com/private/"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the fixtures archived", func() bool {
		return clickhousetest.TryCount(nodes[1], "SELECT count() FROM crawl.pages FINAL WHERE url = 'https://example.com/'") == 2 &&
			clickhousetest.TryCount(nodes[1], "SELECT count() FROM crawl.failures FINAL WHERE crawl_id = '5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c'") == 1
	})

	// Shard 2 stops. The sink writes through shard 1, whose Distributed
	// tables queue shard 2's rows until it is back.
	if err := c.Stop(1); err != nil {
		t.Fatal(err)
	}
	crawlB, err := crawlsim.NewCrawl(crawlsim.Options{Pages: 40, PageBytes: 600, Faults: crawlsim.Faults{Duplicates: 0.2}, Seed: 12})
	if err != nil {
		t.Fatal(err)
	}
	api.Add(crawlB)
	repB := send(t, webhookURL, crawlB)
	if repB.Summary.Accepted != 40 {
		t.Fatalf("crawl B: %+v, want all 40 pages accepted while a shard is down", repB.Summary)
	}
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The sink inserts in the foreground on a cluster, so the insert fails
	// while a shard is down; it must hold the batch (stalled, not ready),
	// never reject it: with SINK_MAX_DELIVER at 2 a rejected batch would be
	// dead-lettered within seconds.
	waitFor(t, 2*time.Minute, "the sink to report the stall", func() bool {
		return sink.readyz() == http.StatusServiceUnavailable && sink.metric(t, "crawlhouse_sink_stalled") == "1"
	})
	cons, err := js.Consumer(ctx, "CRAWL_EVENTS", "sink")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := cons.Info(ctx); err != nil || info.NumAckPending+int(info.NumPending) == 0 {
		t.Errorf("consumer %+v, %v: the deliveries of crawl B are not held", info, err)
	}
	if v := sink.metric(t, "crawlhouse_sink_dead_letters_total"); v != "0" {
		t.Errorf("crawlhouse_sink_dead_letters_total %s during the outage, want 0", v)
	}
	if dlq, err := js.Stream(ctx, "CRAWL_DLQ"); err == nil {
		if info, err := dlq.Info(ctx); err != nil || info.State.Msgs != 0 {
			t.Errorf("dead-letter stream: %v, %+v; want it empty", err, info)
		}
	}

	if err := c.Start(1); err != nil {
		t.Fatal(err)
	}
	for i, conn := range nodes {
		waitFor(t, 2*time.Minute, fmt.Sprintf("crawl B archived after the outage, read through shard %d", i+1), func() bool {
			return clickhousetest.TryCount(conn, "SELECT count() FROM crawl.pages FINAL WHERE crawl_id = ? AND success", crawlB.ID) == 40
		})
		if n := clickhousetest.Count(t, conn, "SELECT count() FROM (SELECT url FROM crawl.pages FINAL WHERE crawl_id = ? GROUP BY url HAVING count() > 1)", crawlB.ID); n != 0 {
			t.Errorf("through shard %d: %d pages of crawl B shown twice", i+1, n)
		}
		if n := clickhousetest.Count(t, conn, "SELECT count() FROM crawl.pages_local WHERE crawl_id = ?", crawlB.ID); n == 0 {
			t.Errorf("shard %d holds no page row of crawl B", i+1)
		}
		// crawls is fed by a materialized view on each shard, and the
		// Distributed table sends each shard its rows in the background:
		// the counts can trail the pages for a moment after the outage.
		w, _ := archive.NewLookups(conn, cfg)
		var got archive.Crawl
		waitFor(t, time.Minute, fmt.Sprintf("crawls counts crawl B through shard %d", i+1), func() bool {
			got, err = w.Crawl(ctx, crawlB.ID)
			return err == nil && got.PagesReceived == 40
		})
		if got.PagesReceived != 40 || got.Failures != 0 {
			t.Errorf("crawls through shard %d: %+v; want 40 pages received, no failure", i+1, got)
		}
	}
	waitFor(t, time.Minute, "the sink ready again", func() bool { return sink.readyz() == http.StatusOK })
	if v := sink.metric(t, "crawlhouse_sink_dead_letters_total"); v != "0" {
		t.Errorf("crawlhouse_sink_dead_letters_total %s after the outage, want 0", v)
	}

	// Two complete crawls of one scope (docs/search.md's removals query
	// names it), the later one no longer finding a page: a removal by
	// absence, classified from rows spread over both shards.
	scope := json.RawMessage(`{"scope":"docs.example.com /docs","limit":500}`)
	const siteID = "0193e000-0000-7000-8000-0000000000c1"
	site, err := crawlsim.NewCrawl(crawlsim.Options{ID: siteID, Pages: 6, PageBytes: 500, Seed: 31, Metadata: scope})
	if err != nil {
		t.Fatal(err)
	}
	recrawl, err := crawlsim.NewCrawl(crawlsim.Options{Pages: 6, PageBytes: 500, Seed: 31, Metadata: scope,
		Recrawl: &crawlsim.Recrawl{Of: siteID, Gone: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*crawlsim.Crawl{site, recrawl} {
		api.Add(c)
		send(t, webhookURL, c)
		waitFor(t, 2*time.Minute, "the scoped crawl archived", func() bool {
			return clickhousetest.TryCount(nodes[0], "SELECT count() FROM crawl.pages FINAL WHERE crawl_id = ?", c.ID) > 0
		})
	}
	// The sink backfills every complete job; until that backfill is done
	// the job is not complete (job_ends) and its removals do not stand yet,
	// so the sink must not be stopped in between.
	waitFor(t, 2*time.Minute, "the scoped crawls backfilled", func() bool {
		return clickhousetest.TryCount(nodes[0], "SELECT count() FROM crawl.job_ends WHERE crawl_id IN (?, ?) AND backfill_done AND complete", site.ID, recrawl.ID) == 2
	})
	waitFor(t, 2*time.Minute, "the recrawl's removal by absence", func() bool {
		return clickhousetest.TryCount(nodes[0], "SELECT count() FROM crawl.page_removals WHERE crawl_id = ?", recrawl.ID) == 1
	})

	alertsMu.Lock()
	if len(alerts) != 1 || alerts[0]["crawlId"] != crawlA.ID {
		t.Errorf("alerts POSTed: %v; want one, for crawl A", alerts)
	}
	alertsMu.Unlock()

	// The search queries compare the cluster with a copy of its rows on one
	// server: the sink stops first (its backfill keeps writing states), and
	// every row queued for another shard is sent, so that the copy is
	// exact.
	sink.stop()
	for i, conn := range nodes {
		waitFor(t, time.Minute, fmt.Sprintf("shard %d's distribution queue empty", i+1), func() bool {
			return clickhousetest.TryCount(conn, "SELECT sum(data_files) FROM system.distribution_queue WHERE database = 'crawl'") == 0
		})
	}
	compareSearchQueries(t, nodes)
	if t.Failed() {
		t.Logf("sink output:\n%s", sink.logs())
	}
}

// compareSearchQueries runs every SQL block of docs/search.md through each
// node and on one server holding the same rows (copied from the cluster into
// a database of the shared ClickHouse, its materialized views fed by the
// copy), and wants the same answers, order aside.
func compareSearchQueries(t *testing.T, nodes []driver.Conn) {
	t.Helper()
	ctx := context.Background()
	_, db := clickhousetest.NewDatabase(t)
	single := clickhousetest.Open(t, db)
	if _, err := schema.Migrate(ctx, single, archive.Config{Addr: "unused:0", Database: db}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"pages", "failures", "crawl_events", "backfill_states", "blocked_urls", "events", "monitor_pages"} {
		copyTable(t, nodes[0], "crawl."+table, single, db+"."+table)
	}
	doc := readFile(t, "../../docs/search.md")
	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 5 {
		t.Fatalf("docs/search.md has %d sql blocks", len(blocks))
	}
	for _, b := range blocks {
		want := answer(t, single, strings.ReplaceAll(b[1], "crawl.", db+"."))
		if len(want) == 0 {
			t.Errorf("on one server the query finds nothing:\n%s", b[1])
		}
		for i, conn := range nodes {
			if got := answer(t, conn, b[1]); !slices.Equal(got, want) {
				t.Errorf("through shard %d:\n%s\nanswers %q\none server answers %q", i+1, b[1], got, want)
			}
		}
	}
}

// answer runs query and returns its rows, each printed, sorted.
func answer(t *testing.T, conn driver.Conn, query string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), query)
	if err != nil {
		t.Fatalf("%v\n%s", err, query)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals := scanTargets(rows.ColumnTypes())
		if err := rows.Scan(vals...); err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, v := range vals {
			parts = append(parts, printed(reflect.ValueOf(v).Elem()))
		}
		out = append(out, strings.Join(parts, " | "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// printed is a scanned value as text: a Nullable column's pointer by what
// it points to, so that two servers' answers compare by value.
func printed(v reflect.Value) string {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "NULL"
		}
		v = v.Elem()
	}
	return fmt.Sprint(v.Interface())
}

func scanTargets(cols []driver.ColumnType) []any {
	vals := make([]any, len(cols))
	for i, ct := range cols {
		vals[i] = reflect.New(ct.ScanType()).Interface()
	}
	return vals
}

// copyTable copies every row (every version: FINAL is the reader's) of from
// into to, column by column.
func copyTable(t *testing.T, src driver.Conn, from string, dst driver.Conn, to string) {
	t.Helper()
	ctx := context.Background()
	rows, err := src.Query(ctx, "SELECT * FROM "+from)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols := rows.ColumnTypes()
	var names []string
	for _, ct := range cols {
		names = append(names, ct.Name())
	}
	batch, err := dst.PrepareBatch(ctx, "INSERT INTO "+to+" ("+strings.Join(names, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		vals := scanTargets(cols)
		if err := rows.Scan(vals...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			vals[i] = reflect.ValueOf(v).Elem().Interface()
		}
		if err := batch.Append(vals...); err != nil {
			t.Fatal(err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatalf("copy %s: %v", from, err)
	}
}

func serveHTTP(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func send(t *testing.T, target string, crawl *crawlsim.Crawl) *crawlsim.Report {
	t.Helper()
	sender, err := crawlsim.NewSender(crawlsim.SenderOptions{Target: target, Secret: secret, Concurrency: 4, RetryDelays: []time.Duration{200 * time.Millisecond, time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return sender.Send(context.Background(), crawl)
}
