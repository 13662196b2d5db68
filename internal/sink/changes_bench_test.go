package sink_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
)

// withoutChangeTrackingDDL takes out of the schema what change tracking
// adds to every insert into pages: the page_versions view (0013), and the
// per-job columns that crawl_stats_from_pages computes for it since 0022
// (job_starts' two times and job_metadata's webhook metadata; the job's
// kind stays, crawls shows it). What is left is the archive as it was
// before change tracking but for pages.text_hash (0020): the sink computes
// and writes it in both runs, so the ratio leaves out its cost, which
// BenchmarkTextHash (internal/archive) measures a page.
var withoutChangeTrackingDDL = []string{
	"DROP VIEW {db}.page_versions_from_pages SYNC",
	`ALTER TABLE {db}.crawl_stats_from_pages MODIFY QUERY
SELECT
    crawl_id,
    minStateIf(received_at, origin = 'webhook') AS first_delivery_at,
    maxStateIf(received_at, origin = 'webhook') AS last_delivery_at,
    uniqExactStateIf(url, origin = 'webhook') AS pages,
    uniqExactStateIf(url, origin = 'backfill') AS backfilled_pages,
    max(toString(job_kind)) AS job_kind
FROM {db}.pages
GROUP BY crawl_id`,
}

// BenchmarkSinkChangeTracking measures what classifying costs the sink:
// the sink binary drains the same pre-filled stream into a schema with
// change tracking on and into one without its views in one run, and
// reports both and the ratio of the means (docs/benchmarks.md, Change
// tracking). A first run, off, warms the machine and is not counted; the
// counted runs go off, on, on, off twice, so that a drift over the run
// weighs on both alike, and four of each keep one slow run (the machine is
// shared) from deciding the ratio; each run's database is dropped before
// the next, so that no run pays for merging the last one's parts.
// BENCH_SINK_DOCS pages of ~3.4 kB (default 50000), one crawl whose webhook
// metadata names a scope.
func BenchmarkSinkChangeTracking(b *testing.B) {
	n := envInt("BENCH_SINK_DOCS", 50000)
	bodies := make([][]byte, n)
	crawl := uuid.NewString()
	for i := range bodies {
		url := fmt.Sprintf("https://bench.test/%d", i)
		bodies[i] = fmt.Appendf(nil, `{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":%q,"metadata":{"title":"T %s","sourceURL":%q,"url":%q,"statusCode":200,"scrapeId":%q}}],"metadata":{"scope":"bench","limit":1000000}}`,
			crawl, uuid.NewString(), text(3000, uint64(i)), url, url, url, uuid.NewString())
	}
	for b.Loop() {
		rates := map[bool][]float64{}
		for i, on := range []bool{false, false, true, true, false, false, true, true, false} {
			natsURL := streamtest.Start(b)
			addr, db := clickhousetest.NewDatabase(b)
			if !on {
				// Migrated first, so that the sink finds every migration
				// applied and inserts with no classifying work.
				migrated(b, addr, db, withoutChangeTrackingDDL)
			}
			prefill(b, natsURL, bodies)
			run := runSinkProcess(b, natsURL, addr, db, len(bodies), 1000)
			dropDatabase(b, addr, db)
			mode := map[bool]string{false: "off", true: "on"}[on]
			if i == 0 {
				b.Logf("warm-up, change tracking %s: %.0f docs/s (not counted)", mode, run.rate)
				continue
			}
			rates[on] = append(rates[on], run.rate)
			b.Logf("change tracking %-3s: %.0f docs/s, sink CPU %.1f µs a page", mode, run.rate, 1e6*run.cpu/float64(len(bodies)))
		}
		off, on := mean(rates[false]), mean(rates[true])
		b.ReportMetric(on, "on_docs/s")
		b.ReportMetric(off, "off_docs/s")
		b.ReportMetric(100*on/off, "%_on_of_off")
		b.Logf("%d documents: change tracking on %.0f docs/s (runs %.0f), off %.0f docs/s (runs %.0f): on is %.0f%% of off",
			n, on, rates[true], off, rates[false], 100*on/off)
	}
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// dropDatabase drops a run's database at once (its parts merge no more).
func dropDatabase(b *testing.B, addr, db string) {
	conn, _ := archiveConn(b, addr, db)
	if err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" SYNC"); err != nil {
		b.Fatal(err)
	}
}
