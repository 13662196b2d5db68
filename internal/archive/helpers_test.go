package archive_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/rs/zerolog"
)

func TestMain(m *testing.M) { clickhousetest.RunMain(m) }

// startClickHouse gives the test a database of its own on the shared
// ClickHouse (make test starts one), migrated, and a connection to it.
func startClickHouse(t *testing.T) (driver.Conn, archive.Config) {
	t.Helper()
	conn, cfg := openDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := archive.Migrate(ctx, conn, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	return conn, cfg
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../testdata/fixtures/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeFixture(t *testing.T, name string) (*events.Event, []byte) {
	t.Helper()
	body := readFixture(t, name)
	ev, err := events.DecodeAccepted(body)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ev, body
}

func mustDecode(t *testing.T, body string) *events.Event {
	t.Helper()
	ev, err := events.DecodeAccepted([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func newStore(t *testing.T, conn driver.Conn, cfg archive.Config) *archive.Store {
	t.Helper()
	w, err := archive.NewStore(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}
