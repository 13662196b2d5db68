package sinkcmd

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/alert"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/archive/schema"
	"github.com/crawlhouse/crawlhouse/internal/changes"
	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/crawlhouse/crawlhouse/internal/sink"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
)

// The parts of the configuration other packages own, embedded under names
// of their own.
type (
	LogConfig       = logs.Config
	StreamConfig    = stream.Config
	ArchiveConfig   = archive.Config
	AlertConfig     = alert.Config
	ChangesConfig   = changes.Config
	TracingConfig   = tracing.Config
	RetentionConfig = schema.Retention
)

// Config is the sink's configuration, read from the environment
// (see Load). config/environment.md documents it and a test keeps the two
// equal.
type Config struct {
	LogConfig
	StreamConfig
	ArchiveConfig
	AlertConfig
	ChangesConfig
	TracingConfig
	RetentionConfig

	// Listen serves /healthz, /readyz and /metrics.
	Listen string `envconfig:"SINK_LISTEN" default:":9090" desc:"listen address of /healthz, /readyz, /metrics"`
	// Consumer is the durable pull consumer every sink replica shares.
	Consumer string `envconfig:"SINK_CONSUMER" default:"sink" desc:"durable pull consumer (shared by replicas)"`
	// BatchSize is the most messages one ClickHouse insert takes.
	BatchSize int `envconfig:"SINK_BATCH_SIZE" default:"10000" desc:"max messages per ClickHouse insert"`
	// BatchBytes is the most delivery bytes (as received, uncompressed) one
	// ClickHouse insert takes; the batches in hand hold at most twice it,
	// so the sink's memory is bounded by bytes whatever the page size
	// (docs/benchmarks.md, "Sink": why the defaults are what they are).
	BatchBytes int `envconfig:"SINK_BATCH_BYTES" default:"16777216" desc:"max delivery bytes per ClickHouse insert; the batches in hand hold at most twice it"`
	// BatchWait is the longest wait to fill a batch.
	BatchWait time.Duration `envconfig:"SINK_BATCH_WAIT" default:"1s" desc:"max wait to fill a batch"`
	// InsertsInFlight is how many batches may be inserting into ClickHouse
	// at once. One insert after the other leaves ClickHouse waiting for the
	// sink and the sink for ClickHouse; a few at once keep both busy
	// (docs/benchmarks.md, "Inserts in flight"). Each batch is still acked
	// only once its own insert is committed.
	InsertsInFlight int `envconfig:"SINK_INSERTS_IN_FLIGHT" default:"4" desc:"batches inserting into ClickHouse at once"`
	// MaxDeliver is how many times ClickHouse may reject a message before
	// it goes to the dead-letter stream.
	MaxDeliver int `envconfig:"SINK_MAX_DELIVER" default:"10" desc:"tries before dead-lettering"`
	// DLQStream is the dead-letter stream.
	DLQStream string `envconfig:"SINK_DLQ_STREAM" default:"CRAWL_DLQ" desc:"dead-letter stream"`
	// Partition is the partition of the events stream this sink reads when
	// the receiver spreads deliveries over NATS_STREAM_PARTITIONS streams.
	// Load turns the configuration into that partition's: its stream,
	// subjects and body store (stream.Config.Lane), and dead letters of its
	// own ("<SINK_DLQ_STREAM>_<partition>", so that a redrive returns each
	// to its own stream).
	Partition int `envconfig:"SINK_PARTITION" default:"0" desc:"partition of the events stream this sink reads (0 to NATS_STREAM_PARTITIONS-1)"`
	// partitions is NATS_STREAM_PARTITIONS as configured, before Load
	// narrowed StreamConfig to one partition.
	partitions int

	// QuarantineStreams names the receiver's quarantine streams, which
	// `sink delete` removes taken-down deliveries from (the receiver's
	// variable, RECEIVER_QUARANTINE_STREAM).
	stream.QuarantineStreams

	// GCPercent is the Go garbage collector's target for the consuming
	// sink (what GOGC sets; Go's default is 100). Each batch allocates its
	// bodies, text and insert columns afresh; at 400 the collector runs a
	// quarter as often, which took the sink's CPU per page down by a sixth
	// for about 1.6 times the resident memory (docs/benchmarks.md, "The
	// sink's cost per page").
	GCPercent int `envconfig:"SINK_GC_PERCENT" default:"400" desc:"Go GC target (GOGC) of the consuming sink"`
	// MemoryLimit is the Go runtime's soft memory limit for the consuming
	// sink (what GOMEMLIMIT sets), 0 for none. Its batches in hand hold
	// at most three times SINK_BATCH_BYTES of deliveries, several times
	// that once decoded; SINK_GC_PERCENT lets the heap grow to five times
	// what is live, which this limit caps: near it the collector runs as
	// often as it must (docs/benchmarks.md, "Sink").
	MemoryLimit int64 `envconfig:"SINK_MEMORY_LIMIT" default:"469762048" desc:"soft memory limit (GOMEMLIMIT) of the consuming sink in bytes, 0 for none; at least 16 times SINK_BATCH_BYTES"`

	// CrawlAPIURL is the crawl API's base URL; backfill is off while unset.
	CrawlAPIURL string `envconfig:"CRAWL_API_URL" desc:"base URL of the crawl API (backfill off while unset)"`
	// CrawlAPIKey is the crawl API's bearer key. Never logged.
	CrawlAPIKey string `envconfig:"CRAWL_API_KEY" desc:"bearer key for the crawl API"`
	// BackfillQuietPeriod: a crawl with no delivery for this long is
	// reconciled against the crawl API.
	BackfillQuietPeriod time.Duration `envconfig:"BACKFILL_QUIET_PERIOD" default:"2m" desc:"reconcile a crawl quiet for this long"`
}

