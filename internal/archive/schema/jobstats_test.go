package schema_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// TestPerJobViewsFolded migrates an archive that kept jobs' starts and
// webhook metadata in tables of their own (the schema before 0022) and
// checks what change tracking relies on: job_starts, job_metadata,
// job_scopes and page_changes answer exactly what they answered before,
// for a job whose pages are gone too (their starts were only in the old
// tables); a job archived after the migration is in them; and an insert
// into pages runs two views, not five.
func TestPerJobViewsFolded(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.OpenDatabase(t)
	ctx := context.Background()
	ms, err := schema.Migrations(cfg)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ms, func(m schema.Migration) bool { return m.Version == 22 })
	if i < 0 {
		t.Fatal("no migration 0022")
	}
	if _, err := schema.MigrateOnly(ctx, conn, cfg, ms[:i]); err != nil {
		t.Fatal(err)
	}
	w := archivetest.NewStore(t, conn, cfg)
	earlierAt := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	deliverJob(t, w, earlierJob, earlierPages, earlierAt)
	deliverJob(t, w, laterJob, laterPages, earlierAt.Add(24*time.Hour))
	backfillAdded(t, w)
	// A job of the batch kind whose webhook metadata names a scope.
	scoped := uuid.NewString()
	archivetest.InsertDelivery(t, w, fmt.Sprintf(`{"success":true,"type":"batch_scrape.page","id":%q,"webhookId":%q,"data":[{"markdown":"x","metadata":{"url":"https://other.test/","statusCode":200}}],"metadata":{"scope":"docs","limit":50}}`,
		scoped, uuid.NewString()), earlierAt.Add(48*time.Hour))
	// The earlier job's pages expired: what it started at is only in
	// job_starts now, and change tracking still orders its versions by it.
	if err := conn.Exec(ctx, "ALTER TABLE "+cfg.Database+".pages DELETE WHERE crawl_id = '"+earlierJob+"' SETTINGS mutations_sync = 2"); err != nil {
		t.Fatal(err)
	}

	perJob := func() []string {
		t.Helper()
		var out []string
		for _, q := range []string{
			"SELECT concat(toString(crawl_id), ' ', ifNull(toString(min(webhook_at)), '-'), ' ', ifNull(toString(min(backfill_at)), '-')) FROM %s.job_starts GROUP BY crawl_id ORDER BY crawl_id",
			"SELECT concat(toString(crawl_id), ' ', max(job_kind), ' ', max(webhook_metadata)) FROM %s.job_metadata GROUP BY crawl_id ORDER BY crawl_id",
			"SELECT concat(toString(crawl_id), ' ', job_kind, ' ', scope, ' ', toString(page_limit)) FROM %s.job_scopes ORDER BY crawl_id",
		} {
			out = append(out, archivetest.QueryStrings(t, conn, fmt.Sprintf(q, cfg.Database))...)
		}
		return out
	}
	before := perJob()
	if len(before) != 9 {
		t.Fatalf("before the migration, %d rows of job_starts, job_metadata and job_scopes, want 3 each: %q", len(before), before)
	}
	changes := func() {
		t.Helper()
		got := readChanges(t, conn, cfg.Database)
		if c := got[scoped+" https://other.test/"]; c != (change{"new", ""}) {
			t.Errorf("the scoped job's page: %+v, want new", c)
		}
		delete(got, scoped+" https://other.test/")
		checkChanges(t, got)
	}
	changes()

	if _, err := schema.Migrate(ctx, conn, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if after := perJob(); !slices.Equal(after, before) {
		t.Errorf("after the migration:\n%s\nwant what it answered before:\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
	changes()
	for _, name := range []string{"job_starts", "job_metadata"} {
		if engine := archivetest.QueryStrings(t, conn, "SELECT engine FROM system.tables WHERE database = ? AND name = ?", cfg.Database, name); !slices.Equal(engine, []string{"View"}) {
			t.Errorf("%s is %q, want a view over crawl_stats", name, engine)
		}
	}
	if left := archivetest.QueryStrings(t, conn, "SELECT name FROM system.tables WHERE database = ? AND name LIKE '%replacement%'", cfg.Database); len(left) > 0 {
		t.Errorf("tables left by the migration: %q", left)
	}
	views := archivetest.QueryStrings(t, conn, "SELECT arrayJoin(dependencies_table) FROM system.tables WHERE database = ? AND name = 'pages'", cfg.Database)
	slices.Sort(views)
	if want := []string{"crawl_stats_from_pages", "page_versions_from_pages"}; !slices.Equal(views, want) {
		t.Errorf("an insert into pages runs the views %q, want %q", views, want)
	}

	// A job archived after the migration: its start, kind and scope.
	next := uuid.NewString()
	nextAt := earlierAt.Add(72 * time.Hour)
	archivetest.InsertDelivery(t, w, fmt.Sprintf(`{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":"y","metadata":{"url":"https://next.test/","statusCode":200}}],"metadata":{"scope":"next","limit":7}}`,
		next, uuid.NewString()), nextAt)
	got := perJob()
	for _, want := range []string{
		next + " " + nextAt.Format("2006-01-02 15:04:05.000") + " -",
		next + ` crawl {"scope":"next","limit":7}`,
		next + " crawl next 7",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("no row %q after a job archived after the migration:\n%s", want, strings.Join(got, "\n"))
		}
	}
}
