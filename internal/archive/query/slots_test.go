package query

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
)

// TestReadQueriesTakeTurns: with one read slot, a query whose rows are
// still open makes the next read wait for its turn and, past the query's
// time limit, answer ErrBusy (the reader's 429); once the rows are closed
// the next read runs, and an export's query never waits for a slot. Reads
// run at the lowest CPU priority (readNice).
func TestReadQueriesTakeTurns(t *testing.T) {
	t.Parallel()
	_, db := clickhousetest.NewDatabase(t)
	raw := clickhousetest.Open(t, db)
	base, err := NewReader(raw, archive.Config{Addr: clickhousetest.Addr(t), Database: db})
	if err != nil {
		t.Fatal(err)
	}
	limits := DefaultLimits
	limits.MaxExecutionTime, limits.MaxQueries = time.Second, 1
	r, err := base.WithReadOptions(ReadOptions{Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	held, err := r.conn.Query(ctx, "SELECT number FROM numbers(10)")
	if err != nil {
		t.Fatal(err)
	}
	var n uint8
	if err := r.conn.QueryRow(ctx, "SELECT 1").Scan(&n); !errors.Is(err, ErrBusy) {
		t.Fatalf("a read while the only slot is held: %v, want ErrBusy", err)
	}
	if err := r.conn.Select(ctx, &[]uint8{}, "SELECT 1"); !errors.Is(err, ErrBusy) {
		t.Fatalf("a select while the only slot is held: %v, want ErrBusy", err)
	}
	var exported uint8
	if err := r.conn.QueryRow(exporting(ctx), "SELECT 1").Scan(&exported); err != nil || exported != 1 {
		t.Fatalf("an export's query while the slot is held: %d, %v", exported, err)
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	if err := held.Close(); err != nil { // twice: the slot is given back once
		t.Fatal(err)
	}
	for range 3 {
		var one uint8
		if err := r.conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("a read after the rows were closed: %d, %v", one, err)
		}
	}
	// Every read runs at the lowest CPU priority in ClickHouse.
	var nice int64
	if err := r.conn.QueryRow(ctx, "SELECT toInt64(getSetting('os_thread_priority'))").Scan(&nice); err != nil || nice != readNice {
		t.Fatalf("a read's os_thread_priority: %d (%v), want %d", nice, err, readNice)
	}
	if len(r.conn.slots) != 0 {
		t.Fatalf("%d slots still taken after every read ended", len(r.conn.slots))
	}
}
