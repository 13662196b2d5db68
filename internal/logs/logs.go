// Package logs is what every crawlhouse binary writes its logs with: the
// zerolog logger (JSON by default, human-readable with LOG_FORMAT=console,
// or at a terminal for a command a person runs by hand), the scrubber that
// keeps secrets out of every line, the redaction of credentials in URLs,
// lines let through at a bounded rate, and net/http's own server errors
// sent to the structured log.
package logs

import (
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"
)

// Config is the logging part of a binary's configuration.
type Config struct {
	// Format is "json" (default) or "console".
	Format string `envconfig:"LOG_FORMAT" default:"json" desc:"json, or console for humans"`
	// Level is a zerolog level name: trace, debug, info, warn, error.
	Level string `envconfig:"LOG_LEVEL" default:"info" desc:"trace, debug, info, warn or error"`
}

// Validate reports an unknown format or level.
func (c Config) Validate() error {
	if c.Format != "json" && c.Format != "console" {
		return fmt.Errorf("LOG_FORMAT: %q is neither json nor console", c.Format)
	}
	if _, err := zerolog.ParseLevel(c.Level); err != nil {
		return fmt.Errorf("LOG_LEVEL: %q is not a level (trace, debug, info, warn, error)", c.Level)
	}
	return nil
}

// New returns a logger writing to w, stamped with the binary's name.
func New(c Config, w io.Writer, binary string) zerolog.Logger {
	if c.Format == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	level, err := zerolog.ParseLevel(c.Level)
	if err != nil {
		level = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(level).With().Timestamp().Str("service", binary).Logger()
}
