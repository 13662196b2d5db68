package receiver

import (
	"fmt"
	"io"
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

// usage writes the --help text: what the receiver does and every variable
// with its default.
func usage(w io.Writer) {
	fmt.Fprint(w, `receiver: takes signed crawl.page webhook deliveries and stores them in JetStream.

Usage: receiver [--help | --version]
       receiver probe URL    exit 0 if GET URL answers 2xx within 2s, else 1 (container healthcheck)
       receiver redrive-rejected [--since 24h]
                             re-examine the quarantined refused deliveries with the current
                             configuration; archive what now verifies and validates, once

Configured by the environment:

`)
	_ = env.WriteTable(w, &Config{})
	fmt.Fprint(w, `
Endpoints: POST $WEBHOOK_PATH, GET /healthz, GET /readyz, GET /metrics.
`)
}
