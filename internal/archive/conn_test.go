package archive_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
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
		})
	}
}

// TestCompression: an archive written and read over each wire compression
// of CLICKHOUSE_COMPRESSION holds the same Document, byte for byte; any
// other value is refused naming the variable.
func TestCompression(t *testing.T) {
	t.Parallel()
	_, base := archivetest.StartClickHouse(t)
	ctx := context.Background()
	for _, c := range []string{"none", "lz4", "zstd"} {
		cfg := base
		cfg.Compression = c
		conn, err := archive.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		w := archivetest.NewStore(t, conn, cfg)
		ev, body := archivetest.DecodeFixture(t, "crawl-page.json")
		r, err := archive.EventRows(ev, body, time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Insert(ctx, r); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		var doc string
		if err := conn.QueryRow(ctx, "SELECT document FROM "+cfg.Database+".pages FINAL WHERE url = 'https://example.com/'").Scan(&doc); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if doc != string(ev.Data[0].Raw) {
			t.Errorf("%s: the Document read back differs from the one received", c)
		}
	}
	bad := base
	bad.Compression = "gzip"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "CLICKHOUSE_COMPRESSION") {
		t.Errorf("Validate(CLICKHOUSE_COMPRESSION=gzip) = %v, want an error naming the variable", err)
	}
}
