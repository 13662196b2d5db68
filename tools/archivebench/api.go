package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/readercmd"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlcorpus"
)

// The read API in front of the loaded archive (docs/read-api.md): each
// search shape, a page and its history, and the NDJSON export of the
// largest job, through the reader binary (started in process, over HTTP
// with a bearer token) and beside it the same query.Reader query run
// directly against ClickHouse over the native protocol, alternating. The
// difference is the API's own cost: HTTP, authentication, JSON.

const (
	benchToken     = "archivebench-reader-token-0123456789"
	benchCursorKey = "archivebench-cursor-key"
)

// apiCall is one measured request and the direct query it makes.
type apiCall struct {
	name   string
	path   string
	direct func(ctx context.Context, r *query.Reader) error
}

func reportAPI(ctx context.Context, o options, c *crawlcorpus.Corpus, out io.Writer) error {
	cfg := archive.Config{Addr: o.addr, Database: o.db, User: "default"}
	base, stop, err := startReader(ctx, cfg)
	if err != nil {
		return err
	}
	defer stop()
	conn, err := archive.Open(cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	plain, err := query.NewReader(conn, cfg)
	if err != nil {
		return err
	}
	r, err := plain.WithReadOptions(query.ReadOptions{CursorKey: []byte(benchCursorKey)})
	if err != nil {
		return err
	}

	calls, err := searchCalls(ctx, c, r)
	if err != nil {
		return err
	}
	// A page and its history: a different URL each run (no cache helps).
	pageN := 0
	nextURL := func() string {
		pageN++
		return c.PageURL(pageN%c.Sites, (pageN*7919)%c.PagesPerSite)
	}

	fmt.Fprintf(out, "\nread API (the reader over HTTP with a bearer token, beside the same query.Reader query direct over the native protocol; %d runs each, alternating; p99 is the slowest of so few):\n", o.runs)
	fmt.Fprintf(out, "  %-26s %9s %9s %9s %9s %9s\n", "query", "p50 API", "p99 API", "p50 dir", "p99 dir", "hits/B")
	for _, call := range calls {
		api, direct, size, err := measure(ctx, o.runs, base, call.path, func(ctx context.Context) error { return call.direct(ctx, r) })
		if err != nil {
			return fmt.Errorf("%s: %w", call.name, err)
		}
		fmt.Fprintf(out, "  %-26s %9s %9s %9s %9s %9d\n", call.name, ms(pct(api, 50)), ms(pct(api, 99)), ms(pct(direct, 50)), ms(pct(direct, 99)), size)
	}
	var apiPage, dirPage []time.Duration
	for range max(o.runs, 20) {
		u := nextURL()
		start := time.Now()
		for _, p := range []string{"/v1/pages?url=" + url.QueryEscape(u), "/v1/pages/history?url=" + url.QueryEscape(u)} {
			if _, err := fetch(ctx, base+p); err != nil {
				return fmt.Errorf("page and history: %w", err)
			}
		}
		apiPage = append(apiPage, time.Since(start))
		start = time.Now()
		if _, err := r.Page(ctx, u, "", query.PageParts{Markdown: true, HTML: true}); err != nil {
			return err
		}
		if _, err := r.History(ctx, u); err != nil {
			return err
		}
		dirPage = append(dirPage, time.Since(start))
	}
	fmt.Fprintf(out, "  %-26s %9s %9s %9s %9s\n", "page + its history", ms(pct(apiPage, 50)), ms(pct(apiPage, 99)), ms(pct(dirPage, 50)), ms(pct(dirPage, 99)))

	// The NDJSON export of the largest job.
	var job string
	var pages uint64
	if err := conn.QueryRow(ctx, "SELECT crawl_id, count() AS n FROM "+o.db+".pages FINAL GROUP BY crawl_id ORDER BY n DESC LIMIT 1").Scan(&job, &pages); err != nil {
		return err
	}
	for range 2 {
		start := time.Now()
		n, err := fetch(ctx, base+"/v1/jobs/"+job+"/export?format=ndjson")
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		apiTook := time.Since(start)
		start = time.Now()
		m, err := r.ExportNDJSON(ctx, job, query.NDJSONOptions{}, io.Discard)
		if err != nil {
			return err
		}
		dirTook := time.Since(start)
		fmt.Fprintf(out, "  NDJSON export of a %d-page job: API %.1f MB in %.2f s = %.0f MB/s; direct %.1f MB in %.2f s = %.0f MB/s\n",
			pages, float64(n)/1e6, apiTook.Seconds(), float64(n)/1e6/apiTook.Seconds(), float64(m)/1e6, dirTook.Seconds(), float64(m)/1e6/dirTook.Seconds())
	}
	return nil
}

// measure runs the API request and the direct query runs times each, after
// one warm-up of each, alternating.
func measure(ctx context.Context, runs int, base, path string, direct func(context.Context) error) (api, dir []time.Duration, size int64, err error) {
	if _, err = fetch(ctx, base+path); err != nil {
		return
	}
	if err = direct(ctx); err != nil {
		return
	}
	for range runs {
		start := time.Now()
		if size, err = fetch(ctx, base+path); err != nil {
			return
		}
		api = append(api, time.Since(start))
		start = time.Now()
		if err = direct(ctx); err != nil {
			return
		}
		dir = append(dir, time.Since(start))
	}
	return
}

// fetch GETs u with the token, reads the whole answer and returns its size.
func fetch(ctx context.Context, u string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+benchToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return n, fmt.Errorf("GET %s: %d", u, resp.StatusCode)
	}
	return n, err
}

