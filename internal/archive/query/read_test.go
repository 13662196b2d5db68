package query_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/google/uuid"
)

// pageBody is a crawl.page delivery of one page of job.
func readPageBody(job, url, title, markdown string, status int) string {
	return fmt.Sprintf(`{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":%q,"html":"<p>%s</p>","metadata":{"url":%q,"sourceURL":%q,"statusCode":%d,"title":%q}}]}`,
		job, uuid.NewString(), markdown, title, url, url, status, title)
}

// failureBody is a failed crawl.page delivery.
func readFailureBody(job, url, errText string) string {
	return fmt.Sprintf(`{"success":false,"type":"crawl.page","id":%q,"webhookId":%q,"error":%q,"data":[{"markdown":"","metadata":{"url":%q,"sourceURL":%q,"statusCode":500}}]}`,
		job, uuid.NewString(), errText, url, url)
}

func apiReader(t *testing.T, conn driver.Conn, cfg archive.Config, settle time.Duration) *query.Reader {
	t.Helper()
	r, err := query.NewReader(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err = r.WithReadOptions(query.ReadOptions{CursorKey: []byte("test key"), FeedSettle: settle})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReadAPIQueries: search with words, phrases, filters, relevance and
// cursors; a page, its history with change classes; jobs, a job's status,
// its failures; against a real ClickHouse.
func TestReadAPIQueries(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	r := apiReader(t, conn, cfg, time.Millisecond)
	ctx := context.Background()
	jobA, jobB := uuid.NewString(), uuid.NewString()
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	for i := range 5 {
		archivetest.InsertDelivery(t, w, readPageBody(jobA, fmt.Sprintf("https://a.example/%d", i), fmt.Sprintf("Page %d", i),
			fmt.Sprintf("Intro text.\n\nThe quick brown fox number %d jumps.", i), 200), t0.Add(time.Duration(i)*time.Second))
	}
	archivetest.InsertDelivery(t, w, readPageBody(jobA, "https://b.example/x", "Fox Fox", "fox fox fox, brown dog", 200), t0.Add(10*time.Second))
	archivetest.InsertDelivery(t, w, readFailureBody(jobA, "https://a.example/broken", "timeout reaching the page"), t0.Add(11*time.Second))
	// Job B, later: page 0 unchanged, page 1 changed.
	archivetest.InsertDelivery(t, w, readPageBody(jobB, "https://a.example/0", "Page 0", "Intro text.\n\nThe quick brown fox number 0 jumps.", 200), t0.Add(time.Hour))
	archivetest.InsertDelivery(t, w, readPageBody(jobB, "https://a.example/1", "Page 1", "Entirely new words here.", 200), t0.Add(time.Hour+time.Second))

	t.Run("words, newest first, paged", func(t *testing.T) {
		var urls []string
		q := query.SearchQuery{Text: "FOX", Job: jobA, Limit: 2}
		for range 10 {
			p, err := r.Search(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range p.Hits {
				urls = append(urls, h.URL)
				if !strings.Contains(strings.ToLower(h.Snippet), "fox") {
					t.Errorf("snippet %q holds no fox", h.Snippet)
				}
			}
			if p.Next == "" {
				break
			}
			q.Cursor = p.Next
			// A row inserted between pages, newer than all: not in later pages.
			archivetest.InsertDelivery(t, w, readPageBody(jobA, "https://late.example/"+uuid.NewString(), "late", "fox late", 200), t0.Add(2*time.Hour))
		}
		want := "https://b.example/x https://a.example/4 https://a.example/3 https://a.example/2 https://a.example/1 https://a.example/0"
		if got := strings.Join(urls, " "); got != want {
			t.Fatalf("hits %s, want %s", got, want)
		}
	})
	t.Run("phrase", func(t *testing.T) {
		p, err := r.Search(ctx, query.SearchQuery{Text: `"Number 3 jumps"`})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Hits) != 1 || p.Hits[0].URL != "https://a.example/3" {
			t.Fatalf("hits %+v", p.Hits)
		}
		if p, _ := r.Search(ctx, query.SearchQuery{Text: `"jumps number 3"`}); len(p.Hits) != 0 {
			t.Fatalf("words out of order matched: %+v", p.Hits)
		}
	})
	t.Run("relevance", func(t *testing.T) {
		// Only b.example/x has fox in its title; it is not the newest.
		archivetest.InsertDelivery(t, w, readPageBody(jobA, "https://c.example/newer", "Other", "a brown fox, newer", 200), t0.Add(20*time.Second))
		p, err := r.Search(ctx, query.SearchQuery{Text: "brown fox", Order: query.OrderRelevance, Job: jobA, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Hits) != 2 || p.Hits[0].URL != "https://b.example/x" || p.Hits[0].Score != 1 || p.Hits[1].URL != "https://c.example/newer" || p.Hits[1].Score != 0 {
			t.Fatalf("hits %+v", p.Hits)
		}
		// A phrase the title holds counts 10.
		p, err = r.Search(ctx, query.SearchQuery{Text: `"fox fox"`, Order: query.OrderRelevance})
		if err != nil || len(p.Hits) != 1 || p.Hits[0].Score != 11 {
			t.Fatalf("phrase in the title: %+v %v", p.Hits, err)
		}
	})
	t.Run("filters", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			q    query.SearchQuery
			want int
		}{
			{"host", query.SearchQuery{Text: "fox", Host: "b.example"}, 1},
			{"job b", query.SearchQuery{Job: jobB}, 2},
			{"time", query.SearchQuery{Text: "fox", From: t0.Add(time.Hour), To: t0.Add(time.Hour + time.Minute)}, 1},
			{"status", query.SearchQuery{Job: jobA, StatusMin: 500, StatusMax: 599}, 1},
			{"changed", query.SearchQuery{Change: "changed"}, 1},
			{"same", query.SearchQuery{Change: "same", Job: jobB}, 1},
			{"kind", query.SearchQuery{Kind: "batch_scrape"}, 0},
		} {
			p, err := r.Search(ctx, tc.q)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if len(p.Hits) != tc.want {
				t.Errorf("%s: %d hits, want %d: %+v", tc.name, len(p.Hits), tc.want, p.Hits)
			}
			for _, h := range p.Hits {
				if tc.q.Change != "" && h.Change != tc.q.Change {
					t.Errorf("%s: hit %s of class %q", tc.name, h.URL, h.Change)
				}
			}
		}
	})
	t.Run("bad parameters name themselves", func(t *testing.T) {
		first, err := r.Search(ctx, query.SearchQuery{Text: "fox", Limit: 1})
		if err != nil || first.Next == "" {
			t.Fatal(err, first)
		}
		tampered := first.Next[:len(first.Next)-2] + "AA"
		for _, tc := range []struct {
			q     query.SearchQuery
			param string
		}{
			{query.SearchQuery{Job: "nope"}, "job"},
			{query.SearchQuery{Text: `"open`}, "q"},
			{query.SearchQuery{Limit: 101}, "limit"},
			{query.SearchQuery{Change: "gone"}, "change"},
			{query.SearchQuery{Text: "fox", Limit: 1, Cursor: tampered}, "cursor"},
			{query.SearchQuery{Text: "dog", Limit: 1, Cursor: first.Next}, "cursor"},
		} {
			_, err := r.Search(ctx, tc.q)
			var pe *query.ParamError
			if !errors.As(err, &pe) || pe.Param != tc.param {
				t.Errorf("%+v: %v, want an error of %s", tc.q, err, tc.param)
			}
		}
	})
	t.Run("a query past a limit", func(t *testing.T) {
		base, _ := query.NewReader(conn, cfg)
		tight, err := base.WithReadOptions(query.ReadOptions{Limits: query.Limits{MaxExecutionTime: time.Minute, MaxResultRows: 2,
			MaxMemoryUsage: 1 << 30, ExportExecutionTime: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tight.Search(ctx, query.SearchQuery{Text: "fox", Limit: 5}); !errors.Is(err, query.ErrLimit) {
			t.Fatalf("5 hits with max_result_rows 2: %v", err)
		}
	})
	t.Run("page and history", func(t *testing.T) {
		p, err := r.Page(ctx, "https://a.example/1", "", query.PageParts{Markdown: true, Document: true})
		if err != nil {
			t.Fatal(err)
		}
		if p.CrawlID.String() != jobB || p.Markdown != "Entirely new words here." || !strings.Contains(string(p.Document), `"Entirely new words here."`) || p.HTML != "" {
			t.Fatalf("latest %+v", p)
		}
		p, err = r.Page(ctx, "https://a.example/1", jobA, query.PageParts{HTML: true})
		if err != nil || p.HTML != "<p>Page 1</p>" {
			t.Fatalf("of job A: %+v %v", p, err)
		}
		if _, err := r.Page(ctx, "https://a.example/4", jobB, query.PageParts{}); !errors.Is(err, query.ErrNoVersion) {
			t.Fatalf("version of a job without it: %v", err)
		}
		if _, err := r.Page(ctx, "https://nowhere.example/", "", query.PageParts{}); !errors.Is(err, query.ErrNoPage) {
			t.Fatalf("unknown page: %v", err)
		}
		h, err := r.History(ctx, "https://a.example/1")
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 2 || h[0].Change != "new" || h[1].Change != "changed" || h[1].PreviousCrawlID == nil || h[1].PreviousCrawlID.String() != jobA {
			t.Fatalf("history %+v", h)
		}
	})
	t.Run("jobs", func(t *testing.T) {
		var seen []string
		q := query.JobsQuery{Limit: 1}
		for {
			p, err := r.Jobs(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range p.Jobs {
				seen = append(seen, j.CrawlID.String())
			}
			if p.Next == "" {
				break
			}
			q.Cursor = p.Next
		}
		if strings.Join(seen, " ") != jobB+" "+jobA {
			t.Fatalf("jobs %v, want B then A", seen)
		}
		st, err := r.JobStatus(ctx, jobA, 5)
		if err != nil {
			t.Fatal(err)
		}
		if st.Failures != 1 || len(st.TopErrors) != 1 || st.TopErrors[0].Error != "timeout reaching the page" || st.SuccessfulPages < 6 {
			t.Fatalf("status %+v", st)
		}
		if _, err := r.JobStatus(ctx, uuid.NewString(), 5); !errors.Is(err, archive.ErrNoCrawl) {
			t.Fatalf("unknown job: %v", err)
		}
		f, err := r.Failures(ctx, query.FailuresQuery{Job: jobA})
		if err != nil || len(f.Failures) != 1 || f.Failures[0].URL != "https://a.example/broken" || f.Failures[0].Reason != "failed" {
			t.Fatalf("failures %+v %v", f, err)
		}
		// A job the archive never saw is not found, not an empty list;
		// a known job without failures or blocked URLs is an empty list.
		unknown := uuid.NewString()
		if _, err := r.Failures(ctx, query.FailuresQuery{Job: unknown}); !errors.Is(err, archive.ErrNoCrawl) {
			t.Fatalf("failures of an unknown job: %v", err)
		}
		if _, err := r.Blocked(ctx, query.BlockedQuery{Job: unknown}); !errors.Is(err, archive.ErrNoCrawl) {
			t.Fatalf("blocked URLs of an unknown job: %v", err)
		}
		if b, err := r.Blocked(ctx, query.BlockedQuery{Job: jobA}); err != nil || len(b.URLs) != 0 {
			t.Fatalf("blocked URLs of a job with none: %+v %v", b, err)
		}
	})
}

// TestChangesFeedResumes: a consumer of the changes feed that is killed
// mid-stream and restarts from the last cursor it kept sees every page
// version and failure once, while rows keep being inserted.
func TestChangesFeedResumes(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	r := apiReader(t, conn, cfg, time.Millisecond)
	ctx := context.Background()
	job := uuid.NewString()
	// A failed page is archived twice: its version in pages (the crawl
	// API's Document of it) and its failure.
	want := map[string]bool{}
	insert := func(batch int) {
		for i := range 4 {
			u := fmt.Sprintf("https://feed.example/%d/%d", batch, i)
			body := readPageBody(job, u, "t", "text", 200)
			if i == 3 {
				body = readFailureBody(job, u, "boom")
			}
			archivetest.InsertDelivery(t, w, body, time.Now().UTC())
			want[query.FeedPage+" "+u] = true
			if i == 3 {
				want[query.FeedFailure+" "+u] = true
			}
		}
	}
	insert(0)
	insert(1)

	seen := map[string]int{}
	cursor := ""
	// consume reads up to pages pages from cursor, as a process that is
	// then killed: it keeps only the cursor of the last page it handled.
	consume := func(pages int) {
		for range pages {
			p, err := r.Changes(ctx, query.FeedQuery{Cursor: cursor, Limit: 3})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range p.Items {
				seen[it.Kind+" "+it.URL]++
			}
			cursor = p.Next
		}
	}
	consume(2)
	// Killed mid-stream: a page read, neither handled nor its cursor kept.
	if _, err := r.Changes(ctx, query.FeedQuery{Cursor: cursor, Limit: 3}); err != nil {
		t.Fatal(err)
	}
	insert(2)
	consume(1)
	insert(3)
	// Until the feed is drained.
	for range 20 {
		consume(1)
	}
	for u := range want {
		if seen[u] != 1 {
			t.Errorf("%s seen %d times", u, seen[u])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("saw %d rows, want %d", len(seen), len(want))
	}
	// Nothing new: the same cursor comes back.
	p, err := r.Changes(ctx, query.FeedQuery{Cursor: cursor})
	if err != nil || len(p.Items) != 0 || p.Next != cursor {
		t.Fatalf("drained feed: %+v %v", p, err)
	}
}
