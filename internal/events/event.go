// Package events owns the crawl API's webhook events and Documents: their
// types, the validation a delivery must pass before it is acknowledged, and
// the envelope in which a delivery travels through JetStream.
//
// It knows nothing of HTTP, NATS or ClickHouse; the receiver and the sink
// adapt it to those.
package events

import (
	"encoding/json"
	"strconv"
)

// Well-known event types. Other types (batch_scrape.*, types added by the
// API later) are valid too: only the envelope is checked.
const (
	TypeCrawlPage      = "crawl.page"
	TypeCrawlStarted   = "crawl.started"
	TypeCrawlCompleted = "crawl.completed"
	TypeCrawlFailed    = "crawl.failed"
)

// Event is one webhook delivery as the crawl API sends it: compact JSON in
// the order success, type, id, webhookId, data, error?, metadata.
type Event struct {
	// Success is true when the page was scraped successfully.
	Success bool `json:"success"`
	// Type is the event type, e.g. "crawl.page".
	Type string `json:"type"`
	// ID is the crawl (job) id, a UUID.
	ID string `json:"id"`
	// WebhookID is unique per event and unchanged on the sender's retries;
	// it is the deduplication key of the whole pipeline.
	WebhookID string `json:"webhookId"`
	// Data holds the page Document for crawl.page (one element; for a failed
	// page only metadata.sourceURL), and is empty for crawl.started and
	// crawl.completed.
	Data []Document `json:"data"`
	// Error is set when the page failed to scrape.
	Error string `json:"error,omitempty"`
	// Metadata is the custom metadata of the webhook configuration, echoed
	// in every delivery. It is kept as received.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// IsPage reports whether the event carries page documents.
func (e *Event) IsPage() bool { return e.Type == TypeCrawlPage }

// Decode parses and validates a delivery body. The returned error wraps
// ErrInvalid and names the offending field (see *InvalidError).
func Decode(body []byte) (*Event, error) {
	if _, err := Validate(body); err != nil {
		return nil, err
	}
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, invalid("", "body: %v", err)
	}
	return &ev, nil
}

// Failure says whether a page of a crawl.page event failed, and why: the
// event has success=false, the Document has metadata.error, or the page
// answered with an HTTP status of 400 or more. The reason is the event's
// error, else metadata.error, else "HTTP <status>".
func Failure(ev *Event, doc *Document) (failed bool, reason string) {
	switch {
	case !ev.Success:
		reason = ev.Error
		if reason == "" {
			reason = doc.Metadata.Error
		}
		if reason == "" {
			reason = "scrape failed"
		}
		return true, reason
	case doc.Metadata.Error != "":
		return true, doc.Metadata.Error
	case doc.Metadata.StatusCode >= 400:
		return true, "HTTP " + strconv.Itoa(doc.Metadata.StatusCode)
	}
	return false, ""
}
