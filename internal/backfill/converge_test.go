package backfill

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
	"github.com/google/uuid"
)

const (
	run2Crawl       = "01a20984-1bf0-721d-b01c-7b602d8c6e1e"
	run2Missing     = "http://127.0.0.1:57080/pages/missing.html"
	run2MissingHook = "a7f13b20-7f60-43e3-8765-923db6b4bcdd"
)

// TestBackfillConvergesOnFailedPages: the real API lists a page whose target
// answered 404 among its documents (success:true, statusCode 404). Delivered
// by webhook first, it is present: backfilling the crawl twice leaves its
// one delivered row (origin webhook, webhook id kept) and one failure, and
// the second run inserts nothing at all.
func TestBackfillConvergesOnFailedPages(t *testing.T) {
	t.Parallel()
	r := newRig(t, crawlsim.APIOptions{})
	status, err := os.ReadFile("../../testdata/fixtures/firecrawl-2026/run2-crawl-status.json")
	if err != nil {
		t.Fatal(err)
	}
	api := httptestServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "Bearer "+testKey {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if req.URL.Path != "/v2/crawl/"+run2Crawl {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Write(status)
	}))
	t.Cleanup(api.Close)
	r.simURL = api.URL

	// The webhook path delivered five pages and the 404 page.
	var rows archive.Rows
	for _, name := range []string{"0002", "0003", "0004", "0005", "0006", "0042"} {
		name = filepath.Join("../../testdata/fixtures/firecrawl-2026/run2", name+"-crawl.page.body")
		body, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := events.DecodeAccepted(body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rs, err := archive.EventRows(ev, body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		rows.Add(rs)
	}
	if len(rows.Pages) != 6 || len(rows.Failures) != 1 {
		t.Fatalf("fixtures: %d pages, %d failures", len(rows.Pages), len(rows.Failures))
	}
	ctx := context.Background()
	if err := r.writer.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}

	rec, _ := r.reconciler("replica-1", nil, ReconcilerConfig{})
	for run, want := range []struct{ inserted, present int }{{35, 6}, {0, 41}} {
		res, err := rec.Reconcile(ctx, run2Crawl, true)
		if err != nil || res.State != StateDone || res.Fetched != 41 || res.Inserted != want.inserted || res.Present != want.present {
			t.Fatalf("run %d: %+v %v", run+1, res, err)
		}

		pages, origin := r.pages(run2Crawl)
		if len(pages) != 41 {
			t.Fatalf("run %d: %d URLs archived, want 41", run+1, len(pages))
		}
		for u, n := range pages {
			if n != 1 {
				t.Fatalf("run %d: %s has %d rows", run+1, u, n)
			}
		}
		if origin[run2Missing] != archive.OriginWebhook {
			t.Fatalf("run %d: the 404 page's origin is %q", run+1, origin[run2Missing])
		}
		var hook string
		if err := r.conn.QueryRow(ctx, "SELECT toString(webhook_id) FROM "+r.db+".pages FINAL WHERE crawl_id = ? AND url = ?",
			uuid.MustParse(run2Crawl), run2Missing).Scan(&hook); err != nil || hook != run2MissingHook {
			t.Fatalf("run %d: the 404 page's webhook id %q %v", run+1, hook, err)
		}
		var failureRows uint64
		if err := r.conn.QueryRow(ctx, "SELECT count() FROM "+r.db+".failures WHERE crawl_id = ?", uuid.MustParse(run2Crawl)).Scan(&failureRows); err != nil || failureRows != 1 {
			t.Fatalf("run %d: %d failure rows %v, want 1", run+1, failureRows, err)
		}
		recent, err := r.writer.RecentFailures(ctx, run2Crawl, time.Now().Add(-time.Hour))
		if err != nil || recent.Failures != 1 || recent.LastURL != run2Missing {
			t.Fatalf("run %d: RecentFailures %+v %v, want 1", run+1, recent, err)
		}
		c, err := r.writer.Crawl(ctx, run2Crawl)
		if err != nil || c.Failures != 1 || c.PagesReceived != 6 || c.PagesBackfilled != 35 {
			t.Fatalf("run %d: crawls row %+v %v", run+1, c, err)
		}
	}
}
