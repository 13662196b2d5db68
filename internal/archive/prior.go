package archive

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"
)

// Prior is what the archive already holds of a failure about to be
// inserted, recorded before it was received.
//
// Only the body of a delivery is signed, without a time, so a captured
// delivery can be sent again long after the stream's duplicate window
// forgot it, and the receiver takes it for new. Its rows collapse with the
// first ones under FINAL, but a failure must not count, nor alert, a second
// time: a failure already recorded for its crawl and URL is not new,
// however late it comes. The archive is the record every sink replica
// shares and that outlives any of them, so it is what is asked.
type Prior uint8

const (
	// PriorNone: nothing earlier; a new failed page.
	PriorNone Prior = iota
	// PriorPage: a failure of the same crawl and URL was recorded earlier,
	// by another delivery or by the backfill. The row is inserted (it is
	// another delivery), but it is no new failed page.
	PriorPage
	// PriorDelivery: this very delivery (same crawl, webhook id and URL)
	// was recorded earlier: a replay, or the sender's retry beyond the
	// duplicate window. Its row is not inserted again, so the first
	// record's received_at stands (the table keeps the newest version of a
	// key, which would otherwise move the failure into the current alert
	// window).
	PriorDelivery
)

// PriorFailures says, for each of fs, what the failures table already
// holds of it from before its ReceivedAt (see Prior). A failure without a
// URL (a page event without a document) is only ever the same delivery:
// PriorDelivery or PriorNone. The same message delivered again by
// JetStream carries the same ReceivedAt, so it is not "earlier" and is
// inserted and counted as the first time: a sink that died between insert
// and ack has counted nothing yet.
func (l *Lookups) PriorFailures(ctx context.Context, fs []Failure) ([]Prior, error) {
	out := make([]Prior, len(fs))
	if len(fs) == 0 {
		return out, nil
	}
	type key struct {
		crawl   uuid.UUID
		webhook uuid.UUID
		url     string
	}
	firstOfURL := map[key]time.Time{}      // webhook zero: any delivery of the URL
	firstOfDelivery := map[key]time.Time{} // crawl, webhook and URL
	keep := func(m map[key]time.Time, k key, at time.Time) {
		if first, ok := m[k]; !ok || at.Before(first) {
			m[k] = at
		}
	}
	urls := map[uuid.UUID][]string{}
	seen := map[key]bool{}
	for _, f := range fs {
		k := key{crawl: f.CrawlID, url: f.URL}
		if !seen[k] {
			seen[k] = true
			urls[f.CrawlID] = append(urls[f.CrawlID], f.URL)
		}
	}
	for crawl, list := range urls {
		for chunk := range urlChunks(list) {
			rows, err := l.conn.Query(ctx,
				"SELECT url, webhook_id, min(received_at) FROM "+l.db+".failures WHERE crawl_id = {crawl:UUID} AND url IN {urls:Array(String)} GROUP BY url, webhook_id",
				clickhouse.Named("crawl", crawl.String()), clickhouse.Named("urls", chunk))
			if err != nil {
				return nil, fmt.Errorf("failures recorded for crawl %s: %w", crawl, err)
			}
			for rows.Next() {
				var (
					url     string
					webhook uuid.UUID
					at      time.Time
				)
				if err := rows.Scan(&url, &webhook, &at); err != nil {
					rows.Close()
					return nil, fmt.Errorf("failures recorded for crawl %s: %w", crawl, err)
				}
				keep(firstOfURL, key{crawl: crawl, url: url}, at)
				keep(firstOfDelivery, key{crawl: crawl, webhook: webhook, url: url}, at)
			}
			err = rows.Err()
			rows.Close()
			if err != nil {
				return nil, fmt.Errorf("failures recorded for crawl %s: %w", crawl, err)
			}
		}
	}
	for i, f := range fs {
		// received_at is stored to the millisecond.
		at := f.ReceivedAt.Truncate(time.Millisecond)
		earlier := func(m map[key]time.Time, k key) bool {
			first, ok := m[k]
			return ok && first.Before(at)
		}
		switch {
		case earlier(firstOfDelivery, key{crawl: f.CrawlID, webhook: f.WebhookID, url: f.URL}):
			out[i] = PriorDelivery
		case f.URL != "" && earlier(firstOfURL, key{crawl: f.CrawlID, url: f.URL}):
			out[i] = PriorPage
		}
	}
	return out, nil
}
