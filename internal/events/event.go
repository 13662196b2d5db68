// Package events owns the crawl API's webhook events and Documents: their
// types, the validation a delivery must pass before it is acknowledged, the
// rules that say which pages failed, and the kinds of job.
//
// It knows nothing of HTTP, NATS or ClickHouse; internal/delivery carries a
// delivery through JetStream, and the receiver and the sink adapt it to the
// rest.
package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Well-known event types. Other types (types added by the API later) are
// valid too: only the envelope is checked.
const (
	TypeCrawlPage      = "crawl.page"
	TypeCrawlStarted   = "crawl.started"
	TypeCrawlCompleted = "crawl.completed"
	TypeCrawlFailed    = "crawl.failed"
	TypeCrawlCancelled = "crawl.cancelled"

	TypeBatchScrapePage      = "batch_scrape.page"
	TypeBatchScrapeStarted   = "batch_scrape.started"
	TypeBatchScrapeCompleted = "batch_scrape.completed"
	TypeBatchScrapeCancelled = "batch_scrape.cancelled"
)

// Failure reasons, the class of a failed page.
const (
	// ReasonFailed is a page whose scrape failed (an error, or an HTTP
	// status of 400 or more): what alerts count.
	ReasonFailed = "failed"
	// ReasonCancelled is a page that was never scraped because its crawl or
	// batch scrape was cancelled: the API sends one such failed page per
	// queued URL when a job is cancelled, which is no outage and must not
	// page anyone.
	ReasonCancelled = "cancelled"
)

// cancellationErrors are the errors, word for word, the crawl API gives
// every page a cancellation left unscraped (JobCancelledError in the API's
// apps/api/src/lib/error.ts: the text since January 2026, then the one
// before). The API sends them as the event's own error of a page event with
// success false and no page metadata beyond its URL.
var cancellationErrors = []string{
	"This scrape was not completed because the parent crawl or batch scrape was cancelled. This happens when you call the cancel endpoint on a crawl or batch scrape, or when the operation is stopped for another reason. Any URLs that were already scraped before cancellation are still available in the results.",
	"Parent crawl/batch scrape was cancelled",
}

// IsCancellationError reports whether errText is, exactly, an error the
// crawl API gives a page its job's cancellation left unscraped. Exactly:
// a failure whose text merely contains the phrase (a page that quotes it,
// an error that wraps it) is a failure like any other.
func IsCancellationError(errText string) bool {
	return slices.Contains(cancellationErrors, errText)
}

// FailureReason classifies a failed page of ev by the sender's own signals:
// ReasonCancelled when the event itself failed (success false) with exactly
// the API's cancellation error, ReasonFailed otherwise. Nothing a crawled
// page controls (its metadata, which the API fills from the page's own
// <meta> tags, or its text) can make a failure look cancelled.
func FailureReason(ev *Event) string {
	if !ev.Success && IsCancellationError(ev.Error) {
		return ReasonCancelled
	}
	return ReasonFailed
}

// Class is how deliveries of an event type are archived.
type Class uint8

// The classes of event types (ClassOf).
const (
	// ClassPage: page events (crawl.page, batch_scrape.page), whose data
	// holds Documents: a pages row per Document, a failures row per failed
	// one.
	ClassPage Class = iota + 1
	// ClassJob: every other crawl.* and batch_scrape.* type, a job's
	// lifecycle (started, completed, failed, cancelled): kept whole in
	// crawl_events, and they drive backfill, so their id is a job's UUID.
	ClassJob
	// ClassRaw: any other type (extract.*, monitor.*, agent.*, and types
	// the API adds later): kept whole in the events table with its type
	// and job id, whatever data holds. They are no crawl: they never drive
	// backfill.
	ClassRaw
)

// ClassOf is the class of event type t. It is the one place that decides
// how a type is archived: the receiver's validation and the sink's mapping
// to rows both ask it.
func ClassOf(t string) Class {
	switch {
	case IsPageType(t):
		return ClassPage
	case strings.HasPrefix(t, KindCrawl+"."), strings.HasPrefix(t, KindBatchScrape+"."):
		return ClassJob
	}
	return ClassRaw
}

