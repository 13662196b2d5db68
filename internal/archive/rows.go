package archive

import (
	"fmt"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/google/uuid"
)

// Origins of a page row.
const (
	// OriginWebhook marks a page delivered by a page webhook (crawl.page,
	// batch_scrape.page).
	OriginWebhook = "webhook"
	// OriginBackfill marks a page recovered from the job's status
	// (GET /v2/crawl/{id} or GET /v2/batch/scrape/{id}).
	OriginBackfill = "backfill"
)

// Page is one row of `pages`: one version of one page of a crawl or batch
// scrape.
type Page struct {
	CrawlID uuid.UUID
	// JobKind is events.KindCrawl or events.KindBatchScrape.
	JobKind   string
	URL       string
	ScrapeID  string
	WebhookID uuid.UUID // uuid.Nil for backfilled pages
	Origin    string
	Success   bool
	// StatusCode is metadata.statusCode under events.Metadata.Status's
	// clamp: 0 when it is not a number in 0..65535.
	StatusCode uint16
	Title      string
	Markdown   string
	HTML       string
	// Error is why the page failed (see events.Failure), empty on success.
	Error string
	// Document is the whole Document JSON as received.
	Document []byte
	// WebhookMetadata is the event's metadata (the custom metadata of the
	// job's webhook configuration, echoed in every delivery) as received;
	// empty for backfilled pages, whose status answer does not carry it.
	WebhookMetadata []byte
	ReceivedAt      time.Time
}

// Failure is one row of `failures`.
type Failure struct {
	CrawlID    uuid.UUID
	JobKind    string
	WebhookID  uuid.UUID
	URL        string
	StatusCode uint16
	Error      string
	// Reason is events.ReasonFailed, or events.ReasonCancelled for a page
	// its cancelled job never scraped (not counted by alerts).
	Reason          string
	WebhookMetadata []byte
	ReceivedAt      time.Time
}

// CrawlEvent is one row of `crawl_events`: a delivery that carries no page
// (crawl.started, crawl.completed, crawl.failed, types added later).
type CrawlEvent struct {
	CrawlID    uuid.UUID
	WebhookID  uuid.UUID
	Type       string
	Success    bool
	Error      string
	Event      []byte
	ReceivedAt time.Time
}

// RawEvent is one row of `events`: a delivery of a type that is neither a
// page nor a job's lifecycle (events.ClassRaw), kept whole.
type RawEvent struct {
	// JobID is the event's job id as sent (any string, "" when none).
	JobID      string
	Type       string
	WebhookID  uuid.UUID
	Success    bool
	Error      string
	Event      []byte
	ReceivedAt time.Time
}

// MonitorPage is one row of `monitor_pages`: a URL's change status in a
// monitor check (events.MonitorPages).
type MonitorPage struct {
	events.MonitorPage
	WebhookID  uuid.UUID
	ReceivedAt time.Time
}

// Rows are what a batch of deliveries writes, one slice per table.
type Rows struct {
	Pages        []Page
	Failures     []Failure
	CrawlEvents  []CrawlEvent
	RawEvents    []RawEvent
	MonitorPages []MonitorPage
}

// Add appends r's rows.
func (r *Rows) Add(o Rows) {
	r.Pages = append(r.Pages, o.Pages...)
	r.Failures = append(r.Failures, o.Failures...)
	r.CrawlEvents = append(r.CrawlEvents, o.CrawlEvents...)
	r.RawEvents = append(r.RawEvents, o.RawEvents...)
	r.MonitorPages = append(r.MonitorPages, o.MonitorPages...)
}

