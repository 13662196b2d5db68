package query

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ClickHouse/clickhouse-go/v2"
)

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

// ErrBusy is a read query that found no free slot (Limits.MaxQueries)
// within the query's time limit: the archive is answering as many reads as
// it runs at once.
var ErrBusy = errors.New("the archive is running as many read queries as it serves at once (READER_MAX_QUERIES); retry later")

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

// ErrNoHTTP: the Parquet export needs ClickHouse's HTTP interface, which
// is not configured.
var ErrNoHTTP = errors.New("the ClickHouse HTTP interface is not configured (CLICKHOUSE_HTTP_URL)")

// Outcomes of Versions that callers tell apart.
var (
	// ErrNoPage: no job of the archive holds the URL.
	ErrNoPage = errors.New("no archived version of the URL")
	// ErrOneVersion: no second version to compare with the one found.
	ErrOneVersion = errors.New("only one archived version of the URL")
	// ErrNoVersion: the job asked for does not hold the URL.
	ErrNoVersion = errors.New("the job holds no version of the URL")
)
