package sinkcmd

import "github.com/crawlhouse/crawlhouse/internal/sink"

// lagCollector reads, at scrape time, the backlog of the sink's durable
// consumer and the dead-letter stream's depth (crawlhouse_sink_lag_* and
// crawlhouse_sink_dead_letter_messages).
func lagCollector(c clients) *sink.LagCollector {
	return sink.NewLagCollector(c.js, sink.LagConfig{
		Stream:        c.cfg.StreamConfig.Stream,
		Durable:       c.cfg.Consumer,
		FilterSubject: c.cfg.pipeline(c.opts).FilterSubject,
		DLQStream:     c.cfg.DLQStream,
	})
}
