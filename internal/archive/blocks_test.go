package archive_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/google/uuid"
)

// TestLargeInsertIsOnePart: an insert larger than the client's block
// (the Writer sends it as blocks of about a MB, so that its buffers stay
// bounded whatever the batch) is still one part of pages, every row whole,
// its markdown and its html (joined in one buffer the Writer reuses row
// after row) its own:
// ClickHouse squashes the blocks of one insert, and fewer, larger parts
// are what the sink's batches are for (docs/benchmarks.md, "Sink").
func TestLargeInsertIsOnePart(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w, err := archive.NewStore(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Merges stopped: a part count of 1 is the insert's, not a merge's.
	if err := conn.Exec(ctx, "SYSTEM STOP MERGES "+cfg.Database+".pages"); err != nil {
		t.Fatal(err)
	}
	const n = 60 // 60 pages of 400 kB: 24 MB, several blocks
	crawl := uuid.New()
	var rows archive.Rows
	for i := range n {
		md := fmt.Sprintf("page %d ", i) + strings.Repeat(fmt.Sprintf("word%d ", i), 400<<10/7)
		var html string
		if i%2 == 1 { // half the pages with html, of other sizes than their neighbours'
			html = "<p>" + strings.Repeat(fmt.Sprintf("tag%d ", i), (i%5+1)*(20<<10)/7) + "</p>"
		}
		rows.Pages = append(rows.Pages, archive.Page{CrawlID: crawl, URL: fmt.Sprintf("https://blocks.test/%d", i),
			WebhookID: uuid.New(), Origin: archive.OriginWebhook, Success: true, StatusCode: 200, Markdown: md, HTML: html,
			ReceivedAt: time.Date(2026, 11, 29, 0, 0, i, 0, time.UTC)})
	}
	if err := w.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	var parts uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.parts WHERE database = ? AND table = 'pages' AND active", cfg.Database).Scan(&parts); err != nil {
		t.Fatal(err)
	}
	if parts != 1 {
		t.Errorf("one insert of %d pages made %d parts, want 1", n, parts)
	}
	got, err := conn.Query(ctx, "SELECT url, markdown, html FROM "+cfg.Database+".pages ORDER BY received_at")
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	i := 0
	for ; got.Next(); i++ {
		var url, md, html string
		if err := got.Scan(&url, &md, &html); err != nil {
			t.Fatal(err)
		}
		if want := rows.Pages[min(i, n-1)]; i < n && (url != want.URL || md != want.Markdown || html != want.HTML) {
			t.Errorf("row %d: %s with %d bytes of markdown and %d of html, want %s with %d and %d", i, url, len(md), len(html), want.URL, len(want.Markdown), len(want.HTML))
		}
	}
	if i != n {
		t.Errorf("%d pages stored, want %d", i, n)
	}
}
