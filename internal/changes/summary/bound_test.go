package summary_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/changes/summary"
	"github.com/crawlhouse/crawlhouse/internal/claim"
	"github.com/crawlhouse/crawlhouse/internal/clip"
)

// hostileURLs returns n URLs of about size bytes, in URL order, made of
// what JSON escapes at six times its length (<, >, &, controls) and of
// multi-byte runes, so that a bound counted in URL bytes would overflow.
func hostileURLs(prefix string, n, size int) []string {
	urls := make([]string, n)
	for i := range urls {
		path := strings.Repeat("é<&>\x01", size/6+1) // cut below after a whole é
		urls[i] = fmt.Sprintf("https://docs.test/%s/%05d/%s", prefix, i, path)[:size]
	}
	slices.Sort(urls)
	return urls
}

// TestSummaryBound: a summary is never larger than its bound, NATS'
// default max_payload (1 MiB) included, however many and however long
// its URLs and scope: its counts stay exact, each list is a prefix of its
// class's URLs in URL order, both classes are shown, and the omitted
// counts and the truncated flag say what was left out. A summary that
// fits is sent whole and says nothing was left out.
func TestSummaryBound(t *testing.T) {
	t.Parallel()
	changed := hostileURLs("changed", 10000, 6000)
	removed := hostileURLs("removed", 10000, 6000)
	for _, tc := range []struct {
		name             string
		limit            int
		changed, removed []string
		scope            string
		// total: the class counts when larger than the lists
		// (CHANGES_MAX_URLS cut them).
		total     uint64
		truncated bool
	}{
		{name: "the issue's job at the default max_payload", limit: claim.DefaultMaxPayload, changed: changed[:100], removed: removed[:100], total: 100, truncated: true},
		{name: "CHANGES_MAX_URLS' most at the default max_payload", limit: claim.DefaultMaxPayload, changed: changed, removed: removed, total: 10000, truncated: true},
		{name: "a small max_payload", limit: 64 << 10, changed: changed[:100], removed: removed[:100], total: 100, truncated: true},
		{name: "one class only", limit: 64 << 10, changed: changed[:100], removed: []string{}, total: 100, truncated: true},
		{name: "a scope of a megabyte", limit: claim.DefaultMaxPayload, changed: changed[:2], removed: removed[:2], scope: strings.Repeat("é", 1<<19), total: 2, truncated: true},
		{name: "lists cut by CHANGES_MAX_URLS only", limit: claim.DefaultMaxPayload, changed: changed[:2], removed: removed[:2], total: 5000, truncated: true},
		{name: "a summary that fits", limit: claim.DefaultMaxPayload, changed: changed[:2], removed: removed[:3], scope: "docs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := summary.Job{CrawlID: "0193b000-0000-7000-8000-000000000002", Kind: "crawl", Scope: tc.scope, Complete: true,
				New: 7, Same: 11, Changed: max(tc.total, uint64(len(tc.changed))), Removed: max(tc.total, uint64(len(tc.removed))),
				ChangedURLs: tc.changed, RemovedURLs: tc.removed}
			body, err := summary.Encode(in, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(body) > tc.limit {
				t.Fatalf("summary of %d bytes, over its bound of %d", len(body), tc.limit)
			}
			var got summary.Job
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("summary does not decode: %v", err)
			}
			if got.New != in.New || got.Same != in.Same || got.Changed != in.Changed || got.Removed != in.Removed {
				t.Errorf("counts new %d same %d changed %d removed %d, want %d %d %d %d", got.New, got.Same, got.Changed, got.Removed, in.New, in.Same, in.Changed, in.Removed)
			}
			for _, l := range []struct {
				class          string
				got, all       []string
				count, omitted uint64
			}{{"changed", got.ChangedURLs, tc.changed, got.Changed, got.ChangedURLsOmitted}, {"removed", got.RemovedURLs, tc.removed, got.Removed, got.RemovedURLsOmitted}} {
				if !slices.Equal(l.got, l.all[:len(l.got)]) {
					t.Errorf("%s URLs are not the first of the class in URL order", l.class)
				}
				if len(l.all) > 0 && len(l.got) == 0 {
					t.Errorf("no %s URL listed", l.class)
				}
				if l.omitted != l.count-uint64(len(l.got)) {
					t.Errorf("%d %s URLs omitted, but %d listed of %d", l.omitted, l.class, len(l.got), l.count)
				}
			}
			if got.Truncated != tc.truncated {
				t.Errorf("truncated %v, want %v (listed %d+%d of %d+%d, scope %d bytes)", got.Truncated, tc.truncated,
					len(got.ChangedURLs), len(got.RemovedURLs), got.Changed, got.Removed, len(got.Scope))
			}
			if !strings.HasPrefix(tc.scope, strings.TrimSuffix(got.Scope, "…")) || len(got.Scope) > clip.MaxField+len("…") {
				t.Errorf("scope of %d bytes, want a prefix of the job's of at most %d", len(got.Scope), clip.MaxField)
			}
			if !tc.truncated && len(body) != len(mustMarshal(t, got)) {
				t.Errorf("a summary that fits was changed")
			}
		})
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
