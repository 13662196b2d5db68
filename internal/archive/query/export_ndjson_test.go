package query_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/google/uuid"
)

// TestExportNDJSONIsTheStoredDocument: the NDJSON export splices each
// Document from its stored parts in Go; every line must be byte for byte
// what the `document` column reads (and, for a Document the sink stored,
// what the crawl API sent). Real rows: Documents through the sink's insert
// path with every field, text with quotes, backslashes, line breaks,
// control characters and unicode, values spelled so they cannot be cut,
// html before markdown, a failed page, a page larger than one write and
// enough pages for many writes; and rows stored by hand with parts no
// Document leaves (a raw 0x02 in the markdown, markers missing, a
// markdown_bytes past the content), where the column's replaceOne rules
// decide.
func TestExportNDJSONIsTheStoredDocument(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	r := apiReader(t, conn, cfg, time.Second)
	ctx := context.Background()
	job := uuid.NewString()
	at := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)

	hostile := `Quotes \" and \\ backslash\nline two\r\n\ttab, \b\f unicode: é 日本語 🦀 end`
	docs := map[string]string{ // by URL
		"https://n.example/every-field": `{"markdown":"# Title\n\n` + hostile + `","summary":"sum \"q\"","html":"<p class=\"x\">` + hostile + `</p>",` +
			`"rawHtml":"<html><body><p>raw</p></body></html>","screenshot":"https://s.example/shot.png","links":["https://n.example/a","https://n.example/b"],` +
			`"actions":{"screenshots":["https://s.example/1.png"],"scrapes":[{"url":"https://n.example/","html":"<b>x</b>"}],"javascriptReturns":[{"type":"number","value":5}],"pdfs":[]},` +
			`"changeTracking":{"previousScrapeAt":"2026-11-20T10:00:00Z","changeStatus":"changed","visibility":"visible","diff":{"text":"- a\n+ b"},"json":{"price":{"previous":1,"current":2}}},` +
			`"warning":"slow \"site\"","metadata":{"title":"Every \"field\" é","description":"d","language":"fr","sourceURL":"https://n.example/every-field","url":"https://n.example/every-field",` +
			`"keywords":"a,b","ogLocaleAlternate":["de_DE"],"statusCode":200,"contentType":"text/html; charset=utf-8","scrapeId":"` + uuid.NewString() + `","ogTitle":"og"}}`,
		// Spelled otherwise than the column re-spells them (\u escapes,
		// \/): kept whole in document_cut.
		"https://n.example/spelled": `{"markdown":"caf\u00e9 \/ slash \u2028 \u0001 \u0002","html":"<p>caf\u00e9<\/p>","metadata":{"url":"https://n.example/spelled","statusCode":200}}`,
		// html before markdown, a space after a colon.
		"https://n.example/html-first": `{"html":"<h1>first</h1>\n","markdown": "second","metadata":{"url":"https://n.example/html-first","statusCode":200,"title":"\u0002"}}`,
		"https://n.example/empty":      `{"markdown":"","metadata":{"url":"https://n.example/empty","statusCode":404}}`,
		"https://n.example/large":      `{"markdown":"` + strings.Repeat(`big \"page\"\n`, 150_000) + `","html":"` + strings.Repeat("<p>é</p>", 200_000) + `","metadata":{"url":"https://n.example/large","statusCode":200}}`,
	}
	for i := range 200 {
		u := fmt.Sprintf("https://n.example/many/%03d", i)
		docs[u] = fmt.Sprintf(`{"markdown":"page %d\n%s","html":"<p>%s</p>","metadata":{"url":%q,"statusCode":200}}`, i, strings.Repeat(`text \"%d\" `, 800), strings.Repeat("ü", 3000), u)
	}
	for _, doc := range docs {
		body := `{"success":true,"type":"crawl.page","id":"` + job + `","webhookId":"` + uuid.NewString() + `","data":[` + doc + `]}`
		archivetest.InsertDelivery(t, w, body, at)
	}
	failed := `{"markdown":"","metadata":{"url":"https://n.example/failed","statusCode":500,"error":"boom"}}`
	archivetest.InsertDelivery(t, w, `{"success":false,"type":"crawl.page","id":"`+job+`","webhookId":"`+uuid.NewString()+`","error":"boom \"x\"","data":[`+failed+`]}`, at)
	docs["https://n.example/failed"] = failed

	// Parts no Document the sink cuts leaves, stored by hand.
	for _, row := range []struct{ url, content, cut string }{
		{"https://n.example/raw-02-in-markdown", "md \x02 inside<p>html</p>", `{"markdown":` + "\x01" + `,"html":` + "\x02" + `}`},
		{"https://n.example/no-markers", "text<p>x</p>", `{"markdown":"text"}`},
		{"https://n.example/html-marker-only", "text<p>x</p>", `{"html":` + "\x02" + `,"a":"` + "\x01" + `"}`},
	} {
		err := conn.Exec(ctx, "INSERT INTO "+cfg.Database+".pages (crawl_id, url, content, markdown_bytes, document_cut, received_at) VALUES (?, ?, ?, ?, ?, ?)",
			uuid.MustParse(job), row.url, row.content, uint32(len("md \x02 inside")), row.cut, at)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.Exec(ctx, "INSERT INTO "+cfg.Database+".pages (crawl_id, url, content, markdown_bytes, document_cut, received_at) VALUES (?, ?, ?, ?, ?, ?)",
		uuid.MustParse(job), "https://n.example/split-past-the-end", "short", uint32(1000), `{"markdown":`+"\x01"+`,"html":`+"\x02"+`}`, at); err != nil {
		t.Fatal(err)
	}

	// The sink cut the values of every Document that spells them as the
	// column re-spells them, so the splice is what is tested.
	var cutRows uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+cfg.Database+".pages WHERE crawl_id = ? AND position(document_cut, '\x01') > 0 AND position(document_cut, '\x02') > 0",
		uuid.MustParse(job)).Scan(&cutRows); err != nil {
		t.Fatal(err)
	}
	if want := uint64(200 + 3 + 2); cutRows != want { // many, every-field, html-first, large; two by hand
		var uncut []string
		rows, err := conn.Query(ctx, "SELECT url FROM "+cfg.Database+".pages WHERE crawl_id = ? AND NOT (position(document_cut, '\x01') > 0 AND position(document_cut, '\x02') > 0)", uuid.MustParse(job))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var u string
			_ = rows.Scan(&u)
			uncut = append(uncut, u)
		}
		t.Fatalf("%d rows hold both markers, want %d; not: %q", cutRows, want, uncut)
	}

	// What the `document` column reads, line by line.
	rows, err := conn.Query(ctx, "SELECT url, document FROM "+cfg.Database+".pages FINAL WHERE crawl_id = ? ORDER BY url", uuid.MustParse(job))
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	var urls []string
	for rows.Next() {
		var u, doc string
		if err := rows.Scan(&u, &doc); err != nil {
			t.Fatal(err)
		}
		if raw, ok := docs[u]; ok && doc != raw {
			t.Errorf("%s: the document column reads %.200q, the crawl API sent %.200q", u, doc, raw)
		}
		urls = append(urls, u)
		// A failed page's line carries its error: the delivery's, which
		// the crawl API sends beside the Document, or the archive's reason
		// for a page it counts as failed (events.Failure).
		switch u {
		case "https://n.example/failed":
			doc = `{"error":"boom \"x\"",` + strings.TrimPrefix(doc, "{")
		case "https://n.example/empty":
			doc = `{"error":"HTTP 404",` + strings.TrimPrefix(doc, "{")
		}
		want.WriteString(doc + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got := len(urls); got != len(docs)+4 {
		t.Fatalf("%d rows stored, want %d", got, len(docs)+4)
	}

	var got bytes.Buffer
	n, err := r.ExportNDJSON(ctx, job, query.NDJSONOptions{}, &got)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(got.Len()) {
		t.Errorf("counted %d bytes, wrote %d", n, got.Len())
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		gl, wl := strings.Split(got.String(), "\n"), strings.Split(want.String(), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("line %d (%s) differs:\n got %.300q\nwant %.300q", i+1, urls[min(i, len(urls)-1)], gl[i], wl[i])
			}
		}
		t.Fatalf("%d lines exported, want %d", len(gl), len(wl))
	}
}

// TestAppendDocumentAppends: AppendDocument keeps what b held and splices
// after it (the export gathers many Documents in one buffer).
func TestAppendDocumentAppends(t *testing.T) {
	t.Parallel()
	got := archive.AppendDocument([]byte("prefix \x02\n"), `{"markdown":`+"\x01"+`,"html":`+"\x02"+`}`, "a\"b<p>\n</p>", 3)
	if want := "prefix \x02\n" + `{"markdown":"a\"b","html":"<p>\n</p>"}`; string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
