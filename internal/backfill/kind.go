package backfill

import (
	"fmt"
	"strings"

	"github.com/crawlhouse/crawlhouse/internal/events"
)

// ParseKind checks a kind given by an operator (`sink backfill -kind`);
// "" means unknown, which Reconcile resolves by trying a crawl, then a
// batch scrape. The kinds themselves are events.KindCrawl and
// events.KindBatchScrape; a job learns its kind from its deliveries'
// event types (events.KindOf) and keeps it in its Record, so that a
// restart still reads the right endpoint.
func ParseKind(s string) (string, error) {
	switch s = strings.TrimSpace(strings.ToLower(s)); s {
	case "", events.KindCrawl, events.KindBatchScrape:
		return s, nil
	case "batch", "batch-scrape":
		return events.KindBatchScrape, nil
	}
	return "", fmt.Errorf("job kind %q is neither %s nor %s", s, events.KindCrawl, events.KindBatchScrape)
}
