package sink

import "time"

// Observer is told of every delivery once its batch is committed and
// acked: the alerter counts failed pages, the backfill sees crawls going
// quiet or completing. Observe runs on the commit path, so it must not
// block.
type Observer interface {
	Observe(Committed)
}

// Committed is what an Observer learns of a committed delivery.
type Committed struct {
	CrawlID string
	// Type is the event type, e.g. "crawl.page".
	Type string
	// ReceivedAt is when the receiver took the delivery.
	ReceivedAt time.Time
	// FailedPages counts its new failed pages: not those a cancellation
	// left unscraped (no outage), nor failures of a crawl and URL the
	// archive already held (a replayed delivery).
	FailedPages int
}
