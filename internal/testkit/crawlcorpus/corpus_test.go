package crawlcorpus

import (
	"bytes"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/events"
)

// The benchmark's figures are only comparable between runs if the corpus is
// the same bytes for the same seed, and only meaningful if every delivery is
// one the receiver accepts and the sink archives as one page.
func TestCorpusDeterministicAndAccepted(t *testing.T) {
	a := New(7, 400, 4, 5, 0.2)
	b := New(7, 400, 4, 5, 0.2)
	if a.Len() != 400 {
		t.Fatalf("Len = %d, want 400", a.Len())
	}
	webhooks := map[string]bool{}
	urls := map[string]int{}
	for i := range a.Len() {
		da, db := a.Delivery(i), b.Delivery(i)
		if !bytes.Equal(da.Body, db.Body) || !da.ReceivedAt.Equal(db.ReceivedAt) {
			t.Fatalf("delivery %d differs between two corpora of the same seed", i)
		}
		if _, err := events.Validate(da.Body); err != nil {
			t.Fatalf("delivery %d refused by the receiver's validation: %v", i, err)
		}
		ev, err := events.DecodeAccepted(da.Body)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := archive.EventRows(ev, da.Body, da.ReceivedAt)
		if err != nil || len(rows.Pages) != 1 {
			t.Fatalf("delivery %d: %d page rows, err %v", i, len(rows.Pages), err)
		}
		p := rows.Pages[0]
		if n := len(p.Markdown); n < 2048 || n > 21*1024 {
			t.Errorf("delivery %d: markdown of %d bytes, want 2-20 KB", i, n)
		}
		if r := float64(len(p.HTML)) / float64(len(p.Markdown)); r < 1.9 || r > 4.2 {
			t.Errorf("delivery %d: html %.2f times the markdown, want 2-4", i, r)
		}
		if !strings.HasPrefix(p.URL, a.SitePrefix(da.Site)) || p.Title == "" || p.ScrapeID == "" {
			t.Errorf("delivery %d: url %q title %q scrapeId %q", i, p.URL, p.Title, p.ScrapeID)
		}
		if webhooks[ev.WebhookID] {
			t.Errorf("delivery %d repeats webhookId %s", i, ev.WebhookID)
		}
		webhooks[ev.WebhookID] = true
		urls[p.URL]++
	}
	// Each URL comes once per crawl round.
	if len(urls) != 400/5 {
		t.Errorf("%d distinct URLs, want %d", len(urls), 400/5)
	}
	for u, n := range urls {
		if n != 5 {
			t.Errorf("%s delivered %d times, want 5", u, n)
		}
	}
	if New(8, 400, 4, 5, 0.2).Delivery(0).Body == nil || bytes.Equal(New(8, 400, 4, 5, 0.2).Delivery(0).Body, a.Delivery(0).Body) {
		t.Error("another seed gave the same first delivery")
	}
}

// Pages that did not change between crawls are delivered with the same text
// (what storing each byte once would save); changed ones with new text.
func TestCorpusRecrawlsRepeatAndChange(t *testing.T) {
	c := New(1, 2000, 10, 2, 0.2)
	per := c.Sites * c.PagesPerSite
	same, changed := 0, 0
	for i := range per {
		first, _ := events.DecodeAccepted(c.Delivery(i).Body)
		second, _ := events.DecodeAccepted(c.Delivery(i + per).Body)
		if first.Data[0].Metadata.URL != second.Data[0].Metadata.URL {
			t.Fatalf("delivery %d and %d are not the same page", i, i+per)
		}
		if first.ID == second.ID {
			t.Fatalf("two rounds share crawl id %s", first.ID)
		}
		if first.Data[0].Markdown == second.Data[0].Markdown {
			same++
		} else {
			changed++
		}
	}
	if changed < per/10 || changed > per*3/10 {
		t.Errorf("%d of %d pages changed between crawls, want about 20%%", changed, per)
	}
	if same == 0 {
		t.Error("no page was delivered unchanged")
	}
}

// With Edits, a page that changed between crawls keeps most of its
// paragraphs (a slight edit, as most real ones are), and pages without
// HTML carry markdown alone of MinMarkdown to ten times it.
func TestCorpusEditsAndSizes(t *testing.T) {
	c := New(3, 2000, 10, 2, 0.2)
	c.Edits, c.HTML, c.MinMarkdown = true, false, 1024
	per := c.Sites * c.PagesPerSite
	changed := 0
	var kept, all int
	for i := range per {
		first, err := events.DecodeAccepted(c.Delivery(i).Body)
		if err != nil {
			t.Fatal(err)
		}
		second, _ := events.DecodeAccepted(c.Delivery(i + per).Body)
		a, b := first.Data[0], second.Data[0]
		if a.HTML != "" || b.HTML != "" {
			t.Fatalf("delivery %d carries html with HTML false", i)
		}
		if n := len(a.Markdown); n < 1024 || n > 11*1024 {
			t.Errorf("delivery %d: markdown of %d bytes, want 1-10 KB", i, n)
		}
		if a.Markdown == b.Markdown {
			continue
		}
		changed++
		before := map[string]bool{}
		for _, p := range strings.Split(a.Markdown, "\n\n") {
			before[p] = true
		}
		for _, p := range strings.Split(b.Markdown, "\n\n") {
			all++
			if before[p] {
				kept++
			}
		}
	}
	if changed < per/10 || changed > per*3/10 {
		t.Errorf("%d of %d pages changed between crawls, want about 20%%", changed, per)
	}
	if kept*2 < all {
		t.Errorf("the changed pages kept %d of %d paragraphs, want most", kept, all)
	}
}
