package sink_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
)

// BenchmarkSinkUnderSearches measures whether the archiving path stays
// first on a ClickHouse it shares with the read API (scripts/bench-sink.sh,
// docs/benchmarks.md): the sink binary's insert rate alone, then, in the
// same run and on the same server, while 16 clients search an archive of
// the same pages for phrases whose words every page holds but never in
// that order (the costliest search: every candidate's text is read), each
// through an query.Reader configured as the reader binary's defaults
// (its limits, max_threads and search budget). It prints the ratio of the
// two rates (the target is 0.8 or more) and the searches answered.
// BENCH_READERS_DOCS is the pages of each (default 20000),
// BENCH_READERS_THREADS the searches' max_threads and BENCH_READERS_QUERIES
// how many of them run in ClickHouse at once (defaults the reader's).
func BenchmarkSinkUnderSearches(b *testing.B) {
	n := envInt("BENCH_READERS_DOCS", 20000)
	const clients = 16
	bodies := make([][]byte, n)
	crawl := uuid.NewString()
	for i := range bodies {
		bodies[i] = pageBody(crawl, uuid.NewString(), fmt.Sprintf("https://bench.test/%d", i), text(3000, uint64(i)))
	}
	for b.Loop() {
		addr, searchedDB := clickhousetest.NewDatabase(b)
		load(b, openArchive(b, addr, searchedDB), decodeAll(b, bodies), 1000)
		conn, cfg := archiveConn(b, addr, searchedDB)
		base, err := query.NewReader(conn, cfg)
		if err != nil {
			b.Fatal(err)
		}
		limits := query.DefaultLimits
		limits.MaxThreads = uint64(envInt("BENCH_READERS_THREADS", int(limits.MaxThreads)))
		limits.MaxQueries = envInt("BENCH_READERS_QUERIES", limits.MaxQueries)
		r, err := base.WithReadOptions(query.ReadOptions{Limits: limits})
		if err != nil {
			b.Fatal(err)
		}
		server := clickhousetest.Open(b, searchedDB)

		run := func(searching bool) (sinkRun, int64, int64, int64) {
			natsURL := streamtest.Start(b)
			_, sinkDB := clickhousetest.NewDatabase(b)
			prefill(b, natsURL, bodies)
			settle(b, server)
			ctx, stop := context.WithCancel(context.Background())
			var answered, partial, busy atomic.Int64
			var wg sync.WaitGroup
			if searching {
				// Six words of the text's vocabulary in a row: every page
				// holds them, (nearly) none in that order.
				phrases := []string{`"token crawl token crawl token crawl"`, `"house site house site house site"`, `"index the index the index the"`, `"link data link data link data"`}
				for c := range clients {
					wg.Go(func() {
						q := query.SearchQuery{Text: phrases[c%len(phrases)]}
						for ctx.Err() == nil {
							p, err := r.Search(ctx, q)
							switch {
							case err == nil:
								answered.Add(1)
								if p.Partial {
									partial.Add(1)
								}
								q.Cursor = p.Next // "" at the end: from the start again
							case errors.Is(err, query.ErrLimit):
								answered.Add(1)
								q.Cursor = ""
							case errors.Is(err, query.ErrBusy):
								busy.Add(1)
							case ctx.Err() == nil:
								b.Errorf("search: %v", err)
								return
							}
						}
					})
				}
			}
			s := runSinkProcess(b, natsURL, addr, sinkDB, len(bodies), 1000)
			stop()
			wg.Wait()
			if got := countRows(b, sinkDB, "pages FINAL"); got != uint64(len(bodies)) {
				b.Fatalf("the sink archived %d pages of %d", got, len(bodies))
			}
			return s, answered.Load(), partial.Load(), busy.Load()
		}
		alone, _, _, _ := run(false)
		shared, answered, partial, busy := run(true)
		ratio := shared.rate / alone.rate
		b.ReportMetric(alone.rate, "alone_docs/s")
		b.ReportMetric(shared.rate, "searched_docs/s")
		b.ReportMetric(ratio, "ratio")
		b.Logf("sink alone %.0f docs/s; while %d clients search phrases that match nothing (max_threads %d, %d queries at once) %.0f docs/s: ratio %.2f (target >= 0.8); %d searches answered, %d of them partial pages, %d turned away busy",
			alone.rate, clients, limits.MaxThreads, limits.MaxQueries, shared.rate, ratio, answered, partial, busy)
	}
}
