package crawlapi

import (
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/events"
)

// A job's references are its kind's paths, the id escaped.
func TestJobRefs(t *testing.T) {
	t.Parallel()
	if JobRef(events.KindBatchScrape, "a/b") != "/v2/batch/scrape/a%2Fb" || ErrorsRef(events.KindCrawl, "c") != "/v2/crawl/c/errors" {
		t.Errorf("refs %s %s", JobRef(events.KindBatchScrape, "a/b"), ErrorsRef(events.KindCrawl, "c"))
	}
}
