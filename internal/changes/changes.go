// Package changes sends one change summary per job once the job is
// complete: how many of its URLs are new, changed, same and removed
// against the jobs before it, and which URLs changed or were removed
// (bounded, with totals). Summaries are published to the NATS subject
// crawl.changes and POSTed to CHANGES_WEBHOOK_URL.
//
// The classes are the archive's (page_changes and page_removals, read by
// query.Reader.JobChanges); this package decides when a job is complete
// and sends its summary once.
//
// When: with the backfill on, when the backfill has read the finished job
// to its end (its state done): the pages the webhook path lost are then
// archived. With the backfill off, CHANGES_SETTLE after the job's end event
// (pages arrive after it), or once the job has had no delivery for
// BACKFILL_QUIET_PERIOD.
//
// Once: as alerts, through internal/claim. Several sink replicas share
// the consumer and any may restart, so the "already sent" fact lives in a
// JetStream KV bucket (stream.ChangeClaimsBucket, CRAWL_CHANGES) shared by
// all: the replica whose claim of the job's key succeeds sends, the others
// and a restarted sink see the key and do not. The claim records which
// destinations (NATS, the webhook) took the summary: a delivery that failed
// releases it, and the next try, by this replica or another, sends the
// summary to the others only; a sink killed while sending holds the claim
// for claim.Lease, after which a sink looking at the job again (one
// starting, or one that saw it claimed) takes it over.
//
// Bounded: a summary is at most the NATS server's max_payload (1 MiB by
// default), which the URL lists give way to (encode); the counts are
// always exact.
package changes

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/claim"
)

// Subject is the NATS subject change summaries are published to.
const Subject = "crawl.changes"

// Config is the change summaries' part of the sink's configuration
// (config/environment.md lists the variables).
type Config struct {
	// WebhookURL receives each summary as a JSON POST. Like an alert
	// webhook it may embed a secret, so it is logged only redacted.
	WebhookURL string `envconfig:"CHANGES_WEBHOOK_URL" desc:"POST each job's change summary here (JSON, Slack-compatible text field)"`
	// URLPatterns, when set, keeps only the URLs matching one of them in
	// summaries (counts and lists): comma-separated, each matched against
	// the whole URL with * standing for any run of characters.
	URLPatterns []string `envconfig:"CHANGES_URL_PATTERNS" desc:"comma-separated URL patterns (* = any characters); summaries count and list only matching URLs"`
	// OnlyWhenChanged sends no summary for a job in which no URL (of those
	// kept) is new, changed or removed.
	OnlyWhenChanged bool `envconfig:"CHANGES_ONLY_WHEN_CHANGED" default:"false" desc:"send no summary when no URL is new, changed or removed"`
	// MaxURLs bounds the changed and removed URLs a summary lists (the
	// counts are totals).
	MaxURLs int `envconfig:"CHANGES_MAX_URLS" default:"100" desc:"most changed and most removed URLs listed in a summary (counts are totals)"`
	// Settle is how long after a job's end event its summary waits when the
	// backfill is off: the sender delivers pages after it.
	Settle time.Duration `envconfig:"CHANGES_SETTLE" default:"30s" desc:"with the backfill off, wait this long after a job's end event before summarizing it"`
}

// maxPatterns bounds CHANGES_URL_PATTERNS: each is a condition of the
// summary's query.
const maxPatterns = 100

// Validate reports settings that could not work.
func (c Config) Validate() error {
	errs := []error{claim.CheckWebhookURL("CHANGES_WEBHOOK_URL", c.WebhookURL)}
	if len(c.URLPatterns) > maxPatterns {
		errs = append(errs, fmt.Errorf("CHANGES_URL_PATTERNS: %d patterns, at most %d", len(c.URLPatterns), maxPatterns))
	}
	for _, p := range c.URLPatterns {
		if strings.TrimSpace(p) == "" {
			errs = append(errs, errors.New("CHANGES_URL_PATTERNS: an empty pattern"))
			break
		}
	}
	if c.MaxURLs < 0 || c.MaxURLs > 10000 {
		errs = append(errs, fmt.Errorf("CHANGES_MAX_URLS: %d is not between 0 and 10000", c.MaxURLs))
	}
	if c.Settle < 0 {
		errs = append(errs, errors.New("CHANGES_SETTLE: must not be negative"))
	}
	return errors.Join(errs...)
}
