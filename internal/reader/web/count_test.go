package web

import (
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/archive/query"
)

// The first page of a search says how many match, exactly or as the upper
// bound the archive counted; later pages say nothing.
func TestCountText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		page   query.SearchPage
		cursor string
		want   string
	}{
		{query.SearchPage{Count: 1, CountExact: true}, "", "1 match"},
		{query.SearchPage{Count: 0, CountExact: true}, "", "0 matches"},
		{query.SearchPage{Count: 37, CountExact: true}, "", "37 matches"},
		{query.SearchPage{Count: 37}, "", "At most 37 matches (the pages holding every word; the phrase or change is checked as results are read)"},
		{query.SearchPage{Count: query.MaxSearchCount + 1, CountExact: true}, "", "More than 10000 matches"},
		{query.SearchPage{Count: 37, CountExact: true}, "next", ""},
	} {
		if got := countText(tc.page, tc.cursor); got != tc.want {
			t.Errorf("countText(%+v, %q) = %q, want %q", tc.page, tc.cursor, got, tc.want)
		}
	}
}
