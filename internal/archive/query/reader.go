package query

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
)

// Reader is the read API's side of the archive: search, jobs, pages,
// versions, the changes feed, job changes and exports, each query under
// the Limits, its pages continued by signed cursors. It only reads, and is
// safe for concurrent use. On a cluster it reads through the Distributed
// tables.
type Reader struct {
	// conn is a boundConn: every query carries the limits (limits.go).
	conn boundConn
	db   string
	// lookups answer a job's status (JobStatus) through conn.
	lookups *archive.Lookups

	// The read API's settings (WithReadOptions).
	limits     Limits
	cursorKey  []byte
	feedSettle time.Duration
	search     SearchBudget
	// ClickHouse's HTTP interface, for what only it can write (Parquet).
	httpURL        string
	user, password string
	http           *http.Client
	// The optional settings the server knows, learnt at the first query
	// that sets one (shared by the copies WithReadOptions makes).
	known *knownSettings
}

// NewReader returns a Reader on conn for the tables of cfg.Database.
func NewReader(conn driver.Conn, cfg archive.Config) (*Reader, error) {
	lookups, err := archive.NewLookups(conn, cfg)
	if err != nil {
		return nil, err
	}
	r := &Reader{conn: boundConn{Conn: conn}, db: cfg.Database, user: cfg.User, password: cfg.Password, known: &knownSettings{}}
	r.lookups = lookups.On(r.conn)
	return r, nil
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