// MaxJobIDLength bounds the job id kept of a raw event (ClassRaw), whose id
// need not be a UUID: a longer one is cut to this many bytes (at a
// character boundary).
const MaxJobIDLength = 256

// Event is one webhook delivery as the crawl API sends it: compact JSON in
// the order success, type, id, webhookId, data, error?, metadata. Older
// senders differ: before 2025-12-12 there is no webhookId (DerivedKey
// stands for it), and the v0 API's deliveries name the job jobId.
type Event struct {
	// Success is true when the page was scraped successfully.
	Success bool `json:"success"`
	// Type is the event type, e.g. "crawl.page".
	Type string `json:"type"`
	// ID is the job id: id, else jobId (the v0 API's name). A UUID for
	// page and job events; any string for a raw event (cut to
	// MaxJobIDLength), empty when it has none.
	ID string `json:"id"`
	// WebhookID is unique per event and unchanged on the sender's retries;
	// it is the deduplication key of the whole pipeline. Empty when the
	// delivery has none: the sink then uses the key the receiver derived
	// (DerivedKey), which travels as the message's id.
	WebhookID string `json:"webhookId"`
	// Data holds the page Documents of a page event (one element; for a
	// failed page only metadata.sourceURL); it is nil for other types,
	// whose data is left raw in RawData.
	Data []Document `json:"data"`
	// RawData is data as received for an event that is not a page event
	// (an object for some monitor events, extraction results, links of the
	// v0 API), nil for page events.
	RawData json.RawMessage `json:"-"`
	// Error is set when the page failed to scrape.
	Error string `json:"error,omitempty"`
	// Metadata is the custom metadata of the webhook configuration, echoed
	// in every delivery. It is kept as received.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// IsPage reports whether the event carries page documents.
func (e *Event) IsPage() bool { return IsPageType(e.Type) }

// IsPageType says whether events of type t carry page documents, archived
// one row per page, rather than a crawl-level event archived whole. It is
// the one place that decides: the receiver's check that a page has a URL and
// the sink's mapping to rows both ask it.
func IsPageType(t string) bool { return t == TypeCrawlPage || t == TypeBatchScrapePage }

// wireEvent is an Event with the scalar fields left raw, so that one of an
// unexpected type costs only that field.
type wireEvent struct {
	Success   json.RawMessage `json:"success"`
	Type      json.RawMessage `json:"type"`
	ID        json.RawMessage `json:"id"`
	JobID     json.RawMessage `json:"jobId"`
	WebhookID json.RawMessage `json:"webhookId"`
	Data      json.RawMessage `json:"data"`
	Error     json.RawMessage `json:"error"`
	Metadata  json.RawMessage `json:"metadata"`
}

// DecodeAccepted decodes a delivery the receiver has accepted (Validate),
// as the sink does: without validating it again, and leniently, because the
// sender was answered 2xx and will not send it again. A field of an
// unexpected type is left empty (error: 5 is no error, a Document's
// markdown: 5 no markdown); the body and each Document's Raw keep every
// value as received. It fails only for what no accepted delivery can be:
// not a JSON object, no type, or for a page event data not an array of
// objects. Data is decoded into Documents for page events only; any other
// type keeps it raw (RawData).
//
// The body is read once by the receiver's scanner (Validate's), which notes
// the envelope's fields and where each Document is; each Document is then
// decoded from its own bytes. Decoding the body with encoding/json instead
// (decodeWhole) reads every Document's bytes four times (the body checked,
// the Document skipped, then checked and decoded), and this is the sink's
// CPU. A body the scanner does not read as the receiver accepts it (not
// UTF-8, an envelope key twice, data of another shape) is decoded whole,
// so the answer is always decodeWhole's (FuzzDecodeAcceptedDifferential).
//
// The Event may share body's memory (Metadata, RawData, each Document's
// Raw are slices of it, not copies: a page's Document is not copied only to
// be cut and dropped): body must not change while the Event is in use.
func DecodeAccepted(body []byte) (*Event, error) {
	if ev, ok := decodeScanned(body); ok {
		return ev, nil
	}
	return decodeWhole(body)
}

// decodeScanned is DecodeAccepted for a body the scanner reads as the
// receiver accepts it; ok is false for any other, left to decodeWhole.
func decodeScanned(body []byte) (ev *Event, ok bool) {
	body = bytes.Trim(body, jsonSpace)
	if len(body) == 0 || body[0] != '{' {
		return nil, false
	}
	env := scannedEnvelope{data: dataSummary{keepSpans: true}}
	if env.scan(body) != nil || env.repeated {
		return nil, false
	}
	ev = &Event{
		Success:   string(env.success) == "true",
		Type:      scannedString(env.typ),
		ID:        jobIDOf(jobIDField(env.id, env.jobID)),
		WebhookID: scannedString(env.webhookID),
		Error:     scannedString(env.errorField),
		Metadata:  env.metadata,
	}
	if ev.Type == "" {
		return nil, false
	}
	switch {
	case !IsPageType(ev.Type):
		ev.RawData = env.data.raw
	case isNull(env.data.raw):
	case kind(env.data.raw) != '[' || env.data.notObject >= 0:
		return nil, false
	default:
		ev.Data = make([]Document, len(env.data.spans))
		for i, span := range env.data.spans {
			if ev.Data[i].decodeShared(span) != nil {
				return nil, false
			}
		}
	}
	return ev, true
}

// scannedString is stringOnly for a value of a body the scanner checked:
// a string literal is unquoted where it lies, without encoding/json
// (which took about a tenth of the sink's decoding of a page delivery).
func scannedString(v []byte) string {
	if s, ok := checkedString(v, true); ok {
		return s
	}
	return stringOnly(v)
}

// decodeWhole is DecodeAccepted with encoding/json over the whole body.
func decodeWhole(body []byte) (*Event, error) {
	var w wireEvent
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	ev := &Event{
		Success:   string(w.Success) == "true",
		Type:      stringOnly(w.Type),
		ID:        jobIDOf(jobIDField(w.ID, w.JobID)),
		WebhookID: stringOnly(w.WebhookID),
		Error:     stringOnly(w.Error),
		Metadata:  w.Metadata,
	}
	if ev.Type == "" {
		return nil, errors.New("type: is required")
	}
	if !IsPageType(ev.Type) {
		ev.RawData = w.Data
		return ev, nil
	}
	if !isNull(w.Data) {
		if err := json.Unmarshal(w.Data, &ev.Data); err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
	}
	return ev, nil
}

// Failure says whether a page of a page event (crawl.page,
// batch_scrape.page) failed, and why, by the sender's own signals only:
//   - the event has success false: failed, for the event's error, else
//     metadata.error, else "scrape failed";
//   - doc is nil (a page event without any Document): failed, nothing was
//     archived, for the event's error or the missing document;
//   - the page answered with an HTTP status of 400 or more
//     (metadata.statusCode under Metadata.Status's clamp, the status the
//     archive stores): failed, for "HTTP <status>", followed by
//     metadata.error when there is one.
//
// Anything else is a page scraped fine, whatever its metadata.error says:
// the API copies a page's own <meta> tags into its metadata, so a crawled
// site can set metadata.error on any page, and what a site says of itself
// must neither fail its page nor raise an alert.
func Failure(ev *Event, doc *Document) (failed bool, reason string) {
	var md Metadata
	if doc != nil {
		md = doc.Metadata
	}
	switch {
	case !ev.Success:
		reason = ev.Error
		if reason == "" {
			reason = md.Error
		}
		if reason == "" {
			reason = "scrape failed"
		}
		return true, reason
	case doc == nil:
		return true, "page event without a document"
	case md.Status() >= 400:
		reason = "HTTP " + strconv.Itoa(md.Status())
		if md.Error != "" {
			reason += ": " + md.Error
		}
		return true, reason
	}
	return false, ""
}
