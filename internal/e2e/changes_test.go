package e2e_test

import (
	"maps"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
)

// TestRecrawlChanges sends a crawl and then crawlsim's recrawl of it (one
// page edited, one reordered, one answering 404, one gone, one added)
// through the receiver and the sink, and reads each page's class from
// page_changes; then both crawls are sent again (the sender's replays) and
// the classes stay.
func TestRecrawlChanges(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, "")
	target := p.startReceiver(t, nil)
	p.startSink(t, nil)

	const earlierID = "3b0c1d2e-4f5a-4b6c-8d7e-9f0a1b2c3d4e"
	earlier, err := crawlsim.NewCrawl(crawlsim.Options{ID: earlierID, Pages: 10, PageBytes: 800, Seed: 26})
	if err != nil {
		t.Fatal(err)
	}
	later, err := crawlsim.NewCrawl(crawlsim.Options{Pages: 10, PageBytes: 800, Seed: 26,
		Recrawl: &crawlsim.Recrawl{Of: earlierID, Edited: 1, Reordered: 1, NotFound: 1, Gone: 1, Added: 1}})
	if err != nil {
		t.Fatal(err)
	}
	want := wantRecrawl()
	delete(want, "https://example.com/page/9")
	// page/9 is gone from the recrawl: no version, and crawlsim's default
	// webhook metadata names no scope, so it is not removed either.

	for round := range 2 {
		for _, c := range []*crawlsim.Crawl{earlier, later} {
			send(t, target, c)
			waitFor(t, time.Minute, "the crawl archived", func() bool {
				pages, err := p.tryPagesOf(c.ID)
				return err == nil && len(pages) == 10
			})
			// ClickHouse fills the views a moment after pages.
			waitFor(t, time.Minute, "the crawl's versions", func() bool { return len(p.classesOf(t, c.ID)) == 10 })
		}
		got := p.classesOf(t, later.ID)
		if !maps.Equal(got, want) {
			t.Errorf("round %d: the recrawl's classes %v, want %v", round+1, got, want)
		}
		for url, class := range p.classesOf(t, earlierID) {
			if class != "new" {
				t.Errorf("round %d: the first crawl's %s is %s, want new", round+1, url, class)
			}
		}
	}
}
