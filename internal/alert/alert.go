// Package alert raises an alert when a crawl's page failures pile up: when
// the failed pages of one crawl within ALERT_WINDOW reach
// ALERT_FAILURE_THRESHOLD, one alert per crawl per window goes to the NATS
// subject crawl.alerts and to an HTTP webhook (Slack-compatible JSON).
//
// Several sink replicas share the consumer, and a sink may restart at any
// time, so neither the count nor the "already alerted" fact can live in one
// process's memory. The count is read from the archive (the failures table,
// which every replica writes), and the alert is claimed in a store shared by
// all replicas whose claims expire after the window (internal/claim, in the
// JetStream KV bucket stream.AlertClaimsBucket): whoever claims first
// sends, the others and a restarted sink see the claim and do not.
//
// Counting and sending never block ingestion: Failure only marks the crawl
// for a check, which Run does in the background after the failures are
// committed.
package alert

import (
	"errors"
	"fmt"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive"
	"github.com/crawlhouse/crawlhouse/internal/claim"
	"github.com/crawlhouse/crawlhouse/internal/clip"
	"github.com/crawlhouse/crawlhouse/internal/events"
)

// Subject is the NATS subject alerts are published to.
const Subject = "crawl.alerts"

// Config is the alerting part of the sink's configuration
// (config/environment.md lists the variables).
type Config struct {
	// WebhookURL receives each alert as a JSON POST. It often embeds a
	// secret (Slack incoming webhooks do), so it is logged only through
	// logs.RedactURL.
	WebhookURL string `envconfig:"ALERT_WEBHOOK_URL" desc:"POST alert JSON here (Slack-compatible text field)"`
	// Threshold is the number of failed pages of one crawl, within Window,
	// that raises an alert.
	Threshold int `envconfig:"ALERT_FAILURE_THRESHOLD" default:"5" desc:"failed pages of one crawl within ALERT_WINDOW that raise an alert"`
	// Window is the window failures are counted over (by the time the
	// receiver accepted them), and the shortest time between two alerts of
	// the same crawl.
	Window time.Duration `envconfig:"ALERT_WINDOW" default:"10m" desc:"window of the failure count; one alert per crawl per window"`
}

// Validate reports settings that could not work.
func (c Config) Validate() error {
	var errs []error
	if c.Threshold < 1 {
		errs = append(errs, fmt.Errorf("ALERT_FAILURE_THRESHOLD: %d must be at least 1", c.Threshold))
	}
	if c.Window <= 0 {
		errs = append(errs, errors.New("ALERT_WINDOW: must be positive"))
	}
	return errors.Join(append(errs, claim.CheckWebhookURL("ALERT_WEBHOOK_URL", c.WebhookURL))...)
}

// Alert is what is published and POSTed. Text makes it a valid Slack
// incoming-webhook message; the other fields are for machines.
type Alert struct {
	Text    string `json:"text"`
	CrawlID string `json:"crawlId"`
	// Kind is events.KindCrawl or events.KindBatchScrape: CrawlID is the id
	// of that job.
	Kind        string    `json:"kind"`
	Failures    int       `json:"failures"`
	Threshold   int       `json:"threshold"`
	Window      string    `json:"window"`
	WindowStart time.Time `json:"windowStart"`
	RaisedAt    time.Time `json:"raisedAt"`
	// LastURL and LastError describe the newest failure, each cut to
	// clip.MaxField bytes (ending in "…" when cut): they come from crawled
	// content, and an alert must stay far below NATS' max_payload.
	LastURL   string `json:"lastUrl"`
	LastError string `json:"lastError"`
}

// newAlert builds the alert for a crawl whose recent failures reached the
// threshold.
func newAlert(cfg Config, crawlID string, r archive.Recent, now time.Time) Alert {
	a := Alert{
		CrawlID:     crawlID,
		Kind:        r.Kind,
		Failures:    r.Failures,
		Threshold:   cfg.Threshold,
		Window:      cfg.Window.String(),
		WindowStart: now.Add(-cfg.Window).UTC(),
		RaisedAt:    now.UTC(),
		LastURL:     clip.Cut(r.LastURL, clip.MaxField),
		LastError:   clip.Cut(r.LastError, clip.MaxField),
	}
	a.Text = fmt.Sprintf(":rotating_light: %s %s: %d failed pages within %s (threshold %d). Last: %s: %s",
		events.KindNoun(r.Kind), crawlID, a.Failures, cfg.Window, cfg.Threshold, a.LastURL, a.LastError)
	return a
}
