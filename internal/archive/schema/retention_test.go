package schema_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// TestRetentionExpiresOldRowsKeepingTheNewestVersions sets a retention on
// an archive holding rows of every age and lets ClickHouse's own merges
// (OPTIMIZE ... FINAL) apply it: page versions, failures and raw events
// past their age are gone, except the two newest versions of each URL,
// however old, which change tracking still compares. The ages are in the
// rows (received_at in the past), not in the test's clock.
func TestRetentionExpiresOldRowsKeepingTheNewestVersions(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	ctx := context.Background()
	w := archivetest.NewStore(t, conn, cfg)
	now := time.Now().UTC().Truncate(time.Millisecond)
	daysAgo := func(d int) time.Time { return now.Add(-time.Duration(d) * 24 * time.Hour) }

	// Five jobs of one site, 400 to 5 days old; /page is in all of them,
	// /once only in the oldest, /broken only failed (a 503) in the oldest.
	ages := []int{400, 300, 200, 100, 5}
	jobs := make([]uuid.UUID, len(ages))
	var rows archive.Rows
	for i, age := range ages {
		jobs[i] = uuid.New()
		rows.Pages = append(rows.Pages, archive.Page{CrawlID: jobs[i], URL: "https://site.test/page", WebhookID: uuid.New(),
			Origin: archive.OriginWebhook, Success: true, StatusCode: 200, Markdown: "text of job " + string(rune('A'+i)), ReceivedAt: daysAgo(age)})
	}
	rows.Pages = append(rows.Pages,
		archive.Page{CrawlID: jobs[0], URL: "https://site.test/once", WebhookID: uuid.New(), Origin: archive.OriginWebhook,
			Success: true, StatusCode: 200, Markdown: "once", ReceivedAt: daysAgo(400)},
		archive.Page{CrawlID: jobs[0], URL: "https://site.test/broken", WebhookID: uuid.New(), Origin: archive.OriginWebhook,
			Success: false, StatusCode: 503, Error: "unavailable", ReceivedAt: daysAgo(400)})
	rows.Failures = []archive.Failure{
		{CrawlID: jobs[0], WebhookID: uuid.New(), URL: "https://site.test/broken", StatusCode: 503, Reason: "failed", ReceivedAt: daysAgo(400)},
		{CrawlID: jobs[4], WebhookID: uuid.New(), URL: "https://site.test/broken", StatusCode: 503, Reason: "failed", ReceivedAt: daysAgo(5)},
	}
	rows.RawEvents = []archive.RawEvent{
		{JobID: "extract-old", Type: "extract.completed", WebhookID: uuid.New(), Success: true, Event: []byte(`{}`), ReceivedAt: daysAgo(400)},
		{JobID: "extract-new", Type: "extract.completed", WebhookID: uuid.New(), Success: true, Event: []byte(`{}`), ReceivedAt: daysAgo(5)},
	}
	if err := w.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}

	r := schema.Retention{PageDays: 30, KeepVersions: 2, FailureDays: 30, EventDays: 30}
	if applied, err := schema.ApplyRetention(ctx, conn, cfg, r, zerolog.Nop()); err != nil || !applied {
		t.Fatalf("apply the retention: applied %v, %v", applied, err)
	}
	expire(t, conn, cfg, "pages", "failures", "events")

	pageJobs := func(url string) []string {
		return archivetest.QueryStrings(t, conn, "SELECT toString(crawl_id) FROM "+cfg.Database+".pages FINAL WHERE url = ? ORDER BY received_at", url)
	}
	if got, want := pageJobs("https://site.test/page"), []string{jobs[3].String(), jobs[4].String()}; !slices.Equal(got, want) {
		t.Errorf("versions of /page kept: %v, want the two newest jobs %v (the others are older than 30 days)", got, want)
	}
	if got := pageJobs("https://site.test/once"); !slices.Equal(got, []string{jobs[0].String()}) {
		t.Errorf("versions of /once kept: %v, want its only version, 400 days old", got)
	}
	if got := pageJobs("https://site.test/broken"); len(got) != 0 {
		t.Errorf("the failed fetch of /broken, 400 days old, is still in pages: %v", got)
	}
	if got := archivetest.QueryStrings(t, conn, "SELECT toString(received_at) FROM "+cfg.Database+".failures FINAL"); len(got) != 1 {
		t.Errorf("failures kept: %v, want the one 5 days old", got)
	}
	if got := archivetest.QueryStrings(t, conn, "SELECT job_id FROM "+cfg.Database+".events FINAL"); !slices.Equal(got, []string{"extract-new"}) {
		t.Errorf("raw events kept: %v, want extract-new", got)
	}
	// Change tracking still classifies the latest version against the one
	// before: its history (page_versions) is not expired.
	if got := archivetest.QueryStrings(t, conn, "SELECT concat(change, ' ', toString(previous_crawl_id)) FROM "+cfg.Database+".page_changes WHERE url = 'https://site.test/page' AND crawl_id = ?", jobs[4]); !slices.Equal(got, []string{"changed " + jobs[3].String()}) {
		t.Errorf("change of the latest /page: %v, want changed against %s", got, jobs[3])
	}

	// A page version arriving late, already past the age, goes at the next
	// merge: the TTL holds for new rows, not only for those there when set.
	late := archive.Rows{Pages: []archive.Page{{CrawlID: uuid.New(), URL: "https://site.test/late", WebhookID: uuid.New(),
		Origin: archive.OriginWebhook, Success: false, StatusCode: 500, ReceivedAt: daysAgo(90)}}}
	if err := w.Insert(ctx, late); err != nil {
		t.Fatal(err)
	}
	expire(t, conn, cfg, "pages")
	if got := pageJobs("https://site.test/late"); len(got) != 0 {
		t.Errorf("a failed fetch 90 days old inserted after the retention was set is still there: %v", got)
	}

	if applied, err := schema.ApplyRetention(ctx, conn, cfg, r, zerolog.Nop()); err != nil || applied {
		t.Errorf("the same retention again: applied %v, %v; want nothing run", applied, err)
	}
}

