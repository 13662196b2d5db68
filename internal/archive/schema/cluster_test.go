package schema_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// everyNode matches a system table read through every node of the cluster.
var everyNode = regexp.MustCompile(`clusterAllReplicas\('prod', (system\.\w+)\)`)

// TestNodeMigrationsAreClusterDDLPerNode pins the per-node rendering to
// what ON CLUSTER runs on each node: statement for statement the cluster
// DDL without its ON CLUSTER clause (the ALTERs of the Distributed tables
// included), and with Replicated engines only when asked for.
func TestNodeMigrationsAreClusterDDLPerNode(t *testing.T) {
	t.Parallel()
	cfg := archive.Config{Addr: "h:9000", Database: "crawl", Cluster: "prod"}
	cluster, err := schema.Migrations(cfg)
	if err != nil {
		t.Fatal(err)
	}
	replicated, err := schema.NodeMigrations(cfg, schema.NodeOptions{Replicated: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := schema.NodeMigrations(cfg, schema.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(replicated) != len(cluster) || len(plain) != len(cluster) {
		t.Fatalf("%d node migrations, %d plain, want %d", len(replicated), len(plain), len(cluster))
	}
	for i, m := range cluster {
		r, p := replicated[i], plain[i]
		if r.Version != m.Version || r.Checksum != m.Checksum || p.Checksum != m.Checksum {
			t.Errorf("%s: node migration %s/%s differs in version or checksum", m.Name, r.Name, p.Name)
		}
		if len(r.Statements) != len(m.Statements) || len(p.Statements) != len(m.Statements) {
			t.Errorf("%s: %d statements per node (%d plain), want %d", m.Name, len(r.Statements), len(p.Statements), len(m.Statements))
			continue
		}
		for j, s := range m.Statements {
			// Per node, a directive's query reads the node's own system
			// tables, not every node's.
			want := strings.ReplaceAll(s, " ON CLUSTER 'prod'", "")
			want = everyNode.ReplaceAllString(want, "$1")
			if r.Statements[j] != want {
				t.Errorf("%s statement %d per node:\n%s\nwant:\n%s", m.Name, j+1, r.Statements[j], want)
			}
			if strings.Contains(p.Statements[j], "Replicated") || strings.Contains(p.Statements[j], "ON CLUSTER") {
				t.Errorf("%s statement %d: unreplicated node DDL holds Replicated or ON CLUSTER:\n%s", m.Name, j+1, p.Statements[j])
			}
		}
	}
	all := joined(plain)
	for _, want := range []string{
		"CREATE TABLE IF NOT EXISTS crawl.pages_local\n(",
		"ENGINE = ReplacingMergeTree(received_at)\nORDER BY (crawl_id, url)",
		"CREATE TABLE IF NOT EXISTS crawl.pages AS crawl.pages_local\nENGINE = Distributed('prod', 'crawl', 'pages_local', cityHash64(crawl_id, url))",
		"ALTER TABLE crawl.pages\n    ADD COLUMN IF NOT EXISTS job_kind",
		"ALTER TABLE crawl.crawl_stats\n    ADD COLUMN IF NOT EXISTS failed_urls",
		"CREATE MATERIALIZED VIEW IF NOT EXISTS crawl.crawl_stats_from_pages\nTO crawl.crawl_stats_local",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("per-node DDL lacks:\n%s", want)
		}
	}
	if _, err := schema.NodeMigrations(archive.Config{Addr: "h:9000", Database: "crawl"}, schema.NodeOptions{}); err == nil {
		t.Error("NodeMigrations without a cluster: no error")
	}
}

// TestMigrateNodesOnShards applies the per-node DDL to a real two-shard
// cluster and writes through the Distributed tables as the sink does: rows
// land on both shards, the materialized views feed each shard's local
// crawl_stats, FINAL through either node shows each page once, and a sink's
// Migrate afterwards finds the schema applied and runs no DDL (ON CLUSTER
// cannot run here and would fail).
func TestMigrateNodesOnShards(t *testing.T) {
	t.Parallel()
	c := clickhousetest.StartCluster(t, 2)
	cfg := archive.Config{Addr: c.Addr(0), Database: "crawl", User: "default", Cluster: c.Name}
	ctx := context.Background()
	nodes := c.OpenAll(t)
	applied, err := schema.MigrateNodes(ctx, nodes, cfg, schema.NodeOptions{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := schema.Migrations(cfg)
	if len(applied) != len(ms) {
		t.Fatalf("MigrateNodes applied %v, want all %d migrations", applied, len(ms))
	}
	for i, conn := range nodes {
		if n := clickhousetest.Count(t, conn, "SELECT count() FROM crawl.schema_migrations FINAL"); n != uint64(len(ms)) {
			t.Errorf("shard %d records %d migrations, want %d", i+1, n, len(ms))
		}
		for table, engine := range map[string]string{"pages": "Distributed", "pages_local": "ReplacingMergeTree", "crawl_stats_local": "AggregatingMergeTree", "crawls": "View", "crawl_stats_from_pages": "MaterializedView"} {
			var got string
			if err := conn.QueryRow(ctx, "SELECT engine FROM system.tables WHERE database = 'crawl' AND name = ?", table).Scan(&got); err != nil || got != engine {
				t.Errorf("shard %d: %s engine %q (%v), want %s", i+1, table, got, err, engine)
			}
		}
		// The Distributed table has the columns later migrations added.
		if n := clickhousetest.Count(t, conn, "SELECT count() FROM system.columns WHERE database = 'crawl' AND table = 'pages' AND name IN ('job_kind', 'webhook_metadata', 'host', 'content_hash', 'document_cut', 'document')"); n != 6 {
			t.Errorf("shard %d: Distributed pages has %d of the 6 added columns", i+1, n)
		}
	}
	for i, conn := range nodes {
		nc := cfg
		nc.Addr = c.Addr(i)
		again, err := schema.Migrate(ctx, conn, nc, zerolog.Nop())
		if err != nil || len(again) != 0 {
			t.Fatalf("sink Migrate on shard %d after MigrateNodes: applied %v, %v; want nothing and no ON CLUSTER DDL", i+1, again, err)
		}
	}

	w := archivetest.NewStore(t, nodes[0], cfg)
	crawl := uuid.New()
	base := time.Now().UTC().Truncate(time.Millisecond)
	var rows archive.Rows
	for i := range 40 {
		rows.Pages = append(rows.Pages, archive.Page{CrawlID: crawl, URL: fmt.Sprintf("https://example.com/%d", i), WebhookID: uuid.New(),
			Origin: archive.OriginWebhook, Success: true, StatusCode: 200, Title: "v1", Markdown: "first", HTML: fmt.Sprintf("<p>%d</p>", i),
			Document: fmt.Appendf(nil, `{"markdown":"first","html":"<p>%d</p>","metadata":{"statusCode":200}}`, i), ReceivedAt: base})
	}
	rows.Failures = append(rows.Failures, archive.Failure{CrawlID: crawl, WebhookID: uuid.New(), URL: "https://example.com/broken", StatusCode: 502, Error: "bad gateway", ReceivedAt: base})
	if err := w.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	// Every page again, newer, through the other node: versions of a page
	// meet on the shard its key picks.
	w2 := archivetest.NewStore(t, nodes[1], cfg)
	for i := range rows.Pages {
		rows.Pages[i].Title, rows.Pages[i].ReceivedAt = "v2", base.Add(time.Second)
	}
	if err := w2.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	// Inserts on a cluster return once every shard holds its rows: what the
	// sink reads right after (alerts' failure count) must see them.
	if n := clickhousetest.Count(t, nodes[0], "SELECT count() FROM crawl.pages WHERE crawl_id = ?", crawl); n != 80 {
		t.Errorf("right after the inserts: %d page rows through the Distributed table, want 80", n)
	}
	if n := clickhousetest.Count(t, nodes[0], "SELECT count() FROM crawl.failures WHERE crawl_id = ?", crawl); n != 2 {
		t.Errorf("right after the inserts: %d failure rows, want 2", n)
	}
	for i, conn := range nodes {
		if n := clickhousetest.Count(t, conn, "SELECT count() FROM crawl.pages_local WHERE crawl_id = ?", crawl); n == 0 || n == 80 {
			t.Errorf("shard %d holds %d of 80 page rows, want a share", i+1, n)
		}
		if n := clickhousetest.Count(t, conn, "SELECT count() FROM crawl.pages FINAL WHERE crawl_id = ? AND title = 'v2'", crawl); n != 40 {
			t.Errorf("through shard %d: %d pages under FINAL with the newer version, want 40", i+1, n)
		}
		// The Document reads back whole through the Distributed table, stored
		// without its markdown and html on the shards.
		if n := clickhousetest.Count(t, conn, "SELECT count() FROM crawl.pages FINAL WHERE crawl_id = '"+crawl.String()+"' AND document = concat('{\"markdown\":\"first\",\"html\":\"', html, '\",\"metadata\":{\"statusCode\":200}}') AND position(document_cut, 'first') = 0"); n != 40 {
			t.Errorf("through shard %d: %d Documents read back whole from their cut storage, want 40", i+1, n)
		}
		var got archive.Crawl
		if got, err = archivetest.NewStore(t, conn, cfg).Crawl(ctx, crawl.String()); err != nil {
			t.Fatal(err)
		}
		if got.PagesReceived != 40 || got.Failures != 1 {
			t.Errorf("crawls through shard %d: %d pages, %d failures; want 40 and 1", i+1, got.PagesReceived, got.Failures)
		}
	}

	// A shard down: the insert fails, as one ClickHouse cannot take writes
	// (Unavailable: the sink holds it), not as data it refuses (which the
	// sink would dead-letter).
	if err := c.Stop(1); err != nil {
		t.Fatal(err)
	}
	err = w.Insert(ctx, rows)
	if err == nil {
		t.Fatal("insert with shard 2 down succeeded: it was queued on shard 1, not written")
	}
	t.Logf("insert with a shard down: %v", err)
	if class := archive.Classify(err); class != archive.Unavailable {
		t.Errorf("insert with a shard down: %v classified %v, want unavailable", err, class)
	}
}

// TestShardOutageErrorsAreUnavailable: the errors an insert through a
// Distributed table gives while a shard is down hold the batch. Connection
// refused (210) is what the two-shard test above sees; a shard whose every
// replica fails gives ALL_CONNECTION_TRIES_FAILED (279).
func TestShardOutageErrorsAreUnavailable(t *testing.T) {
	t.Parallel()
	for _, code := range []int32{210, 279} {
		if c := archive.Classify(&clickhouse.Exception{Code: code, Message: "shard down"}); c != archive.Unavailable {
			t.Errorf("code %d classified %v, want unavailable", code, c)
		}
	}
}
