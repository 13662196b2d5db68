package archive_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// realDeliveries maps every page delivery of the real captures (both runs)
// to rows, as the sink does.
func realDeliveries(t *testing.T) archive.Rows {
	t.Helper()
	paths, err := filepath.Glob("../../testdata/fixtures/firecrawl-2026/run*/*.page.body")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 40 {
		t.Fatalf("only %d real page deliveries found", len(paths))
	}
	var all archive.Rows
	received := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	for i, p := range paths {
		body, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := events.DecodeAccepted(body)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		r, err := archive.EventRows(ev, body, received.Add(time.Duration(i)*time.Millisecond))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		all.Add(r)
	}
	if len(all.Pages) < 40 {
		t.Fatalf("only %d pages in the real deliveries", len(all.Pages))
	}
	return all
}

// storedDocuments reads back, per (crawl, url), the Document the archive
// gives (`document`) and how many bytes of it are stored (`document_cut`).
func storedDocuments(t *testing.T, conn driver.Conn, cfg archive.Config) map[string][2]string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT toString(crawl_id), url, document, document_cut FROM "+cfg.Database+".pages FINAL")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string][2]string{}
	for rows.Next() {
		var crawl, url, doc, cut string
		if err := rows.Scan(&crawl, &url, &doc, &cut); err != nil {
			t.Fatal(err)
		}
		got[crawl+" "+url] = [2]string{doc, cut}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// checkOnce asserts what users rely on: every page's Document comes back
// byte for byte as received, and its markdown and html are stored once (cut
// out of the stored Document).
func checkOnce(t *testing.T, pages []archive.Page, got map[string][2]string) {
	t.Helper()
	cut := 0
	for _, p := range pages {
		g, ok := got[p.CrawlID.String()+" "+p.URL]
		if !ok {
			t.Errorf("%s: not archived", p.URL)
			continue
		}
		if g[0] != string(p.Document) {
			t.Errorf("%s: document read back differs from the Document received:\n got %.300s\nwant %.300s", p.URL, g[0], p.Document)
		}
		// Cut out, each value leaves at most a one-byte marker behind its
		// key, and its JSON spelling is at least its length plus quotes.
		if max := len(p.Document) - len(p.Markdown) - len(p.HTML); len(g[1]) > max {
			t.Errorf("%s: %d bytes of document stored, want at most %d (markdown and html cut out)", p.URL, len(g[1]), max)
		}
		if len(g[1]) < len(p.Document) {
			cut++
		}
	}
	if cut == 0 {
		t.Error("no stored document is smaller than the Document received")
	}
}

// TestDocumentStoredOnceRealDeliveries archives the real captured deliveries
// through the sink's row mapping and Writer into ClickHouse and reads every
// Document back.
func TestDocumentStoredOnceRealDeliveries(t *testing.T) {
	t.Parallel()
	conn, cfg := startClickHouse(t)
	all := realDeliveries(t)
	if err := newWriter(t, conn, cfg).Insert(context.Background(), all); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, all.Pages, storedDocuments(t, conn, cfg))
}

