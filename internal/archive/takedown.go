package archive

import (
	"context"
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
func (l *Lookups) Takedowns(ctx context.Context) ([]Takedown, error) {
	return l.takedowns(ctx, "")
}

// Takedown returns the takedown id, or ErrTakedownNotFound.
func (l *Lookups) Takedown(ctx context.Context, id uuid.UUID) (Takedown, error) {
	ts, err := l.takedowns(ctx, "WHERE id = ?", id)
	if err != nil {
		return Takedown{}, err
	}
	if len(ts) == 0 {
		return Takedown{}, fmt.Errorf("%w: %s", ErrTakedownNotFound, id)
	}
	return ts[0], nil
}

func (l *Lookups) takedowns(ctx context.Context, where string, args ...any) ([]Takedown, error) {
	rows, err := l.conn.Query(ctx, "SELECT id, selector, value, reason, requested_by, created_at, deleted, lifted_at, lifted_by, lift_reason FROM "+
		l.db+".takedowns FINAL "+where+" ORDER BY created_at DESC, id", args...)
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
