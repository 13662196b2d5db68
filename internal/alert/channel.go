package alert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/backoff"
	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/rs/zerolog"
)

// CheckWebhookURL reports a webhook URL that could not work, naming its
// variable and never the URL (it often holds a secret).
func CheckWebhookURL(variable, raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New(variable + ": must be an http(s) URL")
	}
	return nil
}

// Channel is where a claimed notification goes: published on Subject (when
// Pub is set) and POSTed as JSON to WebhookURL (when set). Alerts use it,
// and so do change summaries (internal/changes): what makes either go out
// once is the claim (KVClaims) taken before Deliver, not the channel.
type Channel struct {
	// Name names the notification in logs and errors ("alert").
	Name       string
	Subject    string
	WebhookURL string
	Pub        Publisher
	// Client posts to the webhook (default: a 10 s timeout).
	Client *http.Client
	// Retries is how many times a failed POST is retried; RetryDelay the
	// first wait, doubled each time.
	Retries    int
	RetryDelay time.Duration
}

// Deliver publishes and posts body: nil when every configured destination
// took it, else the last error (the webhook's redacted, see post). A POST
// that fails is retried; a publish is not (NATS buffers it while
// reconnecting).
func (c Channel) Deliver(ctx context.Context, body []byte, log zerolog.Logger) (failure error) {
	if c.Pub != nil {
		if err := c.Pub.Publish(c.Subject, body); err != nil {
			log.Error().Err(err).Msg("publish " + c.Name + " to " + c.Subject)
			failure = err
		}
	}
	if c.WebhookURL == "" {
		return failure
	}
	// RetryDelay doubling without a cap: Retries bounds the waits.
	schedule := backoff.Exponential{First: c.RetryDelay, Max: math.MaxInt64}
	if err := backoff.Retry(ctx, schedule, func() error { return c.post(ctx, body) }, func(attempt int, err error, wait time.Duration) bool {
		if attempt > c.Retries || ctx.Err() != nil {
			log.Error().Err(err).Int("attempts", attempt).Msg(c.Name + " webhook POST failed; giving up")
			return false
		}
		log.Warn().Err(err).Dur("retry_in", wait).Msg(c.Name + " webhook POST failed; retrying")
		return true
	}); err != nil {
		failure = err
	}
	return failure
}

// post sends body once. The URL often holds a secret (Slack's token is
// its path): errors name it only as logs.RedactURL leaves it, and the
// url.Error the client returns, which repeats the URL (or a redirect's),
// is unwrapped to its cause.
func (c Channel) post(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	where := logs.RedactURL(c.WebhookURL)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s webhook %s: cannot build the request", c.Name, where)
	}
	req.Header.Set("Content-Type", "application/json")
	client := c.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		for errors.As(err, &uerr) {
			err = uerr.Err
		}
		if err == nil {
			return fmt.Errorf("%s webhook %s: request failed", c.Name, where)
		}
		return fmt.Errorf("%s webhook %s: %w", c.Name, where, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s webhook %s answered %d", c.Name, where, resp.StatusCode)
	}
	return nil
}
