package sinkcmd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// TestPartitionedStream spreads deliveries over two events streams, as a
// receiver with NATS_STREAM_PARTITIONS=2 does, and runs one sink per
// partition: each stream holds whole jobs only (every delivery of a job in
// the stream its id picks, under that stream's subjects), both streams
// hold some, and the archive gets every page once, each partition read by
// a consumer of its own with dead letters of its own.
func TestPartitionedStream(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e["NATS_STREAM_PARTITIONS"] = "2"
	ctx := context.Background()

	cfg := stream.Config{URL: e["NATS_URL"], Stream: "CRAWL_EVENTS", SubjectPrefix: "crawl.events", DedupWindow: 30 * time.Minute,
		MaxAge: time.Hour, Replicas: 1, Partitions: 2}
	nc, js, err := stream.Connect(cfg, "test-partitions", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := stream.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	pub := stream.NewPublisher(nc, js, cfg, stream.PublisherOptions{})
	t.Cleanup(pub.Close)
	const jobs, pagesPerJob = 12, 5
	perLane := map[int]int{}
	for j := range jobs {
		crawl := uuid.NewString()
		perLane[stream.LaneOf(crawl, 2)] += pagesPerJob
		for i := range pagesPerJob {
			body := pageBody(crawl, uuid.NewString(), fmt.Sprintf("https://p%d.test/%d", j, i), "text")
			h, err := events.Validate(body)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pub.Publish(ctx, delivery.NewEnvelope(cfg.SubjectPrefix, h, body, time.Now())); err != nil {
				t.Fatal(err)
			}
		}
	}
	if perLane[0] == 0 || perLane[1] == 0 {
		t.Fatalf("the jobs all fell in one partition (%v): the test needs both", perLane)
	}
	for lane, want := range perLane {
		st, err := js.Stream(ctx, fmt.Sprintf("CRAWL_EVENTS_%d", lane))
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(fmt.Sprintf("crawl.events-%d.>", lane)))
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != uint64(want) {
			t.Errorf("partition %d holds %d deliveries, want the %d of its jobs", lane, info.State.Msgs, want)
		}
		if len(info.State.Subjects) != 1 {
			t.Errorf("partition %d subjects %v, want its own crawl.events-%d.crawl.page only", lane, info.State.Subjects, lane)
		}
	}

	conn := clickhousetest.Open(t, e["CLICKHOUSE_DATABASE"])
	for lane := range 2 {
		le := env{}
		for k, v := range e {
			le[k] = v
		}
		le["SINK_PARTITION"] = fmt.Sprint(lane)
		startSink(t, le, sinkcmd.Options{})
	}
	waitFor(t, 2*time.Minute, "every page archived", func() bool {
		return clickhousetest.TryCount(conn, "SELECT count() FROM pages FINAL") == jobs*pagesPerJob
	})
	for lane := range 2 {
		if _, err := js.Consumer(ctx, fmt.Sprintf("CRAWL_EVENTS_%d", lane), "sink"); err != nil {
			t.Errorf("partition %d has no sink consumer: %v", lane, err)
		}
		if _, err := js.Stream(ctx, fmt.Sprintf("CRAWL_DLQ_%d", lane)); err != nil {
			t.Errorf("partition %d has no dead-letter stream of its own: %v", lane, err)
		}
	}
	outOfRange, err := sinkcmd.Load(env{"NATS_STREAM_PARTITIONS": "2", "SINK_PARTITION": "2"}.get)
	if err != nil {
		t.Fatal(err)
	}
	if err := outOfRange.Validate(); err == nil {
		t.Error("SINK_PARTITION 2 of 2 partitions: no error")
	}
}
