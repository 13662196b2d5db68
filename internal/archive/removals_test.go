package archive_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/google/uuid"
)

// scopedPage is a crawl.page webhook of one fetched page whose webhook
// metadata is metadata.
func scopedPage(t *testing.T, crawlID, url, metadata string) string {
	t.Helper()
	md, err := json.Marshal("text of " + url)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":%s,"metadata":{"url":%q,"statusCode":200}}],"metadata":%s}`,
		crawlID, uuid.NewString(), md, url, metadata)
}

// endEvent is a job's end delivery (crawl.completed, crawl.cancelled...).
func endEvent(crawlID, typ, metadata string) string {
	return fmt.Sprintf(`{"success":true,"type":%q,"id":%q,"webhookId":%q,"data":[],"metadata":%s}`, typ, crawlID, uuid.NewString(), metadata)
}

// crawlSite archives one job: its pages delivered from at on, then its end
// event (none when end is "").
func crawlSite(t *testing.T, w *archive.Store, crawlID, metadata, end string, urls []string, at time.Time) {
	t.Helper()
	for i, u := range urls {
		insertDelivery(t, w, scopedPage(t, crawlID, u, metadata), at.Add(time.Duration(i)*time.Second))
	}
	if end != "" {
		insertDelivery(t, w, endEvent(crawlID, end, metadata), at.Add(time.Minute))
	}
}

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
			crawlSite(t, w, second, docs, "crawl.completed", recrawl, start.Add(24*time.Hour))
		}, map[string]string{site + "c": first, site + "d": first}},
		{"recrawl found c failing", func(t *testing.T, w *archive.Store) {
			crawlSite(t, w, second, docs, "crawl.completed", recrawl, start.Add(24*time.Hour))
			failed := fmt.Sprintf(`{"success":false,"type":"crawl.page","id":%q,"webhookId":%q,"error":"timeout","data":[{"metadata":{"sourceURL":%q}}],"metadata":%s}`,
				second, uuid.NewString(), site+"c", docs)
			insertDelivery(t, w, failed, start.Add(25*time.Hour))
		}, map[string]string{site + "d": first}},
		{"recrawl cancelled", func(t *testing.T, w *archive.Store) {
			crawlSite(t, w, second, docs, "crawl.cancelled", recrawl, start.Add(24*time.Hour))
		}, map[string]string{}},
		{"recrawl with no end", func(t *testing.T, w *archive.Store) {
			crawlSite(t, w, second, docs, "", recrawl, start.Add(24*time.Hour))
		}, map[string]string{}},
		{"recrawl stopped at its limit", func(t *testing.T, w *archive.Store) {
			crawlSite(t, w, second, `{"scope":"docs","limit":3}`, "crawl.completed", recrawl, start.Add(24*time.Hour))
		}, map[string]string{}},
		{"recrawl of another scope", func(t *testing.T, w *archive.Store) {
			crawlSite(t, w, second, `{"scope":"blog","limit":10}`, "crawl.completed", recrawl, start.Add(24*time.Hour))
		}, map[string]string{}},
		{"recrawl without a scope", func(t *testing.T, w *archive.Store) {
			crawlSite(t, w, second, `{"tenant":"x"}`, "crawl.completed", recrawl, start.Add(24*time.Hour))
		}, map[string]string{}},
		{"backfill still running, then done", func(t *testing.T, w *archive.Store) {
			crawlSite(t, w, second, docs, "crawl.completed", recrawl, start.Add(24*time.Hour))
			if err := w.SetBackfillState(context.Background(), second, "running", "kind=crawl"); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{}},
		// A cancelled job between two complete ones is skipped: the third
		// is compared with the first.
		{"a cancelled job between", func(t *testing.T, w *archive.Store) {
			crawlSite(t, w, second, docs, "crawl.cancelled", all[:1], start.Add(24*time.Hour))
			crawlSite(t, w, third, docs, "crawl.completed", recrawl, start.Add(48*time.Hour))
		}, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, cfg := startClickHouse(t)
			w := newStore(t, conn, cfg)
			crawlSite(t, w, first, docs, "crawl.completed", all, start)
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
			case "a cancelled job between":
				want := map[string]string{site + "c": first, site + "d": first}
				if got := readRemovals(t, conn, cfg.Database, third); !maps.Equal(got, want) {
					t.Errorf("removed by the third job: %v, want %v", got, want)
				}
			case "complete recrawl":
				// Everything delivered again: nothing moves.
				crawlSite(t, w, first, docs, "crawl.completed", all, start.Add(72*time.Hour))
				crawlSite(t, w, second, docs, "crawl.completed", recrawl, start.Add(72*time.Hour))
				got := readRemovals(t, conn, cfg.Database, second)
				if !maps.Equal(got, tc.want) {
					t.Errorf("after replays: %v, want %v", slices.Sorted(maps.Keys(got)), tc.want)
				}
			}
		})
	}
}
