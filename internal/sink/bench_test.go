package sink_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// The sink benchmarks (scripts/bench-sink.sh, docs/benchmarks.md) measure
// documents/s from a pre-filled stream into ClickHouse by the sink binary,
// beside the ceiling measured in the same run: the same rows, already
// decoded, inserted by the sink's Writer into an identical schema. They
// also report the sink process's peak RSS. Run with -benchtime 1x; the
// document count is BENCH_SINK_DOCS (default 50000) and BENCH_SINK_LARGE
// (default 300) 1 MB pages.

func BenchmarkSinkThroughput(b *testing.B) {
	n := envInt("BENCH_SINK_DOCS", 50000)
	bodies := make([][]byte, n)
	crawl := uuid.NewString()
	for i := range bodies {
		bodies[i] = pageBody(crawl, uuid.NewString(), fmt.Sprintf("https://bench.test/%d", i), text(3000, uint64(i)))
	}
	runBench(b, bodies, 1000)
}

func BenchmarkSinkLargePages(b *testing.B) {
	n := envInt("BENCH_SINK_LARGE", 300)
	bodies := make([][]byte, n)
	crawl := uuid.NewString()
	for i := range bodies {
		// 1 MB of page: 400 kB markdown, 600 kB html.
		md, html := text(400<<10, uint64(i)), "<p>"+text(600<<10, uint64(i)+1e9)+"</p>"
		bodies[i] = fmt.Appendf(nil, `{"success":true,"type":"crawl.page","id":%q,"webhookId":%q,"data":[{"markdown":%q,"html":%q,"metadata":{"title":"large %d","sourceURL":"https://bench.test/large/%d","statusCode":200}}]}`,
			crawl, uuid.NewString(), md, html, i, i)
	}
	runBench(b, bodies, 1000)
}

func runBench(b *testing.B, bodies [][]byte, batch int) {
	for b.Loop() {
		natsURL := streamtest.Start(b)
		addr, sinkDB := clickhousetest.NewDatabase(b)
		_, ceilDB := clickhousetest.NewDatabase(b)
		var total int
		for _, body := range bodies {
			total += len(body)
		}
		b.Logf("%d documents, %.1f MB", len(bodies), float64(total)/1e6)

		prefill(b, natsURL, bodies)
		rows := decodeAll(b, bodies)
		ceil1 := ceiling(b, addr, ceilDB, rows, batch)
		rate, rss := runSinkProcess(b, natsURL, addr, sinkDB, len(bodies), batch)
		ceil2 := ceiling(b, addr, ceilDB, rows, batch)
		ceil := (ceil1 + ceil2) / 2
		b.ReportMetric(rate, "docs/s")
		b.ReportMetric(ceil, "ceiling_docs/s")
		b.ReportMetric(100*rate/ceil, "%_of_ceiling")
		b.ReportMetric(float64(rss)/(1<<20), "peak_rss_MB")
		b.Logf("sink %.0f docs/s, ceiling %.0f docs/s (runs %.0f, %.0f), %.0f%% of ceiling, sink peak RSS %d MB",
			rate, ceil, ceil1, ceil2, 100*rate/ceil, rss>>20)
	}
}

