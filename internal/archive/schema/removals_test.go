package schema_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

func readRemovals(t *testing.T, conn driver.Conn, database, crawlID string) map[string]string {
	t.Helper()
	rows, err := conn.Query(context.Background(),
		"SELECT url, toString(previous_crawl_id) FROM "+database+".page_removals WHERE crawl_id = ?", uuid.MustParse(crawlID))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var url, previous string
		if err := rows.Scan(&url, &previous); err != nil {
			t.Fatal(err)
		}
		if _, dup := got[url]; dup {
			t.Errorf("%s removed twice", url)
		}
		got[url] = previous
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestPageRemovals: a URL the previous complete job of the same scope found
// and a complete recrawl did not is removed, and only then: not when the
// recrawl was cancelled, stopped at its limit, is still being backfilled,
// has another scope or limit, or declares none; not either for a URL the
// recrawl found failing. Replayed deliveries change nothing.
func TestPageRemovals(t *testing.T) {
	t.Parallel()
	const (
		docs    = `{"scope":"docs","limit":10}`
		first   = "0193a000-0000-7000-8000-000000000001"
		second  = "0193a000-0000-7000-8000-000000000002"
		third   = "0193a000-0000-7000-8000-000000000003"
		site    = "https://docs.test/"
		firstAt = "2026-11-20T10:00:00Z"
	)
	start, err := time.Parse(time.RFC3339, firstAt)
	if err != nil {
		t.Fatal(err)
	}
	all := []string{site + "a", site + "b", site + "c", site + "d"}
	recrawl := []string{site + "a", site + "b", site + "e"} // c and d not found
	for _, tc := range []struct {
		name string
		// later archives the recrawl (second) after first, complete, has
		// archived all.
		later func(t *testing.T, w *archive.Store)
		want  map[string]string
	}{
		{"complete recrawl", func(t *testing.T, w *archive.Store) {
			archivetest.CrawlSite(t, w, second, docs, "crawl.completed", recrawl, start.Add(24*time.Hour))
		}, map[string]string{site + "c": first, site + "d": first}},
		{"recrawl found c failing", func(t *testing.T, w *archive.Store) {
			archivetest.CrawlSite(t, w, second, docs, "crawl.completed", recrawl, start.Add(24*time.Hour))
			failed := fmt.Sprintf(`{"success":false,"type":"crawl.page","id":%q,"webhookId":%q,"error":"timeout","data":[{"metadata":{"sourceURL":%q}}],"metadata":%s}`,
				second, uuid.NewString(), site+"c", docs)
			archivetest.InsertDelivery(t, w, failed, start.Add(25*time.Hour))
		}, map[string]string{site + "d": first}},
		{"recrawl cancelled", func(t *testing.T, w *archive.Store) {
			archivetest.CrawlSite(t, w, second, docs, "crawl.cancelled", recrawl, start.Add(24*time.Hour))
		}, map[string]string{}},
		// Its completed event, but the API's final status, read by the
		// backfill, says cancelled: the cancellation wins.
		{"recrawl completed, then read as cancelled", func(t *testing.T, w *archive.Store) {
			archivetest.CrawlSite(t, w, second, docs, "crawl.completed", recrawl, start.Add(24*time.Hour))
			if err := w.SetBackfillState(context.Background(), second, "done", "kind=crawl api_status=cancelled"); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{}},
		{"recrawl with no end", func(t *testing.T, w *archive.Store) {
			archivetest.CrawlSite(t, w, second, docs, "", recrawl, start.Add(24*time.Hour))
		}, map[string]string{}},
		// Both jobs with a limit of 5: the earlier one found 4 URLs and is
		// complete, the recrawl found 5, reached its limit and may have
		// stopped there: c and d are not removed.
		{"recrawl stopped at its limit", func(t *testing.T, w *archive.Store) {
			const limit5 = `{"scope":"docs","limit":5}`
			archivetest.CrawlSite(t, w, third, limit5, "crawl.completed", all, start.Add(time.Hour))
			archivetest.CrawlSite(t, w, second, limit5, "crawl.completed", append(recrawl, site+"f", site+"g"), start.Add(24*time.Hour))
		}, map[string]string{}},
		// The crawl API's webhook schema takes metadata values as strings
		// only: "10" is the limit 10, the same scope as the first job's 10.
		{"recrawl with its limit as a string", func(t *testing.T, w *archive.Store) {
			archivetest.CrawlSite(t, w, second, `{"scope":"docs","limit":"10"}`, "crawl.completed", recrawl, start.Add(24*time.Hour))
		}, map[string]string{site + "c": first, site + "d": first}},
		{"recrawl stopped at its limit, given as a string", func(t *testing.T, w *archive.Store) {
			const limit5 = `{"scope":"docs","limit":"5"}`
			archivetest.CrawlSite(t, w, third, limit5, "crawl.completed", all, start.Add(time.Hour))
			archivetest.CrawlSite(t, w, second, limit5, "crawl.completed", append(recrawl, site+"f", site+"g"), start.Add(24*time.Hour))
		}, map[string]string{}},
		{"recrawl of another scope", func(t *testing.T, w *archive.Store) {
			archivetest.CrawlSite(t, w, second, `{"scope":"blog","limit":10}`, "crawl.completed", recrawl, start.Add(24*time.Hour))
		}, map[string]string{}},
		{"recrawl without a scope", func(t *testing.T, w *archive.Store) {
			archivetest.CrawlSite(t, w, second, `{"tenant":"x"}`, "crawl.completed", recrawl, start.Add(24*time.Hour))
		}, map[string]string{}},
		{"backfill still running, then done", func(t *testing.T, w *archive.Store) {
			archivetest.CrawlSite(t, w, second, docs, "crawl.completed", recrawl, start.Add(24*time.Hour))
			if err := w.SetBackfillState(context.Background(), second, "running", "kind=crawl"); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{}},
		// A cancelled job between two complete ones is skipped: the third
		// is compared with the first.
		{"a cancelled job between", func(t *testing.T, w *archive.Store) {
			archivetest.CrawlSite(t, w, second, docs, "crawl.cancelled", all[:1], start.Add(24*time.Hour))
			archivetest.CrawlSite(t, w, third, docs, "crawl.completed", recrawl, start.Add(48*time.Hour))
		}, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, cfg := archivetest.StartClickHouse(t)
			w := archivetest.NewStore(t, conn, cfg)
			archivetest.CrawlSite(t, w, first, docs, "crawl.completed", all, start)
			tc.later(t, w)
			if got := readRemovals(t, conn, cfg.Database, second); !maps.Equal(got, tc.want) {
				t.Errorf("removed by the recrawl: %v, want %v", got, tc.want)
			}
			if got := readRemovals(t, conn, cfg.Database, first); len(got) != 0 {
				t.Errorf("the first job removed %v", got)
			}
			switch tc.name {
			case "backfill still running, then done":
				if err := w.SetBackfillState(context.Background(), second, "done", "kind=crawl api_status=completed"); err != nil {
					t.Fatal(err)
				}
				want := map[string]string{site + "c": first, site + "d": first}
				if got := readRemovals(t, conn, cfg.Database, second); !maps.Equal(got, want) {
					t.Errorf("after the backfill: %v, want %v", got, want)
				}
				// A later run (a replayed end event) that fails, the API
				// having forgotten the job: what the first archived stands.
				if err := w.SetBackfillState(context.Background(), second, "expired", "kind=crawl"); err != nil {
					t.Fatal(err)
				}
				if got := readRemovals(t, conn, cfg.Database, second); !maps.Equal(got, want) {
					t.Errorf("after a later backfill run expired: %v, want %v", got, want)
				}
			case "a cancelled job between":
				want := map[string]string{site + "c": first, site + "d": first}
				if got := readRemovals(t, conn, cfg.Database, third); !maps.Equal(got, want) {
					t.Errorf("removed by the third job: %v, want %v", got, want)
				}
			case "complete recrawl":
				// Everything delivered again: nothing moves.
				archivetest.CrawlSite(t, w, first, docs, "crawl.completed", all, start.Add(72*time.Hour))
				archivetest.CrawlSite(t, w, second, docs, "crawl.completed", recrawl, start.Add(72*time.Hour))
				got := readRemovals(t, conn, cfg.Database, second)
				if !maps.Equal(got, tc.want) {
					t.Errorf("after replays: %v, want %v", slices.Sorted(maps.Keys(got)), tc.want)
				}
			}
		})
	}
}

// TestJobChanges: a job's summary counts each class once per URL, removals
// by status and by absence together, lists the changed and removed URLs in
// URL order up to the bound asked for, and keeps only the URLs matching
// the patterns given.
func TestJobChanges(t *testing.T) {
	t.Parallel()
	const (
		docs   = `{"scope":"docs","limit":10}`
		first  = "0193a000-0000-7000-8000-00000000000a"
		second = "0193a000-0000-7000-8000-00000000000b"
		site   = "https://docs.test/"
	)
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	start := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	archivetest.CrawlSite(t, w, first, docs, "crawl.completed", []string{site + "a", site + "b", site + "c", site + "d", site + "f"}, start)
	later := start.Add(24 * time.Hour)
	for _, v := range []version{
		{site + "a", "text of " + site + "a", 200},
		{site + "b", "text of " + site + "b, edited", 200},
		{site + "f", "text of " + site + "f, edited", 200},
		{site + "c", "Not found", 404},
		{site + "e", "a new page", 200},
	} {
		archivetest.InsertDelivery(t, w, archivetest.ScopedVersion(t, second, v.url, v.markdown, v.status, docs), later)
	}
	archivetest.InsertDelivery(t, w, archivetest.EndEvent(second, "crawl.completed", docs), later.Add(time.Minute))
	r, err := query.NewReader(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		q    query.ChangeQuery
		want query.JobChanges
	}{
		{"all", query.ChangeQuery{MaxURLs: 10}, query.JobChanges{New: 1, Same: 1, Changed: 2, Removed: 2,
			ChangedURLs: []string{site + "b", site + "f"}, RemovedURLs: []string{site + "c", site + "d"}}},
		{"bounded", query.ChangeQuery{MaxURLs: 1}, query.JobChanges{New: 1, Same: 1, Changed: 2, Removed: 2,
			ChangedURLs: []string{site + "b"}, RemovedURLs: []string{site + "c"}}},
		{"patterns", query.ChangeQuery{MaxURLs: 10, URLPatterns: []string{"*/b", "https://docs.test/d*"}}, query.JobChanges{Changed: 1, Removed: 1,
			ChangedURLs: []string{site + "b"}, RemovedURLs: []string{site + "d"}}},
		// No URLs asked for: the counts alone (ClickHouse's
		// groupArraySorted refuses a bound of 0).
		{"counts only", query.ChangeQuery{}, query.JobChanges{New: 1, Same: 1, Changed: 2, Removed: 2}},
		// LIKE's own wildcards in a pattern are literal.
		{"literal underscore", query.ChangeQuery{MaxURLs: 10, URLPatterns: []string{"https://docs_test/*"}}, query.JobChanges{}},
	} {
		got, err := r.JobChanges(ctx, second, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		tc.want.CrawlID, tc.want.Kind, tc.want.Scope, tc.want.Complete = second, "crawl", "docs", true
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	got, err := r.JobChanges(ctx, first, query.ChangeQuery{MaxURLs: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got.New != 5 || got.Same+got.Changed+got.Removed != 0 || !got.Complete {
		t.Errorf("the first job: %+v, want 5 new and complete", got)
	}
}

// TestPageRemovalsOnCluster: on two shards, the versions and pages of a
// job spread over both; removals, classes and a job's summary read through
// either node are those of one server.
func TestPageRemovalsOnCluster(t *testing.T) {
	t.Parallel()
	c := clickhousetest.StartCluster(t, 2)
	cfg := archive.Config{Addr: c.Addr(0), Database: "crawl", User: "default", Cluster: c.Name}
	ctx := context.Background()
	nodes := c.OpenAll(t)
	if _, err := schema.MigrateNodes(ctx, nodes, cfg, schema.NodeOptions{}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	const (
		docs   = `{"scope":"docs","limit":100}`
		first  = "0193d000-0000-7000-8000-000000000001"
		second = "0193d000-0000-7000-8000-000000000002"
		site   = "https://docs.test/"
	)
	var all []string
	for i := range 20 {
		all = append(all, fmt.Sprintf("%s%02d", site, i))
	}
	start := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	archivetest.CrawlSite(t, archivetest.NewStore(t, nodes[0], cfg), first, docs, "crawl.completed", all, start)
	// The recrawl through the other node, without the last four pages.
	archivetest.CrawlSite(t, archivetest.NewStore(t, nodes[1], cfg), second, docs, "crawl.completed", all[:16], start.Add(24*time.Hour))
	want := map[string]string{}
	for _, u := range all[16:] {
		want[u] = first
	}
	for i, conn := range nodes {
		if got := readRemovals(t, conn, cfg.Database, second); !maps.Equal(got, want) {
			t.Errorf("through node %d: removed %v, want %v", i+1, got, want)
		}
		nc := cfg
		nc.Addr = c.Addr(i)
		r, err := query.NewReader(conn, nc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.JobChanges(ctx, second, query.ChangeQuery{MaxURLs: 2})
		if err != nil {
			t.Fatal(err)
		}
		if got.Same != 16 || got.Removed != 4 || got.New+got.Changed != 0 || !got.Complete || got.Scope != "docs" ||
			!slices.Equal(got.RemovedURLs, all[16:18]) {
			t.Errorf("through node %d: summary %+v, want 16 same, 4 removed (%v first), complete, scope docs", i+1, got, all[16:18])
		}
	}
}
