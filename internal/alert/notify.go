package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Publisher publishes a message on a NATS subject; *nats.Conn is one.
type Publisher interface {
	Publish(subject string, data []byte) error
}

// Alerter counts failures and sends the alerts they raise.
type Alerter struct {
	counter *Counter
	pub     Publisher
	url     string
	client  *http.Client
	log     zerolog.Logger
	raised  atomic.Uint64
	queue   chan Alert

	// Retries is how many times a failed POST is retried; RetryDelay the
	// first wait, doubled each time.
	Retries    int
	RetryDelay time.Duration
}

// New returns an Alerter. pub may be nil (no NATS publishing) and client nil
// (a client with a 10 s timeout). Run must be running for alerts to go out.
func New(cfg Config, pub Publisher, client *http.Client, log zerolog.Logger) (*Alerter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Alerter{
		counter:    NewCounter(cfg),
		pub:        pub,
		url:        cfg.WebhookURL,
		client:     client,
		log:        log,
		queue:      make(chan Alert, 256),
		Retries:    3,
		RetryDelay: time.Second,
	}, nil
}

// Failure counts a failed page and queues the alert it raises. It never
// blocks: with the queue full the alert is dropped and logged.
func (a *Alerter) Failure(f Failure) {
	al, ok := a.counter.Add(f)
	if !ok {
		return
	}
	a.raised.Add(1)
	select {
	case a.queue <- al:
	default:
		a.log.Error().Str("crawl_id", al.CrawlID).Msg("alert queue full; alert dropped")
	}
}

// Raised is the number of alerts raised so far (crawlhouse_alerts_total).
func (a *Alerter) Raised() uint64 { return a.raised.Load() }

// Run sends queued alerts until ctx ends; then it sends what is already
// queued, without retries, and returns.
func (a *Alerter) Run(ctx context.Context) {
	for {
		select {
		case al := <-a.queue:
			a.send(ctx, al)
		case <-ctx.Done():
			for {
				select {
				case al := <-a.queue:
					a.send(context.WithoutCancel(ctx), al)
				default:
					return
				}
			}
		}
	}
}

func (a *Alerter) send(ctx context.Context, al Alert) {
	body, err := json.Marshal(al)
	if err != nil {
		a.log.Error().Err(err).Msg("encode alert")
		return
	}
	log := a.log.With().Str("crawl_id", al.CrawlID).Int("failures", al.Failures).Logger()
	log.Warn().Str("last_url", al.LastURL).Str("last_error", al.LastError).Msg("alert: crawl page failures reached the threshold")
	if a.pub != nil {
		if err := a.pub.Publish(Subject, body); err != nil {
			log.Error().Err(err).Msg("publish alert to " + Subject)
		}
	}
	if a.url == "" {
		return
	}
	delay := a.RetryDelay
	for attempt := 0; ; attempt++ {
		err := a.post(ctx, body)
		if err == nil {
			return
		}
		if attempt >= a.Retries || ctx.Err() != nil {
			log.Error().Err(err).Int("attempts", attempt+1).Msg("alert webhook POST failed; giving up")
			return
		}
		log.Warn().Err(err).Dur("retry_in", delay).Msg("alert webhook POST failed; retrying")
		select {
		case <-time.After(delay):
		case <-ctx.Done():
		}
		delay *= 2
	}
}

// post sends one alert. Errors never include the URL (it may hold a secret).
func (a *Alerter) post(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return errors.New("build alert request")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		var uerr interface{ Unwrap() error }
		if errors.As(err, &uerr) {
			return fmt.Errorf("alert webhook: %w", uerr.Unwrap())
		}
		return errors.New("alert webhook: request failed")
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("alert webhook answered %s", resp.Status)
	}
	return nil
}
