package readercmd_test

import (
	"context"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
)

// TestSearchBudgetAnswersPartialPages: under READER_SEARCH_MAX_CANDIDATES,
// a search whose phrase few pages hold answers partial pages, each with a
// cursor that goes on, through the API and the web pages alike; following
// them gives every hit once, in order, and a phrase no page holds ends
// after the budget's share of the archive per request.
func TestSearchBudgetAnswersPartialPages(t *testing.T) {
	t.Parallel()
	cfg, w := archiveDB(t)
	job := uuid.NewString()
	t0 := time.Date(2026, 11, 4, 0, 0, 0, 0, time.UTC)
	var rows archive.Rows
	const pages = 2500
	for i := range pages {
		md := fmt.Sprintf("page %d: a kettle of silver", i)
		if i%500 == 0 {
			md = fmt.Sprintf("page %d: the silver kettle", i)
		}
		body := pageBody(job, fmt.Sprintf("https://budget.example/p%04d", i), "T", md, "<p>x</p>", 200)
		ev, err := events.DecodeAccepted([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		rs, err := archive.EventRows(ev, []byte(body), t0.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		rows.Add(rs)
	}
	if err := w.Insert(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	base := startReader(t, cfg, map[string]string{"READER_TOKENS": "", "READER_OPEN_ACCESS": "true", "READER_SEARCH_MAX_CANDIDATES": "1000",
		// The candidates bound each request here, not the time: a busy machine
		// must not end a request early and add one.
		"READER_SEARCH_MAX_TIME": "10m"})

	type answer struct {
		Hits []struct {
			URL string `json:"url"`
		} `json:"hits"`
		Next    string `json:"next_cursor"`
		Partial bool   `json:"partial"`
	}
	api := func(phrase string) (urls []string, requests, partial int) {
		q := url.Values{"q": {phrase}}
		for requests < 20 {
			var a answer
			getJSON(t, base+"/v1/search?"+q.Encode(), 200, &a)
			requests++
			if a.Partial {
				partial++
			}
			for _, h := range a.Hits {
				urls = append(urls, h.URL)
			}
			if a.Next == "" {
				return urls, requests, partial
			}
			q.Set("cursor", a.Next)
		}
		t.Fatalf("%s: more than 20 requests", phrase)
		return nil, 0, 0
	}
	want := []string{"https://budget.example/p2000", "https://budget.example/p1500", "https://budget.example/p1000", "https://budget.example/p0500", "https://budget.example/p0000"}
	got, requests, partial := api(`"silver kettle"`)
	if !slices.Equal(got, want) || requests != 3 || partial != 2 {
		t.Errorf(`"silver kettle": %v in %d requests (%d partial), want %v in 3 (2 partial: 2500 candidates, 1000 a request)`, got, requests, partial, want)
	}
	if got, requests, partial := api(`"silver page"`); len(got) != 0 || requests != 3 || partial != 2 {
		t.Errorf(`"silver page": %v in %d requests (%d partial), want none in 3 (2 partial)`, got, requests, partial)
	}

	// The web page says the search went only part of the way, and its link
	// goes on.
	link := regexp.MustCompile(`<a rel="next" href="([^"]+)">Search further`)
	hit := regexp.MustCompile(`class="hit-title" href="[^"]*url=([^&"]+)`)
	var web []string
	further := 0
	for path := "/ui/search?q=" + url.QueryEscape(`"silver kettle"`); path != ""; {
		resp, body := get(t, base+path, "")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		for _, m := range hit.FindAllStringSubmatch(string(body), -1) {
			u, _ := url.QueryUnescape(html.UnescapeString(m[1]))
			web = append(web, u)
		}
		path = ""
		if m := link.FindStringSubmatch(string(body)); m != nil {
			further++
			path = html.UnescapeString(m[1])
			if !strings.HasPrefix(path, "/ui/") {
				path = "/ui/search" + strings.TrimPrefix(path, "search")
			}
		}
		if further > 10 {
			t.Fatal("more than 10 pages of the web search")
		}
	}
	if !slices.Equal(web, want) || further != 2 {
		t.Errorf("web pages: %v after %d \"Search further\" links, want %v after 2", web, further, want)
	}
}
