package query

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
)

// DefaultFeedSettle is how far behind the present the changes feed stays
// when not configured (READER_FEED_SETTLE).
const DefaultFeedSettle = 10 * time.Second

// Kinds of a feed item.
const (
	FeedPage    = "page"
	FeedFailure = "failure"
)

// FeedItem is one row of the changes feed: a page version or a failure, as
// stored.
type FeedItem struct {
	// ID names the row: kind, job, URL and received time. A delivery the
	// sink stored twice (a redelivery after a crash, before ClickHouse
	// merged the copies) can appear twice with the same ID: consumers that
	// must see it once dedupe by ID.
	ID string
	// Kind is FeedPage or FeedFailure.
	Kind       string
	CrawlID    uuid.UUID
	JobKind    string
	URL        string
	StatusCode uint16
	// Title of a page; Error and Reason of a failure.
	Title      string
	Error      string
	Reason     string
	ReceivedAt time.Time
	// Change is a page's change class (page_changes, docs/search.md): ""
	// for a failure, and for a page that is no version (a failed fetch).
	// A version's class can change while jobs before it arrive late (a
	// backfill): it is the class when the page was read.
	Change string
	// InsertedAt is when the archive stored the row: the feed's order.
	InsertedAt time.Time
}

// FeedQuery reads the changes feed from a cursor.
type FeedQuery struct {
	// Cursor is the Next of the previous page; empty: from the start of the
	// archive.
	Cursor string
	// Limit is the page's size: 1 to 1000, 0 for 100.
	Limit int
}

// ChangesPage is a page of the feed. Next is always set: the position after
// the last item, or the same cursor when there was nothing new, so that a
// consumer polls with it until items come.
type ChangesPage struct {
	Items []FeedItem
	Next  string
}

// Changes reads the feed: every page version (a row of `pages`) and every
// failure (a row of `failures`) in the order the archive stored them
// (inserted_at, then kind, job, URL and received time), after the cursor.
//
// Resumable without gap or duplicate: each page starts strictly after the
// sort key of the previous page's last item, so a consumer that stops at
// any point and restarts from the last Next it kept sees each row once.
//
// A row stored "in the past". inserted_at is the ClickHouse server's clock
// when the row was written, so a row can become visible after rows with a
// later inserted_at: a Distributed table sending its queue to a shard late,
// two shards' clocks apart, an insert that took long. The feed therefore
// serves only rows settled for FeedSettle (inserted_at at least that far
// behind the server's now): a row that becomes visible within FeedSettle of
// its inserted_at is never skipped. Make it larger than a Distributed
// table's send delay and the clock skew of the shards.
func (r *Reader) Changes(ctx context.Context, q FeedQuery) (ChangesPage, error) {
	limit, err := pageSize(q.Limit, 100, 1000)
	if err != nil {
		return ChangesPage{}, err
	}
	settle := r.feedSettle
	if settle <= 0 {
		settle = DefaultFeedSettle
	}
	w := where{args: []any{clickhouse.Named("settle", uint64(settle.Milliseconds()))}}
	k := keyset{query: fingerprint("changes"), cursor: q.Cursor, limit: limit, what: "changes", ascending: true, follow: true,
		key: "(toUnixTimestamp64Milli(inserted_at), kind, crawl_id, url, rcv)", after: "({t:Int64}, {k:String}, {c:UUID}, {u:String}, {t2:Int64})",
		index: "inserted_at >= fromUnixTimestamp64Milli({t:Int64}, 'UTC')"}
	items, next, err := readPage(ctx, r, k, w, func(cond string) string {
		// Each table is read from the cursor on (inserted_at's minmax
		// index skips the rest) and cut at the limit before the two are
		// merged.
		part := func(kind, table, cols string) string {
			return "SELECT inserted_at, '" + kind + "' AS kind, crawl_id, url, toUnixTimestamp64Milli(received_at) AS rcv, " + cols +
				" FROM " + r.db + "." + table +
				" WHERE inserted_at <= now64(3) - toIntervalMillisecond({settle:UInt64}) AND " + cond +
				" ORDER BY inserted_at, kind, crawl_id, url, rcv LIMIT {limit:UInt64}"
		}
		return "SELECT * FROM (" +
			part(FeedPage, "pages", "toString(job_kind) AS job_kind, status_code, title, '' AS error, '' AS reason") +
			" UNION ALL " +
			part(FeedFailure, "failures", "toString(job_kind) AS job_kind, status_code, '' AS title, error, toString(reason) AS reason") +
			") ORDER BY inserted_at, kind, crawl_id, url, rcv"
	}, func(rows driver.Rows) (FeedItem, position, error) {
		var it FeedItem
		var rcv int64
		err := rows.Scan(&it.InsertedAt, &it.Kind, &it.CrawlID, &it.URL, &rcv, &it.JobKind, &it.StatusCode, &it.Title, &it.Error, &it.Reason)
		it.ReceivedAt = fromMillis(rcv)
		it.ID = fmt.Sprintf("%s:%s:%d:%s", it.Kind, it.CrawlID, rcv, it.URL)
		return it, position{Time: millis(it.InsertedAt), Kind: it.Kind, CrawlID: it.CrawlID.String(), URL: it.URL, Time2: rcv}, err
	})
	if err != nil {
		return ChangesPage{}, err
	}
	var urls []string
	for _, it := range items {
		if it.Kind == FeedPage {
			urls = append(urls, it.URL)
		}
	}
	classes, err := r.changeClasses(ctx, urls)
	if err != nil {
		return ChangesPage{}, err
	}
	for i, it := range items {
		if it.Kind == FeedPage {
			items[i].Change = classes[changeKey{it.CrawlID, it.URL}]
		}
	}
	return ChangesPage{Items: items, Next: next}, nil
}

func orNil(id string) string {
	if id == "" {
		return uuid.Nil.String()
	}
	return id
}
