package archive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/takedown"
	"github.com/google/uuid"
)

// Takedown is one request to remove content and its audit record: what it
// selected, who asked and why, when, and how many rows or stored
// deliveries it removed from each table and stream. It holds no content.
type Takedown struct {
	ID          uuid.UUID
	Selector    takedown.Selector
	Reason      string
	RequestedBy string
	CreatedAt   time.Time
	// Deleted counts what was removed, by table ("pages") or stream
	// ("stream CRAWL_DLQ").
	Deleted map[string]uint64
	// LiftedAt is set once the takedown was lifted: what it selected may be
	// archived again.
	LiftedAt   *time.Time
	LiftedBy   string
	LiftReason string
}

// ErrTakedownNotFound is returned for a takedown id the archive has no
// record of.
var ErrTakedownNotFound = errors.New("no such takedown")

const takedownColumns = "id, selector, value, reason, requested_by, created_at, deleted, lifted_at, lifted_by, lift_reason, updated_at"

// RecordTakedown writes t's audit record (a new version of it when t.ID
// exists: a lift, or the counts once the rows are gone). The write path's
// filter reads the record: from the moment it is written, no insert of
// this archive's writers adds a row t covers.
func (w *Writer) RecordTakedown(ctx context.Context, t Takedown) error {
	now := w.now().UTC()
	return w.send(ctx, "takedowns", takedownColumns, 1, func(b driver.Batch, _ int) error {
		deleted := t.Deleted
		if deleted == nil {
			deleted = map[string]uint64{}
		}
		return b.Append(t.ID, string(t.Selector.Kind), t.Selector.Value, t.Reason, t.RequestedBy, t.CreatedAt,
			deleted, t.LiftedAt, t.LiftedBy, t.LiftReason, now)
	})
}

// Takedowns returns every takedown recorded, the newest first.
func (r *Reader) Takedowns(ctx context.Context) ([]Takedown, error) {
	return r.takedowns(ctx, "")
}

// Takedown returns the takedown id, or ErrTakedownNotFound.
func (r *Reader) Takedown(ctx context.Context, id uuid.UUID) (Takedown, error) {
	ts, err := r.takedowns(ctx, "WHERE id = ?", id)
	if err != nil {
		return Takedown{}, err
	}
	if len(ts) == 0 {
		return Takedown{}, fmt.Errorf("%w: %s", ErrTakedownNotFound, id)
	}
	return ts[0], nil
}

func (r *Reader) takedowns(ctx context.Context, where string, args ...any) ([]Takedown, error) {
	rows, err := r.conn.Query(ctx, "SELECT id, selector, value, reason, requested_by, created_at, deleted, lifted_at, lifted_by, lift_reason FROM "+
		r.db+".takedowns FINAL "+where+" ORDER BY created_at DESC, id", args...)
	if err != nil {
		return nil, fmt.Errorf("read takedowns: %w", err)
	}
	defer rows.Close()
	var out []Takedown
	for rows.Next() {
		var t Takedown
		var kind string
		if err := rows.Scan(&t.ID, &kind, &t.Selector.Value, &t.Reason, &t.RequestedBy, &t.CreatedAt, &t.Deleted, &t.LiftedAt, &t.LiftedBy, &t.LiftReason); err != nil {
			return nil, fmt.Errorf("read takedowns: %w", err)
		}
		t.Selector.Kind = takedown.Kind(kind)
		out = append(out, t)
	}
	return out, rows.Err()
}

// purgeTarget is a table rows are removed from and how a selector names
// its rows there: the URL column ("" when the table has none), and the job
// column and its type.
type purgeTarget struct {
	table, url, job string
	jobIsUUID       bool
	// urlIn is an expression of the row's URLs, for a table that holds
	// them inside a body (events): a row matches when one of them does.
	urlIn string
}

