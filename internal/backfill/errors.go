package backfill

import "errors"

// Outcomes of a walk or a run that callers branch on. The crawl API's own
// (crawlapi.ErrUnauthorized, ErrNotFound, ErrForeignNext, ErrUnavailable)
// come through as they are.
var (
	// ErrRunaway: the API kept answering next links without progress or
	// beyond the page bound; the walk was stopped.
	ErrRunaway = errors.New("crawl API paging does not end")
	// ErrLeased: another replica holds the crawl's lease.
	ErrLeased = errors.New("crawl is being backfilled by another replica")
	// ErrLeaseLost: the lease expired and was taken over during a run; the
	// run stops without saving further progress.
	ErrLeaseLost = errors.New("backfill lease lost")
)
