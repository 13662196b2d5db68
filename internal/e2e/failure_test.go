package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/config"
	"github.com/crawlhouse/crawlhouse/internal/alert"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestSinkKilledMidBatch: a sink process is killed (SIGKILL) while it works
// through a crawl with several inserts in flight, and a new one started:
// every delivery acked before the kill was archived, and in the end every
// page is archived, none twice under FINAL.
func TestSinkKilledMidBatch(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, "")
	url := p.startReceiver(t, nil)
	crawl := uuid.NewString()
	const pages = 3000
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < pages; i += 8 {
				u := fmt.Sprintf("https://site.test/%d", i)
				mustDeliver(t, url, pageBody(crawl, uuid.NewString(), u, strings.Repeat("text ", 400)))
			}
		}()
	}
	wg.Wait()

	// The product's shape, scaled down: batches bounded by bytes (1 MiB,
	// about 480 of these pages), each fetch cut into several of them, two
	// batches in hand.
	batch := env{"SINK_BATCH_BYTES": "1048576", "SINK_INSERTS_IN_FLIGHT": "4"}
	first := p.startSinkProcess(t, batch)
	_, js := streamtest.Connect(t, p.natsURL)
	waitFor(t, 60*time.Second, "the first sink's first acks", func() bool {
		cons, err := js.Consumer(context.Background(), "CRAWL_EVENTS", "sink")
		return err == nil && cons.CachedInfo().AckFloor.Stream >= 400
	})
	first.kill()
	acked := ackedWebhooks(t, js)
	archived := map[string]bool{}
	rows, err := p.conn.Query(context.Background(), "SELECT toString(webhook_id) FROM pages WHERE crawl_id = ?", crawl)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		archived[id] = true
	}
	rows.Close()
	for _, id := range acked {
		if !archived[id] {
			t.Errorf("delivery %s acked before the kill but not archived", id)
		}
	}
	before := clickhousetest.Count(t, p.conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ?", crawl)
	if before >= pages {
		t.Logf("the first sink finished before it was killed (%d pages); the restart still must not double", before)
	}
	p.startSinkProcess(t, batch)
	waitFor(t, 90*time.Second, "every page after the restart", func() bool {
		return clickhousetest.TryCount(p.conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ?", crawl) == pages
	})
	time.Sleep(3 * time.Second) // redeliveries of the killed sink's batch land
	if n := clickhousetest.Count(t, p.conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ?", crawl); n != pages {
		t.Errorf("pages under FINAL: %d, want %d", n, pages)
	}
	if n := clickhousetest.Count(t, p.conn, "SELECT count() FROM (SELECT url FROM pages FINAL WHERE crawl_id = ? GROUP BY url HAVING count() > 1)", crawl); n != 0 {
		t.Errorf("%d URLs twice under FINAL", n)
	}
	if n := clickhousetest.Count(t, p.conn, "SELECT pages_received FROM crawls WHERE crawl_id = ?", crawl); n != pages {
		t.Errorf("crawls.pages_received %d, want %d", n, pages)
	}
	t.Logf("killed with %d of %d pages archived, %d acked (the ack floor)", before, pages, len(acked))
}

// ackedWebhooks are the webhook ids of the deliveries the sink's consumer
// has acked up to its ack floor.
func ackedWebhooks(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	ctx := context.Background()
	cons, err := js.Consumer(ctx, "CRAWL_EVENTS", "sink")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "CRAWL_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for seq := uint64(1); seq <= info.AckFloor.Stream; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, delivery.WebhookID(m.Header))
	}
	return ids
}

// TestClickHouseOutage: ClickHouse stops while deliveries keep arriving. The
// receiver still answers 2xx (JetStream holds them), the sink holds its batch
// and retries, nothing is dead-lettered, and once ClickHouse is back every
// page is there.
func TestClickHouseOutage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ch, err := clickhousetest.Start(dir, 0)
	if err != nil {
		t.Fatalf("own ClickHouse: %v", err)
	}
	t.Cleanup(func() { _ = ch.Stop() })
	port := ch.Addr[strings.LastIndex(ch.Addr, ":")+1:]

	p := newPipeline(t, ch.Addr)
	url := p.startReceiver(t, nil)
	s := p.startSink(t, nil)
	conn, err := archive.Open(archive.Config{Addr: ch.Addr, Database: "crawl", User: "default"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })

	crawl := uuid.NewString()
	for i := range 20 {
		mustDeliver(t, url, pageBody(crawl, uuid.NewString(), fmt.Sprintf("https://site.test/%d", i), "before"))
	}
	waitFor(t, 2*time.Minute, "the first 20 pages", func() bool {
		return clickhousetest.TryCount(conn, "SELECT count() FROM crawl.pages FINAL WHERE crawl_id = ?", crawl) == 20
	})

	if err := ch.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := 20; i < 50; i++ {
		code, answer := deliver(t, url, pageBody(crawl, uuid.NewString(), fmt.Sprintf("https://site.test/%d", i), "during"))
		if code != 200 {
			t.Fatalf("receiver answered %d %s while ClickHouse was down", code, answer)
		}
	}
	resp, err := http.Get("http://" + s.addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "clickhouse") {
		t.Errorf("sink /readyz with ClickHouse down: %d %s", resp.StatusCode, body)
	}
	time.Sleep(3 * time.Second) // the sink retries meanwhile

	var portNum int
	fmt.Sscan(port, &portNum)
	ch2, err := clickhousetest.Start(dir, portNum)
	if err != nil {
		t.Fatalf("restart ClickHouse: %v", err)
	}
	t.Cleanup(func() { _ = ch2.Stop() })
	waitFor(t, 90*time.Second, "all 50 pages after ClickHouse returned", func() bool {
		return clickhousetest.TryCount(conn, "SELECT count() FROM crawl.pages FINAL WHERE crawl_id = ?", crawl) == 50
	})
	resp, err = http.Get("http://" + s.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), "crawlhouse_sink_dead_letters_total 0") {
		t.Errorf("an outage dead-lettered messages:\n%s", metrics)
	}
}

