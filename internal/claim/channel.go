package claim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/backoff"
	"github.com/crawlhouse/crawlhouse/internal/logs"
	"github.com/nats-io/nats.go"
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

// Publisher publishes a message on a NATS subject; *nats.Conn is one.
// Channel publishes only while connected (a message buffered during a
// reconnect could go out after its claim was released, and then twice),
// flushes to learn that the server took it, and bounds bodies by the
// server's MaxPayload.
type Publisher interface {
	Publish(subject string, data []byte) error
	FlushWithContext(ctx context.Context) error
	IsConnected() bool
	MaxPayload() int64
}

var _ Publisher = (*nats.Conn)(nil)

// Channel is where a claimed notification goes: published on Subject (when
// Pub is set) and POSTed as JSON to WebhookURL (when set). Alerts use it,
// and so do change summaries: Send claims the notification (KVClaims)
// before delivering it and settles the claim after, so that it goes out
// once for all replicas and is not lost to a destination that failed.
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

// Destinations, as a claim names those that took a notification.
const (
	destNATS    = "nats"
	destWebhook = "webhook"
)

// DefaultMaxPayload is NATS' default max_payload (1 MiB): the bound of a
// notification while the server's own is not known.
const DefaultMaxPayload = 1 << 20

// MaxBody is the most bytes a notification's body may have: the connected
// NATS server's max_payload (a larger message is refused, never
// delivered), else DefaultMaxPayload, which the webhook's bodies keep to as
// well.
func (c Channel) MaxBody() int {
	if c.Pub != nil {
		if n := c.Pub.MaxPayload(); n > 0 {
			return int(min(n, math.MaxInt32))
		}
	}
	return DefaultMaxPayload
}

// Sent is what Send did with a notification.
type Sent struct {
	// Now: this call delivered it to every destination still owed.
	Now bool
	// Busy, when not zero, is when another replica's hold on it ends (it is
	// delivering it): look again then. Neither Now nor Busy: it was sent
	// before.
	Busy time.Time
}

// Send delivers body once for all replicas: it claims key, delivers to the
// destinations that an earlier holder of the claim did not reach, and
// settles the claim: sent when all took it, else released with those that
// did, and the error. The caller tries again after an error: the next
// Claim (its own or another replica's) delivers to the destinations still
// owed, and to no other.
//
// The delivery is given half the claim's Lease, so the claim is settled
// before any other replica may take it over. It is settled even when ctx
// ends (a sink stopping). A notification goes out twice only when NATS
// fails midway: when Settle fails, the claim stays held until its lease
// ends and is then taken over, and the destinations this call reached get
// it again; a publish whose confirmation was lost is published again.
func (c Channel) Send(ctx context.Context, claims Claims, key string, body []byte, log zerolog.Logger) (Sent, error) {
	cl, err := claims.Claim(ctx, key)
	if err != nil {
		return Sent{}, err
	}
	if !cl.Held {
		return Sent{Busy: cl.Until}, nil
	}
	dctx, cancel := context.WithTimeout(ctx, Lease/2)
	delivered, failure := c.deliver(dctx, body, cl.Delivered, log)
	cancel()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := claims.Settle(sctx, cl, delivered, failure == nil); err != nil {
		log.Error().Err(err).Msg(c.Name + " claim not settled; another sink takes it over when its lease ends")
	}
	return Sent{Now: failure == nil}, failure
}

// deliver publishes and posts body to the destinations not in done: it
// returns those that took it, and the last error (the webhook's redacted,
// see post). A POST that fails is retried; a publish is not (the caller
// tries again later).
func (c Channel) deliver(ctx context.Context, body []byte, done []string, log zerolog.Logger) (delivered []string, failure error) {
	if c.Pub != nil && !slices.Contains(done, destNATS) {
		if err := c.publish(ctx, body); err != nil {
			log.Error().Err(err).Msg("publish " + c.Name + " to " + c.Subject)
			failure = err
		} else {
			delivered = append(delivered, destNATS)
		}
	}
	if c.WebhookURL == "" || slices.Contains(done, destWebhook) {
		return delivered, failure
	}
	// RetryDelay doubling without a cap: Retries bounds the waits.
	schedule := backoff.Exponential{First: c.RetryDelay, Max: math.MaxInt64}
	if err := backoff.Retry(ctx, schedule, func() error { return c.post(ctx, body) }, func(attempt int, err error, wait time.Duration) bool {
		if attempt > c.Retries || ctx.Err() != nil {
			log.Error().Err(err).Int("attempts", attempt).Msg(c.Name + " webhook POST failed; giving up for now")
			return false
		}
		log.Warn().Err(err).Dur("retry_in", wait).Msg(c.Name + " webhook POST failed; retrying")
		return true
	}); err != nil {
		return delivered, err
	}
	return append(delivered, destWebhook), failure
}

// publish publishes body and waits until the server has it (a flush: a
// PING answered after the message). It publishes only while connected:
// the connection would otherwise buffer the message and send it on
// reconnecting, after this publish was counted as failed and the claim
// released, and so twice.
func (c Channel) publish(ctx context.Context, body []byte) error {
	if !c.Pub.IsConnected() {
		return fmt.Errorf("publish %s to %s: not connected to NATS", c.Name, c.Subject)
	}
	if err := c.Pub.Publish(c.Subject, body); err != nil {
		return fmt.Errorf("publish %s to %s (%d bytes): %w", c.Name, c.Subject, len(body), err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Pub.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("publish %s to %s: not confirmed: %w", c.Name, c.Subject, err)
	}
	return nil
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