// EventRows maps one accepted delivery to rows, by its type's class
// (events.ClassOf). A page event gives a page row per Document and, for a
// failed Document, a failure row; a job event (a crawl's or batch scrape's
// lifecycle) gives a crawl_events row holding body, the delivery as
// received; any other type gives an events row holding body, and a
// monitor.page event also a monitor_pages row per URL it reports. The
// rows' webhook_id is the event's webhookId, else (senders before
// 2025-12-12) events.DerivedKey of body, the key the receiver published it
// under. Every accepted delivery leaves at least one row:
//   - a page event without any Document (a failed page with data: []) gives
//     one failure row, url empty;
//   - a Document with neither metadata.url nor metadata.sourceURL gives a
//     failure row only: pages are keyed by (crawl_id, url), and such pages
//     would all collapse into one row under the empty URL, while failures
//     are keyed by webhook too. The receiver refuses successful ones, so
//     these are failed pages (or deliveries stored before that check).
//
// receivedAt is when the receiver accepted it: the version of the rows, the
// same on every redelivery.
func EventRows(ev *events.Event, body []byte, receivedAt time.Time) (Rows, error) {
	key := ev.WebhookID
	if key == "" {
		key = events.DerivedKey(body)
	}
	webhookID, err := uuid.Parse(key)
	if err != nil {
		return Rows{}, fmt.Errorf("webhookId: %w", err)
	}
	receivedAt = receivedAt.UTC()
	if events.ClassOf(ev.Type) == events.ClassRaw {
		return rawRows(ev, body, webhookID, receivedAt), nil
	}
	crawlID, err := uuid.Parse(ev.ID)
	if err != nil {
		return Rows{}, fmt.Errorf("id: %w", err)
	}
	kind := events.JobKind(ev.Type)
	// The metadata travels with every row of the delivery; an object is
	// what the API sends ({} when none was configured), anything else is
	// kept as received too.
	md := []byte(ev.Metadata)
	failure := func(url string, status uint16, reason string) Failure {
		return Failure{
			CrawlID: crawlID, JobKind: kind, WebhookID: webhookID, URL: url, StatusCode: status,
			Error: reason, Reason: events.FailureReason(ev), WebhookMetadata: md, ReceivedAt: receivedAt,
		}
	}
	var r Rows
	if !ev.IsPage() {
		r.CrawlEvents = append(r.CrawlEvents, CrawlEvent{
			CrawlID: crawlID, WebhookID: webhookID, Type: ev.Type, Success: ev.Success,
			Error: ev.Error, Event: body, ReceivedAt: receivedAt,
		})
		return r, nil
	}
	if len(ev.Data) == 0 {
		_, reason := events.Failure(ev, nil)
		r.Failures = append(r.Failures, failure("", 0, reason))
		return r, nil
	}
	for i := range ev.Data {
		doc := &ev.Data[i]
		failed, reason := events.Failure(ev, doc)
		p := page(crawlID, doc, receivedAt)
		if p.URL == "" {
			if !failed {
				reason = NoPageURLReason
			}
			r.Failures = append(r.Failures, failure("", p.StatusCode, reason))
			continue
		}
		p.JobKind = kind
		p.WebhookMetadata = md
		p.WebhookID = webhookID
		p.Origin = OriginWebhook
		p.Success = !failed
		p.Error = reason
		r.Pages = append(r.Pages, p)
		if failed {
			r.Failures = append(r.Failures, failure(p.URL, p.StatusCode, reason))
		}
	}
	return r, nil
}

// rawRows are the rows of a raw event (events.ClassRaw).
func rawRows(ev *events.Event, body []byte, webhookID uuid.UUID, receivedAt time.Time) Rows {
	r := Rows{RawEvents: []RawEvent{{
		JobID: ev.ID, Type: ev.Type, WebhookID: webhookID, Success: ev.Success,
		Error: ev.Error, Event: body, ReceivedAt: receivedAt,
	}}}
	for _, mp := range events.MonitorPages(ev) {
		r.MonitorPages = append(r.MonitorPages, MonitorPage{MonitorPage: mp, WebhookID: webhookID, ReceivedAt: receivedAt})
	}
	return r
}

// page maps the Document's own fields.
func page(crawlID uuid.UUID, doc *events.Document, receivedAt time.Time) Page {
	raw := []byte(doc.Raw)
	if len(raw) == 0 {
		raw, _ = doc.MarshalJSON()
	}
	return Page{
		CrawlID:    crawlID,
		URL:        doc.Metadata.PageURL(),
		ScrapeID:   doc.Metadata.ScrapeID,
		StatusCode: uint16(doc.Metadata.Status()), // 0..65535 by Status's clamp
		Title:      doc.Metadata.Title,
		Markdown:   doc.Markdown,
		HTML:       doc.HTML,
		Document:   raw,
		ReceivedAt: receivedAt,
	}
}

// NoPageURLReason is the failure recorded for a Document that has no page URL
// and did not otherwise fail.
const NoPageURLReason = "document has neither metadata.url nor metadata.sourceURL"
