package archive

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/takedown"
)

// takedownFilter keeps rows that a takedown in force covers out of every
// insert of a Writer: a page removed on request does not come back through
// a replayed or redriven delivery nor through a backfill until the
// takedown is lifted.
//
// The takedowns are cached. Each insert first asks ClickHouse for the
// takedowns table's size and newest change (one row read from a table of a
// few rows; one query per batch, nothing per page) and reloads them only
// when those moved, so a takedown recorded before a batch's insert starts
// is applied to it. A batch whose insert had started when the takedown was
// recorded may still land after its rows were removed: `sink delete` waits
// for the inserts running when it recorded the takedown before it removes
// anything (Writer.WaitInserts). Per row the check is a map lookup, or
// nothing at all while no takedown is in force.
type takedownFilter struct {
	conn driver.Conn
	db   string

	mu      sync.Mutex
	loaded  bool
	rows    uint64
	changed time.Time
	set     *takedown.Set
}

// inForce returns the takedowns in force now.
func (f *takedownFilter) inForce(ctx context.Context) (*takedown.Set, error) {
	var n uint64
	var changed time.Time
	if err := f.conn.QueryRow(ctx, "SELECT count(), max(updated_at) FROM "+f.db+".takedowns").Scan(&n, &changed); err != nil {
		return nil, fmt.Errorf("read the takedowns in force: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loaded && n == f.rows && changed.Equal(f.changed) {
		return f.set, nil
	}
	rows, err := f.conn.Query(ctx, "SELECT selector, value FROM "+f.db+".takedowns FINAL WHERE lifted_at IS NULL")
	if err != nil {
		return nil, fmt.Errorf("read the takedowns in force: %w", err)
	}
	defer rows.Close()
	var sels []takedown.Selector
	for rows.Next() {
		var kind, value string
		if err := rows.Scan(&kind, &value); err != nil {
			return nil, fmt.Errorf("read the takedowns in force: %w", err)
		}
		sels = append(sels, takedown.Selector{Kind: takedown.Kind(kind), Value: value})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the takedowns in force: %w", err)
	}
	f.loaded, f.rows, f.changed, f.set = true, n, changed, takedown.NewSet(sels)
	return f.set, nil
}

// filter returns rows without the rows the takedowns in force cover.
func (f *takedownFilter) filter(ctx context.Context, rows Rows) (Rows, error) {
	if len(rows.Pages)+len(rows.Failures)+len(rows.CrawlEvents)+len(rows.RawEvents)+len(rows.MonitorPages) == 0 {
		return rows, nil
	}
	set, err := f.inForce(ctx)
	if err != nil || set.Empty() {
		return rows, err
	}
	rows.Pages = slices.DeleteFunc(slices.Clone(rows.Pages), func(p Page) bool { return set.Covers(p.CrawlID.String(), p.URL) })
	rows.Failures = slices.DeleteFunc(slices.Clone(rows.Failures), func(x Failure) bool { return set.Covers(x.CrawlID.String(), x.URL) })
	rows.CrawlEvents = slices.DeleteFunc(slices.Clone(rows.CrawlEvents), func(e CrawlEvent) bool { return set.Covers(e.CrawlID.String(), "") })
	rows.RawEvents = slices.DeleteFunc(slices.Clone(rows.RawEvents), func(e RawEvent) bool { return set.CoversBody(e.JobID, e.Event) })
	rows.MonitorPages = slices.DeleteFunc(slices.Clone(rows.MonitorPages), func(p MonitorPage) bool { return set.Covers("", p.URL) })
	return rows, nil
}
