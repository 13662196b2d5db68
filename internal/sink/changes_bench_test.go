package sink_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// changeTrackingViews are the materialized views change tracking adds to
// every insert into pages (migrations 0013 and 0014); without them the
// schema is the archive as it was before but for pages.text_hash (0020):
// the sink computes and writes it in both runs, so the ratio leaves out its
// cost, which BenchmarkTextHash (internal/archive) measures a page.
var changeTrackingViews = []string{"page_versions_from_pages", "job_starts_from_pages", "job_metadata_from_pages"}

// BenchmarkSinkChangeTracking measures what classifying costs the sink:
// the sink binary drains the same pre-filled stream into a schema with
// change tracking on and into one without its views, alternated (off, on,
// off, on) in one run, and reports both and the ratio of the medians
// (docs/benchmarks.md, Change tracking). BENCH_SINK_DOCS pages of ~3.4 kB
// (default 50000), one crawl whose webhook metadata names a scope.
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
		for _, on := range []bool{false, true, false, true} {
			natsURL := streamtest.Start(b)
			addr, db := clickhousetest.NewDatabase(b)
			if !on {
				withoutChangeTracking(b, addr, db)
			}
			prefill(b, natsURL, bodies)
			run := runSinkProcess(b, natsURL, addr, db, len(bodies), 1000)
			rates[on] = append(rates[on], run.rate)
			b.Logf("change tracking %-3s: %.0f docs/s, sink CPU %.1f µs a page", map[bool]string{false: "off", true: "on"}[on], run.rate, 1e6*run.cpu/float64(len(bodies)))
		}
		off, on := median(rates[false]), median(rates[true])
		b.ReportMetric(on, "on_docs/s")
		b.ReportMetric(off, "off_docs/s")
		b.ReportMetric(100*on/off, "%_on_of_off")
		b.Logf("%d documents: change tracking on %.0f docs/s (runs %.0f), off %.0f docs/s (runs %.0f): on is %.0f%% of off",
			n, on, rates[true], off, rates[false], 100*on/off)
	}
}

// withoutChangeTracking migrates db and drops change tracking's views, so
// that the sink, finding every migration applied, inserts into pages with
// no classifying work.
func withoutChangeTracking(b *testing.B, addr, db string) {
	cfg := archive.Config{Addr: addr, Database: db, User: "default"}
	conn, err := archive.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	if _, err := archive.Migrate(ctx, conn, cfg, zerolog.Nop()); err != nil {
		b.Fatal(err)
	}
	for _, v := range changeTrackingViews {
		if err := conn.Exec(ctx, "DROP VIEW "+db+"."+v+" SYNC"); err != nil {
			b.Fatal(err)
		}
	}
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}
