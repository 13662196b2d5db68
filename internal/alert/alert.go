// Package alert raises an alert when a crawl's page failures pile up: it
// counts failed pages per crawl over a sliding window and, when they reach a
// threshold, sends one alert per crawl per window to the NATS subject
// crawl.alerts and to an HTTP webhook (Slack-compatible JSON).
//
// Counting and sending never block ingestion: Failure only updates counters
// in memory and queues an alert; a full queue drops the alert with a log line.
// Each sink replica counts the failures it consumed itself; with several
// replicas sharing the consumer a crawl's failures split between them, so a
// threshold is reached later (at worst replicas × threshold failures).
package alert

import (
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"
)

// Subject is the NATS subject alerts are published to.
const Subject = "crawl.alerts"

// Config is the alerting part of the sink's configuration (SPEC §4).
type Config struct {
	// WebhookURL receives each alert as a JSON POST. It often embeds a
	// secret (Slack incoming webhooks do), so it is never logged.
	WebhookURL string `envconfig:"ALERT_WEBHOOK_URL" desc:"POST alert JSON here (Slack-compatible text field)"`
	// Threshold is the number of failed pages of one crawl, within Window,
	// that raises an alert.
	Threshold int `envconfig:"ALERT_FAILURE_THRESHOLD" default:"5" desc:"failed pages of one crawl within ALERT_WINDOW that raise an alert"`
	// Window is the sliding window failures are counted over, and the
	// shortest time between two alerts of the same crawl.
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
	if c.WebhookURL != "" {
		u, err := url.Parse(c.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, errors.New("ALERT_WEBHOOK_URL: must be an http(s) URL"))
		}
	}
	return errors.Join(errs...)
}

// Failure is one failed page, as the sink archived it.
type Failure struct {
	CrawlID   string
	WebhookID string
	URL       string
	Error     string
	// At is when the receiver accepted the delivery.
	At time.Time
}

// Alert is what is published and POSTed. Text makes it a valid Slack
// incoming-webhook message; the other fields are for machines.
type Alert struct {
	Text        string    `json:"text"`
	CrawlID     string    `json:"crawlId"`
	Failures    int       `json:"failures"`
	Threshold   int       `json:"threshold"`
	Window      string    `json:"window"`
	WindowStart time.Time `json:"windowStart"`
	RaisedAt    time.Time `json:"raisedAt"`
	LastURL     string    `json:"lastUrl"`
	LastError   string    `json:"lastError"`
}

// Counter counts failures per crawl and decides when an alert is due. It is
// safe for concurrent use.
type Counter struct {
	threshold int
	window    time.Duration

	mu     sync.Mutex
	crawls map[string]*crawlFailures
	calls  int
}

type crawlFailures struct {
	// recent holds the newest failures, at most threshold of them: enough to
	// tell whether threshold failures fall inside the window, and to ignore
	// a redelivered failure (same webhook id).
	recent    []Failure
	lastAlert time.Time
}

// NewCounter returns a Counter for cfg's threshold and window.
func NewCounter(cfg Config) *Counter {
	return &Counter{threshold: cfg.Threshold, window: cfg.Window, crawls: map[string]*crawlFailures{}}
}

// Add counts f and returns the alert it raises, if any: when the crawl's
// failures within the window reach the threshold and the crawl had no alert
// within the window before.
func (c *Counter) Add(f Failure) (Alert, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.calls%1024 == 0 {
		c.sweep(f.At)
	}
	cf := c.crawls[f.CrawlID]
	if cf == nil {
		cf = &crawlFailures{}
		c.crawls[f.CrawlID] = cf
	}
	for _, r := range cf.recent {
		if f.WebhookID != "" && r.WebhookID == f.WebhookID && r.URL == f.URL {
			return Alert{}, false
		}
	}
	cf.recent = append(cf.recent, f)
	if len(cf.recent) > c.threshold {
		cf.recent = cf.recent[len(cf.recent)-c.threshold:]
	}
	if len(cf.recent) < c.threshold {
		return Alert{}, false
	}
	oldest := cf.recent[0].At
	for _, r := range cf.recent {
		if r.At.Before(oldest) {
			oldest = r.At
		}
	}
	if f.At.Sub(oldest) >= c.window {
		return Alert{}, false
	}
	if !cf.lastAlert.IsZero() && f.At.Sub(cf.lastAlert) < c.window {
		return Alert{}, false
	}
	cf.lastAlert = f.At
	a := Alert{
		CrawlID:     f.CrawlID,
		Failures:    len(cf.recent),
		Threshold:   c.threshold,
		Window:      c.window.String(),
		WindowStart: oldest.UTC(),
		RaisedAt:    f.At.UTC(),
		LastURL:     f.URL,
		LastError:   f.Error,
	}
	a.Text = fmt.Sprintf(":rotating_light: crawl %s: %d failed pages within %s (threshold %d). Last: %s: %s",
		f.CrawlID, a.Failures, c.window, c.threshold, f.URL, f.Error)
	return a, true
}

// sweep forgets crawls with nothing left to remember at now.
func (c *Counter) sweep(now time.Time) {
	for id, cf := range c.crawls {
		last := cf.lastAlert
		if n := len(cf.recent); n > 0 && cf.recent[n-1].At.After(last) {
			last = cf.recent[n-1].At
		}
		if now.Sub(last) > c.window {
			delete(c.crawls, id)
		}
	}
}

// Len is the number of crawls being tracked.
func (c *Counter) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.crawls)
}
