package sinkcmd

import (
	"io"

	"github.com/crawlhouse/crawlhouse/internal/env"
)

// Load reads a Config through getenv (os.Getenv in the binary, a map in
// tests), applying the defaults, with envconfig doing the decoding (see
// internal/env). It does not validate: see Config.Validate. With
// NATS_STREAM_PARTITIONS above 1, the stream settings are those of the
// partition SINK_PARTITION (Config.narrow).
func Load(getenv func(string) string) (Config, error) {
	var c Config
	err := env.Load(getenv, &c)
	return c.narrow(), err
}

// writeEnv lists every variable with its default and meaning (--help).
func writeEnv(w io.Writer) {
	_ = env.WriteTable(w, &Config{})
}
