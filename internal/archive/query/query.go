package query

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// The read API's queries (search.go, pages_read.go, jobs_read.go, feed.go,
// export.go) share what is written here: the limits every one of them runs
// under, the errors that name the parameter at fault, and the opaque
// cursors of their pages.

// ParamError is a query's parameter that cannot be used: the read API
// answers it 400 with Param named.
type ParamError struct {
	// Param is the parameter's name as the API spells it ("q", "cursor").
	Param string
	// Reason says what is wrong, without repeating the value.
	Reason string
}

func (e *ParamError) Error() string { return e.Param + ": " + e.Reason }

func invalid(param, format string, args ...any) error {
	return &ParamError{Param: param, Reason: fmt.Sprintf(format, args...)}
}

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

// ReadOptions configure the read API's side of a Reader (WithReadOptions).
type ReadOptions struct {
	// Limits bound every query (zero: DefaultLimits).
	Limits Limits
	// CursorKey signs the cursors. Every replica of the read API must share
	// it, or a cursor given by one is refused by another; empty: a random
	// key of the process (its cursors die with it).
	CursorKey []byte
	// FeedSettle is how far behind the present the changes feed stays
	// (feed.go); zero: DefaultFeedSettle.
	FeedSettle time.Duration
	// HTTPURL is ClickHouse's HTTP interface (http://host:8123), which
	// writes the Parquet exports; empty: no Parquet export (ErrNoHTTP).
	HTTPURL string
	// Search bounds each search request (zero fields: DefaultSearchBudget's).
	Search SearchBudget
}

// WithReadOptions returns a copy of r that runs the read API's queries
// with o.
func (r *Reader) WithReadOptions(o ReadOptions) (*Reader, error) {
	c := *r
	c.limits = o.Limits
	if c.limits == (Limits{}) {
		c.limits = DefaultLimits
	}
	c.conn = boundConn{Conn: r.conn.Conn, limits: c.limits, slots: make(chan struct{}, c.limits.queries())}
	c.lookups = r.lookups.On(c.conn)
	key := o.CursorKey
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("cursor key: %w", err)
		}
	}
	c.cursorKey = key
	c.feedSettle = o.FeedSettle
	c.search = o.Search
	c.httpURL = strings.TrimRight(o.HTTPURL, "/")
	c.http = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8, ResponseHeaderTimeout: c.limits.ExportExecutionTime}}
	if c.feedSettle <= 0 {
		c.feedSettle = DefaultFeedSettle
	}
	return &c, nil
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

// ErrBusy is a read query that found no free slot (Limits.MaxQueries)
// within the query's time limit: the archive is answering as many reads as
// it runs at once.
var ErrBusy = errors.New("the archive is running as many read queries as it serves at once (READER_MAX_QUERIES); retry later")

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

func (r *Reader) searchBudget() SearchBudget {
	b := r.search
	if b.Candidates <= 0 {
		b.Candidates = DefaultSearchBudget.Candidates
	}
	if b.Time <= 0 {
		b.Time = DefaultSearchBudget.Time
	}
	return b
}

func (r *Reader) limitsOrDefault() Limits {
	if r.limits == (Limits{}) {
		return DefaultLimits
	}
	return r.limits
}

// ErrLimit is a query ClickHouse stopped at one of the Limits.
var ErrLimit = errors.New("the query went past a limit of the read API")

// limitCodes are the exceptions of a query ClickHouse stopped at a limit:
// TOO_MANY_ROWS 158, TIMEOUT_EXCEEDED 159, MEMORY_LIMIT_EXCEEDED 241,
// TOO_MANY_ROWS_OR_BYTES 396.
var limitCodes = []int32{158, 159, 241, 396}

// limitError is a query stopped at a limit: ErrLimit, with ClickHouse's
// reason.
type limitError struct{ reason string }

