package sink_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
)

// BenchmarkSinkBytes is where the bytes of the sink's pages are on
// BenchmarkSinkThroughput's recrawls, without the stream and the sink
// process: the same rows inserted by the sink's Writer in the sink's insert
// size, then each part of pages (content, each search index, document_cut,
// the rest) against the same Documents stored once (bytesRatio's baseline),
// measured as the merges leave them and again after OPTIMIZE FINAL; and
// what pages would take if the versions whose markdown equals an earlier
// version of their URL kept no text, the rest of their row kept (what a
// layout storing unchanged text once would reach, before the reference it
// needs). BENCH_SINK_SCHEMA changes the schema first, as in
// BenchmarkSinkThroughput (a codec or an index parameter tried: see
// docs/benchmarks.md, "Bytes on recrawls"); BENCH_SINK_CHANGE is the share
// of pages changed between two crawls (default 0.2).
func BenchmarkSinkBytes(b *testing.B) {
	c := smallPages(envInt("BENCH_SINK_DOCS", 50000))
	if v, err := strconv.ParseFloat(os.Getenv("BENCH_SINK_CHANGE"), 64); err == nil && v >= 0 && v <= 1 {
		c.ChangeRate = v
	}
	bodies := corpusBodies(c)
	size, bytes := sinkShape(b)
	batch := rowsPerInsert(bodies, size, bytes)
	rows := decodeAll(b, bodies)
	for b.Loop() {
		addr, db := clickhousetest.NewDatabase(b)
		schema := strings.Split(os.Getenv("BENCH_SINK_SCHEMA"), ";")
		conn, cfg := migrated(b, addr, db, schema)
		s, err := archive.NewStore(conn, cfg)
		if err != nil {
			b.Fatal(err)
		}
		load(b, s, rows, batch)
		server := clickhousetest.Open(b, db)
		settle(b, server)
		pages, base := bytesRatio(b, server, db, db, rows, batch)
		b.ReportMetric(float64(pages)/float64(base), "bytes_÷_docs_once")
		b.Logf("%d pages (change rate %.2f) in inserts of %d; between merges (%d parts): pages %.1f MB, the Documents once %.1f MB, ratio %.2f; MB and share of the Documents once: %s",
			len(rows), c.ChangeRate, batch, partCount(b, server, db), float64(pages)/1e6, float64(base)/1e6, float64(pages)/float64(base), largestParts(b, server, db, base))
		optimize(b, server, db+".pages", db+".docs_baseline")
		pages, base = onDisk(b, server, db, "pages"), onDisk(b, server, db, "docs_baseline")
		b.ReportMetric(float64(pages)/float64(base), "merged_bytes_÷_docs_once")
		b.Logf("merged (OPTIMIZE FINAL): pages %.1f MB, the Documents once %.1f MB, ratio %.2f; MB and share of the Documents once: %s",
			float64(pages)/1e6, float64(base)/1e6, float64(pages)/float64(base), largestParts(b, server, db, base))
		once, kept := textOnce(b, addr, db, schema)
		b.ReportMetric(float64(once)/float64(base), "text_once_bytes_÷_docs_once")
		b.Logf("each URL's unchanged text stored once (%d of %d versions keep their text; merged): pages %.1f MB, ratio %.2f",
			kept, len(rows), float64(once)/1e6, float64(once)/float64(base))
	}
}

// textOnce copies db.pages into a freshly migrated pages (schema applied
// after the migrations, as to db), the versions whose markdown equals an
// earlier version of the same URL with no content, and returns the copy's
// bytes once merged and how many versions kept their text.
func textOnce(b *testing.B, addr, db string, schema []string) (bytes, kept uint64) {
	_, once := clickhousetest.NewDatabase(b)
	conn, _ := migrated(b, addr, once, schema)
	cols := storedColumns(b, conn, db)
	sel := make([]string, len(cols))
	for i, col := range cols {
		switch col {
		case "content":
			sel[i] = "if(first, content, '')"
		case "markdown_bytes":
			sel[i] = "if(first, markdown_bytes, 0)"
		default:
			sel[i] = col
		}
	}
	q := "INSERT INTO " + once + ".pages (" + strings.Join(cols, ", ") + ") SELECT " + strings.Join(sel, ", ") +
		" FROM (SELECT *, content_hash, (url, received_at) IN (SELECT url, min(received_at) FROM " + db + ".pages GROUP BY url, content_hash) AS first FROM " + db + ".pages)"
	if err := conn.Exec(context.Background(), q); err != nil {
		b.Fatal(err)
	}
	optimize(b, conn, once+".pages")
	kept = clickhousetest.Count(b, conn, "SELECT count() FROM "+once+".pages WHERE markdown_bytes > 0 OR content != ''")
	return onDisk(b, conn, once, "pages"), kept
}

// optimize merges each table into one part and waits for every merge.
func optimize(b *testing.B, conn driver.Conn, tables ...string) {
	for _, t := range tables {
		if err := conn.Exec(context.Background(), "OPTIMIZE TABLE "+t+" FINAL"); err != nil {
			b.Fatal(err)
		}
	}
	settle(b, conn)
}

// partCount is the active parts of db.pages.
func partCount(b *testing.B, conn driver.Conn, db string) uint64 {
	return clickhousetest.Count(b, conn, "SELECT count() FROM system.parts WHERE active AND database = ? AND table = 'pages'", db)
}
