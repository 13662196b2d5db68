package archive_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/rs/zerolog"
)

// startClickHouse connects to the ClickHouse of CLICKHOUSE_ADDR (make test
// starts one), creates a database of its own for the test, migrates it, and
// drops it at the end.
func startClickHouse(t *testing.T) (driver.Conn, archive.Config) {
	t.Helper()
	addr := os.Getenv("CLICKHOUSE_ADDR")
	if addr == "" {
		t.Fatal(`CLICKHOUSE_ADDR is not set: run "make test", or eval "$(scripts/clickhouse.sh ensure)"; export CLICKHOUSE_ADDR`)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	cfg := archive.Config{Addr: addr, Database: "test_archive_" + hex.EncodeToString(b), User: "default"}
	conn, err := archive.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := archive.Migrate(ctx, conn, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+cfg.Database+" SYNC")
		_ = conn.Close()
	})
	return conn, cfg
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeFixture(t *testing.T, name string) (*events.Event, []byte) {
	t.Helper()
	body := readFixture(t, name)
	ev, err := events.Decode(body)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ev, body
}

func mustDecode(t *testing.T, body string) *events.Event {
	t.Helper()
	ev, err := events.Decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func newWriter(t *testing.T, conn driver.Conn, cfg archive.Config) *archive.Writer {
	t.Helper()
	w, err := archive.NewWriter(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}