// TestRetentionResumesAfterEveryStatement stops the change from one
// retention to another after each statement, as a sink killed there leaves
// the archive, and checks that the next start ends with the schema of a
// change never stopped.
func TestRetentionResumesAfterEveryStatement(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	ctx := context.Background()
	from := schema.Retention{PageDays: 0, KeepVersions: 3, FailureDays: 180, EventDays: 10}
	to := schema.Retention{PageDays: 30, KeepVersions: 2, FailureDays: 0, EventDays: 0}
	apply := func(r schema.Retention) {
		t.Helper()
		if _, err := schema.ApplyRetention(ctx, conn, cfg, r, zerolog.Nop()); err != nil {
			t.Fatal(err)
		}
	}
	tables := func() string {
		return strings.Join(archivetest.QueryStrings(t, conn, "SELECT concat(name, ': ', create_table_query) FROM system.tables WHERE database = ? AND name IN ('pages', 'failures', 'events', 'retained_versions') ORDER BY name", cfg.Database), "\n")
	}
	apply(to)
	want := tables()
	for _, line := range strings.Split(want, "\n") {
		name, _, _ := strings.Cut(line, ":")
		if hasTTL := strings.Contains(line, " TTL "); hasTTL != (name == "pages") || name == "pages" && !strings.Contains(line, "toIntervalDay(30)") {
			t.Fatalf("after %s the table has the wrong TTL (only pages has one, of 30 days):\n%s", to, line)
		}
	}
	stmts, err := schema.RetentionStatements(cfg, to)
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= len(stmts); k++ {
		apply(from)
		for _, stmt := range stmts[:k] {
			if err := schema.RunStatement(ctx, conn, cfg, stmt); err != nil {
				t.Fatalf("statement %d before the stop: %v", k, err)
			}
		}
		apply(to)
		if got := tables(); got != want {
			t.Errorf("stopped after statement %d of %d, then started again:\n%s\nwant\n%s", k, len(stmts), got, want)
		}
	}
}

// expire waits for the TTL recomputation MODIFY TTL started, then merges
// each table so that ClickHouse drops its expired rows.
func expire(t *testing.T, conn driver.Conn, cfg archive.Config, tables ...string) {
	t.Helper()
	ctx := context.Background()
	for {
		var running uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.mutations WHERE database = ? AND NOT is_done", cfg.Database).Scan(&running); err != nil {
			t.Fatal(err)
		}
		if running == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, table := range tables {
		if err := conn.Exec(ctx, "OPTIMIZE TABLE "+cfg.Database+"."+table+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
}
