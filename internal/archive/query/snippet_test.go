package query_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/archivetest"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/google/uuid"
)

// A hit's snippet is centred on what matched: the phrase where its words
// stand together (not the first word's first occurrence, far from it), and
// a word where it stands whole (not inside a longer word).
func TestSearchSnippetCentredOnMatch(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	r := apiReader(t, conn, cfg, time.Millisecond)
	job := uuid.NewString()
	filler := strings.Repeat("lorem ipsum dolor ", 30) // 540 characters
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	archivetest.InsertDelivery(t, w, readPageBody(job, "https://s.example/phrase", "Phrase",
		"Quick start. "+filler+"A brown dog. "+filler+"Then the quick, brown fox jumped. "+filler, 200), t0)
	archivetest.InsertDelivery(t, w, readPageBody(job, "https://s.example/word", "Word",
		"We concatenate strings. "+filler+"The cat sat. "+filler, 200), t0.Add(time.Second))
	for _, tc := range []struct {
		name, q, url, want string
	}{
		{"phrase", `"quick brown"`, "https://s.example/phrase", "quick, brown fox"},
		{"phrase in any case, with a word", `fox "QUICK BROWN"`, "https://s.example/phrase", "quick, brown fox"},
		{"whole word", "cat", "https://s.example/word", "The cat sat."},
	} {
		page, err := r.Search(context.Background(), query.SearchQuery{Text: tc.q, Job: job})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(page.Hits) != 1 || page.Hits[0].URL != tc.url {
			t.Fatalf("%s: hits %+v, want %s", tc.name, page.Hits, tc.url)
		}
		snip := page.Hits[0].Snippet
		at := strings.Index(snip, tc.want)
		if at < 0 {
			t.Errorf("%s: snippet %q lacks %q", tc.name, snip, tc.want)
			continue
		}
		// Centred: as much text before the match as after it, give or take
		// the match's own length and the separator before it.
		before, after := at, len(snip)-at-len(tc.want)
		if d := before - after; d < -len(tc.want)-2 || d > len(tc.want)+2 {
			t.Errorf("%s: match at %d of a %d-byte snippet, not centred: %q", tc.name, at, len(snip), snip)
		}
	}
}

// A search's first page says how many versions match: exactly for words
// and index filters, as an upper bound (the pages holding the words) when
// a phrase is checked page by page; later pages do not count again.
func TestSearchCount(t *testing.T) {
	t.Parallel()
	conn, cfg := archivetest.StartClickHouse(t)
	w := archivetest.NewStore(t, conn, cfg)
	r := apiReader(t, conn, cfg, time.Millisecond)
	job := uuid.NewString()
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	for i := range 5 {
		md := "brown then quick"
		if i < 2 {
			md = "the quick brown fox"
		}
		u := "https://c.example/" + strconv.Itoa(i)
		archivetest.InsertDelivery(t, w, readPageBody(job, u, "Count", md, 200), t0.Add(time.Duration(i)*time.Second))
		if i == 0 {
			// Delivered again: one version.
			archivetest.InsertDelivery(t, w, readPageBody(job, u, "Count", md, 200), t0.Add(time.Minute))
		}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		q     string
		count uint64
		exact bool
	}{{"quick", 5, true}, {"quick fox", 2, true}, {`"quick brown"`, 5, false}, {"absent", 0, true}} {
		page, err := r.Search(ctx, query.SearchQuery{Text: tc.q, Job: job, Limit: 1, Count: true})
		if err != nil {
			t.Fatal(err)
		}
		if page.Count != tc.count || page.CountExact != tc.exact {
			t.Errorf("%s: count %d exact %v, want %d %v", tc.q, page.Count, page.CountExact, tc.count, tc.exact)
		}
		if page.Next != "" {
			next, err := r.Search(ctx, query.SearchQuery{Text: tc.q, Job: job, Limit: 1, Count: true, Cursor: page.Next})
			if err != nil || next.Count != 0 {
				t.Errorf("%s, next page: count %d, %v", tc.q, next.Count, err)
			}
		}
	}
}
