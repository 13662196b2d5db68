package stream

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxPartitions bounds NATS_STREAM_PARTITIONS.
const MaxPartitions = 64

// One events stream has one leader, which stores (and with replicas,
// replicates) every delivery before it acknowledges it: its rate is the
// ceiling of the whole pipeline (docs/benchmarks.md, "A single stream's
// leader"). Past it, the deliveries are spread over several streams by job,
// each with its own leader, which JetStream places on different servers of
// a cluster, and each read by its own sinks (SINK_PARTITION): a partition
// is the whole path of the one-stream layout, with its own name, subjects,
// body store, consumer and dead letters.
//
// A delivery's partition is a hash of its job id (of its webhook id when it
// has none), so that every delivery of a job, and every retry of a
// delivery, goes to the same stream: its order within the job and the
// stream's duplicate window (Nats-Msg-Id = webhookId) hold as with one
// stream.

// Lane is partition i of c: the stream "<NATS_STREAM>_<i>" with subjects
// "<NATS_SUBJECT_PREFIX>-<i>.>" (a prefix of its own, so that no two
// partitions, nor the unpartitioned stream, share a subject) and the body
// store "<NATS_STREAM>_<i>_BODIES". The result is one stream: Partitions 1.
func (c Config) Lane(i int) Config {
	c.Stream = fmt.Sprintf("%s_%d", c.Stream, i)
	c.SubjectPrefix = fmt.Sprintf("%s-%d", c.SubjectPrefix, i)
	c.Partitions = 1
	return c
}

// Lanes are the streams of c: its partitions, or c itself when it has one.
func (c Config) Lanes() []Config {
	if c.Partitions <= 1 {
		return []Config{c}
	}
	lanes := make([]Config, c.Partitions)
	for i := range lanes {
		lanes[i] = c.Lane(i)
	}
	return lanes
}

// LaneOf is the partition, of n, of the deliveries of job jobID (or, for
// a delivery without a job id, of webhook id key).
func LaneOf(key string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// laneKey is what picks env's partition.
func laneKey(env *delivery.Envelope) string {
	if env.CrawlID != "" {
		return env.CrawlID
	}
	return env.WebhookID
}

// newLanes returns the publisher of each partition of cfg.
func newLanes(nc *nats.Conn, js jetstream.JetStream, cfg Config, opts PublisherOptions) []*Publisher {
	lanes := cfg.Lanes()
	pubs := make([]*Publisher, len(lanes))
	for i, l := range lanes {
		pubs[i] = NewPublisher(nc, js, l, opts)
		pubs[i].prefix = l.SubjectPrefix
	}
	return pubs
}

// publishToLane publishes env to its partition's stream, under its
// partition's subject.
func (p *Publisher) publishToLane(ctx context.Context, env *delivery.Envelope) (Ack, error) {
	lane := p.lanes[LaneOf(laneKey(env), len(p.lanes))]
	env.Subject = delivery.Subject(lane.prefix, env.Type)
	return lane.Publish(ctx, env)
}

// ensureLanes creates or updates every partition's stream and body store.
func ensureLanes(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.Stream, error) {
	var first jetstream.Stream
	for i, l := range cfg.Lanes() {
		s, err := EnsureStream(ctx, js, l)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			first = s
		}
	}
	return first, nil
}
