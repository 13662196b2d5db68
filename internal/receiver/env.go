package receiver

import (
	"strings"

	"github.com/crawlhouse/crawlhouse/internal/env"
)

// Load reads a Config through getenv (os.Getenv in the binary, a map in
// tests), applying the defaults, with envconfig doing the decoding (see
// internal/env). It does not validate: see Config.Validate.
func Load(getenv func(string) string) (Config, error) {
	var c Config
	err := env.Load(getenv, &c)
	c.signatureHeaderSet = strings.TrimSpace(getenv("WEBHOOK_SIGNATURE_HEADER")) != ""
	return c, err
}
