package query

import (
	"context"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Every query of the read API runs under the Limits: boundConn is the one
// connection a Reader queries through, and it adds them to each query and
// takes a read slot for it.

// Limits bound what one query may take of ClickHouse, so that no request
// can load the cluster: they travel as settings of each query, and
// ClickHouse stops a query past them (the API answers 503 with the reason).
type Limits struct {
	// MaxExecutionTime is max_execution_time.
	MaxExecutionTime time.Duration
	// MaxResultRows is max_result_rows: also the rows a subquery (the keys
	// of a phrase's candidate pages) may give.
	MaxResultRows uint64
	// MaxMemoryUsage is max_memory_usage, in bytes.
	MaxMemoryUsage uint64
	// ExportExecutionTime is max_execution_time of an export, which reads a
	// whole job (its rows are not bounded by MaxResultRows).
	ExportExecutionTime time.Duration
	// MaxThreads is max_threads of every read query (0: the default's):
	// the threads one query may take of ClickHouse's cores, which the
	// sink's inserts share. The read API's queries wait on a busy server
	// rather than take the cores the archiving path needs.
	MaxThreads uint64
	// MaxQueries is how many read queries (exports aside, which
	// ReadOptions' callers bound on their own) run in ClickHouse at once
	// across every request of the Reader (0: the default's). A query waits
	// for a slot up to MaxExecutionTime, then fails with ErrBusy. With
	// MaxThreads it bounds the cores reads take beside the sink's inserts:
	// max_threads bounds one query, not how many run.
	MaxQueries int
}

// DefaultLimits are the limits of a Reader that was given none.
var DefaultLimits = Limits{
	MaxExecutionTime:    10 * time.Second,
	MaxResultRows:       1_000_000,
	MaxMemoryUsage:      2 << 30,
	ExportExecutionTime: 10 * time.Minute,
	MaxThreads:          1,
	MaxQueries:          1,
}

// withSettings is ctx carrying a query's own settings, which the
// Reader's connection adds to the limits (boundConn). Nothing else sets a
// read query's settings: a query's settings are set at once, and a
// clickhouse.Context of its own would replace the limits.
func withSettings(ctx context.Context, own clickhouse.Settings) context.Context {
	b, _ := ctx.Value(boundKey{}).(bound)
	b.own = own
	return context.WithValue(ctx, boundKey{}, b)
}

// exporting is ctx marking its queries as an export's: no bound on rows
// (a job's rows are what is asked), the export's own time, the memory
// bound (Limits.settings).
func exporting(ctx context.Context) context.Context {
	b, _ := ctx.Value(boundKey{}).(bound)
	b.export = true
	return context.WithValue(ctx, boundKey{}, b)
}

type boundKey struct{}

// bound is what a query asked of its settings through its context.
type bound struct {
	export bool
	own    clickhouse.Settings
}

// readNice is os_thread_priority of every read query and export: the
// Linux nice value of the query's threads in ClickHouse, the lowest
// priority, so that on a busy server the sink's inserts (nice 0) get the
// cores first and reads the rest. ClickHouse applies it where it has
// CAP_SYS_NICE (root, or the capability granted to its container) and
// ignores it otherwise.
const readNice = 19

// settings are the settings of a query under l: those of an export when
// export is set. None for zero Limits (a Reader not configured for the
// read API: the sink's, `sink status`).
func (l Limits) settings(export bool) clickhouse.Settings {
	if l == (Limits{}) {
		return nil
	}
	if export {
		return clickhouse.Settings{
			"max_execution_time": max(1, int(l.ExportExecutionTime.Seconds())),
			"max_memory_usage":   l.MaxMemoryUsage,
			"max_threads":        l.threads(),
			"os_thread_priority": readNice,
		}
	}
	return clickhouse.Settings{
		"max_execution_time": max(1, int(l.MaxExecutionTime.Seconds())),
		"max_result_rows":    l.MaxResultRows,
		"max_memory_usage":   l.MaxMemoryUsage,
		"max_threads":        l.threads(),
		"os_thread_priority": readNice,
	}
}

func (l Limits) queries() int {
	if l.MaxQueries <= 0 {
		return DefaultLimits.MaxQueries
	}
	return l.MaxQueries
}

func (l Limits) threads() uint64 {
	if l.MaxThreads == 0 {
		return DefaultLimits.MaxThreads
	}
	return l.MaxThreads
}

// boundConn is the only connection a Reader queries through: every query,
// whatever method runs it, carries the settings of the Reader's limits
// (the export's for a context marked exporting) plus the query's own
// (withSettings). A read cannot run without the limits by forgetting to
// ask for them; a setting of the caller's own clickhouse.Context is
// replaced, the limits included.
//
// It also holds a read query's slot (slots, Limits.MaxQueries) from the
// query's start until its rows are closed: the many requests the reader
// admits share a few queries in ClickHouse, and the cores of the sink's
// inserts stay theirs. Exports take no slot (the reader bounds them apart,
// READER_MAX_EXPORTS). A nil slots (a Reader not configured for the read
// API) waits for nothing.
type boundConn struct {
	driver.Conn
	limits Limits
	slots  chan struct{}
}

// acquire takes a slot for a query of ctx, waiting up to the query's time
// limit; release gives it back (once, however often it is called).
func (c boundConn) acquire(ctx context.Context) (release func(), err error) {
	b, _ := ctx.Value(boundKey{}).(bound)
	if c.slots == nil || b.export {
		return func() {}, nil
	}
	select {
	case c.slots <- struct{}{}:
	default:
		wait := time.NewTimer(max(time.Second, c.limits.MaxExecutionTime))
		defer wait.Stop()
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wait.C:
			return nil, ErrBusy
		}
	}
	var once sync.Once
	return func() { once.Do(func() { <-c.slots }) }, nil
}