func (e *limitError) Error() string { return ErrLimit.Error() + " (" + e.reason + ")" }
func (e *limitError) Unwrap() error { return ErrLimit }

// limitErr is err, as a limitError when ClickHouse stopped the query at a
// limit.
func limitErr(err error) error {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) && slices.Contains(limitCodes, ex.Code) {
		return &limitError{reason: firstLine(ex.Message)}
	}
	return err
}

// readErr wraps err of a read API query with what was read.
func readErr(what string, err error) error {
	return fmt.Errorf("%s: %w", what, err)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// A cursor is the position after the last row of a page (a keyset: the
// values of the row's sort key), with the fingerprint of the query it
// belongs to, signed: base64url(JSON) "." base64url(HMAC-SHA256[:16]).
// A cursor that was altered, or given with another query, is refused as
// a ParamError of "cursor" rather than silently giving other rows.
type position struct {
	// Query is the fingerprint of the query the cursor continues.
	Query string `json:"q"`
	// The sort key of the last row; which fields are set depends on the
	// query.
	Time    int64  `json:"t,omitempty"` // Unix milliseconds
	Time2   int64  `json:"t2,omitempty"`
	Score   uint64 `json:"s,omitempty"`
	CrawlID string `json:"c,omitempty"`
	URL     string `json:"u,omitempty"`
	Kind    string `json:"k,omitempty"`
}

func (r *Reader) key() []byte {
	if len(r.cursorKey) == 0 {
		// A Reader not configured for the API: cursors of this process.
		return processKey
	}
	return r.cursorKey
}

var processKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}()

func (r *Reader) encodeCursor(p position) string {
	// Without HTML escaping: a URL's "&", "<" and ">" stay one byte each,
	// not six, so a cursor stays within maxCursor.
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p)
	b := []byte(strings.TrimSuffix(buf.String(), "\n"))
	mac := hmac.New(sha256.New, r.key())
	mac.Write(b)
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:16])
}

// maxCursor bounds a cursor's length: it holds one URL and a few numbers.
// The URL may be as long as any the read side takes (maxURL) and
// JSON-escaped (six bytes for a control character at worst), and the
// whole is base64 (four bytes for three): the archive takes back every
// cursor it writes of a URL it serves.
const maxCursor = (6*maxURL + 1024) * 4 / 3

// decodeCursor reads a cursor of the query whose fingerprint is query;
// "" is the start (ok false).
func (r *Reader) decodeCursor(s, query string) (p position, ok bool, err error) {
	if s == "" {
		return position{}, false, nil
	}
	if len(s) > maxCursor {
		return position{}, false, invalid("cursor", "longer than %d bytes", maxCursor)
	}
	body, sig, found := strings.Cut(s, ".")
	b, err1 := base64.RawURLEncoding.DecodeString(body)
	mac, err2 := base64.RawURLEncoding.DecodeString(sig)
	if !found || err1 != nil || err2 != nil {
		return position{}, false, invalid("cursor", "not a cursor of this API")
	}
	h := hmac.New(sha256.New, r.key())
	h.Write(b)
	if !hmac.Equal(mac, h.Sum(nil)[:16]) {
		return position{}, false, invalid("cursor", "altered, or signed by a reader with another READER_CURSOR_KEY")
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return position{}, false, invalid("cursor", "not a cursor of this API")
	}
	if p.Query != query {
		return position{}, false, invalid("cursor", "belongs to another query: repeat the parameters of the request that gave it")
	}
	return p, true, nil
}

// fingerprint names a query by its parameters (for its cursors).
func fingerprint(kind string, params ...any) string {
	b, _ := json.Marshal(append([]any{kind}, params...))
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// pageSize clamps a requested number of rows to [1, most], def when 0.
func pageSize(n, def, most int) (int, error) {
	switch {
	case n == 0:
		return def, nil
	case n < 0 || n > most:
		return 0, invalid("limit", "must be between 1 and %d", most)
	}
	return n, nil
}

func millis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
