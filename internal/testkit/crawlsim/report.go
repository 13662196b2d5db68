package crawlsim

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/crawlhouse/crawlhouse/internal/events"
)

// Outcomes of a delivery, as they appear in a Report.
const (
	// OutcomeAccepted: an attempt got a 2xx answer.
	OutcomeAccepted = "accepted"
	// OutcomeRejected: every attempt got a non-2xx answer or no answer;
	// the sender gave up (or was stopped) with retries exhausted.
	OutcomeRejected = "rejected"
	// OutcomeDropped: never sent (fault drop).
	OutcomeDropped = "dropped"
	// OutcomeCancelled: the run stopped before the delivery was answered.
	OutcomeCancelled = "cancelled"
)

// Delivery is what happened to one event of a run.
type Delivery struct {
	// Type is the event type: crawl.started, crawl.page, crawl.completed,
	// crawl.cancelled, or their batch_scrape.* twins.
	Type      string `json:"type"`
	WebhookID string `json:"webhookId"`
	// Page is the page index of a page delivery, else -1.
	Page int `json:"page"`
	// URL, ScrapeID and Success describe the page (page deliveries only).
	URL      string `json:"url,omitempty"`
	ScrapeID string `json:"scrapeId,omitempty"`
	Success  bool   `json:"success"`
	// Faults applied to the page.
	Faults []string `json:"faults,omitempty"`
	// Outcome is one of the Outcome* values.
	Outcome string `json:"outcome"`
	// Answer is the receiver's "status" field of the accepting answer
	// ("accepted" or "duplicate"), when it gave one.
	Answer string `json:"answer,omitempty"`
	// Attempts counts the POSTs, duplicates included; Statuses lists their
	// HTTP status codes in order (0: no answer within the timeout).
	Attempts int   `json:"attempts"`
	Statuses []int `json:"statuses,omitempty"`
	// Bytes is the body size.
	Bytes int `json:"bytes"`
}

// Summary counts a run's deliveries. Pages are page events (crawl.page,
// batch_scrape.page) only.
type Summary struct {
	Pages      int `json:"pages"`
	Successful int `json:"successful"`
	// Failed counts failed pages, CancelledPages among them those the job's
	// cancellation stopped.
	Failed         int `json:"failed"`
	CancelledPages int `json:"cancelledPages"`
	Dropped        int `json:"dropped"`
	Duplicated     int `json:"duplicated"`
	BadSignatures  int `json:"badSignatures"`
	Oversized      int `json:"oversized"`
	// Accepted and Rejected count page deliveries by outcome.
	Accepted  int `json:"accepted"`
	Rejected  int `json:"rejected"`
	Cancelled int `json:"cancelled"`
	// Attempts counts every POST (all event types, retries and duplicates
	// included); Retries the ones after a failed attempt.
	Attempts int `json:"attempts"`
	Retries  int `json:"retries"`
	// BackfillOnly counts successful pages that no delivery got through:
	// the archive holds them only once backfill has run.
	BackfillOnly int `json:"backfillOnly"`
}

// Report is the machine-readable manifest of a run: the job, its kind,
// where it was sent, and every delivery. A checker compares it with the
// archive: every page with success=true must end up in pages (from the
// webhook when its outcome is accepted, else from backfill), every failed
// page in failures (from the webhook when accepted, else from backfill's
// read of the errors endpoint), every robots-blocked URL among the blocked
// URLs and none in failures.
type Report struct {
	CrawlID string `json:"crawlId"`
	// Kind is crawl or batch_scrape.
	Kind          string     `json:"kind"`
	Target        string     `json:"target"`
	RobotsBlocked []string   `json:"robotsBlocked,omitempty"`
	Status        string     `json:"status"`
	Summary       Summary    `json:"summary"`
	Deliveries    []Delivery `json:"deliveries"`
}

func (r *Report) summarise() {
	s := Summary{}
	sort.SliceStable(r.Deliveries, func(i, j int) bool { return order(r.Deliveries[i]) < order(r.Deliveries[j]) })
	for _, d := range r.Deliveries {
		s.Attempts += d.Attempts
		for i := 1; i < len(d.Statuses); i++ {
			if !ok2xx(d.Statuses[i-1]) {
				s.Retries++
			}
		}
		if !isPage(d.Type) {
			continue
		}
		s.Pages++
		if d.Success {
			s.Successful++
		} else {
			s.Failed++
		}
		for _, f := range d.Faults {
			switch f {
			case FaultCancelled:
				s.CancelledPages++
			case FaultDuplicate:
				s.Duplicated++
			case FaultBadSignature:
				s.BadSignatures++
			case FaultOversized:
				s.Oversized++
			}
		}
		switch d.Outcome {
		case OutcomeDropped:
			s.Dropped++
		case OutcomeAccepted:
			s.Accepted++
		case OutcomeRejected:
			s.Rejected++
		case OutcomeCancelled:
			s.Cancelled++
		}
		if d.Success && d.Outcome != OutcomeAccepted {
			s.BackfillOnly++
		}
	}
	r.Summary = s
}

// order sorts <kind>.started first, then pages by index, then the rest.
func order(d Delivery) int {
	switch {
	case strings.HasSuffix(d.Type, ".started"):
		return -2
	case isPage(d.Type):
		return d.Page
	}
	return 1 << 30
}

// isPage reports whether an event type is a page delivery of either kind.
func isPage(typ string) bool { return typ == events.TypeCrawlPage || typ == events.TypeBatchScrapePage }

func ok2xx(code int) bool { return code >= 200 && code < 300 }

// WriteSummary prints the run in a few human lines.
func (r *Report) WriteSummary(w io.Writer) error {
	s := r.Summary
	kind := strings.ReplaceAll(r.Kind, "_", " ")
	if kind == "" {
		kind = events.KindCrawl
	}
	_, err := fmt.Fprintf(w, `%s %s (%s) -> %s
pages: %d (%d successful, %d failed); %d failed as cancelled, %d robots-blocked URLs
faults: %d dropped, %d duplicated, %d bad signatures, %d oversized
page deliveries: %d accepted, %d rejected, %d cancelled; %d POSTs, %d retries
successful pages only backfill can recover: %d
`, kind, r.CrawlID, r.Status, r.Target, s.Pages, s.Successful, s.Failed, s.CancelledPages, len(r.RobotsBlocked),
		s.Dropped, s.Duplicated, s.BadSignatures, s.Oversized, s.Accepted, s.Rejected, s.Cancelled, s.Attempts, s.Retries, s.BackfillOnly)
	return err
}

// WriteManifest writes the report as indented JSON to path.
func (r *Report) WriteManifest(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadManifest reads a report written by WriteManifest.
func ReadManifest(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	return &r, nil
}
