// Package archive owns crawlhouse's ClickHouse connection and its write
// path: Config and Open (with the settings every statement carries and the
// server versions it runs on), the mapping of webhook events and Documents
// to rows of `pages`, `failures`, `crawl_events`, `events` and
// `monitor_pages` (rows.go, the Document cut in document.go, the text hash
// in texthash.go), the Writer that inserts them, what the backfill
// recovers and a crawl's backfill state, the takedown filter that keeps
// what was taken down out of every insert, and the Lookups the pipeline
// asks before or after it writes (the sink, the backfill, alerts,
// `sink delete` and a job's status). Classify says what an insert's error
// means for the messages behind it.
//
// The schema (migrations, retention, a takedown's purge) is package
// archive/schema; the read API, package archive/query. Both import this
// package, never the reverse.
//
// Values always travel through the clickhouse-go batch API or bound
// parameters, never through SQL built from strings. The schema (and why it is
// keyed, coded and indexed as it is) lives in config/migrations.
package archive

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Config is the ClickHouse part of the sink's configuration
// (config/environment.md lists the variables).
type Config struct {
	// Addr lists native-protocol addresses, comma-separated; the client
	// spreads connections over them and fails over.
	Addr string `envconfig:"CLICKHOUSE_ADDR" default:"127.0.0.1:9000" desc:"native protocol address(es), comma-separated"`
	// Database holds the crawlhouse tables; the migrations create it.
	Database string `envconfig:"CLICKHOUSE_DATABASE" default:"crawl" desc:"database (created by migrations)"`
	// User and Password authenticate. The password is never logged.
	User     string `envconfig:"CLICKHOUSE_USER" default:"default" desc:"user"`
	Password string `envconfig:"CLICKHOUSE_PASSWORD" desc:"password"`
	// TLS connects with TLS (the secure native port, usually 9440).
	TLS bool `envconfig:"CLICKHOUSE_TLS" default:"false" desc:"connect with TLS"`
	// Cluster, when set, makes the migrations create Replicated tables ON
	// CLUSTER plus Distributed tables in front of them.
	Cluster string `envconfig:"CLICKHOUSE_CLUSTER" desc:"cluster: Replicated tables ON CLUSTER plus Distributed tables"`
	// Compression is how inserts and answers are compressed on the wire:
	// none, lz4 or zstd. None by default: ClickHouse compresses every
	// column for storage anyway, and lz4 on the client was a fifth of the
	// sink's CPU per page, taken from ClickHouse on shared cores
	// (docs/benchmarks.md, "The sink's cost per page"). Across a slow or
	// metered network lz4 sends about a third of the bytes.
	Compression string `envconfig:"CLICKHOUSE_COMPRESSION" default:"none" desc:"wire compression: none, lz4 or zstd"`
}

// compressions are the values of CLICKHOUSE_COMPRESSION; "" (a Config
// built in code) is none.
var compressions = map[string]*clickhouse.Compression{
	"":     nil,
	"none": nil,
	"lz4":  {Method: clickhouse.CompressionLZ4},
	"zstd": {Method: clickhouse.CompressionZSTD},
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
var clusterName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Validate reports settings that could not work. Database and cluster names
// end up in DDL, so they are restricted to plain identifiers.
func (c Config) Validate() error {
	var errs []error
	if len(c.Addrs()) == 0 {
		errs = append(errs, errors.New("CLICKHOUSE_ADDR: must name at least one host:port"))
	}
	for _, a := range c.Addrs() {
		if !strings.Contains(a, ":") {
			errs = append(errs, fmt.Errorf("CLICKHOUSE_ADDR: %q is not host:port", a))
		}
	}
	if !identifier.MatchString(c.Database) {
		errs = append(errs, fmt.Errorf("CLICKHOUSE_DATABASE: %q is not an identifier (letters, digits, _)", c.Database))
	}
	if _, ok := compressions[c.Compression]; !ok {
		errs = append(errs, fmt.Errorf("CLICKHOUSE_COMPRESSION: %q is not one of none, lz4, zstd", c.Compression))
	}
	if c.Cluster != "" && !clusterName.MatchString(c.Cluster) {
		errs = append(errs, fmt.Errorf("CLICKHOUSE_CLUSTER: %q may hold only letters, digits, '_', '.' and '-'", c.Cluster))
	}
	return errors.Join(errs...)
}

// Addrs returns the addresses of Addr, trimmed, empty ones dropped.
func (c Config) Addrs() []string {
	var out []string
	for a := range strings.SplitSeq(c.Addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
