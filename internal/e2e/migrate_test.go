package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
)

// TestSinkResumesHalfMigratedArchive starts the sink binary on an archive a
// sink of an earlier run was killed in the middle of migrating: 0001-0007
// recorded, 0008 stopped after its rename and its alias (the state in which
// every later start failed with "Cannot rename to document_cut"). In the way
// of 0010 lies an object it cannot move parts out of, so the sink must stay
// unready and say which migration cannot proceed, while /healthz answers;
// once the operator removes it, the same process finishes the migrations and
// becomes ready, and every page reads back as it was stored.
func TestSinkResumesHalfMigratedArchive(t *testing.T) {
	t.Parallel()
	addr, db := clickhousetest.NewDatabase(t)
	conn := clickhousetest.Open(t, db)
	ctx := context.Background()
	cfg := archive.Config{Addr: addr, Database: db}
	ms, err := schema.Migrations(cfg)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The record table as the migrator makes it, then 0001-0007 applied and
	// recorded, as a sink of the previous version left them.
	exec("CREATE TABLE " + db + ".schema_migrations (version UInt32, name String, checksum String, applied_at DateTime64(3, 'UTC')) ENGINE = ReplacingMergeTree(applied_at) ORDER BY version")
	for _, m := range ms[:7] {
		for _, s := range m.Statements {
			exec(s)
		}
		exec("INSERT INTO "+db+".schema_migrations VALUES (?, ?, ?, now64(3))", m.Version, m.Name, m.Checksum)
	}
	type page struct{ url, markdown, html, document string }
	var pages []page
	crawl := uuid.New()
	for i := range 5 {
		p := page{url: fmt.Sprintf("https://half.example/%d", i), markdown: fmt.Sprintf("# Page %d\n\n\"quoted\"\ttext", i), html: fmt.Sprintf("<h1>Page %d</h1>", i)}
		p.document = fmt.Sprintf(`{"markdown":%q,"html":%q,"metadata":{"sourceURL":%q,"statusCode":200}}`, p.markdown, p.html, p.url)
		pages = append(pages, p)
		exec("INSERT INTO "+db+".pages (crawl_id, url, success, status_code, markdown, html, document, received_at) VALUES (?, ?, true, 200, ?, ?, ?, now64(3))",
			crawl, p.url, p.markdown, p.html, p.document)
	}
	if !strings.HasPrefix(ms[7].Name, "0008_") {
		t.Fatalf("migration 8 is %s", ms[7].Name)
	}
	for _, s := range ms[7].Statements[:2] {
		exec(s)
	}
	exec("CREATE VIEW " + db + ".pages_rebuild AS SELECT 1 AS in_the_way")

	natsURL := streamtest.Start(t)
	sink := startSinkBinary(t, map[string]string{
		"NATS_URL":            natsURL,
		"CLICKHOUSE_ADDR":     addr,
		"CLICKHOUSE_DATABASE": db,
	})
	var body string
	waitFor(t, 2*time.Minute, "the sink unready, naming the migration that cannot proceed", func() bool {
		var code int
		code, body = getBody("http://" + sink.addr + "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, `"migrations":"migration cannot proceed`) && strings.Contains(body, "0010_fine_granules.sql")
	})
	if code, _ := getBody("http://" + sink.addr + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz %d while migrations cannot proceed", code)
	}
	if !strings.Contains(sink.logs(), "0010_fine_granules.sql") {
		t.Errorf("the sink's logs do not name the migration that cannot proceed:\n%s", sink.logs())
	}
	if n := clickhousetest.Count(t, conn, "SELECT count() FROM (SELECT version FROM "+db+".schema_migrations FINAL WHERE version IN (8, 9))"); n != 2 {
		t.Errorf("0008 and 0009 not recorded before 0010 failed: %d of them", n)
	}

	exec("DROP VIEW " + db + ".pages_rebuild")
	waitFor(t, 3*time.Minute, "the sink ready once the obstacle is gone", func() bool {
		code, b := getBody("http://" + sink.addr + "/readyz")
		body = b
		return code == http.StatusOK
	})
	if !strings.Contains(body, `"migrations":"ok"`) {
		t.Errorf("/readyz: %s", body)
	}
	if n := clickhousetest.Count(t, conn, "SELECT count() FROM (SELECT version FROM "+db+".schema_migrations FINAL)"); n != uint64(len(ms)) {
		t.Errorf("%d migrations recorded, want %d", n, len(ms))
	}
	for _, p := range pages {
		var document, markdown, html string
		if err := conn.QueryRow(ctx, "SELECT document, markdown, html FROM "+db+".pages FINAL WHERE crawl_id = ? AND url = ?", crawl, p.url).Scan(&document, &markdown, &html); err != nil {
			t.Fatalf("%s: %v", p.url, err)
		}
		if document != p.document || markdown != p.markdown || html != p.html {
			t.Errorf("%s read back as %q, %q, %q; stored %q, %q, %q", p.url, document, markdown, html, p.document, p.markdown, p.html)
		}
	}
}

// getBody is a GET's status and body, 0 when the server does not answer.
func getBody(url string) (int, string) {
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}