// TestRejectedToDeadLetterAndRedrive: a delivery ClickHouse refuses goes to
// the dead-letter stream after SINK_MAX_DELIVER tries and comes back with
// `sink redrive` once the cause is fixed.
func TestRejectedToDeadLetterAndRedrive(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, "")
	url := p.startReceiver(t, nil)
	s := p.startSink(t, env{"SINK_MAX_DELIVER": "3"})
	// Every migration applied, not just the one that creates pages.
	migrations, err := fs.Glob(config.Migrations, "migrations/*.sql")
	if err != nil || len(migrations) == 0 {
		t.Fatalf("migrations: %v", err)
	}
	waitFor(t, 2*time.Minute, "the schema", func() bool {
		return clickhousetest.TryCount(p.conn, "SELECT count() FROM schema_migrations FINAL") == uint64(len(migrations))
	})
	ctx := context.Background()
	// A constraint stands in for anything ClickHouse refuses.
	if err := p.conn.Exec(ctx, "ALTER TABLE pages ADD CONSTRAINT no_poison CHECK NOT startsWith(content, 'POISON')"); err != nil {
		t.Fatal(err)
	}
	crawl := uuid.NewString()
	mustDeliver(t, url, pageBody(crawl, uuid.NewString(), "https://site.test/fine", "fine"))
	poison := uuid.NewString()
	mustDeliver(t, url, pageBody(crawl, poison, "https://site.test/poison", "POISON pill"))

	nc, err := nats.Connect(p.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstreamNew(nc)
	waitFor(t, 60*time.Second, "the dead letter", func() bool {
		return dlqMsgs(ctx, js) == 1
	})
	if n := clickhousetest.Count(t, p.conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ?", crawl); n != 1 {
		t.Errorf("pages %d, want the good one only", n)
	}
	if err := p.conn.Exec(ctx, "ALTER TABLE pages DROP CONSTRAINT no_poison"); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := sinkcmd.Run(ctx, []string{"sink", "redrive"}, p.sinkEnv.get, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "redriven 1") {
		t.Errorf("redrive: %s", out.String())
	}
	waitFor(t, 2*time.Minute, "the redriven page", func() bool {
		return clickhousetest.TryCount(p.conn, "SELECT count() FROM pages FINAL WHERE crawl_id = ? AND toString(webhook_id) = ?", crawl, poison) == 1
	})
	if n := dlqMsgs(ctx, js); n != 0 {
		t.Errorf("dead-letter stream holds %d", n)
	}
	_ = s
}

// TestAlertRaisedOnce: failed pages of one crawl cross the threshold; one
// alert is POSTed (checked by a test server) and published on crawl.alerts,
// however many failures follow in the window.
func TestAlertRaisedOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var posts []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("alert POST: %v %s", err, r.Header.Get("Content-Type"))
		}
		mu.Lock()
		posts = append(posts, m)
		mu.Unlock()
	}))
	defer hook.Close()

	p := newPipeline(t, "")
	nc, err := nats.Connect(p.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	alerts, err := nc.SubscribeSync(alert.Subject)
	if err != nil {
		t.Fatal(err)
	}
	url := p.startReceiver(t, nil)
	p.startSink(t, env{"ALERT_WEBHOOK_URL": hook.URL, "ALERT_FAILURE_THRESHOLD": "3", "ALERT_WINDOW": "10m"})

	crawl, other := uuid.NewString(), uuid.NewString()
	mustDeliver(t, url, failedBody(other, uuid.NewString(), "https://other.test/1"))
	for i := range 8 {
		body := failedBody(crawl, uuid.NewString(), fmt.Sprintf("https://site.test/broken/%d", i))
		mustDeliver(t, url, body)
		mustDeliver(t, url, body) // a retry: one failure
	}
	waitFor(t, 2*time.Minute, "the failures archived", func() bool {
		return clickhousetest.TryCount(p.conn, "SELECT count() FROM failures FINAL WHERE crawl_id = ?", crawl) == 8
	})
	waitFor(t, 2*time.Minute, "the alert POST", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(posts) > 0
	})
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(posts) != 1 {
		t.Fatalf("%d alerts POSTed, want 1: %v", len(posts), posts)
	}
	a := posts[0]
	text, _ := a["text"].(string)
	// The count is what the archive held when the alert was checked: at
	// least the threshold, at most the 8 failures sent.
	n, _ := a["failures"].(float64)
	if a["crawlId"] != crawl || n < 3 || n > 8 || a["threshold"] != float64(3) || a["window"] != "10m0s" ||
		a["lastError"] != "Request failed with status code 502" || !strings.Contains(text, crawl) || !strings.Contains(text, fmt.Sprintf("%d failed pages", int(n))) {
		t.Errorf("alert body %v", a)
	}
	msg, err := alerts.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("no alert on %s: %v", alert.Subject, err)
	}
	var published map[string]any
	_ = json.Unmarshal(msg.Data, &published)
	if published["crawlId"] != crawl {
		t.Errorf("published alert %s", msg.Data)
	}
	if extra, err := alerts.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("a second alert: %s", extra.Data)
	}
}
