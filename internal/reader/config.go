package reader

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/verify"
)

// Config is the read API's HTTP side: who may read, and what one query
// may take of ClickHouse (config/environment.md, section reader).
type Config struct {
	// Tokens are the bearer tokens a request must carry one of
	// (Authorization: Bearer <token>), compared in constant time. Without
	// any the reader refuses to start unless OpenAccess is set.
	Tokens []string `envconfig:"READER_TOKENS" desc:"comma-separated bearer tokens (16 characters or more); a request must carry one as Authorization: Bearer <token>. Required unless READER_OPEN_ACCESS=true"`
	// OpenAccess serves every request without a token.
	OpenAccess bool `envconfig:"READER_OPEN_ACCESS" default:"false" desc:"serve without tokens (anyone who reaches the port reads the whole archive); logged as a warning"`
	// CursorKey signs the cursors of the paged answers; every replica must
	// share it.
	CursorKey string `envconfig:"READER_CURSOR_KEY" desc:"key signing the cursors (16 characters or more), the same on every replica; empty: a random key per process, whose cursors a restart or another replica refuses"`
	// The limits of every query (query.Limits).
	QueryMaxTime     time.Duration `envconfig:"READER_QUERY_MAX_TIME" default:"10s" desc:"max_execution_time of each query"`
	QueryMaxRows     uint64        `envconfig:"READER_QUERY_MAX_ROWS" default:"1000000" desc:"max_result_rows of each query and of its subqueries"`
	QueryMaxMemory   uint64        `envconfig:"READER_QUERY_MAX_MEMORY" default:"2147483648" desc:"max_memory_usage of each query, in bytes"`
	ExportMaxTime    time.Duration `envconfig:"READER_EXPORT_MAX_TIME" default:"10m" desc:"max_execution_time of an export (its rows are not bounded by READER_QUERY_MAX_ROWS)"`
	QueryThreads     uint64        `envconfig:"READER_QUERY_THREADS" default:"1" desc:"max_threads of each query and export: the cores one read may take of ClickHouse, which the sink's inserts share"`
	QueryConcurrency int           `envconfig:"READER_MAX_QUERIES" default:"1" desc:"read queries (exports aside) running in ClickHouse at once across all requests; a query waits for a slot up to READER_QUERY_MAX_TIME, then 429 overloaded: with READER_QUERY_THREADS, the cores reads take beside the sink's inserts"`
	// The budget of one search request (query.SearchBudget).
	SearchCandidates int           `envconfig:"READER_SEARCH_MAX_CANDIDATES" default:"65536" desc:"candidates (page versions passing the filters and the text index) one search request checks for its phrases and change class; past it the answer is a partial page whose cursor goes on"`
	SearchMaxTime    time.Duration `envconfig:"READER_SEARCH_MAX_TIME" default:"5s" desc:"how long after its start a search request still reads another batch of candidates; past it the answer is a partial page whose cursor goes on"`
	// RequestMaxTime is the deadline of one request as a whole (exports
	// aside): a query waits for its slot up to READER_QUERY_MAX_TIME and
	// runs up to as long again, and a request runs a few.
	RequestMaxTime time.Duration `envconfig:"READER_REQUEST_MAX_TIME" default:"30s" desc:"how long one request of the API or the web pages may take as a whole, its queries and their waits for a slot included (exports aside: READER_EXPORT_MAX_TIME); past it 504 timeout"`
	// What the reader serves at once.
	MaxInflight int `envconfig:"READER_MAX_INFLIGHT" default:"64" desc:"requests of the API and the web pages in progress at once (exports included); beyond it 429 overloaded with Retry-After"`
	MaxExports  int `envconfig:"READER_MAX_EXPORTS" default:"2" desc:"exports in progress at once; beyond it 429 overloaded with Retry-After"`
	// FeedSettle is how far behind the present the changes feed stays.
	FeedSettle time.Duration `envconfig:"READER_FEED_SETTLE" default:"10s" desc:"the changes feed serves rows stored at least this long ago: longer than a Distributed table's send delay plus the shards' clock skew"`
	// HTTPURL is ClickHouse's HTTP interface, for the Parquet export.
	HTTPURL string `envconfig:"CLICKHOUSE_HTTP_URL" desc:"ClickHouse's HTTP interface (http://host:8123), which writes the Parquet exports; empty: Parquet export answers 501"`
}

