package query

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
)

// JobChanges is what one job changed against the jobs before it: the
// classes of its page versions (page_changes) and the URLs a complete job
// no longer found (page_removals).
type JobChanges struct {
	CrawlID string
	// Kind is the job's kind, Scope the scope its webhook metadata names
	// ("" when none).
	Kind  string
	Scope string
	// Complete reports whether the job ended complete (job_ends): only a
	// complete job, of a scope and under its limit, removes URLs by not
	// finding them.
	Complete bool
	// New, Changed, Same and Removed count the URLs of each class (Removed:
	// those answering 404 or 410 and those no longer found).
	New, Changed, Same, Removed uint64
	// ChangedURLs and RemovedURLs are the first changed and removed URLs in
	// URL order, at most ChangeQuery.MaxURLs of each; Changed and Removed
	// are their totals.
	ChangedURLs, RemovedURLs []string
}

// Something reports whether anything changed: a URL new, changed or
// removed.
func (c JobChanges) Something() bool { return c.New+c.Changed+c.Removed > 0 }

// ChangeQuery narrows JobChanges.
type ChangeQuery struct {
	// URLPatterns, when any, keeps only the URLs matching one of them: a
	// pattern is matched against the whole URL, * standing for any run of
	// characters (https://example.com/pricing*).
	URLPatterns []string
	// MaxURLs bounds ChangedURLs and RemovedURLs (at least 0, at most
	// 10000).
	MaxURLs int
}

// maxChangeURLs is the most URLs of one class JobChanges lists.
const maxChangeURLs = 10000

// JobChanges reads what job crawlID changed. Its versions are classed by
// page_changes read only for the URLs the job holds (the URL is
// page_versions' first key column, so the window reads those URLs'
// versions and no others), and its removals by job_removals, which reads
// only the job's pages and its predecessor's versions: both keep it fast on
// a large archive.
func (r *Reader) JobChanges(ctx context.Context, crawlID string, q ChangeQuery) (JobChanges, error) {
	id, err := uuid.Parse(crawlID)
	if err != nil {
		return JobChanges{}, fmt.Errorf("crawl id %q: %w", crawlID, err)
	}
	out := JobChanges{CrawlID: id.String()}
	where, args := urlPatterns(q.URLPatterns)
	// groupArraySorted takes no 0: one URL is read and dropped then.
	maxURLs := min(max(q.MaxURLs, 0), maxChangeURLs)
	query := fmt.Sprintf(`SELECT change, count(), groupArraySorted(%d)(url) FROM (
	SELECT url, change FROM %[2]s.page_changes
	WHERE crawl_id = ? AND url GLOBAL IN (SELECT url FROM %[2]s.page_versions WHERE crawl_id = ?)
	UNION ALL
	SELECT url, change FROM %[2]s.job_removals(crawl_id = ?)
) WHERE %s GROUP BY change`, max(maxURLs, 1), r.db, where)
	rows, err := r.conn.Query(ctx, query, append([]any{id, id, id.String()}, args...)...)
	if err != nil {
		return out, fmt.Errorf("changes of job %s: %w", crawlID, err)
	}
	defer rows.Close()
	var counts ChangeCounts
	for rows.Next() {
		var class string
		var n uint64
		var urls []string
		if err := rows.Scan(&class, &n, &urls); err != nil {
			return out, fmt.Errorf("changes of job %s: %w", crawlID, err)
		}
		urls = urls[:min(len(urls), maxURLs)]
		counts.set(class, n)
		switch class {
		case events.ChangeChanged:
			out.ChangedURLs = urls
		case events.ChangeRemoved:
			out.RemovedURLs = urls
		}
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("changes of job %s: %w", crawlID, err)
	}
	out.New, out.Changed, out.Same, out.Removed = counts.New, counts.Changed, counts.Same, counts.Removed
	// Its rows closed first: a query holds one of the read slots until
	// then (boundConn), and with READER_MAX_QUERIES=1 (the default) the
	// second query would find none and the read API answer busy.
	rows.Close()
	err = r.conn.QueryRow(ctx, `SELECT
	(SELECT ifNull(any(job_kind), '') FROM `+r.db+`.job_scopes WHERE crawl_id = ?),
	(SELECT ifNull(any(scope), '') FROM `+r.db+`.job_scopes WHERE crawl_id = ?),
	(SELECT ifNull(max(complete), false) FROM `+r.db+`.job_ends WHERE crawl_id = ?)`, id, id, id).Scan(&out.Kind, &out.Scope, &out.Complete)
	if err != nil {
		return out, fmt.Errorf("scope of job %s: %w", crawlID, err)
	}
	return out, nil
}

