package ops

import (
	"context"
	"errors"
	"fmt"
	"github.com/crawlhouse/crawlhouse/internal/env"
	"io"
	"net/http"
	"time"
)

// ProbeTimeout bounds one probe: connecting, sending and reading the status.
const ProbeTimeout = 2 * time.Second

// Probe is the probe subcommand: args are what follows "probe" on the command
// line, exactly one URL. It GETs the URL and returns nil on a 2xx answer;
// any other answer, a timeout or a connection error is a one-line error for
// stderr (the caller exits 1). A healthcheck succeeds quietly.
func Probe(ctx context.Context, args []string) error {
	if len(args) != 1 || args[0] == "" {
		return env.Usage(errors.New("usage: probe URL"))
	}
	return ProbeURL(ctx, &http.Client{Timeout: ProbeTimeout}, args[0])
}

// ProbeURL GETs url with client and returns nil on a 2xx answer.
func ProbeURL(ctx context.Context, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("probe %s: %s", url, resp.Status)
	}
	return nil
}