// tokens are the configured tokens, blanks dropped.
func (c Config) tokens() []string {
	var out []string
	for _, t := range c.Tokens {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// TokenChecker checks the tokens of c; nil with open access.
func (c Config) TokenChecker() (*verify.Tokens, error) {
	if c.OpenAccess {
		return nil, nil
	}
	return verify.NewTokens(c.tokens())
}

// Validate reports every invalid setting, joined.
func (c Config) Validate() error {
	var errs []error
	switch {
	case len(c.tokens()) == 0 && !c.OpenAccess:
		errs = append(errs, errors.New("READER_TOKENS: required unless READER_OPEN_ACCESS=true (refusing to serve the archive to anyone)"))
	case len(c.tokens()) > 0 && c.OpenAccess:
		errs = append(errs, errors.New("READER_OPEN_ACCESS: not with READER_TOKENS (say which one is meant)"))
	case len(c.tokens()) > 0:
		if _, err := verify.NewTokens(c.tokens()); err != nil {
			errs = append(errs, fmt.Errorf("READER_TOKENS: %w", err))
		}
	}
	if k := strings.TrimSpace(c.CursorKey); k != "" && len(k) < 16 {
		errs = append(errs, errors.New("READER_CURSOR_KEY: must have at least 16 characters"))
	}
	if c.QueryMaxTime < time.Second || c.QueryMaxTime > time.Hour {
		errs = append(errs, fmt.Errorf("READER_QUERY_MAX_TIME: %s must be between 1s and 1h", c.QueryMaxTime))
	}
	if c.RequestMaxTime < time.Second || c.RequestMaxTime > time.Hour {
		errs = append(errs, fmt.Errorf("READER_REQUEST_MAX_TIME: %s must be between 1s and 1h", c.RequestMaxTime))
	}
	if c.ExportMaxTime < time.Second || c.ExportMaxTime > 24*time.Hour {
		errs = append(errs, fmt.Errorf("READER_EXPORT_MAX_TIME: %s must be between 1s and 24h", c.ExportMaxTime))
	}
	if c.QueryMaxRows < 1000 {
		errs = append(errs, fmt.Errorf("READER_QUERY_MAX_ROWS: %d is below 1000 (a page of an answer)", c.QueryMaxRows))
	}
	if c.QueryMaxMemory < 64<<20 {
		errs = append(errs, fmt.Errorf("READER_QUERY_MAX_MEMORY: %d is below 64 MiB", c.QueryMaxMemory))
	}
	if c.QueryConcurrency < 1 || c.QueryConcurrency > 1024 {
		errs = append(errs, fmt.Errorf("READER_MAX_QUERIES: %d must be between 1 and 1024", c.QueryConcurrency))
	}
	if c.QueryThreads < 1 || c.QueryThreads > 256 {
		errs = append(errs, fmt.Errorf("READER_QUERY_THREADS: %d must be between 1 and 256", c.QueryThreads))
	}
	if c.SearchCandidates < 1000 {
		errs = append(errs, fmt.Errorf("READER_SEARCH_MAX_CANDIDATES: %d is below 1000", c.SearchCandidates))
	}
	if c.SearchMaxTime < 100*time.Millisecond || c.SearchMaxTime > time.Hour {
		errs = append(errs, fmt.Errorf("READER_SEARCH_MAX_TIME: %s must be between 100ms and 1h", c.SearchMaxTime))
	}
	if c.MaxInflight < 1 {
		errs = append(errs, fmt.Errorf("READER_MAX_INFLIGHT: %d must be at least 1", c.MaxInflight))
	}
	if c.MaxExports < 1 || c.MaxExports > c.MaxInflight {
		errs = append(errs, fmt.Errorf("READER_MAX_EXPORTS: %d must be between 1 and READER_MAX_INFLIGHT (%d)", c.MaxExports, c.MaxInflight))
	}
	if c.FeedSettle < 0 || c.FeedSettle > time.Hour {
		errs = append(errs, fmt.Errorf("READER_FEED_SETTLE: %s must be between 0 and 1h", c.FeedSettle))
	}
	if u := c.HTTPURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		errs = append(errs, errors.New("CLICKHOUSE_HTTP_URL: must start with http:// or https://"))
	}
	return errors.Join(errs...)
}

// ReadOptions are the query.ReadOptions of c.
func (c Config) ReadOptions() query.ReadOptions {
	return query.ReadOptions{
		Limits: query.Limits{MaxExecutionTime: c.QueryMaxTime, MaxResultRows: c.QueryMaxRows,
			MaxMemoryUsage: c.QueryMaxMemory, ExportExecutionTime: c.ExportMaxTime, MaxThreads: c.QueryThreads, MaxQueries: c.QueryConcurrency},
		Search:     query.SearchBudget{Candidates: c.SearchCandidates, Time: c.SearchMaxTime},
		CursorKey:  []byte(strings.TrimSpace(c.CursorKey)),
		FeedSettle: max(c.FeedSettle, time.Millisecond),
		HTTPURL:    c.HTTPURL,
	}
}
