package schema_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/google/uuid"
)

// storedDocuments reads back, per (crawl, url), the Document the archive
// gives (`document`) and how many bytes of it are stored (`document_cut`).
func storedDocuments(t *testing.T, conn driver.Conn, cfg archive.Config) map[string]stored {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT toString(crawl_id), url, document, document_cut, markdown, html, document_meta FROM "+cfg.Database+".pages FINAL")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]stored{}
	for rows.Next() {
		var crawl, url string
		var s stored
		if err := rows.Scan(&crawl, &url, &s.document, &s.cut, &s.markdown, &s.html, &s.meta); err != nil {
			t.Fatal(err)
		}
		got[crawl+" "+url] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// stored is what one page reads back as.
type stored struct{ document, cut, markdown, html, meta string }

// checkOnce asserts what users rely on: every page's Document, markdown and
// html come back byte for byte as received, and the markdown and html are
// stored once (cut out of the stored Document).
func checkOnce(t *testing.T, pages []archive.Page, got map[string]stored) {
	t.Helper()
	cut := 0
	for _, p := range pages {
		g, ok := got[p.CrawlID.String()+" "+p.URL]
		if !ok {
			t.Errorf("%s: not archived", p.URL)
			continue
		}
		if g.document != string(p.Document) {
			t.Errorf("%s: document read back differs from the Document received:\n got %.300s\nwant %.300s", p.URL, g.document, p.Document)
		}
		if g.markdown != p.Markdown || g.html != p.HTML {
			t.Errorf("%s: markdown (%d bytes) or html (%d bytes) read back differ from the %d and %d received", p.URL, len(g.markdown), len(g.html), len(p.Markdown), len(p.HTML))
		}
		// Cut out, each value leaves at most a one-byte marker behind its
		// key, and its JSON spelling is at least its length plus quotes.
		if max := len(p.Document) - len(p.Markdown) - len(p.HTML); len(g.cut) > max {
			t.Errorf("%s: %d bytes of document stored, want at most %d (markdown and html cut out)", p.URL, len(g.cut), max)
		}
		if len(g.cut) < len(p.Document) {
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
	conn, cfg := archivetest.StartClickHouse(t)
	all := archivetest.RealDeliveries(t)
	if err := archivetest.NewStore(t, conn, cfg).Insert(context.Background(), all); err != nil {
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
	conn, cfg := archivetest.StartClickHouse(t) // a database of its own, migrated to the end
	ctx := context.Background()
	archivetest.PagesBefore(t, conn, cfg, 8)
	all := archivetest.RealDeliveries(t)
	insertTheOldWay(t, conn, cfg, all.Pages, "document", func(p archive.Page) string { return string(p.Document) })
	archivetest.MigrateApplies(t, conn, cfg, "0008", "0009", "0010", "0011")
	checkOnce(t, all.Pages, storedDocuments(t, conn, cfg))
	// A page archived after the migration, by today's writer, reads the same.
	var later archive.Rows
	p := all.Pages[0]
	p.ReceivedAt = p.ReceivedAt.Add(time.Hour)
	later.Pages = append(later.Pages, p)
	if err := archivetest.NewStore(t, conn, cfg).Insert(ctx, later); err != nil {
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

// insertTheOldWay archives pages as the sink did while markdown and html
// had columns of their own, the Document in docColumn as doc spells it.
func insertTheOldWay(t *testing.T, conn driver.Conn, cfg archive.Config, pages []archive.Page, docColumn string, doc func(archive.Page) string) {
	t.Helper()
	batch, err := conn.PrepareBatch(context.Background(), "INSERT INTO "+cfg.Database+".pages (crawl_id, job_kind, url, scrape_id, webhook_id, origin, success, status_code, title, markdown, html, error, "+docColumn+", webhook_metadata, received_at)")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if err := batch.Append(p.CrawlID, p.JobKind, p.URL, p.ScrapeID, p.WebhookID, p.Origin, p.Success, p.StatusCode,
			p.Title, p.Markdown, p.HTML, p.Error, doc(p), string(p.WebhookMetadata), p.ReceivedAt); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateContentOnceExistingArchive fills an archive the way the sink did
// before markdown and html shared one column (both in their own columns, the
// Document cut), migrates it, and checks what users rely on: every page reads
// back byte for byte, the old columns are gone (only aliases remain), and a
// token search uses the rebuilt text index and finds what a scan finds.
func TestMigrateContentOnceExistingArchive(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	ctx := context.Background()
	archivetest.PagesBefore(t, conn, cfg, 9)
	all := archivetest.RealDeliveries(t)
	insertTheOldWay(t, conn, cfg, all.Pages, "document_cut", func(p archive.Page) string {
		return string(archive.CutDocument(p.Document, p.Markdown, p.HTML))
	})
	archivetest.MigrateApplies(t, conn, cfg, "0009", "0010", "0011")
	checkOnce(t, all.Pages, storedDocuments(t, conn, cfg))

	var kinds []string
	rows, err := conn.Query(ctx, "SELECT name || ' ' || default_kind FROM system.columns WHERE database = ? AND table = 'pages' AND name IN ('markdown', 'html', 'content') ORDER BY name", cfg.Database)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, k)
	}
	rows.Close()
	if want := []string{"content ", "html ALIAS", "markdown ALIAS"}; !slices.Equal(kinds, want) {
		t.Errorf("columns %q, want %q", kinds, want)
	}

	// A word of the real pages, searched with the index and by scanning.
	word := ""
	for _, p := range all.Pages {
		for _, w := range strings.FieldsFunc(strings.ToLower(p.Markdown), func(r rune) bool { return r < 'a' || r > 'z' }) {
			if len(w) >= 6 && word == "" {
				word = w
			}
		}
	}
	if word == "" {
		t.Fatal("no word of six letters in the real pages")
	}
	q := "SELECT count() FROM " + cfg.Database + ".pages FINAL WHERE hasToken(markdown, '" + word + "')"
	var withIndex, scanning uint64
	if err := conn.QueryRow(ctx, q).Scan(&withIndex); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, q+" SETTINGS use_skip_indexes = 0").Scan(&scanning); err != nil {
		t.Fatal(err)
	}
	if withIndex == 0 || withIndex != scanning {
		t.Errorf("hasToken(markdown, %q): %d pages with the index, %d scanning", word, withIndex, scanning)
	}
	plan := explainIndexes(t, conn, q)
	if !strings.Contains(plan, "markdown_text") {
		t.Errorf("the search does not use the text index markdown_text:\n%s", plan)
	}
}

// explainIndexes returns EXPLAIN indexes = 1 of q.
func explainIndexes(t *testing.T, conn driver.Conn, q string) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "EXPLAIN indexes = 1 "+q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
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
	conn, cfg := archivetest.StartClickHouse(t)
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
	if err := archivetest.NewStore(t, conn, cfg).Insert(context.Background(), archive.Rows{Pages: []archive.Page{p}}); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, []archive.Page{p}, storedDocuments(t, conn, cfg))
}

// TestDocumentMetaRealDeliveries: document_meta, read from the stored cut
// alone, is every real Document with its markdown and html as empty strings
// (JSON-equal), so metadata queries get every other field without the text.
func TestDocumentMetaRealDeliveries(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	all := archivetest.RealDeliveries(t)
	if err := archivetest.NewStore(t, conn, cfg).Insert(context.Background(), all); err != nil {
		t.Fatal(err)
	}
	got := storedDocuments(t, conn, cfg)
	blanked := 0
	for _, p := range all.Pages {
		var want, have map[string]any
		if err := json.Unmarshal(p.Document, &want); err != nil {
			t.Fatalf("%s: the real Document is not JSON: %v", p.URL, err)
		}
		g, ok := got[p.CrawlID.String()+" "+p.URL]
		if !ok {
			t.Errorf("%s: not archived", p.URL)
			continue
		}
		meta := g.meta
		if err := json.Unmarshal([]byte(meta), &have); err != nil {
			t.Errorf("%s: document_meta is not JSON: %v\n%.300s", p.URL, err, meta)
			continue
		}
		for _, k := range []string{"markdown", "html"} {
			if v, ok := want[k].(string); ok && v != "" {
				want[k] = ""
				blanked++
			}
		}
		if !reflect.DeepEqual(want, have) {
			t.Errorf("%s: document_meta differs from the Document with markdown and html emptied:\n got %.300s", p.URL, meta)
		}
	}
	if blanked == 0 {
		t.Error("no real Document had markdown or html to leave out")
	}
}