// ChangeCounts are a job's URLs by change class, as JobChanges counts
// them.
type ChangeCounts struct {
	New, Changed, Same, Removed uint64
}

// Counts are c's counts.
func (c JobChanges) Counts() ChangeCounts {
	return ChangeCounts{New: c.New, Changed: c.Changed, Same: c.Same, Removed: c.Removed}
}

// set sets the count of class to n.
func (c *ChangeCounts) set(class string, n uint64) {
	switch class {
	case events.ChangeNew:
		c.New = n
	case events.ChangeChanged:
		c.Changed = n
	case events.ChangeSame:
		c.Same = n
	case events.ChangeRemoved:
		c.Removed = n
	}
}

// MaxCountedJobs is the most jobs one JobsChangeCounts reads: a page of the
// jobs list.
const MaxCountedJobs = 100

// JobsChangeCounts counts the URLs of each of jobs (at most
// MaxCountedJobs) by class as JobChanges does, in one query: page_changes
// read for the jobs' URLs only, and each job's removals by job_removals,
// which reads only the job's pages and its predecessor's versions. A job
// with nothing classed is not in the answer.
func (r *Reader) JobsChangeCounts(ctx context.Context, jobs []uuid.UUID) (map[uuid.UUID]ChangeCounts, error) {
	out := make(map[uuid.UUID]ChangeCounts, len(jobs))
	if len(jobs) == 0 {
		return out, nil
	}
	if len(jobs) > MaxCountedJobs {
		return nil, invalid("jobs", "at most %d at once", MaxCountedJobs)
	}
	// The ids are parsed UUIDs: written into the query as they are.
	ids := make([]string, len(jobs))
	removals := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = "'" + j.String() + "'"
		removals[i] = fmt.Sprintf("SELECT crawl_id, change FROM %s.job_removals(crawl_id = %s)", r.db, ids[i])
	}
	in := strings.Join(ids, ", ")
	query := fmt.Sprintf(`SELECT crawl_id, change, count() FROM (
	SELECT crawl_id, change FROM %[1]s.page_changes
	WHERE crawl_id IN (%[2]s) AND url GLOBAL IN (SELECT url FROM %[1]s.page_versions WHERE crawl_id IN (%[2]s))
	UNION ALL %[3]s
) GROUP BY crawl_id, change`, r.db, in, strings.Join(removals, " UNION ALL "))
	rows, err := r.conn.Query(ctx, query)
	if err != nil {
		return nil, readErr("changes of the jobs", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var class string
		var n uint64
		if err := rows.Scan(&id, &class, &n); err != nil {
			return nil, readErr("changes of the jobs", err)
		}
		c := out[id]
		c.set(class, n)
		out[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, readErr("changes of the jobs", err)
	}
	return out, nil
}

// urlPatterns is the condition keeping the URLs that match one of patterns
// (all when there are none), as LIKE patterns passed as parameters.
func urlPatterns(patterns []string) (string, []any) {
	if len(patterns) == 0 {
		return "1", nil
	}
	escape := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`, `*`, `%`)
	conds := make([]string, len(patterns))
	args := make([]any, len(patterns))
	for i, p := range patterns {
		conds[i] = "url LIKE ?"
		args[i] = escape.Replace(p)
	}
	return "(" + strings.Join(conds, " OR ") + ")", args
}

// RecentJob is a job's row of crawls, as far as change summaries need it.
type RecentJob struct {
	CrawlID        string
	LastDeliveryAt time.Time
	// LastEvent is its newest lifecycle event type (crawl.completed...),
	// BackfillState its backfill's newest state ("" when none).
	LastEvent     string
	BackfillState string
}

// RecentJobs returns the jobs with a delivery since since, newest first, at
// most limit of them: what a restarted sink looks at again for change
// summaries it may not have sent.
func (r *Reader) RecentJobs(ctx context.Context, since time.Time, limit int) ([]RecentJob, error) {
	rows, err := r.conn.Query(ctx, "SELECT toString(crawl_id), assumeNotNull(last_delivery_at), last_event, backfill_state FROM "+r.db+
		".crawls WHERE last_delivery_at >= ? ORDER BY last_delivery_at DESC LIMIT ?", since.UTC(), max(limit, 0))
	if err != nil {
		return nil, fmt.Errorf("recent jobs: %w", err)
	}
	defer rows.Close()
	var out []RecentJob
	for rows.Next() {
		var j RecentJob
		if err := rows.Scan(&j.CrawlID, &j.LastDeliveryAt, &j.LastEvent, &j.BackfillState); err != nil {
			return nil, fmt.Errorf("recent jobs: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("recent jobs: %w", err)
	}
	return out, nil
}
