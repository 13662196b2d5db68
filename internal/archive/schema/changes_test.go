package schema_test

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/events"
)

// The earlier job has the greater id: jobs are ordered by when they
// started, not by id nor by when their pages were archived.
const (
	earlierJob = "22222222-2222-4222-8222-222222222222"
	laterJob   = "11111111-1111-4111-8111-111111111111"
)

type version struct {
	url, markdown string
	status        int
}

// The two crawls of a site: the earlier one, and the later one with one
// page equal but for its whitespace, one reordered, one edited, one gone
// and one added.
var (
	earlierPages = []version{
		{"https://site.test/spaces", "# Prices\n\nBasic  plan: 10 EUR", 200},
		{"https://site.test/reordered", "alpha beta gamma", 200},
		{"https://site.test/edited", "Price: 10 EUR", 200},
		{"https://site.test/gone", "Old offer", 200},
		{"https://site.test/still-gone", "", 410},
	}
	laterPages = []version{
		{"https://site.test/spaces", "\u00a0# Prices\r\n\t\nBasic\u3000plan:  10 EUR\n", 200},
		{"https://site.test/reordered", "gamma beta alpha", 200},
		{"https://site.test/edited", "Price: 12 EUR", 200},
		{"https://site.test/gone", "Not found", 404},
		{"https://site.test/still-gone", "", 410},
	}
	// Added in the later crawl, archived by its backfill.
	addedPage = version{"https://site.test/added", "A new page", 200}
)

type change struct{ class, previous string }

// wantChanges is what page_changes must say of both crawls, however their
// pages arrived.
var wantChanges = map[string]change{
	earlierJob + " https://site.test/spaces":     {"new", ""},
	earlierJob + " https://site.test/reordered":  {"new", ""},
	earlierJob + " https://site.test/edited":     {"new", ""},
	earlierJob + " https://site.test/gone":       {"new", ""},
	earlierJob + " https://site.test/still-gone": {"removed", ""},
	laterJob + " https://site.test/spaces":       {"same", earlierJob},
	laterJob + " https://site.test/reordered":    {"changed", earlierJob},
	laterJob + " https://site.test/edited":       {"changed", earlierJob},
	laterJob + " https://site.test/gone":         {"removed", earlierJob},
	laterJob + " https://site.test/still-gone":   {"same", earlierJob},
	laterJob + " https://site.test/added":        {"new", ""},
}

// deliverJob archives a crawl's pages as webhook deliveries received from
// start on, a second apart, each delivered twice (a sender retry): the
// job's own duplicates.
func deliverJob(t *testing.T, w *archive.Store, crawlID string, pages []version, start time.Time) {
	t.Helper()
	for i, p := range pages {
		body := archivetest.PageBody(t, crawlID, p.url, p.markdown, p.status)
		at := start.Add(time.Duration(i) * time.Second)
		archivetest.InsertDelivery(t, w, body, at)
		archivetest.InsertDelivery(t, w, body, at.Add(time.Minute))
	}
}

func backfillAdded(t *testing.T, w *archive.Store) {
	t.Helper()
	doc := archivetest.MustDecode(t, archivetest.PageBody(t, laterJob, addedPage.url, addedPage.markdown, addedPage.status)).Data[0]
	if _, err := w.InsertBackfill(context.Background(), laterJob, events.KindCrawl, []events.Document{doc}); err != nil {
		t.Fatal(err)
	}
}

func readChanges(t *testing.T, conn driver.Conn, database string) map[string]change {
	t.Helper()
	rows, err := conn.Query(context.Background(),
		"SELECT toString(crawl_id), url, change, ifNull(toString(previous_crawl_id), '') FROM "+database+".page_changes")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]change{}
	for rows.Next() {
		var crawlID, url string
		var c change
		if err := rows.Scan(&crawlID, &url, &c.class, &c.previous); err != nil {
			t.Fatal(err)
		}
		if _, dup := got[crawlID+" "+url]; dup {
			t.Errorf("%s %s: more than one row", crawlID, url)
		}
		got[crawlID+" "+url] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func checkChanges(t *testing.T, got map[string]change) {
	t.Helper()
	for key, want := range wantChanges {
		if got[key] != want {
			t.Errorf("%s: %+v, want %+v", key, got[key], want)
		}
	}
	if len(got) != len(wantChanges) {
		t.Errorf("%d versions classified, want %d: %v", len(got), len(wantChanges), got)
	}
}

// TestPageChanges: a recrawl's pages classified against the earlier crawl's
// (whitespace only is same, reordered and edited are changed, 404 and 410
// are removed, a URL never archived is new), the same whether the later
// crawl arrived first, whether a page was delivered or backfilled, and after
// the versions are delivered again.
func TestPageChanges(t *testing.T) {
	t.Parallel()
	earlierAt := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	laterAt := earlierAt.Add(24 * time.Hour)
	for _, tc := range []struct {
		name    string
		archive func(t *testing.T, w *archive.Store)
	}{
		{"in order", func(t *testing.T, w *archive.Store) {
			deliverJob(t, w, earlierJob, earlierPages, earlierAt)
			deliverJob(t, w, laterJob, laterPages, laterAt)
			backfillAdded(t, w)
		}},
		// The later crawl's pages archived before the earlier crawl's (a
		// sink that was behind, a backfill of the earlier crawl run late):
		// jobs are ordered by when they started, not by when they arrived.
		{"later crawl archived first", func(t *testing.T, w *archive.Store) {
			backfillAdded(t, w)
			deliverJob(t, w, laterJob, laterPages, laterAt)
			deliverJob(t, w, earlierJob, earlierPages, earlierAt)
		}},
		// The added page delivered by webhook instead of backfilled.
		{"added page delivered", func(t *testing.T, w *archive.Store) {
			deliverJob(t, w, earlierJob, earlierPages, earlierAt)
			deliverJob(t, w, laterJob, append(laterPages[:len(laterPages):len(laterPages)], addedPage), laterAt)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, cfg := archivetest.StartClickHouse(t)
			w := archivetest.NewStore(t, conn, cfg)
			tc.archive(t, w)
			checkChanges(t, readChanges(t, conn, cfg.Database))

			// Every version archived again, after both crawls (a replay
			// from the stream, a redrive, the sender's late retries):
			// nothing moves.
			replayAt := laterAt.Add(48 * time.Hour)
			for _, p := range earlierPages {
				archivetest.InsertDelivery(t, w, archivetest.PageBody(t, earlierJob, p.url, p.markdown, p.status), replayAt)
			}
			for _, p := range append(laterPages[:len(laterPages):len(laterPages)], addedPage) {
				archivetest.InsertDelivery(t, w, archivetest.PageBody(t, laterJob, p.url, p.markdown, p.status), replayAt)
			}
			checkChanges(t, readChanges(t, conn, cfg.Database))
		})
	}
}
