package schema_test

import (
	"context"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/rs/zerolog"
)

// TestMigrationsCluster checks the DDL generated for CLICKHOUSE_CLUSTER: every
// table is created ON CLUSTER with a Replicated engine under a _local name,
// and a Distributed table of the public name sits in front of it.
func TestMigrationsCluster(t *testing.T) {
	t.Parallel()
	ms, err := schema.Migrations(archive.Config{Addr: "h:9000", Database: "crawl", Cluster: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	all := joined(ms)
	for _, want := range []string{
		"CREATE TABLE IF NOT EXISTS crawl.pages_local ON CLUSTER 'prod'",
		"ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', received_at)",
		"CREATE TABLE IF NOT EXISTS crawl.pages ON CLUSTER 'prod' AS crawl.pages_local\nENGINE = Distributed('prod', 'crawl', 'pages_local', cityHash64(crawl_id, url))",
		"CREATE TABLE IF NOT EXISTS crawl.failures ON CLUSTER 'prod' AS crawl.failures_local\nENGINE = Distributed('prod', 'crawl', 'failures_local', cityHash64(crawl_id, webhook_id))",
		"ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')",
		"CREATE MATERIALIZED VIEW IF NOT EXISTS crawl.crawl_stats_from_pages ON CLUSTER 'prod'\nTO crawl.crawl_stats_local",
		"FROM crawl.pages_local",
		"CREATE VIEW IF NOT EXISTS crawl.crawls ON CLUSTER 'prod' AS",
		"FROM crawl.crawl_stats\n",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("cluster DDL lacks:\n%s", want)
		}
	}
	for _, m := range ms {
		for _, s := range m.Statements {
			if strings.HasPrefix(s, "CREATE") && !strings.Contains(s, "ON CLUSTER 'prod'") {
				t.Errorf("%s: statement without ON CLUSTER:\n%s", m.Name, s)
			}
			if strings.Contains(s, "ENGINE = ReplacingMergeTree") || strings.Contains(s, "ENGINE = MergeTree") {
				t.Errorf("%s: non-replicated engine on a cluster:\n%s", m.Name, s)
			}
		}
	}
}

func TestMigrationsSingleServer(t *testing.T) {
	t.Parallel()
	ms, err := schema.Migrations(archive.Config{Addr: "h:9000", Database: "crawl"})
	if err != nil {
		t.Fatal(err)
	}
	all := joined(ms)
	for _, bad := range []string{"ON CLUSTER", "Replicated", "Distributed", "_local", "{{"} {
		if strings.Contains(all, bad) {
			t.Errorf("single-server DDL holds %q", bad)
		}
	}
	if !strings.Contains(all, "ENGINE = ReplacingMergeTree(received_at)\nORDER BY (crawl_id, url)") {
		t.Error("pages is not a ReplacingMergeTree keyed by (crawl_id, url)")
	}
}

func joined(ms []schema.Migration) string {
	var b strings.Builder
	for _, m := range ms {
		for _, s := range m.Statements {
			b.WriteString(s)
			b.WriteString("\n;\n")
		}
	}
	return b.String()
}

// TestMigrate applies the migrations to a real ClickHouse twice (the second
// time nothing is applied) and checks the columns docs/search.md documents.
func TestMigrate(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	ctx := context.Background()
	again, err := schema.Migrate(ctx, conn, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 0 {
		t.Errorf("second Migrate applied %v", again)
	}
	want := map[string]map[string]string{
		"pages": {
			"crawl_id": "UUID", "url": "String", "scrape_id": "String", "webhook_id": "UUID",
			"origin": "LowCardinality(String)", "success": "Bool", "status_code": "UInt16",
			"title": "String", "markdown": "String", "html": "String", "error": "String",
			"document": "String", "received_at": "DateTime64(3, 'UTC')", "text_hash": "UInt64",
		},
		"failures": {
			"crawl_id": "UUID", "webhook_id": "UUID", "url": "String", "status_code": "UInt16",
			"error": "String", "received_at": "DateTime64(3, 'UTC')",
		},
		"crawls": {
			"crawl_id": "UUID", "first_delivery_at": "Nullable(DateTime64(3, 'UTC'))",
			"last_delivery_at": "Nullable(DateTime64(3, 'UTC'))", "pages_received": "UInt64",
			"pages_backfilled": "UInt64", "failures": "UInt64", "last_event": "String", "backfill_state": "String",
		},
	}
	for table, cols := range want {
		rows, err := conn.Query(ctx, "SELECT name, type FROM system.columns WHERE database = ? AND table = ?", cfg.Database, table)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for rows.Next() {
			var n, typ string
			if err := rows.Scan(&n, &typ); err != nil {
				t.Fatal(err)
			}
			got[n] = typ
		}
		rows.Close()
		for c, typ := range cols {
			if got[c] != typ {
				t.Errorf("%s.%s: type %q, want %q", table, c, got[c], typ)
			}
		}
	}
	var engine, key string
	if err := conn.QueryRow(ctx, "SELECT engine, sorting_key FROM system.tables WHERE database = ? AND name = 'pages'", cfg.Database).Scan(&engine, &key); err != nil {
		t.Fatal(err)
	}
	if engine != "ReplacingMergeTree" || key != "crawl_id, url" {
		t.Errorf("pages: engine %s key %q", engine, key)
	}
	var indexes uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.data_skipping_indices WHERE database = ? AND table = 'pages' AND type = 'text' AND name IN ('title_text', 'markdown_text')", cfg.Database).Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	if indexes != 2 {
		t.Errorf("pages has %d text indexes on title and markdown, want 2", indexes)
	}
}
