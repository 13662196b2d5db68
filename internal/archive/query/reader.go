package query

import (
	"errors"
	"net/http"
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
	// conn is a boundConn: every query carries the limits (query.go).
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
	if conn == nil {
		return nil, errors.New("archive: nil ClickHouse connection")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Reader{conn: boundConn{Conn: conn}, db: cfg.Database, user: cfg.User, password: cfg.Password, known: &knownSettings{}}
	var err error
	if r.lookups, err = archive.NewLookups(r.conn, cfg); err != nil {
		return nil, err
	}
	return r, nil
}
