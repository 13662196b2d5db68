package readercmd

import (
	"errors"
	"net"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/env"
	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/crawlhouse/crawlhouse/internal/reader"
	"github.com/crawlhouse/crawlhouse/internal/tracing"
)

// Config is the reader binary's configuration, read from the environment
// (config/environment.md, section reader): the HTTP side's (reader.Config),
// ClickHouse's (read-only credentials suffice), logging, tracing and the
// listener.
type Config struct {
	reader.Config
	ArchiveConfig
	LogConfig
	TracingConfig

	// Listen is the HTTP listen address: the API and the operational
	// endpoints. Port 0 picks a free port (Options.Ready reports it).
	Listen string `envconfig:"READER_LISTEN" default:":8090" desc:"HTTP listen address: the API, /openapi.json, /healthz, /readyz, /metrics"`
}

// The embedded parts of Config, named (their packages all call them Config).
type (
	ArchiveConfig = archive.Config
	LogConfig     = logs.Config
	TracingConfig = tracing.Config
)

// Load reads a Config through getenv, with the defaults. It does not
// validate: see Validate.
func Load(getenv func(string) string) (Config, error) {
	var c Config
	err := env.Load(getenv, &c)
	return c, err
}

// Validate reports every invalid setting at once, joined.
func (c Config) Validate() error {
	errs := []error{c.Config.Validate(), c.ArchiveConfig.Validate(), c.LogConfig.Validate(), c.TracingConfig.Validate()}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, errors.New("READER_LISTEN: is not host:port (e.g. :8090)"))
	}
	return errors.Join(errs...)
}
