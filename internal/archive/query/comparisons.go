package query

import (
	"context"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"
)

// VersionKey names one version of a page: the job that archived it and its
// URL.
type VersionKey struct {
	CrawlID uuid.UUID
	URL     string
}

// Comparison is how a version compares with the version page_changes
// classes it against: what the crawl API's changeTracking object says of
// it (docs/read-api.md, "changeTracking").
type Comparison struct {
	// Change is new, changed, same or removed.
	Change string
	// PreviousCrawlID is the compared version's job, nil for new.
	PreviousCrawlID *uuid.UUID
	// PreviousReceivedAt is the compared version's time, zero for new (and
	// when the compared version is past the URL's newest maxHistory).
	PreviousReceivedAt time.Time
}

// MaxComparisons is the most versions one Comparisons call takes: a page
// of search hits.
const MaxComparisons = 100

// Comparisons reads the Comparison of each of keys (at most
// MaxComparisons) in one query on page_changes by URL, which reaches its
// table's key, at most the newest maxHistory versions of each URL (as a
// history). A key that is no version (a failed fetch other than 404 or
// 410) is not in the answer.
func (r *Reader) Comparisons(ctx context.Context, keys []VersionKey) (map[VersionKey]Comparison, error) {
	out := make(map[VersionKey]Comparison, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	if len(keys) > MaxComparisons {
		return nil, invalid("keys", "at most %d versions at once", MaxComparisons)
	}
	seen := map[string]bool{}
	urls := make([]string, 0, len(keys))
	for _, k := range keys {
		if !seen[k.URL] {
			seen[k.URL] = true
			urls = append(urls, k.URL)
		}
	}
	rows, err := r.conn.Query(ctx, "SELECT crawl_id, url, change, previous_crawl_id, received_at FROM "+r.db+
		".page_changes WHERE url IN {urls:Array(String)} ORDER BY url, job_started_at DESC, crawl_id DESC LIMIT {n:UInt64} BY url",
		clickhouse.Named("urls", urls), clickhouse.Named("n", uint64(maxHistory)))
	if err != nil {
		return nil, readErr("comparisons", err)
	}
	defer rows.Close()
	all := map[VersionKey]Comparison{}
	at := map[VersionKey]time.Time{}
	for rows.Next() {
		var k VersionKey
		var c Comparison
		var received time.Time
		if err := rows.Scan(&k.CrawlID, &k.URL, &c.Change, &c.PreviousCrawlID, &received); err != nil {
			return nil, readErr("comparisons", err)
		}
		all[k], at[k] = c, received
	}
	if err := rows.Err(); err != nil {
		return nil, readErr("comparisons", err)
	}
	for _, k := range keys {
		c, ok := all[k]
		if !ok {
			continue
		}
		if c.PreviousCrawlID != nil {
			c.PreviousReceivedAt = at[VersionKey{*c.PreviousCrawlID, k.URL}]
		}
		out[k] = c
	}
	return out, nil
}

// RemovedBy returns the job whose version of url job compared it with, when
// job removed url by absence (job_removals: a complete job of its scope no
// longer found it), and nil otherwise: that version is the URL's latest
// state for job.
func (r *Reader) RemovedBy(ctx context.Context, url string, job uuid.UUID) (*uuid.UUID, error) {
	if url == "" || len(url) > maxURL {
		return nil, invalid("url", "must be given, at most %d bytes", maxURL)
	}
	rows, err := r.conn.Query(ctx, "SELECT previous_crawl_id FROM "+r.db+".job_removals(crawl_id = ?) WHERE url = ? LIMIT 1", job.String(), url)
	if err != nil {
		return nil, readErr("removal", err)
	}
	defer rows.Close()
	var prev *uuid.UUID
	for rows.Next() {
		prev = new(uuid.UUID)
		if err := rows.Scan(prev); err != nil {
			return nil, readErr("removal", err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, readErr("removal", err)
	}
	return prev, nil
}
