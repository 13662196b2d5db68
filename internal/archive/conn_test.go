package archive_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/crawlhouse/crawlhouse/internal/archive"
)

// TestClassify: credential and server-state errors hold the data
// (Unavailable), size-related "not now" errors and errors without an answer
// are TryLater, and everything else ClickHouse raises is Refused.
func TestClassify(t *testing.T) {
	t.Parallel()
	exc := func(code int32) error {
		return fmt.Errorf("insert into pages: %w", &clickhouse.Exception{Code: code, Name: "X", Message: "m"})
	}
	for _, tc := range []struct {
		name string
		err  error
		want archive.Class
	}{
		{"AUTHENTICATION_FAILED", exc(516), archive.Unavailable},
		{"WRONG_PASSWORD", exc(193), archive.Unavailable},
		{"UNKNOWN_USER", exc(192), archive.Unavailable},
		{"REQUIRED_PASSWORD", exc(194), archive.Unavailable},
		{"ACCESS_DENIED", exc(497), archive.Unavailable},
		{"DATABASE_ACCESS_DENIED", exc(291), archive.Unavailable},
		{"READONLY", exc(164), archive.Unavailable},
		{"TOO_MANY_PARTS", exc(252), archive.Unavailable},
		{"UNKNOWN_TABLE", exc(60), archive.Unavailable},
		{"MEMORY_LIMIT_EXCEEDED", exc(241), archive.TryLater},
		{"TIMEOUT_EXCEEDED", exc(159), archive.TryLater},
		{"SOCKET_TIMEOUT", exc(209), archive.TryLater},
		{"network", fmt.Errorf("insert: %w", io.ErrUnexpectedEOF), archive.TryLater},
		{"deadline", context.DeadlineExceeded, archive.TryLater},
		{"plain", errors.New("x"), archive.TryLater},
		{"VIOLATED_CONSTRAINT", exc(469), archive.Refused},
		{"CANNOT_PARSE_TEXT", exc(6), archive.Refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := archive.Classify(tc.err); got != tc.want {
				t.Errorf("Classify = %v, want %v", got, tc.want)
			}
			if got := archive.Rejected(tc.err); got != (tc.want == archive.Refused) {
				t.Errorf("Rejected = %v", got)
			}
		})
	}
}
