package query_test

import (
	"context"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
)

// TestEveryReadRunsUnderTheLimits: every method the read API calls (each
// method of reader.Archive, found by reflection, so that a new one without
// a case here fails) runs its queries under the limits, whatever it reads
// (a diff's versions, a history, an export, over the native protocol or
// HTTP): under a memory limit of one byte and one row, ClickHouse stops each, and the
// method fails with ErrLimit (the API's 422 query_limit).
func TestEveryReadRunsUnderTheLimits(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	ctx := context.Background()
	jobX, jobY := uuid.NewString(), uuid.NewString()
	const url = "https://limits.example/plum"
	t0 := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	archivetest.InsertDelivery(t, w, readPageBody(jobX, url, "Plum", "a plum tart", 200), t0)
	archivetest.InsertDelivery(t, w, readPageBody(jobY, url, "Plum", "a plum cake", 200), t0.Add(time.Hour))
	archivetest.InsertDelivery(t, w, readPageBody(jobX, url+"/gone", "Gone", "gone", 500), t0)
	if _, err := w.RecordBlockedURLs(ctx, jobX, []string{url + "/private/1", url + "/private/2", url + "/private/3"}); err != nil {
		t.Fatal(err)
	}

	// ClickHouse stops a query that allocates memory or gives more than
	// one row.
	limits := query.Limits{MaxExecutionTime: time.Minute, MaxResultRows: 1, MaxMemoryUsage: 1, ExportExecutionTime: time.Minute}
	base, err := query.NewReader(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := base.WithReadOptions(query.ReadOptions{Limits: limits, FeedSettle: time.Millisecond, HTTPURL: clickhousetest.HTTPURL(t)})
	if err != nil {
		t.Fatal(err)
	}

	calls := map[string]func() error{
		"Search": func() error {
			if _, err := r.Search(ctx, query.SearchQuery{Text: "plum"}); err != nil {
				return err
			}
			// A phrase and a change class: the candidates, their check
			// and their classes.
			_, err := r.Search(ctx, query.SearchQuery{Text: `"plum cake"`, Change: "changed"})
			return err
		},
		"Page": func() error {
			_, err := r.Page(ctx, url, "", query.PageParts{Markdown: true, HTML: true, Document: true})
			return err
		},
		"History": func() error { _, err := r.History(ctx, url); return err },
		"Versions": func() error {
			_, _, err := r.Versions(ctx, url, "", "")
			return err
		},
		"Comparisons": func() error {
			_, err := r.Comparisons(ctx, []query.VersionKey{{CrawlID: uuid.MustParse(jobY), URL: url}})
			return err
		},
		"RemovedBy": func() error { _, err := r.RemovedBy(ctx, url, uuid.MustParse(jobY)); return err },
		"JobsChangeCounts": func() error {
			_, err := r.JobsChangeCounts(ctx, []uuid.UUID{uuid.MustParse(jobX), uuid.MustParse(jobY)})
			return err
		},
		"Jobs":      func() error { _, err := r.Jobs(ctx, query.JobsQuery{}); return err },
		"JobStatus": func() error { _, err := r.JobStatus(ctx, jobX, 5); return err },
		"JobChanges": func() error {
			_, err := r.JobChanges(ctx, jobY, query.ChangeQuery{MaxURLs: 10})
			return err
		},
		"Failures": func() error { _, err := r.Failures(ctx, query.FailuresQuery{Job: jobX}); return err },
		"Blocked":  func() error { _, err := r.Blocked(ctx, query.BlockedQuery{Job: jobX}); return err },
		"Changes":  func() error { _, err := r.Changes(ctx, query.FeedQuery{}); return err },
		"ExportNDJSON": func() error {
			if _, err := r.ExportNDJSON(ctx, jobX, query.NDJSONOptions{}, io.Discard); !errors.Is(err, query.ErrLimit) {
				return err
			}
			// With changeTracking: the join of the classes, the removals.
			_, err := r.ExportNDJSON(ctx, jobY, query.NDJSONOptions{ChangeTracking: true}, io.Discard)
			return err
		},
		"ExportParquet": func() error {
			_, err := r.ExportParquet(ctx, jobX, io.Discard)
			return err
		},
		"ExportWARC": func() error {
			_, err := r.ExportWARC(ctx, jobX, query.WARCOptions{}, io.Discard)
			return err
		},
		"ExportCDXJ": func() error {
			_, err := r.ExportCDXJ(ctx, jobX, query.WARCOptions{}, io.Discard)
			return err
		},
		"ExportWACZ": func() error {
			_, err := r.ExportWACZ(ctx, jobX, io.Discard)
			return err
		},
	}
	api := reflect.TypeFor[reader.Archive]()
	for i := range api.NumMethod() {
		m := api.Method(i).Name
		call := calls[m]
		if call == nil {
			t.Fatalf("reader.Archive.%s has no case here: add one", m)
		}
		if err := call(); !errors.Is(err, query.ErrLimit) {
			t.Errorf("%s under a memory limit of one byte and one row: %v, want ErrLimit", m, err)
		}
	}
}
