package events

import (
	"encoding/json"
	"strconv"
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

// ChangeTracking compares a page with its previous scrape.
type ChangeTracking struct {
	PreviousScrapeAt string          `json:"previousScrapeAt,omitempty"`
	ChangeStatus     string          `json:"changeStatus,omitempty"`
	Visibility       string          `json:"visibility,omitempty"`
	Diff             string          `json:"diff,omitempty"`
	JSON             json.RawMessage `json:"json,omitempty"`
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

// UnmarshalJSON decodes the typed fields and keeps the raw bytes.
func (d *Document) UnmarshalJSON(b []byte) error {
	var f documentFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
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
		if !metadataKnown[k] {
			if m.Extra == nil {
				m.Extra = make(map[string]json.RawMessage)
			}
			m.Extra[k] = v
			continue
		}
		switch k {
		case "title":
			m.Title = lenientString(v)
		case "description":
			m.Description = lenientString(v)
		case "language":
			m.Language = lenientString(v)
		case "sourceURL":
			m.SourceURL = lenientString(v)
		case "url":
			m.URL = lenientString(v)
		case "keywords":
			m.Keywords = lenientString(v)
		case "contentType":
			m.ContentType = lenientString(v)
		case "error":
			m.Error = lenientString(v)
		case "scrapeId":
			m.ScrapeID = lenientString(v)
		case "statusCode":
			m.StatusCode = int(lenientInt(v))
		case "concurrencyQueueDurationMs":
			m.ConcurrencyQueueDurationMs = lenientInt(v)
		case "concurrencyLimited":
			_ = json.Unmarshal(v, &m.ConcurrencyLimited)
		case "ogLocaleAlternate":
			_ = json.Unmarshal(v, &m.OGLocaleAlternate)
		}
	}
	return nil
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
		out := ""
		for i, e := range list {
			if i > 0 {
				out += ", "
			}
			out += e
		}
		return out
	}
	if string(v) == "null" {
		return ""
	}
	return string(v)
}

// lenientInt reads a number or a numeric string; anything else is 0.
func lenientInt(v json.RawMessage) int64 {
	var f float64
	if json.Unmarshal(v, &f) == nil {
		return int64(f)
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	return 0
}
