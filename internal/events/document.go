package events

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// Document is a scraped page as the crawl API returns it: in the data of a
// crawl.page event and in each element of a Job status's data. All fields are
// optional and appear according to the requested formats.
//
// Raw holds the Document exactly as received. Decoding keeps it and encoding
// a decoded Document writes it back unchanged, so fields this version does
// not know survive a round trip. Documents built in code (Raw empty) encode
// their typed fields.
type Document struct {
	Markdown       string          `json:"markdown,omitempty"`
	Summary        string          `json:"summary,omitempty"`
	HTML           string          `json:"html,omitempty"`
	RawHTML        string          `json:"rawHtml,omitempty"`
	Screenshot     string          `json:"screenshot,omitempty"`
	Audio          string          `json:"audio,omitempty"`
	Video          string          `json:"video,omitempty"`
	Answer         string          `json:"answer,omitempty"`
	Highlights     string          `json:"highlights,omitempty"`
	Links          []string        `json:"links,omitempty"`
	Actions        *Actions        `json:"actions,omitempty"`
	Metadata       Metadata        `json:"metadata"`
	Warning        string          `json:"warning,omitempty"`
	ChangeTracking *ChangeTracking `json:"changeTracking,omitempty"`
	// Branding is kept raw: it is deep, mostly free-form, and not mapped to
	// columns.
	Branding json.RawMessage `json:"branding,omitempty"`

	// Raw is the Document's JSON as received.
	Raw json.RawMessage `json:"-"`
}

// Actions are the results of page actions.
type Actions struct {
	Screenshots       []string           `json:"screenshots,omitempty"`
	Scrapes           []ActionScrape     `json:"scrapes,omitempty"`
	JavascriptReturns []JavascriptReturn `json:"javascriptReturns,omitempty"`
	PDFs              []string           `json:"pdfs,omitempty"`
}

// ActionScrape is one scrape action's result.
type ActionScrape struct {
	URL  string `json:"url"`
	HTML string `json:"html"`
}

// JavascriptReturn is the value an executeJavascript action returned.
type JavascriptReturn struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// ChangeTracking is the crawl API's changeTracking object: how a page
// compares with its previous scrape (the crawl API's Document type,
// testdata/changetracking). A Document the crawl API sent with it keeps it
// as sent; the read API computes the same object from the archive
// (docs/read-api.md, "changeTracking").
type ChangeTracking struct {
	// PreviousScrapeAt is the compared scrape's time, null for new.
	PreviousScrapeAt *string `json:"previousScrapeAt"`
	// ChangeStatus is new, same, changed or removed (ChangeNew...).
	ChangeStatus string `json:"changeStatus"`
	// Visibility is VisibilityHidden for a URL the crawl did not find
	// through its links, VisibilityVisible otherwise.
	Visibility string `json:"visibility"`
	// Diff is the git-diff mode's diff of the markdown, for changed only.
	Diff *TrackingDiff `json:"diff,omitempty"`
	// JSON is the json mode's extraction, kept as sent.
	JSON json.RawMessage `json:"json,omitempty"`
	// DiffOmitted is crawlhouse's own: why a diff asked for is absent
	// (larger than MaxTrackingDiff). The crawl API never sends it.
	DiffOmitted string `json:"diffOmitted,omitempty"`
}

// Metadata describes the page. Besides the named fields it carries any other
// page metadata key (og:*, description variants…), kept in Extra.
type Metadata struct {
	Title                      string   `json:"title,omitempty"`
	Description                string   `json:"description,omitempty"`
	Language                   string   `json:"language,omitempty"`
	SourceURL                  string   `json:"sourceURL,omitempty"`
	URL                        string   `json:"url,omitempty"`
	Keywords                   string   `json:"keywords,omitempty"`
	OGLocaleAlternate          []string `json:"ogLocaleAlternate,omitempty"`
	StatusCode                 int      `json:"statusCode,omitempty"`
	ContentType                string   `json:"contentType,omitempty"`
	Error                      string   `json:"error,omitempty"`
	ScrapeID                   string   `json:"scrapeId,omitempty"`
	ConcurrencyLimited         bool     `json:"concurrencyLimited,omitempty"`
	ConcurrencyQueueDurationMs int64    `json:"concurrencyQueueDurationMs,omitempty"`

	// Extra holds the keys not named above, raw.
	Extra map[string]json.RawMessage `json:"-"`
}

