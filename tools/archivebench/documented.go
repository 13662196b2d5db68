package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlcorpus"
)

// docExamples maps the example values of docs/search.md to the corpus's:
// one site's crawls, that site's host, one of its URLs and the corpus's
// words, so that every documented query asks the loaded archive something
// it holds (the queries whose example has no counterpart here, such as a
// webhook tenant, still run and still cost their reads).
func docExamples(c *crawlcorpus.Corpus) map[string]string {
	site := 5
	return map[string]string{
		"5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c": c.CrawlID(site, c.Crawls-2),
		"a3c1e2d4-5b6f-4a7c-8d9e-0f1a2b3c4d5e": c.CrawlID(site, c.Crawls-1),
		"example.com":                          strings.TrimSuffix(strings.TrimPrefix(c.SitePrefix(site), "https://"), "/"),
		"https://example.com/":                 c.PageURL(site, c.PagesPerSite/2),
		"illustrative examples":                c.PlantedPhrase(),
		"%illustrative examples%":              "%" + c.PlantedPhrase() + "%",
		"illustrative":                         c.Word(crawlcorpus.RankMid),
		"example domain":                       c.Word(crawlcorpus.RankPairA) + " " + c.Word(crawlcorpus.RankPairB),
		"domain":                               c.Word(crawlcorpus.RankRare),
		"docs.example.com /docs":               c.Scope(site),
	}
}

var (
	sqlBlock  = regexp.MustCompile("(?s)```sql\n(.*?)```")
	sqlString = regexp.MustCompile(`'[^']*'`)
)

// documentedQueries are the SQL blocks of docs/search.md for database db,
// each string literal that is one of the examples replaced by the corpus's
// value.
func documentedQueries(doc, db string, examples map[string]string) []string {
	var out []string
	for _, m := range sqlBlock.FindAllStringSubmatch(doc, -1) {
		q := strings.ReplaceAll(m[1], "crawl.", db+".")
		q = sqlString.ReplaceAllStringFunc(q, func(lit string) string {
			if v, ok := examples[lit[1:len(lit)-1]]; ok {
				return "'" + strings.ReplaceAll(v, "'", "''") + "'"
			}
			return lit
		})
		out = append(out, strings.TrimSpace(q))
	}
	return out
}

// reportDocumented times every query of docs/search.md on the loaded
// archive, with the text indexes, as users run them: p50 and p99 of o.runs
// runs after one warm-up, the rows each answered and read.
func reportDocumented(ctx context.Context, admin driver.Conn, o options, c *crawlcorpus.Corpus, out io.Writer) error {
	doc, err := os.ReadFile(o.searchDoc)
	if err != nil {
		return fmt.Errorf("documented queries: %w", err)
	}
	qs := documentedQueries(string(doc), o.db, docExamples(c))
	if len(qs) == 0 {
		return fmt.Errorf("documented queries: no sql block in %s", o.searchDoc)
	}
	fmt.Fprintf(out, "\ndocumented queries (%s, every sql block with the corpus's crawls, host, URL and words; warm cache, %d runs each):\n", o.searchDoc, o.runs)
	fmt.Fprintf(out, "  %3s %9s %9s %9s %11s  %s\n", "#", "p50", "p99", "rows", "rows read", "query")
	var slowest time.Duration
	for i, sql := range qs {
		q := timedQuery{name: fmt.Sprintf("documented %d", i+1), sql: sql}
		if _, _, _, err := timeQuery(ctx, admin, q, true); err != nil {
			return fmt.Errorf("documented query %d: %w\n%s", i+1, err, sql)
		}
		var ds []time.Duration
		var read uint64
		var n int
		for range o.runs {
			d, r, rows, err := timeQuery(ctx, admin, q, true)
			if err != nil {
				return fmt.Errorf("documented query %d: %w", i+1, err)
			}
			ds, read, n = append(ds, d), r, rows
		}
		slowest = max(slowest, pct(ds, 99))
		fmt.Fprintf(out, "  %3d %9s %9s %9d %11d  %s\n", i+1, ms(pct(ds, 50)), ms(pct(ds, 99)), n, read, oneLine(sql, 90))
	}
	fmt.Fprintf(out, "  slowest p99: %s\n", ms(slowest))
	return nil
}

// oneLine is sql on one line, cut at n bytes.
func oneLine(sql string, n int) string {
	s := strings.Join(strings.Fields(sql), " ")
	if len(s) > n {
		s = s[:n-3] + "..."
	}
	return s
}