// startReader runs the reader binary in process on a free port.
func startReader(ctx context.Context, cfg archive.Config) (base string, stop func(), err error) {
	vars := map[string]string{"READER_LISTEN": "127.0.0.1:0", "READER_TOKENS": benchToken, "READER_CURSOR_KEY": benchCursorKey,
		"CLICKHOUSE_ADDR": cfg.Addr, "CLICKHOUSE_DATABASE": cfg.Database, "LOG_LEVEL": "warn",
		// The benchmark's searches of the whole archive may take longer
		// than the product's default.
		"READER_QUERY_MAX_TIME": "60s"}
	ctx, cancel := context.WithCancel(ctx)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- readercmd.RunWithOptions(ctx, []string{"reader"}, func(k string) string { return vars[k] }, io.Discard, io.Discard,
			readercmd.Options{Ready: func(addr string) { ready <- addr }})
	}()
	select {
	case addr := <-ready:
		return "http://" + addr, func() { cancel(); <-done }, nil
	case err := <-done:
		cancel()
		return "", nil, fmt.Errorf("reader: %w", err)
	}
}

// searchCalls are the searches timed on the corpus c: every query shape
// docs/read-api.md documents (words, phrases, each filter, both orders,
// the filters alone and a later page).
func searchCalls(ctx context.Context, c *crawlcorpus.Corpus, r *query.Reader) ([]apiCall, error) {
	crawl := c.CrawlID(min(3, c.Sites-1), c.Crawls/2)
	site, _ := url.Parse(c.SitePrefix(min(5, c.Sites-1)))
	mid, rare, common := c.Word(crawlcorpus.RankMid), c.Word(crawlcorpus.RankRare), c.Word(crawlcorpus.RankCommon)
	two := c.Word(crawlcorpus.RankPairA) + " " + c.Word(crawlcorpus.RankPairB)
	phrase := `"` + c.PlantedPhrase() + `"`
	// One day: the middle recrawl of every site.
	day := c.RoundStart(c.Crawls / 2)
	search := func(name string, q query.SearchQuery) apiCall {
		v := url.Values{}
		for k, s := range map[string]string{"q": q.Text, "job": q.Job, "kind": q.Kind, "host": q.Host, "order": q.Order, "change": q.Change, "cursor": q.Cursor} {
			if s != "" {
				v.Set(k, s)
			}
		}
		if !q.From.IsZero() {
			v.Set("from", q.From.Format(time.RFC3339))
		}
		if !q.To.IsZero() {
			v.Set("to", q.To.Format(time.RFC3339))
		}
		if q.StatusMin != 0 {
			v.Set("status", fmt.Sprintf("%d-%d", q.StatusMin, q.StatusMax))
		}
		return apiCall{name, "/v1/search?" + v.Encode(), func(ctx context.Context, r *query.Reader) error {
			_, err := r.Search(ctx, q)
			return err
		}}
	}
	// A second page: the cursor of the first (the API and r share the
	// cursor key, so either takes it).
	var nextErr error
	next := func(q query.SearchQuery) query.SearchQuery {
		p, err := r.Search(ctx, q)
		switch {
		case err != nil:
			nextErr = err
		case p.Next == "":
			nextErr = fmt.Errorf("search %q has one page only", q.Text)
		}
		q.Cursor = p.Next
		return q
	}
	calls := []apiCall{
		search("token in one crawl", query.SearchQuery{Text: mid, Job: crawl}),
		search("rare token", query.SearchQuery{Text: rare}),
		search("common token", query.SearchQuery{Text: common}),
		search("common token, page 2", next(query.SearchQuery{Text: common})),
		search("two tokens", query.SearchQuery{Text: two}),
		search("two tokens, relevance", query.SearchQuery{Text: two, Order: query.OrderRelevance}),
		search("relevance, page 2", next(query.SearchQuery{Text: two, Order: query.OrderRelevance})),
		search("phrase", query.SearchQuery{Text: phrase}),
		search("phrase in one site", query.SearchQuery{Text: phrase, Host: site.Host}),
		search("token, kind", query.SearchQuery{Text: mid, Kind: events.KindCrawl}),
		search("token, one day", query.SearchQuery{Text: mid, From: day, To: day.Add(24 * time.Hour)}),
		search("token, status 4xx", query.SearchQuery{Text: mid, StatusMin: 400, StatusMax: 499}),
		search("no words: status 4xx", query.SearchQuery{StatusMin: 400, StatusMax: 499}),
		search("no words: one site", query.SearchQuery{Host: site.Host}),
		search("no words: everything", query.SearchQuery{}),
		search("changed in one crawl", query.SearchQuery{Change: events.ChangeChanged, Job: crawl}),
		search("changed, token", query.SearchQuery{Change: events.ChangeChanged, Text: mid}),
		search("changed, everywhere", query.SearchQuery{Change: events.ChangeChanged}),
	}
	return calls, nextErr
}