var _ driver.Conn = boundConn{}

func (c boundConn) bind(ctx context.Context) context.Context {
	b, _ := ctx.Value(boundKey{}).(bound)
	settings := clickhouse.Settings{}
	maps.Copy(settings, c.limits.settings(b.export))
	maps.Copy(settings, b.own)
	if len(settings) == 0 {
		return ctx
	}
	return clickhouse.Context(ctx, clickhouse.WithSettings(settings))
}

// The errors of every method, and of the rows and row it returns, are
// limitErr's: ErrLimit for a query ClickHouse stopped at a limit, whoever
// reads it.

func (c boundConn) Select(ctx context.Context, dest any, query string, args ...any) error {
	release, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	return limitErr(c.Conn.Select(c.bind(ctx), dest, query, args...))
}

func (c boundConn) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	release, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.Conn.Query(c.bind(ctx), query, args...)
	if err != nil {
		release()
		return nil, limitErr(err)
	}
	return boundRows{Rows: rows, release: release}, nil
}

func (c boundConn) QueryRow(ctx context.Context, query string, args ...any) driver.Row {
	release, err := c.acquire(ctx)
	if err != nil {
		return failedRow{err}
	}
	defer release()
	return boundRow{c.Conn.QueryRow(c.bind(ctx), query, args...)}
}

func (c boundConn) QueryFormat(ctx context.Context, format, query string, args ...any) (io.ReadCloser, error) {
	release, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	rc, err := c.Conn.QueryFormat(c.bind(ctx), format, query, args...)
	if err != nil {
		release()
		return nil, limitErr(err)
	}
	return boundBody{ReadCloser: rc, release: release}, nil
}

func (c boundConn) Exec(ctx context.Context, query string, args ...any) error {
	release, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	return limitErr(c.Conn.Exec(c.bind(ctx), query, args...))
}

func (c boundConn) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	b, err := c.Conn.PrepareBatch(c.bind(ctx), query, opts...)
	return b, limitErr(err)
}

func (c boundConn) InsertFormat(ctx context.Context, format, query string, data io.Reader) error {
	return limitErr(c.Conn.InsertFormat(c.bind(ctx), format, query, data))
}

func (c boundConn) AsyncInsert(ctx context.Context, query string, wait bool, args ...any) error {
	return limitErr(c.Conn.AsyncInsert(c.bind(ctx), query, wait, args...))
}

// boundRows are a query's rows: its slot is given back when they are
// closed.
type boundRows struct {
	driver.Rows
	release func()
}

func (r boundRows) Scan(dest ...any) error { return limitErr(r.Rows.Scan(dest...)) }
func (r boundRows) Err() error             { return limitErr(r.Rows.Err()) }
func (r boundRows) Close() error {
	defer r.release()
	return r.Rows.Close()
}

type boundRow struct{ driver.Row }

func (r boundRow) Scan(dest ...any) error { return limitErr(r.Row.Scan(dest...)) }
func (r boundRow) Err() error             { return limitErr(r.Row.Err()) }

// failedRow is a row whose query never ran (no slot).
type failedRow struct{ err error }

func (r failedRow) Err() error           { return r.err }
func (r failedRow) Scan(...any) error    { return r.err }
func (r failedRow) ScanStruct(any) error { return r.err }

// boundBody is a formatted answer: its slot is given back when it is
// closed.
type boundBody struct {
	io.ReadCloser
	release func()
}

func (b boundBody) Close() error {
	defer b.release()
	return b.ReadCloser.Close()
}

// optionalSettings are the settings a query may set only where the server
// knows them: a setting ClickHouse does not know fails the query, and an
// archive's server may be older than the setting.
var optionalSettings = []string{"use_top_k_dynamic_filtering"}

// knownSettings are the optional settings a server knows, read from
// system.settings until a read succeeds.
type knownSettings struct {
	mu    sync.Mutex
	names map[string]bool // nil until read
}

// optional returns the settings of own that r's server knows. While the
// server cannot be asked, it is taken to know none: the query runs
// without them (slower, not wrong), and the next query asks again.
func (r *Reader) optional(ctx context.Context, own clickhouse.Settings) clickhouse.Settings {
	r.known.mu.Lock()
	defer r.known.mu.Unlock()
	if r.known.names == nil {
		r.known.names = r.knownSettings(ctx)
	}
	out := clickhouse.Settings{}
	for k, v := range own {
		if r.known.names[k] {
			out[k] = v
		}
	}
	return out
}

// knownSettings reads which optionalSettings the server knows; nil if it
// could not.
func (r *Reader) knownSettings(ctx context.Context) map[string]bool {
	rows, err := r.conn.Query(ctx, "SELECT name FROM system.settings WHERE name IN {names:Array(String)}", clickhouse.Named("names", optionalSettings))
	if err != nil {
		return nil
	}
	defer rows.Close()
	names := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil
		}
		names[name] = true
	}
	if rows.Err() != nil {
		return nil
	}
	return names
}

// readErr wraps err of a read API query with what was read.
func readErr(what string, err error) error {
	return fmt.Errorf("%s: %w", what, err)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
