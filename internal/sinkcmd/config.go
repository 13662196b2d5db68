package sinkcmd

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/alert"
	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/changes"
	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/crawlhouse/crawlhouse/internal/sink"
	"github.com/crawlhouse/crawlhouse/internal/stream"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
)

// The parts of the configuration other packages own, embedded under names
// of their own.
type (
	LogConfig     = logs.Config
	StreamConfig  = stream.Config
	ArchiveConfig = archive.Config
	AlertConfig   = alert.Config
	ChangesConfig = changes.Config
	TracingConfig = tracing.Config
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

	// Listen serves /healthz, /readyz and /metrics.
	Listen string `envconfig:"SINK_LISTEN" default:":9090" desc:"listen address of /healthz, /readyz, /metrics"`
	// Consumer is the durable pull consumer every sink replica shares.
	Consumer string `envconfig:"SINK_CONSUMER" default:"sink" desc:"durable pull consumer (shared by replicas)"`
	// BatchSize is the most messages one ClickHouse insert takes.
	BatchSize int `envconfig:"SINK_BATCH_SIZE" default:"1000" desc:"max messages per ClickHouse insert"`
	// BatchWait is the longest wait to fill a batch.
	BatchWait time.Duration `envconfig:"SINK_BATCH_WAIT" default:"1s" desc:"max wait to fill a batch"`
	// MaxDeliver is how many times ClickHouse may reject a message before
	// it goes to the dead-letter stream.
	MaxDeliver int `envconfig:"SINK_MAX_DELIVER" default:"10" desc:"tries before dead-lettering"`
	// DLQStream is the dead-letter stream.
	DLQStream string `envconfig:"SINK_DLQ_STREAM" default:"CRAWL_DLQ" desc:"dead-letter stream"`

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
	errs := []error{c.LogConfig.Validate(), c.StreamConfig.Validate(), c.ArchiveConfig.Validate(), c.AlertConfig.Validate(), c.ChangesConfig.Validate(), c.TracingConfig.Validate()}
	if c.Listen == "" {
		errs = append(errs, errors.New("SINK_LISTEN: must not be empty"))
	}
	if c.Consumer == "" || strings.ContainsAny(c.Consumer, ". *>") {
		errs = append(errs, fmt.Errorf("SINK_CONSUMER: %q must be non-empty with no '.', '*', '>' or spaces", c.Consumer))
	}
	if c.BatchSize < 1 || c.BatchSize > 100000 {
		errs = append(errs, fmt.Errorf("SINK_BATCH_SIZE: %d is not between 1 and 100000", c.BatchSize))
	}
	if c.BatchWait <= 0 {
		errs = append(errs, errors.New("SINK_BATCH_WAIT: must be positive"))
	}
	if c.MaxDeliver < 1 {
		errs = append(errs, fmt.Errorf("SINK_MAX_DELIVER: %d must be at least 1", c.MaxDeliver))
	}
	if c.DLQStream == "" || strings.ContainsAny(c.DLQStream, ". *>") || c.DLQStream == c.StreamConfig.Stream {
		errs = append(errs, fmt.Errorf("SINK_DLQ_STREAM: %q must be a stream name other than NATS_STREAM", c.DLQStream))
	}
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
		BatchWait:     c.BatchWait,
		MaxDeliver:    c.MaxDeliver,
		AckWait:       opts.AckWait,
	}
}

// deadLetters is where dead letters go (SINK_DLQ_STREAM) and where a
// redrive returns them (the events stream and its body store).
func (c Config) deadLetters() stream.DeadLetterConfig {
	return stream.DeadLetterConfig{Stream: c.DLQStream, Events: c.StreamConfig}
}
