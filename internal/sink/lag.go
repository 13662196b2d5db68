package sink

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// lagTimeout bounds the JetStream requests of one scrape: a scrape must
// answer even while NATS does not.
const lagTimeout = 3 * time.Second

// LagConfig names what a LagCollector reads.
type LagConfig struct {
	// Stream and Durable are the events stream and the sink's durable
	// consumer on it; FilterSubject is the consumer's filter.
	Stream        string
	Durable       string
	FilterSubject string
	// DLQStream is the dead-letter stream (SINK_DLQ_STREAM).
	DLQStream string
	// Now is the clock ages are judged by (default time.Now).
	Now func() time.Time
}

// LagCollector exports, at scrape time, what waits to be archived:
//
//   - crawlhouse_sink_lag_messages: deliveries in the events stream the
//     durable consumer has not had acked (not delivered yet, or delivered
//     and not yet committed), across every sink replica;
//   - crawlhouse_sink_lag_seconds: the age of the oldest of them, from the
//     time JetStream stored it; 0 when none waits;
//   - crawlhouse_sink_dead_letter_messages: messages in the dead-letter
//     stream, waiting for a fix and `sink redrive`.
//
// A count says how much waits, the age how long: a small backlog that is
// not moving is as bad as a large one, and the age is what NATS_MAX_AGE
// threatens. Each scrape costs at most four small JetStream requests (the
// consumer's info, the events stream's info and one message by sequence
// when something waits, the dead-letter stream's info), whatever the
// backlog. When NATS does not answer, the
// series are left out of that scrape rather than failing it: the sink's
// other metrics, and /readyz, say why.
type LagCollector struct {
	js  jetstream.JetStream
	cfg LagConfig

	messages, seconds, deadLetters *prometheus.Desc
}

// NewLagCollector returns the collector; register it on the sink's
// registry.
func NewLagCollector(js jetstream.JetStream, cfg LagConfig) *LagCollector {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &LagCollector{
		js:  js,
		cfg: cfg,
		messages: prometheus.NewDesc("crawlhouse_sink_lag_messages",
			"Deliveries in the events stream not archived yet: not delivered to a sink, or delivered and not acked.", nil, nil),
		seconds: prometheus.NewDesc("crawlhouse_sink_lag_seconds",
			"Age of the oldest delivery not archived yet (since JetStream stored it); 0 when none waits.", nil, nil),
		deadLetters: prometheus.NewDesc("crawlhouse_sink_dead_letter_messages",
			"Messages in the dead-letter stream (SINK_DLQ_STREAM), waiting for `sink redrive`.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *LagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.messages
	ch <- c.seconds
	ch <- c.deadLetters
}

// Collect implements prometheus.Collector.
func (c *LagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), lagTimeout)
	defer cancel()
	if n, age, err := c.lag(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(c.messages, prometheus.GaugeValue, float64(n))
		ch <- prometheus.MustNewConstMetric(c.seconds, prometheus.GaugeValue, age.Seconds())
	}
	if st, err := c.js.Stream(ctx, c.cfg.DLQStream); err == nil {
		ch <- prometheus.MustNewConstMetric(c.deadLetters, prometheus.GaugeValue, float64(st.CachedInfo().State.Msgs))
	}
}

// lag is what waits to be archived: how many deliveries, and the age of the
// oldest (0 when none).
func (c *LagCollector) lag(ctx context.Context) (uint64, time.Duration, error) {
	cons, err := c.js.Consumer(ctx, c.cfg.Stream, c.cfg.Durable)
	if err != nil {
		return 0, 0, err
	}
	info := cons.CachedInfo()
	n := info.NumPending + uint64(max(info.NumAckPending, 0))
	if n == 0 {
		return 0, 0, nil
	}
	// Everything up to the ack floor is acked; the first message after it
	// that the consumer's filter selects is the oldest not archived (the
	// floor's successor may be another subject's, or deleted, so ask for
	// the next one matching).
	st, err := c.js.Stream(ctx, c.cfg.Stream)
	if err != nil {
		return 0, 0, err
	}
	msg, err := st.GetMsg(ctx, info.AckFloor.Stream+1, jetstream.WithGetMsgSubject(c.cfg.FilterSubject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// Acked or expired since the consumer's info was read.
		return n, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	// Clocks of different hosts: a stored time in the future is no lag.
	return n, max(c.cfg.Now().Sub(msg.Time), 0), nil
}
