package backfill

import (
	"context"
	"fmt"

	"github.com/crawlhouse/crawlhouse/internal/crawlapi"
	"github.com/crawlhouse/crawlhouse/internal/events"
)

// StatusPager reads a job's status pages and its errors; *crawlapi.Client
// implements it.
type StatusPager interface {
	// Get reads the page at ref, a reference (crawlapi.JobRef or a Ref).
	Get(ctx context.Context, crawlID, ref string) (*crawlapi.StatusPage, error)
	// Ref resolves the next link of the page read at current into the
	// reference to read next, or refuses it with crawlapi.ErrForeignNext.
	Ref(current, next string) (string, error)
	// Errors reads the job's errors endpoint at ref (crawlapi.ErrorsRef); a
	// lasting 404 is crawlapi.ErrNotFound.
	Errors(ctx context.Context, crawlID, ref string) (*crawlapi.ErrorsPage, error)
}

var _ StatusPager = (*crawlapi.Client)(nil)

// Chunk is one status page handed to a walk's callback.
type Chunk struct {
	// Docs are the chunk's documents (successful pages).
	Docs []events.Document
	// Status and Total are the crawl's, as of this chunk.
	Status string
	Total  int
	// Cursor is where a later walk resumes once this chunk is stored: the
	// reference of the next page, or "" when the crawl was read to its end.
	Cursor string
}

// Walk is how a walk ended.
type Walk struct {
	// Finished is true when the crawl is terminal and was read to the end;
	// false when it was still scraping (walk again later from Cursor).
	Finished bool
	// Status and Total are the crawl's at the last page read.
	Status string
	Total  int
	// Cursor is where the next walk starts ("" once Finished).
	Cursor string
	// Requests counts the pages read, Docs the documents in them.
	Requests int
	Docs     int
}

// Pager follows a crawl's next links.
type Pager struct {
	api StatusPager
	// maxRequests bounds one walk, so a server that answers next forever
	// (with data) cannot keep a backfill busy without end.
	maxRequests int
}

// NewPager returns a Pager reading through api; maxRequests bounds the
// pages of one walk (0: 100000, i.e. ten million documents).
func NewPager(api StatusPager, maxRequests int) *Pager {
	if maxRequests <= 0 {
		maxRequests = 100000
	}
	return &Pager{api: api, maxRequests: maxRequests}
}

// Walk is WalkJob of a crawl.
func (p *Pager) Walk(ctx context.Context, crawlID, cursor string, fn func(context.Context, Chunk) error) (Walk, error) {
	return p.WalkJob(ctx, events.KindCrawl, crawlID, cursor, fn)
}

// WalkJob reads the job of kind (events.KindCrawl or
// events.KindBatchScrape: which status endpoint) from cursor ("" = the
// first page) and calls fn with each page, in order; fn's error stops the
// walk. The walk ends:
//   - Finished, when next is absent or null, or when the status is
//     terminal and the page is empty or the cursor reached total;
//   - not Finished, when the crawl is scraping and the page is empty: the
//     API has nothing more for now (its next stays present); walk again
//     later from the returned Cursor;
//   - with ErrRunaway when a next repeats the reference just read while
//     data is non-empty, or after maxRequests pages;
//   - with crawlapi.ErrForeignNext when next points to another host, after
//     fn got the page that carried it (Cursor stays at that page);
//   - with the client's errors (crawlapi.ErrUnauthorized, ErrNotFound,
//     ErrUnavailable) otherwise.
//
// fn sees a chunk even when it is empty, so that its Cursor can be saved.
func (p *Pager) WalkJob(ctx context.Context, kind, crawlID, cursor string, fn func(context.Context, Chunk) error) (Walk, error) {
	ref := cursor
	if ref == "" {
		ref = crawlapi.JobRef(kind, crawlID)
	}
	var w Walk
	w.Cursor = cursor
	for {
		if w.Requests >= p.maxRequests {
			return w, fmt.Errorf("%w: %d pages read in one walk", ErrRunaway, w.Requests)
		}
		page, err := p.api.Get(ctx, crawlID, ref)
		if err != nil {
			return w, err
		}
		w.Requests++
		w.Docs += len(page.Data)
		w.Status, w.Total = page.Status, page.Total

		next := ""
		if page.Next != "" {
			if next, err = p.api.Ref(ref, page.Next); err != nil {
				// The page itself came from our host: keep its documents,
				// then stop where it began.
				if ferr := fn(ctx, Chunk{Docs: page.Data, Status: page.Status, Total: page.Total, Cursor: ref}); ferr != nil {
					return w, ferr
				}
				w.Cursor = ref
				return w, err
			}
		}
		// Progress against total: the skip of next (it counts failed pages
		// too, as total does), else the documents read when the walk began
		// at the first page.
		read := crawlapi.SkipOf(next)
		if read < 0 && cursor == "" {
			read = w.Docs
		}
		terminal := crawlapi.Terminal(page.Status)
		end := next == "" || (terminal && (len(page.Data) == 0 || read >= page.Total))
		wait := !end && len(page.Data) == 0
		if !end && !wait && next == ref {
			return w, fmt.Errorf("%w: next %s repeats the page just read", ErrRunaway, next)
		}

		c := Chunk{Docs: page.Data, Status: page.Status, Total: page.Total, Cursor: next}
		if end {
			c.Cursor = ""
			if !terminal {
				// No next while not terminal: nothing to read for now;
				// the next walk re-reads this page (stored pages are
				// skipped) and goes on from there.
				c.Cursor = ref
			}
		}
		if err := fn(ctx, c); err != nil {
			return w, err
		}
		w.Cursor = c.Cursor
		if end || wait {
			w.Finished = end && terminal
			return w, nil
		}
		ref = next
	}
}