// Validate reports every setting that could not work, each naming its
// variable. Secrets are never part of the message.
func (c Config) Validate() error {
	errs := []error{c.LogConfig.Validate(), c.StreamConfig.Validate(), c.ArchiveConfig.Validate(), c.AlertConfig.Validate(), c.ChangesConfig.Validate(), c.TracingConfig.Validate(), c.RetentionConfig.Validate()}
	if c.Listen == "" {
		errs = append(errs, errors.New("SINK_LISTEN: must not be empty"))
	}
	if c.Consumer == "" || strings.ContainsAny(c.Consumer, ". *>") {
		errs = append(errs, fmt.Errorf("SINK_CONSUMER: %q must be non-empty with no '.', '*', '>' or spaces", c.Consumer))
	}
	// The batch and its inserts: sink.Config.Validate holds their bounds.
	errs = append(errs, c.pipeline(Options{}).Validate())
	if c.MemoryLimit != 0 && c.MemoryLimit < 16*int64(c.BatchBytes) {
		errs = append(errs, fmt.Errorf("SINK_MEMORY_LIMIT: %d is below 16 times SINK_BATCH_BYTES (%d): the batches in hand would not fit; 0 sets no limit", c.MemoryLimit, 16*int64(c.BatchBytes)))
	}
	if c.GCPercent < 50 || c.GCPercent > 2000 {
		errs = append(errs, fmt.Errorf("SINK_GC_PERCENT: %d is not between 50 and 2000", c.GCPercent))
	}
	if n := max(c.partitions, c.StreamConfig.Partitions, 1); c.Partition < 0 || c.Partition >= n {
		errs = append(errs, fmt.Errorf("SINK_PARTITION: %d is not between 0 and NATS_STREAM_PARTITIONS-1 (%d)", c.Partition, n-1))
	}
	if c.DLQStream == "" || strings.ContainsAny(c.DLQStream, ". *>") || c.DLQStream == c.StreamConfig.Stream {
		errs = append(errs, fmt.Errorf("SINK_DLQ_STREAM: %q must be a stream name other than NATS_STREAM", c.DLQStream))
	}
	errs = append(errs, c.QuarantineStreams.Validate())
	if c.CrawlAPIURL != "" {
		u, err := url.Parse(c.CrawlAPIURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, errors.New("CRAWL_API_URL: must be an http(s) URL"))
		}
	}
	if c.BackfillQuietPeriod <= 0 {
		errs = append(errs, errors.New("BACKFILL_QUIET_PERIOD: must be positive"))
	}
	return errors.Join(errs...)
}

// pipeline is the consumer's part of the configuration; opts.AckWait is
// tests'.
func (c Config) pipeline(opts Options) sink.Config {
	return sink.Config{
		Durable:       c.Consumer,
		FilterSubject: c.SubjectPrefix + ".>",
		BatchSize:     c.BatchSize,
		BatchBytes:    c.BatchBytes,
		BatchWait:     c.BatchWait,
		MaxDeliver:    c.MaxDeliver,
		AckWait:       opts.AckWait,

		InsertsInFlight: c.InsertsInFlight,
	}
}

// deadLetters is where dead letters go (SINK_DLQ_STREAM) and where a
// redrive returns them (the events stream and its body store).
func (c Config) deadLetters() stream.DeadLetterConfig {
	return stream.DeadLetterConfig{Stream: c.DLQStream, Events: c.StreamConfig}
}

// narrow makes a sink of a partitioned stream read its own partition
// (SINK_PARTITION); a partition out of range is left for Validate.
func (c Config) narrow() Config {
	n := c.StreamConfig.Partitions
	if n <= 1 || c.Partition < 0 || c.Partition >= n {
		return c
	}
	c.partitions = n
	c.StreamConfig = c.StreamConfig.Lane(c.Partition)
	c.DLQStream = fmt.Sprintf("%s_%d", c.DLQStream, c.Partition)
	return c
}
