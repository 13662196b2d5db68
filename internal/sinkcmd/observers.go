package sinkcmd

import (
	"github.com/crawlhouse/crawlhouse/internal/alert"
	"github.com/crawlhouse/crawlhouse/internal/backfill"
	"github.com/crawlhouse/crawlhouse/internal/changes"
	"github.com/crawlhouse/crawlhouse/internal/sink"
)

// alertObserver wakes the alerter for a delivery with failed pages.
type alertObserver struct{ a *alert.Alerter }

func (o alertObserver) Observe(c sink.Committed) {
	if c.FailedPages > 0 {
		o.a.Failed(c.CrawlID)
	}
}

// backfillObserver feeds the backfill scheduler every committed delivery:
// any restarts its crawl's quiet period, an end event triggers it now.
type backfillObserver struct{ s *backfill.Service }

func (o backfillObserver) Observe(c sink.Committed) { o.s.Observe(c.CrawlID, c.Type, c.ReceivedAt) }

// changesObserver feeds the change summaries every committed delivery: with
// the backfill off, a job's end event or its going quiet makes its summary
// due.
type changesObserver struct{ s *changes.Summarizer }

func (o changesObserver) Observe(c sink.Committed) { o.s.Observe(c.CrawlID, c.Type) }

var (
	_ sink.Observer = alertObserver{}
	_ sink.Observer = backfillObserver{}
	_ sink.Observer = changesObserver{}
)
