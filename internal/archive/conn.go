package archive

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Open connects to ClickHouse. It does not wait for the server: a sink starts
// while ClickHouse is down and its readiness says so. The connection is not
// bound to a database; every statement names CLICKHOUSE_DATABASE, which the
// migrations create.
func Open(cfg Config) (driver.Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := &clickhouse.Options{
		Addr: cfg.Addrs(),
		Auth: clickhouse.Auth{Username: cfg.User, Password: cfg.Password},
		// Page bodies are text: LZ4 shrinks what crosses the wire several
		// times for little CPU.
		Compression:      &clickhouse.Compression{Method: clickhouse.CompressionLZ4},
		DialTimeout:      5 * time.Second,
		ReadTimeout:      5 * time.Minute,
		MaxOpenConns:     8,
		MaxIdleConns:     4,
		ConnMaxLifetime:  time.Hour,
		ConnOpenStrategy: clickhouse.ConnOpenInOrder,
		ClientInfo: clickhouse.ClientInfo{Products: []struct {
			Name    string
			Version string
		}{{Name: "crawlhouse-sink", Version: "1"}}},
	}
	if cfg.TLS {
		opts.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open ClickHouse %s: %w", cfg.Addr, err)
	}
	return conn, nil
}

// Rejected reports whether err is ClickHouse refusing the data or statement
// itself (an exception the server raised), as opposed to ClickHouse being
// unreachable or temporarily unable to take writes. Retrying a rejected
// insert unchanged fails again; retrying the others succeeds once the server
// is back.
func Rejected(err error) bool {
	var exc *clickhouse.Exception
	if !errors.As(err, &exc) {
		return false
	}
	return !transientCodes[exc.Code]
}

// transientCodes are server exceptions that say "not now" rather than "not
// this data".
var transientCodes = map[int32]bool{
	159: true, // TIMEOUT_EXCEEDED
	164: true, // READONLY
	202: true, // TOO_MANY_SIMULTANEOUS_QUERIES
	203: true, // NO_FREE_CONNECTION
	209: true, // SOCKET_TIMEOUT
	210: true, // NETWORK_ERROR
	241: true, // MEMORY_LIMIT_EXCEEDED
	242: true, // TABLE_IS_READ_ONLY
	252: true, // TOO_MANY_PARTS
	285: true, // TOO_FEW_LIVE_REPLICAS
	319: true, // UNKNOWN_STATUS_OF_INSERT
	425: true, // SYSTEM_ERROR
	999: true, // KEEPER_EXCEPTION
	81:  true, // UNKNOWN_DATABASE (migrations not applied yet)
	60:  true, // UNKNOWN_TABLE (idem)
}
