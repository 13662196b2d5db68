package backfill

import (
	"fmt"
	"strings"
)

// Job kinds. The crawl API runs two kinds of job whose pages backfill
// recovers: crawls, whose Job status is GET /v2/crawl/{id}, and batch
// scrapes, at GET /v2/batch/scrape/{id}. A delivery's event type names its
// job's kind in its prefix (crawl.page, batch_scrape.page), which is how
// the backfill learns it; the kind is kept in the job's Record so that a
// restart still reads the right endpoint.
const (
	KindCrawl       = "crawl"
	KindBatchScrape = "batch_scrape"
)

// KindOf returns the kind an event type's prefix names ("crawl.page" →
// KindCrawl, "batch_scrape.completed" → KindBatchScrape), or "" for any
// other type.
func KindOf(eventType string) string {
	prefix, _, ok := strings.Cut(eventType, ".")
	if ok && (prefix == KindCrawl || prefix == KindBatchScrape) {
		return prefix
	}
	return ""
}

// ParseKind checks a kind given by an operator (`sink backfill -kind`);
// "" means unknown, which Reconcile resolves by trying a crawl, then a
// batch scrape.
func ParseKind(s string) (string, error) {
	switch s = strings.TrimSpace(strings.ToLower(s)); s {
	case "", KindCrawl, KindBatchScrape:
		return s, nil
	case "batch", "batch-scrape":
		return KindBatchScrape, nil
	}
	return "", fmt.Errorf("job kind %q is neither %s nor %s", s, KindCrawl, KindBatchScrape)
}

// terminalEvent reports whether an event type ends its job: completed,
// failed or cancelled, of a crawl or a batch scrape. The job can then be
// reconciled at once instead of after a quiet period.
func terminalEvent(eventType string) bool {
	if KindOf(eventType) == "" {
		return false
	}
	_, event, _ := strings.Cut(eventType, ".")
	return event == "completed" || event == "failed" || event == "cancelled"
}
