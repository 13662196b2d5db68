package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	eventstream "github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkStreamLeaderPublish measures how many deliveries one stream's
// leader takes per second on the soak's three-node cluster (every node
// syncing before it acknowledges, as production is configured), with the
// stream at one replica and at three, in the same run: the limit of a
// single events stream, which docs/capacity.md sizes against. The messages
// are what the receiver publishes (BENCH_LEADER_BYTES, 5 000 by default,
// the size of the receiver benchmark's deliveries), each with its own
// Nats-Msg-Id so that the leader does its duplicate check, published
// asynchronously with BENCH_LEADER_WINDOW (256) waiting for their PubAck:
// many receivers' deliveries at once. Each round publishes
// BENCH_LEADER_MSGS (20 000) to a fresh stream per variant, the order of
// the variants rotating; a third variant spreads the same messages over
// BENCH_LEADER_PARTITIONS (2) R3 streams, as NATS_STREAM_PARTITIONS does,
// to show what a second leader adds. Run with -benchtime 1x.
func BenchmarkStreamLeaderPublish(b *testing.B) {
	size, window, msgs := envInt("BENCH_LEADER_BYTES", 5000), envInt("BENCH_LEADER_WINDOW", 256), envInt("BENCH_LEADER_MSGS", 20000)
	rounds := envInt("BENCH_LEADER_ROUNDS", 3)
	c, err := startCluster(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer c.shutdown()
	nc, err := nats.Connect(c.urls())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(window))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	body := make([]byte, size)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	// R1 and R3: one stream; R3x2: the same deliveries over two
	// partitions (NATS_STREAM_PARTITIONS=2), two leaders.
	variants := []struct {
		name                 string
		replicas, partitions int
	}{{"R1", 1, 1}, {"R3", 3, 1}, {fmt.Sprintf("R3x%d", envInt("BENCH_LEADER_PARTITIONS", 2)), 3, envInt("BENCH_LEADER_PARTITIONS", 2)}}
	rates := map[string][]float64{}
	for round := range rounds {
		for k := range variants {
			// A different first variant each round: none always gets the
			// coldest or the warmest minute.
			v := variants[(k+round)%len(variants)]
			cfg := eventstream.Config{Stream: fmt.Sprintf("LEADER_%s_%d", v.name, round), SubjectPrefix: fmt.Sprintf("leader.%s.%d", v.name, round),
				MaxAge: time.Hour, DedupWindow: 30 * time.Minute, Replicas: v.replicas, Partitions: v.partitions}
			lanes := cfg.Lanes()
			for _, lane := range lanes {
				// The cluster elects its meta leader after it starts: until
				// then stream creation times out.
				deadline := time.Now().Add(time.Minute)
				for {
					cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					_, err := js.CreateStream(cctx, eventstream.EventsStreamConfig(lane))
					cancel()
					if err == nil {
						break
					}
					if time.Now().After(deadline) {
						b.Fatal(err)
					}
					time.Sleep(200 * time.Millisecond)
				}
				if v.replicas > 1 {
					if err := c.waitStream(ctx, lane.Stream, 30*time.Second); err != nil {
						b.Fatal(err)
					}
				}
			}
			start := time.Now()
			for i := range msgs {
				lane := lanes[i%len(lanes)]
				m := nats.NewMsg(lane.SubjectPrefix + ".crawl.page")
				m.Data = body
				m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s-%d", cfg.Stream, i))
				if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(5 * time.Minute):
				b.Fatal("PubAcks still outstanding after 5 minutes")
			}
			elapsed := time.Since(start)
			var stored uint64
			for _, lane := range lanes {
				s, err := js.Stream(ctx, lane.Stream)
				if err != nil {
					b.Fatal(err)
				}
				stored += s.CachedInfo().State.Msgs
				_ = js.DeleteStream(ctx, lane.Stream)
			}
			if stored != uint64(msgs) {
				b.Fatalf("%s holds %d messages, %d were published", v.name, stored, msgs)
			}
			rate := float64(msgs) / elapsed.Seconds()
			rates[v.name] = append(rates[v.name], rate)
			b.Logf("round %d %s: %d × %d B in %s = %.0f msgs/s (%.1f MB/s)", round+1, v.name, msgs, size, elapsed.Round(time.Millisecond), rate, rate*float64(size)/1e6)
		}
	}
	r1, r3, rp := median(rates["R1"]), median(rates["R3"]), median(rates[variants[2].name])
	b.Logf("median R1 %.0f msgs/s, R3 %.0f msgs/s (R3/R1 %.0f%%), %s %.0f msgs/s; 100M pages/day needs 1 157/s", r1, r3, 100*r3/r1, variants[2].name, rp)
	b.ReportMetric(r1, "R1-msgs/s")
	b.ReportMetric(r3, "R3-msgs/s")
	b.ReportMetric(rp, variants[2].name+"-msgs/s")
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