// TestMigrateDocumentOnceExistingArchive creates the archive as the
// migrations before 0008 left it, fills it the way the sink did then (the
// whole Document in `document`), migrates it, and reads it back: the rows
// are rewritten in place and the Documents read back unchanged.
func TestMigrateDocumentOnceExistingArchive(t *testing.T) {
	t.Parallel()
	conn, cfg := startClickHouse(t) // a database of its own, migrated to the end
	ctx := context.Background()
	// Start over from the schema as it was before this migration.
	for _, s := range []string{
		"DROP TABLE IF EXISTS " + cfg.Database + ".pages SYNC",
		"DELETE FROM " + cfg.Database + ".schema_migrations WHERE version >= 8",
	} {
		if err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	ms, err := archive.Migrations(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version >= 8 {
			continue
		}
		for _, s := range m.Statements {
			if err := conn.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %s: %v", m.Name, s, err)
			}
		}
	}
	all := realDeliveries(t)
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+cfg.Database+".pages (crawl_id, job_kind, url, scrape_id, webhook_id, origin, success, status_code, title, markdown, html, error, document, webhook_metadata, received_at)")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all.Pages {
		if err := batch.Append(p.CrawlID, p.JobKind, p.URL, p.ScrapeID, p.WebhookID, p.Origin, p.Success, p.StatusCode,
			p.Title, p.Markdown, p.HTML, p.Error, string(p.Document), string(p.WebhookMetadata), p.ReceivedAt); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	applied, err := archive.Migrate(ctx, conn, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 1 || !strings.HasPrefix(applied[0], "0008") {
		t.Fatalf("applied %v, want only 0008", applied)
	}
	checkOnce(t, all.Pages, storedDocuments(t, conn, cfg))
	// A page archived after the migration, by today's writer, reads the same.
	var later archive.Rows
	p := all.Pages[0]
	p.ReceivedAt = p.ReceivedAt.Add(time.Hour)
	later.Pages = append(later.Pages, p)
	if err := newWriter(t, conn, cfg).Insert(ctx, later); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, all.Pages, storedDocuments(t, conn, cfg))
	// JSON functions over `document` read the spliced Document.
	var withMarkdown uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+cfg.Database+".pages FINAL WHERE JSONExtractString(document, 'markdown') = markdown AND markdown != ''").Scan(&withMarkdown); err != nil {
		t.Fatal(err)
	}
	if withMarkdown == 0 {
		t.Error("JSONExtractString(document, 'markdown') matches no page's markdown after the migration")
	}
}

// TestCutDocument pins the cutting rule on spellings the sender may use.
func TestCutDocument(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, raw, md, html, want string
	}{
		{"both", `{"markdown":"a\"b\\c\nd/é","html":"<p>x</p>","metadata":{}}`, "a\"b\\c\nd/é", "<p>x</p>", "{\"markdown\":\x01,\"html\":\x02,\"metadata\":{}}"},
		{"unicode escape kept", `{"markdown":"\u0041","html":"h"}`, "A", "h", "{\"markdown\":\"\\u0041\",\"html\":\x02}"},
		{"space after colon kept", `{"markdown": "m"}`, "m", "", `{"markdown": "m"}`},
		{"escaped slash kept", `{"html":"<\/p>"}`, "", "</p>", `{"html":"<\/p>"}`},
		{"no values", `{"metadata":{"url":"u"}}`, "", "", `{"metadata":{"url":"u"}}`},
		{"marker present", "{\"markdown\":\"m\",\"x\":\"\x01\"}", "m", "", "{\"markdown\":\"m\",\"x\":\"\x01\"}"},
	} {
		got := archive.CutDocument([]byte(c.raw), c.md, c.html)
		if !bytes.Equal(got, []byte(c.want)) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// TestCutDocumentEveryByte: the Go spelling that decides a cut and the SQL
// spelling that splices the value back agree on every byte value (but the
// two markers, which cannot be in a Document), invalid UTF-8 included; a
// disagreement would give back a different Document.
func TestCutDocumentEveryByte(t *testing.T) {
	t.Parallel()
	conn, cfg := startClickHouse(t)
	var all []byte
	for c := 0; c < 256; c++ {
		if c != 1 && c != 2 {
			all = append(all, byte(c))
		}
	}
	md := string(all) + "\u2028 \\\" / é"
	html := "<p>" + string(all[100:]) + "</p>"
	// Spelled as the cut expects, whatever a JSON encoder would do, so
	// that every byte is really cut and spliced back.
	spell := func(s string) string {
		r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\b", `\b`, "\f", `\f`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
		return `"` + r.Replace(s) + `"`
	}
	doc := `{"markdown":` + spell(md) + `,"html":` + spell(html) + `,"metadata":{"url":"https://example.com/bytes"}}`
	if cut := archive.CutDocument([]byte(doc), md, html); len(cut) > len(doc)-len(md)-len(html) {
		t.Fatalf("not cut: %q", cut)
	}
	p := archive.Page{CrawlID: uuid.New(), JobKind: "crawl", URL: "https://example.com/bytes", Origin: archive.OriginWebhook,
		Success: true, StatusCode: 200, Markdown: md, HTML: html, Document: []byte(doc), ReceivedAt: time.Now().UTC()}
	if err := newWriter(t, conn, cfg).Insert(context.Background(), archive.Rows{Pages: []archive.Page{p}}); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, []archive.Page{p}, storedDocuments(t, conn, cfg))
}
