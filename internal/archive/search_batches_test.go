package archive_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/google/uuid"
)

// TestSearchChecksCandidatesInBatches: a phrase or a change class is
// checked on the candidates newest first, a batch at a time, until a page
// is full. Hits spread over several batches (the first holds 256
// candidates) come out in order, each once, page after page of cursors.
func TestSearchChecksCandidatesInBatches(t *testing.T) {
	t.Parallel()
	conn, cfg := startClickHouse(t)
	w := newStore(t, conn, cfg)
	r := apiReader(t, conn, cfg, time.Second)
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
		rs, err := archive.EventRows(mustDecode(t, body), []byte(body), at)
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

	all := func(q archive.SearchQuery) []string {
		t.Helper()
		var urls []string
		for range 20 {
			p, err := r.Search(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Hits) > q.Limit {
				t.Fatalf("%d hits on a page of %d", len(p.Hits), q.Limit)
			}
			for _, h := range p.Hits {
				urls = append(urls, h.URL)
			}
			if p.Next == "" {
				return urls
			}
			q.Cursor = p.Next
		}
		t.Fatal("more than 20 pages")
		return nil
	}
	for _, tc := range []struct {
		name string
		q    archive.SearchQuery
		want []int
	}{
		{"phrase", archive.SearchQuery{Text: `"silver kettle"`, Job: jobX, Limit: 5}, []int{1100, 1000, 900, 800, 700, 600, 500, 400, 300, 200, 100, 0}},
		{"changed", archive.SearchQuery{Change: "changed", Limit: 5}, []int{550, 500, 450, 400, 350, 300, 250, 200, 150, 100, 50, 0}},
		{"changed in one job", archive.SearchQuery{Change: "changed", Job: jobY, Limit: 5}, []int{550, 500, 450, 400, 350, 300, 250, 200, 150, 100, 50, 0}},
		{"new in one job", archive.SearchQuery{Change: "new", Job: jobX, Text: "changed"}, nil},
		{"phrase, changed", archive.SearchQuery{Text: `"silver kettle"`, Change: "changed", Limit: 2}, []int{500, 400, 300, 200, 100, 0}},
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