// prefill publishes the deliveries as the receiver does, 8 at a time.
func prefill(b *testing.B, natsURL string, bodies [][]byte) {
	cfg := stream.Config{URL: natsURL, Stream: "CRAWL_EVENTS", SubjectPrefix: "crawl.events", DedupWindow: 30 * time.Minute, MaxAge: time.Hour, Replicas: 1}
	nc, js, err := stream.Connect(cfg, "bench-prefill", zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	ctx := context.Background()
	if _, err := stream.EnsureStream(ctx, js, cfg); err != nil {
		b.Fatal(err)
	}
	pub := stream.NewPublisher(nc, js, cfg, stream.PublisherOptions{})
	defer pub.Close()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(bodies); i += 8 {
				h, err := events.Validate(bodies[i])
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := pub.Publish(ctx, delivery.NewEnvelope(cfg.SubjectPrefix, h, bodies[i], time.Now())); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func decodeAll(b *testing.B, bodies [][]byte) []archive.Page {
	var out []archive.Page
	for _, body := range bodies {
		ev, err := events.DecodeAccepted(body)
		if err != nil {
			b.Fatal(err)
		}
		r, err := archive.EventRows(ev, body, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, r.Pages...)
	}
	return out
}

// ceiling inserts rows, decoded beforehand, in batches of size batch into a
// freshly migrated schema with the sink's own Writer, and returns rows/s:
// the same columns and the same work per row as the sink's inserts, without
// the stream's fetches and acks or the decoding.
func ceiling(b *testing.B, addr, db string, rows []archive.Page, batch int) float64 {
	cfg := archive.Config{Addr: addr, Database: db, User: "default"}
	conn, err := archive.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	_ = conn.Exec(ctx, "DROP TABLE IF EXISTS "+db+".pages SYNC")
	_ = conn.Exec(ctx, "DROP TABLE IF EXISTS "+db+".schema_migrations SYNC")
	for _, mv := range []string{"crawl_stats_from_pages", "crawl_stats_from_failures", "crawl_stats_from_events", "crawl_stats_from_backfill", "crawls"} {
		_ = conn.Exec(ctx, "DROP VIEW IF EXISTS "+db+"."+mv+" SYNC")
	}
	if _, err := archive.Migrate(ctx, conn, cfg, zerolog.Nop()); err != nil {
		b.Fatal(err)
	}
	w, err := archive.NewWriter(conn, cfg)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < len(rows); i += batch {
		if err := w.Insert(ctx, archive.Rows{Pages: rows[i:min(i+batch, len(rows))]}); err != nil {
			b.Fatal(err)
		}
	}
	return float64(len(rows)) / time.Since(start).Seconds()
}

// runSinkProcess runs the sink binary over the pre-filled stream until every
// message is acked; it returns documents/s (from the consumer's creation,
// i.e. after migrations, to the last ack) and the process's peak RSS.
func runSinkProcess(b *testing.B, natsURL, addr, db string, n, batch int) (float64, int64) {
	bin := filepath.Join(b.TempDir(), "sink")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/crawlhouse/crawlhouse/cmd/sink").CombinedOutput(); err != nil {
		b.Fatalf("build sink: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "NATS_URL="+natsURL, "CLICKHOUSE_ADDR="+addr, "CLICKHOUSE_DATABASE="+db,
		"SINK_LISTEN=127.0.0.1:0", "SINK_BATCH_SIZE="+strconv.Itoa(batch), "LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	nc, js, err := stream.Connect(stream.Config{URL: natsURL}, "bench-watch", zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	// A hung sink ends the run with the context (the benchmark's -timeout
	// would too, without saying which step hung).
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var cons jetstream.Consumer
	for cons == nil {
		if c, err := js.Consumer(ctx, "CRAWL_EVENTS", "sink"); err == nil {
			cons = c
		} else if ctx.Err() != nil {
			b.Fatalf("the sink created no consumer: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	var peak int64
	for {
		info, err := cons.Info(ctx)
		if err == nil && info.AckFloor.Consumer >= uint64(n) && info.NumAckPending == 0 && info.NumPending == 0 {
			break
		}
		if rss := vmHWM(cmd.Process.Pid); rss > peak {
			peak = rss
		}
		if ctx.Err() != nil {
			b.Fatalf("the sink did not ack all %d messages: %v", n, ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	if rss := vmHWM(cmd.Process.Pid); rss > peak {
		peak = rss
	}
	return float64(n) / elapsed.Seconds(), peak
}

// vmHWM is a process's peak resident set size, in bytes.
func vmHWM(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// text is n bytes of word-like text (compressible about as real pages are).
func text(n int, seed uint64) string {
	words := []string{"crawl", "page", "archive", "search", "the", "of", "and", "data", "click", "house", "stream", "index", "token", "markdown", "site", "link"}
	r := rand.New(rand.NewPCG(seed, 7))
	var sb strings.Builder
	sb.Grow(n + 16)
	for sb.Len() < n {
		sb.WriteString(words[r.IntN(len(words))])
		if r.IntN(12) == 0 {
			sb.WriteString(strconv.Itoa(r.IntN(100000)))
		}
		sb.WriteByte(' ')
	}
	return sb.String()[:n]
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}
