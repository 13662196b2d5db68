package archive

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Open connects to ClickHouse. It does not wait for the server: a sink starts
// while ClickHouse is down and its readiness says so. The connection is not
// bound to a database; every statement names CLICKHOUSE_DATABASE, which the
// migrations create.
func Open(cfg Config) (driver.Conn, error) { return OpenWithSettings(cfg, nil) }

// OpenWithSettings is Open with ClickHouse settings for every query of the
// connection (tests use a low max_memory_usage to make an insert fail on
// the server).
func OpenWithSettings(cfg Config, settings clickhouse.Settings) (driver.Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	all := maps.Clone(statementSettings)
	maps.Copy(all, settings)
	opts := &clickhouse.Options{
		Addr:             cfg.Addrs(),
		Auth:             clickhouse.Auth{Username: cfg.User, Password: cfg.Password},
		Compression:      compressions[cfg.Compression],
		DialTimeout:      5 * time.Second,
		ReadTimeout:      5 * time.Minute,
		MaxOpenConns:     8,
		MaxIdleConns:     4,
		ConnMaxLifetime:  time.Hour,
		ConnOpenStrategy: clickhouse.ConnOpenInOrder,
		Settings:         all,
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

// statementSettings travel with every statement and query of a connection,
// so that the archive works the same on a server whose profile keeps the
// `compatibility` of an older release (a server upgraded in place keeps
// it): compatibility = '25.8' turns off, below 26.2, the text index
// itself (enable_full_text_index: a migration creating one is refused,
// a search reads every granule) and, below 26.1, reading the skip indexes
// while reading the data (use_skip_indexes_on_data_read) and using them
// for OR conditions (use_skip_indexes_for_disjunctions, 25.12). Settings
// named here exist on every supported release (OldestServer): a server
// refuses a query with a setting it does not know. The user needs
// readonly = 0 or 2 to send settings, as the reader's limits already do.
var statementSettings = clickhouse.Settings{
	"enable_full_text_index":            1,
	"use_skip_indexes":                  1,
	"use_skip_indexes_on_data_read":     1,
	"use_skip_indexes_for_disjunctions": 1,
}

// Class is what an error of ClickHouse says about the data that was sent,
// and so what the sink does with the messages behind it.
type Class int

const (
	// Unavailable: ClickHouse cannot take writes now, whatever the data:
	// it is read-only, out of parts or replicas, its keeper is away, the
	// schema is not migrated yet, or it refuses the sink's credentials or
	// privileges (a rotated password or a revoked grant). Retrying the same
	// insert succeeds once an operator or the server fixes it, so the data
	// is held, for ever, and never dead-lettered: a credential error must
	// not send every delivery to the dead-letter stream.
	Unavailable Class = iota
	// TryLater: ClickHouse said "not now" to this insert (memory limit,
	// timeout) or the insert got no answer at all (network, deadline). A
	// server under pressure and an insert too large for it look alike, so
	// the caller tells them apart by whether ClickHouse answers otherwise
	// (a ping) while the insert keeps failing.
	TryLater
	// Refused: ClickHouse refused the data or the statement itself;
	// retrying it unchanged fails again.
	Refused
)

func (c Class) String() string {
	switch c {
	case Unavailable:
		return "unavailable"
	case TryLater:
		return "try later"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Classify sorts an insert error into a Class. An error that is not a
// server exception (network, EOF, context deadline) is TryLater.
func Classify(err error) Class {
	var exc *clickhouse.Exception
	if !errors.As(err, &exc) {
		return TryLater
	}
	if c, ok := codeClass[exc.Code]; ok {
		return c
	}
	return Refused
}

// codeClass are the server exceptions that are not Refused. The codes are
// ClickHouse's (src/Common/ErrorCodes.cpp; ch-go's proto.Err* constants).
var codeClass = map[int32]Class{
	// The server, not the data.
	60:  Unavailable, // UNKNOWN_TABLE (migrations not applied yet)
	81:  Unavailable, // UNKNOWN_DATABASE (idem)
	164: Unavailable, // READONLY
	201: Unavailable, // QUOTA_EXCEEDED
	202: Unavailable, // TOO_MANY_SIMULTANEOUS_QUERIES
	203: Unavailable, // NO_FREE_CONNECTION
	210: Unavailable, // NETWORK_ERROR (between servers)
	225: Unavailable, // NO_ZOOKEEPER
	242: Unavailable, // TABLE_IS_READ_ONLY
	252: Unavailable, // TOO_MANY_PARTS
	254: Unavailable, // NO_ACTIVE_REPLICAS
	279: Unavailable, // ALL_CONNECTION_TRIES_FAILED (a shard down, on a cluster)
	285: Unavailable, // TOO_FEW_LIVE_REPLICAS
	319: Unavailable, // UNKNOWN_STATUS_OF_INSERT
	394: Unavailable, // QUERY_WAS_CANCELLED (a server shutting down)
	425: Unavailable, // SYSTEM_ERROR
	439: Unavailable, // CANNOT_SCHEDULE_TASK
	999: Unavailable, // KEEPER_EXCEPTION
	// Credentials and privileges: an operator's fix, never the data's.
	192: Unavailable, // UNKNOWN_USER
	193: Unavailable, // WRONG_PASSWORD
	194: Unavailable, // REQUIRED_PASSWORD
	195: Unavailable, // IP_ADDRESS_NOT_ALLOWED
	291: Unavailable, // DATABASE_ACCESS_DENIED
	497: Unavailable, // ACCESS_DENIED ("Not enough privileges")
	516: Unavailable, // AUTHENTICATION_FAILED
	// "Not now" that may be this insert's own size.
	159: TryLater, // TIMEOUT_EXCEEDED
	173: TryLater, // CANNOT_ALLOCATE_MEMORY
	209: TryLater, // SOCKET_TIMEOUT
	241: TryLater, // MEMORY_LIMIT_EXCEEDED
}