type documentFields Document

// UnmarshalJSON decodes the typed fields and keeps the raw bytes. It never
// refuses an object: a known field holding a value of another type (a number
// for markdown, a string for links or metadata) is left empty, because the
// receiver has already acknowledged the delivery and Raw keeps the value.
// Only a value that is not an object is an error.
func (d *Document) UnmarshalJSON(b []byte) error {
	if err := d.decodeShared(b); err != nil {
		return err
	}
	d.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// decodeShared is UnmarshalJSON with Raw a slice of b, not a copy
// (DecodeAccepted's Documents share the body's memory).
func (d *Document) decodeShared(b []byte) error {
	if f, ok := decodeLifted(b); ok {
		*d = Document(f)
		d.Raw = b
		return nil
	}
	return d.unmarshalWhole(b)
}

// unmarshalWhole is UnmarshalJSON with encoding/json over all of b.
func (d *Document) unmarshalWhole(b []byte) error {
	var f documentFields
	// Strict first: it decodes the large strings once, and every Document
	// the sender really makes passes it.
	if err := json.Unmarshal(b, &f); err != nil {
		f = documentFields{}
		if err := decodeLeniently(b, &f); err != nil {
			return err
		}
	}
	*d = Document(f)
	d.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// MarshalJSON writes Raw when the Document was decoded, else its fields.
func (d Document) MarshalJSON() ([]byte, error) {
	if len(d.Raw) > 0 {
		return d.Raw, nil
	}
	return json.Marshal(documentFields(d))
}

type metadataFields Metadata

var metadataKnown = map[string]bool{
	"title": true, "description": true, "language": true, "sourceURL": true,
	"url": true, "keywords": true, "ogLocaleAlternate": true, "statusCode": true,
	"contentType": true, "error": true, "scrapeId": true,
	"concurrencyLimited": true, "concurrencyQueueDurationMs": true,
}

// UnmarshalJSON decodes the named fields leniently (the API has sent
// statusCode as a string and keywords as an array in the wild: a page is
// never rejected for a metadata type) and keeps the other keys in Extra.
func (m *Metadata) UnmarshalJSON(b []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	*m = Metadata{}
	for k, v := range all {
		m.set(k, v, false)
	}
	return nil
}

// set decodes the value v of the metadata key k. checked says the scanner
// checked v (decodeDirect): a string or a number is then read without
// encoding/json, with the same result.
func (m *Metadata) set(k string, v json.RawMessage, checked bool) {
	if !metadataKnown[k] {
		if m.Extra == nil {
			m.Extra = make(map[string]json.RawMessage)
		}
		m.Extra[k] = v
		return
	}
	str := func(lenient func(json.RawMessage) string) string {
		if s, ok := checkedString(v, checked); ok {
			return s
		}
		return lenient(v)
	}
	number := func() (float64, bool) {
		if f, ok := checkedNumber(v, checked); ok {
			return f, true
		}
		return lenientNumber(v)
	}
	switch k {
	case "title":
		m.Title = str(lenientString)
	case "description":
		m.Description = str(lenientString)
	case "language":
		m.Language = str(lenientString)
	case "sourceURL":
		m.SourceURL = str(stringOnly)
	case "url":
		m.URL = str(stringOnly)
	case "keywords":
		m.Keywords = str(lenientString)
	case "contentType":
		m.ContentType = str(lenientString)
	case "error":
		m.Error = str(lenientString)
	case "scrapeId":
		m.ScrapeID = str(lenientString)
	case "statusCode":
		f, _ := number()
		m.StatusCode = clampStatus(f)
	case "concurrencyQueueDurationMs":
		m.ConcurrencyQueueDurationMs = intOf(number())
	case "concurrencyLimited":
		switch {
		case checked && string(v) == "true":
			m.ConcurrencyLimited = true
		case checked && string(v) == "false":
			m.ConcurrencyLimited = false
		case json.Unmarshal(v, &m.ConcurrencyLimited) != nil:
			m.ConcurrencyLimited = false
		}
	case "ogLocaleAlternate":
		if json.Unmarshal(v, &m.OGLocaleAlternate) != nil {
			m.OGLocaleAlternate = nil
		}
	}
}

// MarshalJSON writes the named fields and Extra.
func (m Metadata) MarshalJSON() ([]byte, error) {
	known, err := json.Marshal(metadataFields(m))
	if err != nil || len(m.Extra) == 0 {
		return known, err
	}
	all := make(map[string]json.RawMessage, len(m.Extra)+8)
	for k, v := range m.Extra {
		all[k] = v
	}
	var named map[string]json.RawMessage
	if err := json.Unmarshal(known, &named); err != nil {
		return nil, err
	}
	for k, v := range named {
		all[k] = v
	}
	return json.Marshal(all)
}

// PageURL is the URL a page is archived under: metadata.url (after
// redirects), else metadata.sourceURL (what was asked for).
func (m *Metadata) PageURL() string {
	if m.URL != "" {
		return m.URL
	}
	return m.SourceURL
}

// lenientString returns a JSON string's value; for an array of strings it
// joins them with ", " (keywords), for other values their JSON text.
func lenientString(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var list []string
	if json.Unmarshal(v, &list) == nil {
		return strings.Join(list, ", ")
	}
	if string(v) == "null" {
		return ""
	}
	return string(v)
}

// stringOnly returns a JSON string's value and "" for any other value. The
// page's URLs are read this way: a number is no URL, and the receiver's
// check that a page has one (Validate) must see exactly what decoding sees.
func stringOnly(v json.RawMessage) string {
	var s string
	_ = json.Unmarshal(v, &s)
	return s
}

// lenientNumber reads a JSON number or a string holding one (the API has
// sent statusCode as "404"). ok is false for anything else, for numbers
// beyond float64 and for NaN and the infinities.
func lenientNumber(v json.RawMessage) (f float64, ok bool) {
	if json.Unmarshal(v, &f) != nil {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return 0, false
		}
		var err error
		if f, err = strconv.ParseFloat(s, 64); err != nil {
			return 0, false
		}
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// intOf is the integer of a metadata value read as a number (f, ok: a
// number or a numeric string), the fraction dropped; anything else, and
// anything beyond ±2^62, is 0.
func intOf(f float64, ok bool) int64 {
	if !ok || f >= 1<<62 || f <= -(1<<62) {
		return 0
	}
	return int64(f)
}

// MaxStatusCode is the largest HTTP status the archive keeps; it is the
// range of the status_code column (UInt16).
const MaxStatusCode = 65535

// clampStatus is the one rule for a page's HTTP status, applied when the
// metadata is decoded and again by Status (for Metadata built in code): a
// number in 0..MaxStatusCode is kept, its fraction dropped (404.7 is 404);
// anything else (negative, beyond the column's range, not a number) is not a
// status at all and becomes 0, "unknown". Both the status_code column and
// the failure decision (status >= 400) read the clamped value, so a row
// never says "HTTP 70000" beside a status of 0; the value as sent stays in
// the raw Document.
func clampStatus(f float64) int {
	if !(f >= 0 && f < MaxStatusCode+1) { // NaN fails both comparisons
		return 0
	}
	return int(f)
}

// Status is the page's HTTP status under the archive's rule (clampStatus):
// metadata.statusCode when it is a number in 0..65535, else 0 (unknown).
func (m *Metadata) Status() int { return clampStatus(float64(m.StatusCode)) }
