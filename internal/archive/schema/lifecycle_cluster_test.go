package schema_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/takedown"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// TestLifecycleOnShards runs retention and a takedown on a real two-shard
// cluster, where the versions of one URL are spread over the shards (rows
// are sharded by job and URL): each shard's TTL keeps the newest versions
// of the URL across the whole cluster, and a takedown of a host removes its
// rows from both shards and keeps them out of inserts through either node.
func TestLifecycleOnShards(t *testing.T) {
	t.Parallel()
	c := clickhousetest.StartCluster(t, 2)
	cfg := archive.Config{Addr: c.Addr(0), Database: "crawl", User: "default", Cluster: c.Name}
	ctx := context.Background()
	nodes := c.OpenAll(t)
	if _, err := schema.MigrateNodes(ctx, nodes, cfg, schema.NodeOptions{}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	w := archivetest.NewStore(t, nodes[0], cfg)
	now := time.Now().UTC().Truncate(time.Millisecond)

	// Retention: /page in eight jobs, 800 to 100 days old; one job a
	// page of another host too.
	var rows archive.Rows
	jobs := make([]uuid.UUID, 8)
	for i := range jobs {
		jobs[i] = uuid.New()
		rows.Pages = append(rows.Pages, archive.Page{CrawlID: jobs[i], URL: "https://site.test/page", WebhookID: uuid.New(), Origin: archive.OriginWebhook,
			Success: true, StatusCode: 200, Markdown: fmt.Sprint("version ", i), ReceivedAt: now.Add(-time.Duration(800-100*i) * 24 * time.Hour)})
	}
	if err := w.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	for i, conn := range nodes {
		if n := clickhousetest.Count(t, conn, "SELECT count() FROM crawl.pages_local"); n == 0 || n == 8 {
			t.Fatalf("shard %d holds %d of the 8 versions: the test needs them on both", i+1, n)
		}
	}
	r := schema.Retention{PageDays: 30, KeepVersions: 3, FailureDays: 30}
	if applied, err := schema.ApplyRetentionNodes(ctx, nodes, cfg, schema.NodeOptions{}, r, zerolog.Nop()); err != nil || !applied {
		t.Fatalf("apply the retention to the nodes: %v, %v", applied, err)
	}
	for _, conn := range nodes {
		expire(t, conn, cfg, "pages_local")
	}
	// A sink started on either node finds the retention applied: the same
	// digest ON CLUSTER as node by node, so it runs no DDL (which this
	// cluster, without a Keeper, could not run).
	for i, conn := range nodes {
		if applied, err := schema.ApplyRetention(ctx, conn, cfg, r, zerolog.Nop()); err != nil || applied {
			t.Errorf("sink retention on shard %d after ApplyRetentionNodes: applied %v, %v; want nothing run", i+1, applied, err)
		}
	}
	got := archivetest.QueryStrings(t, nodes[1], "SELECT toString(crawl_id) FROM crawl.pages FINAL WHERE url = 'https://site.test/page' ORDER BY received_at")
	want := []string{jobs[5].String(), jobs[6].String(), jobs[7].String()}
	if !slices.Equal(got, want) {
		t.Errorf("versions kept across the shards: %v, want the three newest jobs %v", got, want)
	}

	// Takedown of a host with pages on both shards.
	var site archive.Rows
	job := uuid.New()
	for i := range 40 {
		site.Pages = append(site.Pages, archive.Page{CrawlID: job, URL: fmt.Sprintf("https://gone.test/%d", i), WebhookID: uuid.New(), Origin: archive.OriginWebhook,
			Success: true, StatusCode: 200, Markdown: "content", ReceivedAt: now})
	}
	site.Pages = append(site.Pages, archive.Page{CrawlID: job, URL: "https://stays.test/", WebhookID: uuid.New(), Origin: archive.OriginWebhook,
		Success: true, StatusCode: 200, Markdown: "content", ReceivedAt: now})
	if err := w.Insert(ctx, site); err != nil {
		t.Fatal(err)
	}
	for i, conn := range nodes {
		if n := clickhousetest.Count(t, conn, "SELECT count() FROM crawl.pages_local WHERE host = 'gone.test'"); n == 0 || n == 40 {
			t.Fatalf("shard %d holds %d of the host's 40 pages: the test needs them on both", i+1, n)
		}
	}
	sel, err := takedown.NewSelector(takedown.KindHost, "gone.test")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.RecordTakedown(ctx, archive.Takedown{ID: uuid.New(), Selector: sel, Reason: "site owner's request", RequestedBy: "ops", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	deleted, err := schema.PurgeNodes(ctx, nodes, cfg, sel)
	if err != nil {
		t.Fatal(err)
	}
	if wantDeleted := map[string]uint64{"pages": 40, "failures": 0, "page_versions": 40, "blocked_urls": 0, "monitor_pages": 0, "events": 0}; !maps.Equal(deleted, wantDeleted) {
		t.Errorf("rows removed: %v, want %v", deleted, wantDeleted)
	}
	// The deliveries again, through the other node: its writer reads the
	// takedown recorded through the first.
	if err := archivetest.NewStore(t, nodes[1], cfg).Insert(ctx, site); err != nil {
		t.Fatal(err)
	}
	for i, conn := range nodes {
		if n := clickhousetest.Count(t, conn, "SELECT count() FROM crawl.pages_local WHERE host = 'gone.test'"); n != 0 {
			t.Errorf("shard %d holds %d pages of the host taken down", i+1, n)
		}
		if n := clickhousetest.Count(t, conn, "SELECT count() FROM crawl.page_versions_local WHERE url LIKE 'https://gone.test/%'"); n != 0 {
			t.Errorf("shard %d holds %d change records of the host taken down", i+1, n)
		}
	}
	if n := clickhousetest.Count(t, nodes[0], "SELECT count() FROM crawl.pages FINAL WHERE host = 'stays.test'"); n != 1 {
		t.Errorf("the other host's page: %d rows, want 1", n)
	}
}