// purgeTargets are the tables a takedown removes rows from: the pages and
// their failures, the change records (page_versions, and monitor checks'
// per-URL rows), the URLs robots.txt blocked, the raw events and a job's
// lifecycle events. The per-job aggregates (crawl_stats: counts, when the
// job started, the webhook metadata the team set) hold no content and are
// left: a job's counts stay what they were.
var purgeTargets = []purgeTarget{
	{table: "pages", url: "url", job: "crawl_id", jobIsUUID: true},
	{table: "failures", url: "url", job: "crawl_id", jobIsUUID: true},
	{table: "page_versions", url: "url", job: "crawl_id", jobIsUUID: true},
	{table: "blocked_urls", url: "url", job: "crawl_id", jobIsUUID: true},
	{table: "monitor_pages", url: "url"},
	{table: "events", job: "job_id", urlIn: `extractAll(event, '"(https?://[^"]*)"')`},
	{table: "crawl_events", job: "crawl_id", jobIsUUID: true},
}

// where is the condition selecting sel's rows of the target, with one
// placeholder for sel.Value; "" when sel cannot name rows there.
func (p purgeTarget) where(sel takedown.Selector) string {
	if sel.Kind == takedown.KindJob {
		switch {
		case p.job == "":
			return ""
		case p.jobIsUUID:
			return p.job + " = toUUID(?)"
		}
		return p.job + " = ?"
	}
	var match func(col string) string
	switch sel.Kind {
	case takedown.KindURL:
		match = func(col string) string { return col + " = ?" }
	case takedown.KindPrefix:
		match = func(col string) string { return "startsWith(" + col + ", ?)" }
	case takedown.KindHost:
		match = func(col string) string { return "domain(" + col + ") = ?" }
	default:
		return ""
	}
	switch {
	case p.url != "":
		return match(p.url)
	case p.urlIn != "":
		return "arrayExists(u -> " + match("u") + ", " + p.urlIn + ")"
	}
	return ""
}

// Purge removes every row sel covers from the archive's tables, with ALTER
// TABLE ... DELETE (a mutation: the parts holding them are rewritten
// without them, so the content is gone from disk, not only hidden) waited
// for, ON CLUSTER on a cluster. It returns the rows removed per table,
// counted just before. Run again it removes what is left (nothing, or rows
// an insert under way added): a takedown interrupted midway is finished by
// running it again.
func Purge(ctx context.Context, conn driver.Conn, cfg Config, sel takedown.Selector) (map[string]uint64, error) {
	return purge(ctx, []driver.Conn{conn}, cfg, clusterDDL, sel)
}

// PurgeNodes is Purge for a cluster without ON CLUSTER DDL (MigrateNodes):
// the mutation runs on each node's local tables in turn.
func PurgeNodes(ctx context.Context, nodes []driver.Conn, cfg Config, sel takedown.Selector) (map[string]uint64, error) {
	if len(nodes) == 0 || cfg.Cluster == "" {
		return nil, errors.New("purge nodes: needs nodes and CLICKHOUSE_CLUSTER")
	}
	return purge(ctx, nodes, cfg, renderMode{perNode: true}, sel)
}

func purge(ctx context.Context, nodes []driver.Conn, cfg Config, mode renderMode, sel takedown.Selector) (map[string]uint64, error) {
	counts := map[string]uint64{}
	for _, p := range purgeTargets {
		where := p.where(sel)
		if where == "" {
			continue
		}
		var n uint64
		if err := nodes[0].QueryRow(ctx, "SELECT count() FROM "+cfg.Database+"."+p.table+" WHERE "+where, sel.Value).Scan(&n); err != nil {
			return counts, fmt.Errorf("count the rows of %s to remove: %w", p.table, err)
		}
		counts[p.table] = n
		if n == 0 {
			continue
		}
		stmt, err := renderWith(cfg, mode, "purge", `ALTER TABLE {{table "`+p.table+`"}}{{on_cluster}} DELETE WHERE `+where+` SETTINGS mutations_sync = 2`, nil)
		if err != nil {
			return counts, err
		}
		for _, conn := range nodes {
			if err := conn.Exec(ctx, stmt[0], sel.Value); err != nil {
				return counts, fmt.Errorf("remove the rows of %s: %w", p.table, err)
			}
		}
	}
	return counts, nil
}

// WaitInserts returns once every INSERT running on ClickHouse when it was
// called has ended (on every node, on a cluster): after a takedown is
// recorded, an insert that started before it, and so before the write
// path's filter could see it, has landed once this returns, and Purge
// removes its rows too.
func WaitInserts(ctx context.Context, conn driver.Conn, cfg Config) error {
	return waitInserts(ctx, conn, cfg, clusterDDL)
}
