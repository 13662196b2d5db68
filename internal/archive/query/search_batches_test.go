package query_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/google/uuid"
)

// budgets are the search budgets the search tests run under: the default,
// and a budget that runs out every few requests. Under both, following
// the cursors gives the same hits, in the same order, each once.
var budgets = []struct {
	name   string
	budget query.SearchBudget
}{
	{"default budget", query.SearchBudget{}},
	{"budget of 300 candidates", query.SearchBudget{Candidates: 300}},
	{"budget of 3 candidates", query.SearchBudget{Candidates: 3}},
}

// budgetReader is apiReader with the search budget b.
func budgetReader(t *testing.T, conn driver.Conn, cfg archive.Config, b query.SearchBudget) *query.Reader {
	t.Helper()
	r, err := query.NewReader(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err = r.WithReadOptions(query.ReadOptions{CursorKey: []byte("test key"), FeedSettle: time.Second, Search: b})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSearchChecksCandidatesInBatches: a phrase or a change class is
// checked on the candidates newest first, a batch at a time, until a page
// is full or the request's budget runs out. Hits spread over several
// batches (the first holds 256 candidates) come out in order, each once,
// page after page of cursors, whatever the budget; a phrase that matches
// nothing reads a budget's worth of candidates per request and answers a
// partial page that goes on.
func TestSearchChecksCandidatesInBatches(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	ctx := context.Background()
	jobX, jobY := uuid.NewString(), uuid.NewString()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(24 * time.Hour)
	page := func(i int) string { return fmt.Sprintf("https://batch.example/p%04d", i) }

	// 1200 pages hold both words; every hundredth has them as a phrase.
	// The recrawl Y of the first 600 changes every fiftieth.
	var rows archive.Rows
	add := func(job, url, markdown string, at time.Time) {
		body := readPageBody(job, url, "T", markdown, 200)
		rs, err := archive.EventRows(archivetest.MustDecode(t, body), []byte(body), at)
		if err != nil {
			t.Fatal(err)
		}
		rows.Add(rs)
	}
	for i := range 1200 {
		md := fmt.Sprintf("page %d: a kettle of silver", i)
		if i%100 == 0 {
			md = fmt.Sprintf("page %d: the Silver, kettle", i)
		}
		add(jobX, page(i), md, t0.Add(time.Duration(i)*time.Second))
		if i < 600 {
			if i%50 == 0 {
				md += " changed"
			}
			add(jobY, page(i), md, t1.Add(time.Duration(i)*time.Second))
		}
	}
	if err := w.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}

	for _, b := range budgets[:2] {
		r := budgetReader(t, conn, cfg, b.budget)
		t.Run(b.name, func(t *testing.T) {
			checkBatchedSearches(t, r, page, jobX, jobY)
		})
	}

	// Both words are on every page, never next to each other: nothing
	// matches. Under a budget of 300, each request reads 300 of the 1800
	// candidates and answers none, partial, with a cursor.
	r := budgetReader(t, conn, cfg, query.SearchBudget{Candidates: 300})
	q := query.SearchQuery{Text: `"silver page"`}
	p, err := r.Search(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Hits) != 0 || !p.Partial || p.Next == "" {
		t.Fatalf("never adjacent, first request: %d hits, partial %v, next %q; want none, partial, a cursor", len(p.Hits), p.Partial, p.Next)
	}
	hits, pages, partial := searchPages(t, r, q, func(h query.SearchHit) string { return h.URL })
	if len(hits) != 0 || pages != 7 || partial != 6 {
		t.Errorf("never adjacent: %d hits in %d requests (%d partial), want none in 7 (6 partial: 1800 candidates, 300 a request)", len(hits), pages, partial)
	}
}

func checkBatchedSearches(t *testing.T, r *query.Reader, page func(int) string, jobX, jobY string) {
	all := func(q query.SearchQuery) []string {
		t.Helper()
		return searchAll(t, r, q, func(h query.SearchHit) string { return h.URL })
	}
	for _, tc := range []struct {
		name string
		q    query.SearchQuery
		want []int
	}{
		{"phrase", query.SearchQuery{Text: `"silver kettle"`, Job: jobX, Limit: 5}, []int{1100, 1000, 900, 800, 700, 600, 500, 400, 300, 200, 100, 0}},
		{"changed", query.SearchQuery{Change: "changed", Limit: 5}, []int{550, 500, 450, 400, 350, 300, 250, 200, 150, 100, 50, 0}},
		{"changed in one job", query.SearchQuery{Change: "changed", Job: jobY, Limit: 5}, []int{550, 500, 450, 400, 350, 300, 250, 200, 150, 100, 50, 0}},
		{"new in one job", query.SearchQuery{Change: "new", Job: jobX, Text: "changed"}, nil},
		{"phrase, changed", query.SearchQuery{Text: `"silver kettle"`, Change: "changed", Limit: 2}, []int{500, 400, 300, 200, 100, 0}},
	} {
		var want []string
		for _, i := range tc.want {
			want = append(want, page(i))
		}
		if got := all(tc.q); !slices.Equal(got, want) {
			t.Errorf("%s: hits\n%v\nwant\n%v", tc.name, got, want)
		}
	}
}

// TestSearchHitsAreLatestVersions: a search reads its candidates without
// FINAL, so it sees every version a job archived of a URL; what it shows is
// what `pages FINAL` holds. A page delivered again with other text matches
// only its latest text; a page archived twice is one hit; and pages
// received in the same millisecond, many more than a page of hits, come
// each once, page after page, in one order.
func TestSearchHitsAreLatestVersions(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	ctx := context.Background()
	// The versions below stay in parts of their own, as they would be
	// between merges.
	if err := conn.Exec(ctx, "SYSTEM STOP MERGES "+cfg.Database+".pages"); err != nil {
		t.Fatal(err)
	}
	jobX, jobY := uuid.NewString(), uuid.NewString()
	t0 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	insert := func(job, url, markdown string, at time.Time) {
		t.Helper()
		archivetest.InsertDelivery(t, w, readPageBody(job, url, "T", markdown, 200), at)
	}
	// Redelivered with new text: only the later text is the page's.
	insert(jobX, "https://v.example/edited", "an apple tart", t0)
	insert(jobX, "https://v.example/edited", "a plum tart", t0.Add(time.Minute))
	// Delivered again, and the later delivery archived twice (a replay).
	insert(jobX, "https://v.example/twice", "a plum cake", t0.Add(2*time.Minute))
	insert(jobX, "https://v.example/twice", "a plum cake", t0.Add(3*time.Minute))
	insert(jobX, "https://v.example/twice", "a plum cake", t0.Add(3*time.Minute))
	// 30 pages of two jobs received in the same millisecond.
	tie := t0.Add(-time.Hour)
	var tied []string
	for i := range 15 {
		for _, job := range []string{jobX, jobY} {
			url := fmt.Sprintf("https://v.example/tied/%02d", i)
			insert(job, url, "a plum jam", tie)
			tied = append(tied, job+" "+url)
		}
	}

	for _, b := range budgets {
		r := budgetReader(t, conn, cfg, b.budget)
		t.Run(b.name, func(t *testing.T) {
			checkLatestVersions(t, r, jobX, tied)
		})
	}
}

func checkLatestVersions(t *testing.T, r *query.Reader, jobX string, tied []string) {
	all := func(q query.SearchQuery) []string {
		t.Helper()
		return searchAll(t, r, q, func(h query.SearchHit) string { return h.CrawlID.String() + " " + h.URL })
	}
	if got := all(query.SearchQuery{Text: "apple"}); len(got) != 0 {
		t.Errorf("apple: %v, want no hit (the page's latest text has none)", got)
	}
	if got, want := all(query.SearchQuery{Text: "tart"}), []string{jobX + " https://v.example/edited"}; !slices.Equal(got, want) {
		t.Errorf("tart: %v, want %v", got, want)
	}
	if got, want := all(query.SearchQuery{Text: "cake", Limit: 1}), []string{jobX + " https://v.example/twice"}; !slices.Equal(got, want) {
		t.Errorf("cake: %v, want %v", got, want)
	}
	got := all(query.SearchQuery{Text: "plum", Limit: 4})
	if len(got) != 2+len(tied) {
		t.Fatalf("plum: %d hits, want %d: %v", len(got), 2+len(tied), got)
	}
	if want := []string{jobX + " https://v.example/twice", jobX + " https://v.example/edited"}; !slices.Equal(got[:2], want) {
		t.Errorf("plum: first hits %v, want the newest %v", got[:2], want)
	}
	if !slices.Equal(slices.Sorted(slices.Values(got[2:])), slices.Sorted(slices.Values(tied))) {
		t.Errorf("plum: the tied pages %v, want each of %v once", got[2:], tied)
	}
	// One order, whatever the page size.
	if again := all(query.SearchQuery{Text: "plum", Limit: 7}); !slices.Equal(again, got) {
		t.Errorf("plum by 7: %v, want the order of pages of 4 %v", again, got)
	}
}

// searchAll follows q's cursors to the end and returns every hit as key
// gives it (searchPages).
func searchAll(t *testing.T, r *query.Reader, q query.SearchQuery, key func(query.SearchHit) string) []string {
	t.Helper()
	out, _, _ := searchPages(t, r, q, key)
	return out
}

// searchPages follows q's cursors to the end and returns every hit as key
// gives it, the requests made and how many answered a partial page. It
// fails on a page of more hits than q's limit, on a full page marked
// partial, and after 1000 requests.
func searchPages(t *testing.T, r *query.Reader, q query.SearchQuery, key func(query.SearchHit) string) (out []string, pages, partial int) {
	t.Helper()
	limit := q.Limit
	if limit == 0 {
		limit = 20
	}
	for range 1000 {
		p, err := r.Search(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(p.Hits) > limit {
			t.Fatalf("%d hits on a page of %d", len(p.Hits), limit)
		}
		if p.Partial {
			if len(p.Hits) == limit || p.Next == "" {
				t.Fatalf("a partial page of %d hits (limit %d), next %q", len(p.Hits), limit, p.Next)
			}
			partial++
		}
		for _, h := range p.Hits {
			out = append(out, key(h))
		}
		if p.Next == "" {
			return out, pages, partial
		}
		q.Cursor = p.Next
	}
	t.Fatal("more than 1000 requests")
	return nil, 0, 0
}
