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
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/archive/query"
	"github.com/crawlhouse/crawlhouse/internal/claim"
	"github.com/crawlhouse/crawlhouse/internal/events"
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

// Summary is what is published and POSTed for a job, encoded by Encode;
// GET /v1/jobs/{id} of the read API answers the same. Text makes it a valid
// Slack incoming-webhook message; the other fields are for machines.
type Summary struct {
	Text    string `json:"text"`
	CrawlID string `json:"crawlId"`
	// Kind is events.KindCrawl or events.KindBatchScrape; Scope the scope
	// the job's webhook metadata names ("" when none), cut to
	// claim.MaxField bytes.
	Kind  string `json:"kind"`
	Scope string `json:"scope,omitempty"`
	// Complete: the job ended complete, so URLs it no longer found are
	// counted as removed (docs/search.md, "What changed").
	Complete bool   `json:"complete"`
	New      uint64 `json:"new"`
	Changed  uint64 `json:"changed"`
	Same     uint64 `json:"same"`
	Removed  uint64 `json:"removed"`
	// ChangedURLs and RemovedURLs are the first changed and removed URLs,
	// in URL order: at most CHANGES_MAX_URLS of each, and fewer when the
	// summary would not fit in its byte bound (see encode). Changed and
	// Removed are the totals, whatever the lists hold.
	ChangedURLs []string `json:"changedUrls"`
	RemovedURLs []string `json:"removedUrls"`
	// ChangedURLsOmitted and RemovedURLsOmitted count the URLs of each
	// class the lists leave out (Changed - len(ChangedURLs), ...).
	// Truncated says that something was left out or cut: a URL of a list,
	// or the end of Scope.
	ChangedURLsOmitted uint64 `json:"changedUrlsOmitted"`
	RemovedURLsOmitted uint64 `json:"removedUrlsOmitted"`
	Truncated          bool   `json:"truncated"`
	// URLPatterns are CHANGES_URL_PATTERNS when set: the counts are of the
	// matching URLs only.
	URLPatterns  []string  `json:"urlPatterns,omitempty"`
	SummarizedAt time.Time `json:"summarizedAt"`
}

func summaryText(s Summary) string {
	text := fmt.Sprintf("%s %s: %d %s, %d %s, %d %s, %d %s", events.KindNoun(s.Kind), s.CrawlID,
		s.New, events.ChangeNew, s.Changed, events.ChangeChanged, s.Removed, events.ChangeRemoved, s.Same, events.ChangeSame)
	if s.Scope != "" {
		text += " (scope " + s.Scope + ")"
	}
	return text
}

// NewSummary is the summary of what a job changed (query.Reader.JobChanges
// read with patterns), made at at.
func NewSummary(jc query.JobChanges, patterns []string, at time.Time) Summary {
	return Summary{CrawlID: jc.CrawlID, Kind: jc.Kind, Scope: jc.Scope, Complete: jc.Complete,
		New: jc.New, Changed: jc.Changed, Same: jc.Same, Removed: jc.Removed,
		ChangedURLs: jc.ChangedURLs, RemovedURLs: jc.RemovedURLs,
		URLPatterns: patterns, SummarizedAt: at.UTC()}
}

// Encode returns s as JSON of at most limit bytes (the NATS server's
// max_payload: a larger message is refused, never delivered). The counts
// are always exact; what gives way is the URL lists. When the whole lists
// do not fit, the changed and removed URLs are taken in turn, each list
// keeping its URL order, until the next URL of a list does not fit: both
// classes are shown, and each list stays a prefix of the class's URLs. The
// Omitted counts and Truncated say what was left out. URLs are hostile
// bytes: their cost is what JSON makes of them (escapes included), never
// their length.
func Encode(s Summary, limit int) ([]byte, error) {
	scope := claim.Cut(s.Scope, claim.MaxField)
	s.Truncated = scope != s.Scope
	s.Scope = scope
	s.Text = summaryText(s)
	changed, removed := nonNil(s.ChangedURLs), nonNil(s.RemovedURLs)
	fits := func(changed, removed []string) ([]byte, error) {
		t := s
		t.ChangedURLs, t.RemovedURLs = changed, removed
		t.ChangedURLsOmitted = s.Changed - min(s.Changed, uint64(len(changed)))
		t.RemovedURLsOmitted = s.Removed - min(s.Removed, uint64(len(removed)))
		t.Truncated = s.Truncated || t.ChangedURLsOmitted+t.RemovedURLsOmitted > 0
		return json.Marshal(t)
	}
	// Without URLs every Omitted count is at its widest: each URL added
	// costs its JSON and a comma, and shortens a count, so adding URLs
	// while their cost fits the room left cannot overflow. Only the URLs
	// kept, and one more of each list, are encoded: CHANGES_MAX_URLS of
	// long URLs are a hundred megabytes of JSON.
	empty, err := fits([]string{}, []string{})
	if err != nil {
		return nil, err
	}
	room := limit - len(empty)
	if room < 0 {
		return nil, fmt.Errorf("change summary of job %s: %d bytes without URLs, over the bound of %d", s.CrawlID, len(empty), limit)
	}
	lists := [2][]string{changed, removed}
	var kept [2]int
	for open := [2]bool{true, true}; open[0] || open[1]; {
		for i := range lists {
			if !open[i] {
				continue
			}
			if kept[i] == len(lists[i]) {
				open[i] = false
				continue
			}
			u, err := json.Marshal(lists[i][kept[i]])
			if err != nil {
				return nil, err
			}
			if len(u)+1 > room {
				open[i] = false
				continue
			}
			room -= len(u) + 1
			kept[i]++
		}
	}
	return fits(changed[:kept[0]], removed[:kept[1]])
}
