package sink_test

import (
	"context"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/sink"
	"github.com/crawlhouse/crawlhouse/internal/testkit/streamtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// TestLagCollector: against a real JetStream, the lag is what the durable
// consumer has not had acked, and its age is the age of the first such
// message the consumer's filter selects: a message of another subject
// stored before it does not count, a later message acked out of order does
// not move the age, and once everything is acked both are 0. The dead-letter
// depth is the dead-letter stream's message count.
func TestLagCollector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, js := streamtest.Connect(t, streamtest.Start(t))
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>", "other"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "EV", jetstream.ConsumerConfig{Durable: "sink", FilterSubject: "ev.>", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	var now time.Time
	c := sink.NewLagCollector(js, sink.LagConfig{Stream: "EV", Durable: "sink", FilterSubject: "ev.>", DLQStream: "DLQ", Now: func() time.Time { return now }})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	want := func(messages, seconds, dead float64) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			got[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
		}
		for name, v := range map[string]float64{"crawlhouse_sink_lag_messages": messages, "crawlhouse_sink_lag_seconds": seconds, "crawlhouse_sink_dead_letter_messages": dead} {
			if g, ok := got[name]; !ok || g != v {
				t.Errorf("%s = %v (exported: %v), want %v", name, g, ok, v)
			}
		}
	}
	now = time.Now()
	want(0, 0, 0)

	if _, err := js.Publish(ctx, "other", []byte("not the sink's")); err != nil {
		t.Fatal(err)
	}
	var stored []time.Time
	for _, s := range []string{"ev.a", "ev.b"} {
		if _, err := js.Publish(ctx, s, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	// Fetch, not FetchNoWait: on a busy machine the pull request can reach
	// the server before the consumer has the messages pending, and a
	// no-wait fetch then answers empty. Fetch returns as soon as both came.
	var msgs []jetstream.Msg
	for attempt := 0; len(msgs) < 2 && attempt < 5; attempt++ {
		batch, err := cons.Fetch(2-len(msgs), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			stored = append(stored, md.Timestamp)
			msgs = append(msgs, m)
		}
	}
	if len(msgs) != 2 {
		t.Fatalf("fetched %d messages, want 2", len(msgs))
	}
	// Judged from a clock an hour after the first was stored.
	now = stored[0].Add(time.Hour)
	want(2, time.Hour.Seconds(), 0)
	// The second acked first: the first still waits, as old as before.
	if err := msgs[1].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	want(1, time.Hour.Seconds(), 0)
	if err := msgs[0].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	want(0, 0, 0)

	// A stored time ahead of this host's clock is no lag, not a negative one.
	if _, err := js.Publish(ctx, "ev.c", []byte("c")); err != nil {
		t.Fatal(err)
	}
	now = time.Unix(0, 0)
	if _, err := js.Publish(ctx, "dlq.x", []byte("dead")); err != nil {
		t.Fatal(err)
	}
	want(1, 0, 1)
}
