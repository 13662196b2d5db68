package sinkcmd

import (
	"io"

	"github.com/crawlhouse/crawlhouse/internal/env"
)

// Load reads a Config through getenv (os.Getenv in the binary, a map in
// tests), applying the defaults, with envconfig doing the decoding (see
// internal/env). It does not validate: see Config.Validate.
func Load(getenv func(string) string) (Config, error) {
	var c Config
	err := env.Load(getenv, &c)
	return c, err
}

// writeEnv lists every variable with its default and meaning (--help).
func writeEnv(w io.Writer) {
	_ = env.WriteTable(w, &Config{})
}
