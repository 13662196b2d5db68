package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/crawlhouse/crawlhouse/internal/testkit/crawlsim"
	"github.com/google/uuid"
)

// Check is one line of the accounting: what the run sent says should be in
// the archive, and what is.
type Check struct {
	Crawl    string
	Name     string
	Expected int
	Got      int
	// Detail names a few offending pages when the numbers differ.
	Detail string
}

// OK reports whether the archive holds what was expected.
func (c Check) OK() bool { return c.Expected == c.Got && c.Detail == "" }

// Alerts is what the alert endpoint received: alerts per crawl id.
type Alerts map[string]int

// Account compares what crawlsim sent (its reports) with ClickHouse, per
// crawl, under FINAL:
//   - every successful page is in pages, once;
//   - every page whose deliveries were all refused (dropped, bad signature)
//     is there from backfill, and no refused webhookId ever is;
//   - every failed page is one failures row (delivered, or recorded by
//     backfill from the errors endpoint when its delivery was lost);
//   - a crawl whose accepted failures reach threshold raised exactly one
//     alert, any other none.
func Account(ctx context.Context, conn driver.Conn, db string, reports []*crawlsim.Report, alerts Alerts, threshold int) ([]Check, error) {
	var out []Check
	for _, r := range reports {
		checks, err := accountCrawl(ctx, conn, db, r, alerts, threshold)
		if err != nil {
			return nil, fmt.Errorf("crawl %s: %w", r.CrawlID, err)
		}
		out = append(out, checks...)
	}
	return out, nil
}

type pageRow struct {
	origin    string
	webhookID uuid.UUID
	success   bool
}

func accountCrawl(ctx context.Context, conn driver.Conn, db string, r *crawlsim.Report, alerts Alerts, threshold int) ([]Check, error) {
	rows, err := conn.Query(ctx, "SELECT url, origin, webhook_id, success FROM "+db+".pages FINAL WHERE crawl_id = ?", uuid.MustParse(r.CrawlID))
	if err != nil {
		return nil, err
	}
	have := map[string]pageRow{}
	seen := map[string]int{}
	for rows.Next() {
		var url string
		var pr pageRow
		if err := rows.Scan(&url, &pr.origin, &pr.webhookID, &pr.success); err != nil {
			rows.Close()
			return nil, err
		}
		have[url] = pr
		seen[url]++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}

	var (
		successful, backfillOnly, failed []crawlsim.Delivery
		refused                          = map[uuid.UUID]bool{}
		missing, notBackfilled, doubled  []string
	)
	for _, d := range r.Deliveries {
		if d.Type != "crawl.page" && d.Type != "batch_scrape.page" {
			continue
		}
		if d.Outcome != crawlsim.OutcomeAccepted {
			refused[uuid.MustParse(d.WebhookID)] = true
		}
		switch {
		case d.Success:
			successful = append(successful, d)
			row, ok := have[d.URL]
			if !ok || !row.success {
				missing = append(missing, d.URL)
			}
			if d.Outcome != crawlsim.OutcomeAccepted {
				backfillOnly = append(backfillOnly, d)
				if ok && row.origin != "backfill" {
					notBackfilled = append(notBackfilled, d.URL)
				}
			}
		default:
			// A failed page is archived whether its delivery was accepted
			// or not: backfill reads the ones the webhooks missed from the
			// API's errors endpoint.
			failed = append(failed, d)
		}
	}
	var leaked []string
	for url, row := range have {
		if seen[url] > 1 {
			doubled = append(doubled, url)
		}
		if refused[row.webhookID] {
			leaked = append(leaked, url)
		}
	}
	successRows := 0
	for _, row := range have {
		if row.success {
			successRows++
		}
	}

	var failures uint64
	// Failures count once per URL, as alerts and `crawls` count them: a
	// failure the backfill recorded before the sink archived its delayed
	// delivery is a second row of the same failed page.
	if err := conn.QueryRow(ctx, "SELECT uniqExact(url) FROM "+db+".failures WHERE crawl_id = ? AND reason != 'cancelled'", uuid.MustParse(r.CrawlID)).Scan(&failures); err != nil {
		return nil, err
	}
	wantAlerts := 0
	// Failures the backfill records (their deliveries were lost) wake the
	// alerter too: every failed page counts.
	if threshold > 0 && len(failed) >= threshold {
		wantAlerts = 1
	}
	recovered := 0
	for _, d := range backfillOnly {
		if row, ok := have[d.URL]; ok && row.origin == "backfill" {
			recovered++
		}
	}

	c := r.CrawlID[:8]
	return []Check{
		{Crawl: c, Name: "successful pages in pages (FINAL)", Expected: len(successful), Got: successRows, Detail: few("missing", missing)},
		{Crawl: c, Name: "pages shown twice under FINAL", Expected: 0, Got: len(doubled), Detail: few("doubled", doubled)},
		{Crawl: c, Name: "refused deliveries in pages", Expected: 0, Got: len(leaked), Detail: few("leaked", leaked)},
		{Crawl: c, Name: "dropped/refused pages recovered by backfill", Expected: len(backfillOnly), Got: recovered, Detail: few("not from backfill", notBackfilled)},
		{Crawl: c, Name: "failed pages in failures", Expected: len(failed), Got: int(failures)},
		{Crawl: c, Name: "alerts raised", Expected: wantAlerts, Got: alerts[r.CrawlID]},
	}, nil
}

func few(what string, urls []string) string {
	if len(urls) == 0 {
		return ""
	}
	sort.Strings(urls)
	if len(urls) > 3 {
		return fmt.Sprintf("%s: %s … (%d)", what, strings.Join(urls[:3], " "), len(urls))
	}
	return what + ": " + strings.Join(urls, " ")
}

// WriteTable prints the accounting, one check a line, and returns the number
// of checks that failed.
func WriteTable(w io.Writer, checks []Check) int {
	bad := 0
	fmt.Fprintf(w, "%-8s  %-45s %9s %9s  %s\n", "crawl", "check", "expected", "got", "")
	for _, c := range checks {
		mark := "ok"
		if !c.OK() {
			mark = "DIFF " + c.Detail
			bad++
		}
		fmt.Fprintf(w, "%-8s  %-45s %9d %9d  %s\n", c.Crawl, c.Name, c.Expected, c.Got, mark)
	}
	return bad
}
