package query_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
)

// TestFailedFetchBetweenVersions: a crawl, a crawl in which some pages'
// fetches failed (a timeout, an answer 503 the crawl API called a
// success, its job's cancellation), and a third crawl. The failed fetches
// are no versions: the third crawl's pages are compared with the first
// crawl's, so an unchanged page is same (not changed, not new) and an
// edited one changed against the first; the failures stay in the job's
// failures. Against a real ClickHouse (docs/search.md, "A failed fetch
// between two versions").
func TestFailedFetchBetweenVersions(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	// A minute per query: the machine is shared, and the outcome is
	// asserted, not the time.
	limits := query.DefaultLimits
	limits.MaxExecutionTime = time.Minute
	r, err := apiReader(t, conn, cfg, time.Millisecond).WithReadOptions(query.ReadOptions{Limits: limits, FeedSettle: time.Millisecond, CursorKey: []byte("test key")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	job1, job2, job3 := uuid.NewString(), uuid.NewString(), uuid.NewString()
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	const timeout, unavailable, cancelled, edited = "https://f.example/timeout", "https://f.example/503", "https://f.example/cancelled", "https://f.example/edited"
	text := func(u string) string { return "The text of " + u + "." }
	for i, u := range []string{timeout, unavailable, cancelled, edited} {
		archivetest.InsertDelivery(t, w, readPageBody(job1, u, "one", text(u), 200), t0.Add(time.Duration(i)*time.Second))
	}
	t1 := t0.Add(time.Hour)
	archivetest.InsertDelivery(t, w, readFailureBody(job2, timeout, "timeout reaching the page"), t1)
	archivetest.InsertDelivery(t, w, readPageBody(job2, unavailable, "busy", "Service Unavailable", 503), t1.Add(time.Second))
	archivetest.InsertDelivery(t, w, readFailureBody(job2, cancelled, "Parent crawl/batch scrape was cancelled"), t1.Add(2*time.Second))
	archivetest.InsertDelivery(t, w, readFailureBody(job2, edited, "timeout reaching the page"), t1.Add(3*time.Second))
	t2 := t0.Add(2 * time.Hour)
	for i, u := range []string{timeout, unavailable, cancelled} {
		archivetest.InsertDelivery(t, w, readPageBody(job3, u, "three", "The text of "+u+".  ", 200), t2.Add(time.Duration(i)*time.Second))
	}
	archivetest.InsertDelivery(t, w, readPageBody(job3, edited, "three", "Edited since.", 200), t2.Add(3*time.Second))

	for _, u := range []string{timeout, unavailable, cancelled, edited} {
		h, err := r.History(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		want := events.ChangeSame
		if u == edited {
			want = events.ChangeChanged
		}
		if len(h) != 2 || h[0].CrawlID.String() != job1 || h[0].Change != events.ChangeNew || h[1].CrawlID.String() != job3 ||
			h[1].Change != want || h[1].PreviousCrawlID == nil || h[1].PreviousCrawlID.String() != job1 {
			t.Errorf("%s: history %s, want job 1 new then job 3 %s against job 1", u, historyString(h), want)
		}
	}
	jc, err := r.JobChanges(ctx, job3, query.ChangeQuery{MaxURLs: 10})
	if err != nil {
		t.Fatal(err)
	}
	if jc.New != 0 || jc.Changed != 1 || jc.Same != 3 || jc.Removed != 0 {
		t.Errorf("job 3 changes: %+v, want 1 changed, 3 same", jc)
	}
	if f, err := r.Failures(ctx, query.FailuresQuery{Job: job2}); err != nil || len(f.Failures) < 3 {
		t.Errorf("job 2 failures: %+v %v, want its failed fetches kept", f, err)
	}
	// The changes feed carries each version's class: job 3's pages the
	// classes above, job 2's 503 page (no version) and failures none.
	feed, err := r.Changes(ctx, query.FeedQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, it := range feed.Items {
		got[it.Kind+" "+it.CrawlID.String()[:8]+" "+it.URL] = it.Change
	}
	for key, want := range map[string]string{
		"page " + job1[:8] + " " + timeout: events.ChangeNew, "page " + job3[:8] + " " + timeout: events.ChangeSame,
		"page " + job3[:8] + " " + edited: events.ChangeChanged, "page " + job2[:8] + " " + unavailable: "",
		"failure " + job2[:8] + " " + cancelled: "",
	} {
		if c, ok := got[key]; !ok || c != want {
			t.Errorf("feed item %s: class %q (present %v), want %q", key, c, ok, want)
		}
	}
}

func historyString(h []query.HistoryEntry) string {
	s := ""
	for _, e := range h {
		s += fmt.Sprintf("[%s %s prev %v] ", e.CrawlID, e.Change, e.PreviousCrawlID)
	}
	return s
}
