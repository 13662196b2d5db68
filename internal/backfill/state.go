package backfill

import (
	"context"
	"time"
)

// Backfill states of a crawl, as kept in the StateStore and mirrored to the
// archive's crawls table (archive.Writer.SetBackfillState): the one
// definition of these words.
const (
	// StatePending: seen or triggered, not reconciled yet.
	StatePending = "pending"
	// StateRunning: a replica holds the lease and is reading the crawl.
	StateRunning = "running"
	// StateScraping: reconciled as far as the API had results; the crawl
	// was still scraping, so it is revisited at DueAt.
	StateScraping = "scraping"
	// StateDone: the crawl is terminal and was read to its end.
	StateDone = "done"
	// StateExpired: the API no longer knows the crawl (404 that persisted).
	StateExpired = "expired"
	// StateDenied: the API refused the key (401/403).
	StateDenied = "denied"
	// StateFailed: the last run failed otherwise (API unavailable, archive
	// error, foreign next…); retried at DueAt.
	StateFailed = "failed"
)

// Final reports whether a state needs no further automatic run. An explicit
// run (sink backfill <id>) still reconciles such a crawl again.
func Final(state string) bool {
	return state == StateDone || state == StateExpired || state == StateDenied
}

// Record is what survives a restart about one job's backfill (a crawl or
// a batch scrape; the key is the job id either way).
type Record struct {
	CrawlID string `json:"crawlId"`
	// Kind is the job's kind (events.KindCrawl, events.KindBatchScrape),
	// learned from its deliveries' event types or from the endpoint that
	// answered; "" when not known yet (then a run tries a crawl, then a
	// batch scrape).
	Kind  string `json:"kind,omitempty"`
	State string `json:"state"`
	// Cursor is where the next run resumes (a status page reference);
	// empty: from the first page.
	Cursor string `json:"cursor,omitempty"`
	// Fetched, Inserted and Present count documents over all runs: read
	// from the API, archived by backfill, already in the archive.
	Fetched  int64 `json:"fetched"`
	Inserted int64 `json:"inserted"`
	Present  int64 `json:"present"`
	// Runs counts the runs started.
	Runs int `json:"runs"`
	// FailuresRecorded counts, over all runs, the failed scrapes the errors
	// endpoint listed that the archive lacked and that were recorded;
	// RobotsBlocked is how many robots-blocked URLs it listed last.
	FailuresRecorded int64 `json:"failuresRecorded,omitempty"`
	RobotsBlocked    int   `json:"robotsBlocked,omitempty"`
	// APIStatus and Total are the crawl's as last read.
	APIStatus string `json:"apiStatus,omitempty"`
	Total     int    `json:"total,omitempty"`
	// LastError is the error that ended the last run, if any.
	LastError string `json:"lastError,omitempty"`
	// Failures counts the runs that failed in a row; the retry wait grows
	// with it.
	Failures int `json:"failures,omitempty"`
	// DueAt is when the scheduler should run it next (zero: when it is
	// triggered).
	DueAt     time.Time `json:"dueAt,omitzero"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Owner and LeaseUntil are the lease: while LeaseUntil is in the future,
	// only Owner may run the crawl.
	Owner      string    `json:"owner,omitempty"`
	LeaseUntil time.Time `json:"leaseUntil,omitzero"`
}

// Lease is the right to run one crawl's backfill, held until Release or
// until it expires without being renewed by Save.
type Lease struct {
	CrawlID string
	Owner   string
	// Revision is the record's revision when the lease was last written;
	// every write is a compare-and-set on it.
	Revision uint64
}

// StateStore keeps Records across restarts and hands out leases so that two
// replicas never run the same crawl at once. KVStore implements it.
type StateStore interface {
	// Get returns the crawl's record; ok is false when there is none.
	Get(ctx context.Context, crawlID string) (rec Record, ok bool, err error)
	// Acquire takes the crawl's lease for ttl, creating the record when
	// absent. It returns ErrLeased when another owner holds an unexpired
	// lease.
	Acquire(ctx context.Context, crawlID, owner string, ttl time.Duration) (*Lease, Record, error)
	// Save writes rec under the lease and renews it for ttl. It returns
	// ErrLeaseLost when the record changed since (the lease expired and was
	// taken).
	Save(ctx context.Context, l *Lease, rec Record, ttl time.Duration) error
	// Release writes rec and gives the lease up.
	Release(ctx context.Context, l *Lease, rec Record) error
	// Touch creates a pending record of a job of kind ("" if unknown) due
	// at due when the job has none. An existing record is left alone: it
	// may be leased, and a run given the kind records it.
	Touch(ctx context.Context, crawlID, kind string, due time.Time) error
	// List returns every record (for the scheduler after a restart).
	List(ctx context.Context) ([]Record, error)
}
