// Package archivetest holds what the tests of the archive's packages
// (archive, archive/schema, archive/query) share: a migrated database of
// the test's own on the shared ClickHouse, a Store on it, the sender's
// fixtures and deliveries as the sink archives them.
package archivetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// testdata is the repository's testdata folder, wherever the test runs.
var testdata = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata")
}()

// StartClickHouse gives the test a database of its own on the shared
// ClickHouse (make test starts one), migrated, and a connection to it.
func StartClickHouse(t *testing.T) (driver.Conn, archive.Config) {
	t.Helper()
	conn, cfg := OpenDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := schema.Migrate(ctx, conn, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	return conn, cfg
}

// OpenDatabase is an empty database of the test's own and a connection to it.
func OpenDatabase(t *testing.T) (driver.Conn, archive.Config) {
	t.Helper()
	addr, db := clickhousetest.NewDatabase(t)
	cfg := archive.Config{Addr: addr, Database: db, User: "default"}
	conn, err := archive.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn, cfg
}

func NewStore(t *testing.T, conn driver.Conn, cfg archive.Config) *archive.Store {
	t.Helper()
	w, err := archive.NewStore(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func ReadFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, "fixtures", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func DecodeFixture(t *testing.T, name string) (*events.Event, []byte) {
	t.Helper()
	body := ReadFixture(t, name)
	ev, err := events.DecodeAccepted(body)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ev, body
}

func MustDecode(t *testing.T, body string) *events.Event {
	t.Helper()
	ev, err := events.DecodeAccepted([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// InsertDelivery maps one delivery body to rows and inserts them, as the
// sink does.
func InsertDelivery(t *testing.T, w *archive.Store, body string, at time.Time) {
	t.Helper()
	rows, err := archive.EventRows(MustDecode(t, body), []byte(body), at)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Insert(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

// InsertFixtures archives the three sender fixtures, the page twice (a
// redelivery), as the sink would.
func InsertFixtures(t *testing.T, w *archive.Store) {
	t.Helper()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var rows archive.Rows
	for i, name := range []string{"crawl-page.json", "crawl-page-failed.json", "crawl-completed.json", "crawl-page.json"} {
		ev, body := DecodeFixture(t, name)
		r, err := archive.EventRows(ev, body, at.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		rows.Add(r)
	}
	if err := w.Insert(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	// And once more in its own insert: a sink crash between insert and ack.
	ev, body := DecodeFixture(t, "crawl-page.json")
	r, _ := archive.EventRows(ev, body, at)
	if err := w.Insert(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

// PageBody is a crawl.page webhook of one Document, with a webhook id of
// its own.
func PageBody(t *testing.T, crawlID, url, markdown string, status int) string {
	t.Helper()
	return PageBodyWithID(t, crawlID, uuid.NewString(), url, markdown, status)
}

func PageBodyWithID(t *testing.T, crawlID, webhookID, url, markdown string, status int) string {
	t.Helper()
	md, err := json.Marshal(markdown)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":%s,"metadata":{"url":%q,"statusCode":%d}}]}`,
		crawlID, webhookID, md, url, status)
}

func QueryStrings(t *testing.T, conn driver.Conn, q string, args ...any) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// RealDeliveries maps every page delivery of the real captures (both runs)
// to rows, as the sink does.
func RealDeliveries(t *testing.T) archive.Rows {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(testdata, "fixtures", "firecrawl-2026", "run*", "*.page.body"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 40 {
		t.Fatalf("only %d real page deliveries found", len(paths))
	}
	var all archive.Rows
	received := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	for i, p := range paths {
		body, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := events.DecodeAccepted(body)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		r, err := archive.EventRows(ev, body, received.Add(time.Duration(i)*time.Millisecond))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		all.Add(r)
	}
	if len(all.Pages) < 40 {
		t.Fatalf("only %d pages in the real deliveries", len(all.Pages))
	}
	return all
}

// MigrateApplies migrates and checks that the migrations numbered want were
// applied first, in order, followed only by later ones (migrations added
// since the test was written, which touch other tables).
func MigrateApplies(t *testing.T, conn driver.Conn, cfg archive.Config, want ...string) {
	t.Helper()
	applied, err := schema.Migrate(context.Background(), conn, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	// want, then any migrations added after it (none sorts before).
	ok := len(applied) >= len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.HasPrefix(applied[i], want[i]+"_")
	}
	for i := len(want); ok && i < len(applied); i++ {
		ok = applied[i] > applied[i-1]
	}
	if !ok {
		t.Fatalf("applied %v, want %v", applied, want)
	}
}

// PagesBefore recreates the pages table as the migrations before version v
// left it, and forgets that v and later were applied.
func PagesBefore(t *testing.T, conn driver.Conn, cfg archive.Config, v uint32) {
	t.Helper()
	ctx := context.Background()
	// The views reading pages go with it: the migrations before v create
	// theirs again below, and the later ones are created when they run.
	var drops []string
	for _, view := range QueryStrings(t, conn, "SELECT arrayJoin(dependencies_table) FROM system.tables WHERE database = ? AND name = 'pages'", cfg.Database) {
		drops = append(drops, "DROP VIEW IF EXISTS "+cfg.Database+"."+view+" SYNC")
	}
	// job_starts and job_metadata are tables until 0022 makes them views
	// over crawl_stats: the migrations before it make the tables again.
	if v <= 22 {
		for _, view := range QueryStrings(t, conn, "SELECT name FROM system.tables WHERE database = ? AND name IN ('job_starts', 'job_metadata') AND engine = 'View'", cfg.Database) {
			drops = append(drops, "DROP VIEW IF EXISTS "+cfg.Database+"."+view+" SYNC")
		}
	}
	for _, s := range append(drops,
		"DROP TABLE IF EXISTS "+cfg.Database+".pages SYNC",
		fmt.Sprintf("DELETE FROM %s.schema_migrations WHERE version >= %d", cfg.Database, v),
	) {
		if err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	ms, err := schema.Migrations(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version >= v {
			continue
		}
		for _, s := range m.Statements {
			if err := conn.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %s: %v", m.Name, s, err)
			}
		}
	}
}

// ScopedPage is a crawl.page webhook of one fetched page whose webhook
// metadata is metadata.
func ScopedPage(t *testing.T, crawlID, url, metadata string) string {
	t.Helper()
	return ScopedVersion(t, crawlID, url, "text of "+url, 200, metadata)
}

// EndEvent is a job's end delivery (crawl.completed, crawl.cancelled...).
func EndEvent(crawlID, typ, metadata string) string {
	return fmt.Sprintf(`{"success":true,"type":%q,"id":%q,"webhookId":%q,"data":[],"metadata":%s}`, typ, crawlID, uuid.NewString(), metadata)
}

// CrawlSite archives one job: its pages delivered from at on, then its end
// event (none when end is "").
func CrawlSite(t *testing.T, w *archive.Store, crawlID, metadata, end string, urls []string, at time.Time) {
	t.Helper()
	for i, u := range urls {
		InsertDelivery(t, w, ScopedPage(t, crawlID, u, metadata), at.Add(time.Duration(i)*time.Second))
	}
	if end != "" {
		InsertDelivery(t, w, EndEvent(crawlID, end, metadata), at.Add(time.Minute))
	}
}

func ScopedVersion(t *testing.T, crawlID, url, markdown string, status int, metadata string) string {
	t.Helper()
	md, err := json.Marshal(markdown)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":%s,"metadata":{"url":%q,"statusCode":%d}}],"metadata":%s}`,
		crawlID, uuid.NewString(), md, url, status, metadata)
}
