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
// BENCH_LEADER_MSGS (20 000) to a fresh stream per replica count, the
// order of R1 and R3 alternating; run with -benchtime 1x.
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
	rates := map[int][]float64{}
	for round := range rounds {
		order := []int{1, 3}
		if round%2 == 1 {
			order = []int{3, 1}
		}
		for _, replicas := range order {
			name := fmt.Sprintf("LEADER_R%d_%d", replicas, round)
			cfg := eventstream.Config{Stream: name, SubjectPrefix: "leader." + strconv.Itoa(round) + "." + strconv.Itoa(replicas), MaxAge: time.Hour, DedupWindow: 30 * time.Minute, Replicas: replicas}
			// The cluster elects its meta leader after it starts: until
			// then stream creation times out.
			deadline := time.Now().Add(time.Minute)
			for {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := js.CreateStream(cctx, eventstream.EventsStreamConfig(cfg))
				cancel()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					b.Fatal(err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			if replicas > 1 {
				if err := c.waitStream(ctx, name, 30*time.Second); err != nil {
					b.Fatal(err)
				}
			}
			subject := cfg.SubjectPrefix + ".crawl.page"
			start := time.Now()
			for i := range msgs {
				m := nats.NewMsg(subject)
				m.Data = body
				m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s-%d", name, i))
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
			s, err := js.Stream(ctx, name)
			if err != nil {
				b.Fatal(err)
			}
			if got := s.CachedInfo().State.Msgs; got != uint64(msgs) {
				b.Fatalf("%s holds %d messages, %d were published", name, got, msgs)
			}
			rate := float64(msgs) / elapsed.Seconds()
			rates[replicas] = append(rates[replicas], rate)
			b.Logf("round %d R%d: %d × %d B in %s = %.0f msgs/s (%.1f MB/s)", round+1, replicas, msgs, size, elapsed.Round(time.Millisecond), rate, rate*float64(size)/1e6)
			_ = js.DeleteStream(ctx, name)
		}
	}
	r1, r3 := median(rates[1]), median(rates[3])
	b.Logf("median R1 %.0f msgs/s, R3 %.0f msgs/s, R3/R1 %.0f%%; 100M pages/day needs 1 157/s", r1, r3, 100*r3/r1)
	b.ReportMetric(r1, "R1-msgs/s")
	b.ReportMetric(r3, "R3-msgs/s")
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
