package archive

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// The ClickHouse releases the archive runs on, both ends included.
//
// OldestServer is the first release whose text indexes are generally
// available: 26.2. The migrations create them as `text(tokenizer = ...,
// preprocessor = ..., posting_list_codec = ...)`; before 26.2 the index was
// beta, stored another format and needed settings. Everything else the
// migrations and the queries of the sink and the reader use is older
// (EXCHANGE TABLES on the Atomic engine, MODIFY QUERY, dictionaries,
// hasAllTokens). The phrase queries written by hand in docs/search.md use
// hasPhrase, which came in 26.4; the binaries do not.
//
// NewestServer is the newest release the project is tested on (the local
// build of scripts/clickhouse.sh). A newer one is refused until it is
// tested: its defaults may change what a query reads or how an index
// answers.
var (
	OldestServer = ServerVersion{Major: 26, Minor: 2}
	NewestServer = ServerVersion{Major: 26, Minor: 7}
)

// ServerVersion is a ClickHouse release: year and month ("26.3").
type ServerVersion struct {
	Major, Minor int
}

func (v ServerVersion) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

func (v ServerVersion) less(o ServerVersion) bool {
	return v.Major < o.Major || v.Major == o.Major && v.Minor < o.Minor
}

// SupportedServers says the range in words, for logs and errors.
func SupportedServers() string {
	return OldestServer.String() + " to " + NewestServer.String()
}

// CheckServerVersion asks conn's server its version() and returns
// ErrUnsupportedServer, naming the version found and the range, when it is
// outside OldestServer to NewestServer. It runs before any other statement
// of a migration, the sink's start-up and the reader's readiness, so that a
// server that cannot finish the migrations never starts one.
func CheckServerVersion(ctx context.Context, conn driver.Conn) error {
	var found string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&found); err != nil {
		return fmt.Errorf("read ClickHouse version: %w", err)
	}
	return SupportedServer(found)
}

// SupportedServer checks a version() string ("26.7.2.1") against the range.
func SupportedServer(found string) error {
	v, err := parseServerVersion(found)
	if err != nil {
		return fmt.Errorf("%w: %q is not a ClickHouse version (%v); crawlhouse runs on ClickHouse %s", ErrUnsupportedServer, found, err, SupportedServers())
	}
	if v.less(OldestServer) || NewestServer.less(v) {
		return fmt.Errorf("%w: ClickHouse %s found; crawlhouse runs on ClickHouse %s", ErrUnsupportedServer, found, SupportedServers())
	}
	return nil
}

// parseServerVersion reads the release of a version() string: its first two
// numbers.
func parseServerVersion(s string) (ServerVersion, error) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return ServerVersion{}, errors.New("want at least year.month")
	}
	major, err := strconv.Atoi(parts[0])
	if err != nil || major < 0 {
		return ServerVersion{}, fmt.Errorf("year %q", parts[0])
	}
	minor, err := strconv.Atoi(parts[1])
	if err != nil || minor < 0 {
		return ServerVersion{}, fmt.Errorf("month %q", parts[1])
	}
	return ServerVersion{Major: major, Minor: minor}, nil
}
