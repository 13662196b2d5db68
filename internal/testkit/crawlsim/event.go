package crawlsim

import (
	"bytes"
	"encoding/json"
)

// wireEvent is a delivery in the real sender's key order: success, type, id,
// webhookId, data, error?, metadata. Data holds documents already encoded, so
// a page's bytes are identical in a delivery and in a status response.
type wireEvent struct {
	Success   bool              `json:"success"`
	Type      string            `json:"type"`
	ID        string            `json:"id"`
	WebhookID string            `json:"webhookId"`
	Data      []json.RawMessage `json:"data"`
	Error     string            `json:"error,omitempty"`
	Metadata  json.RawMessage   `json:"metadata,omitempty"`
}

// wireDocument is a Document in the key order the API writes it.
type wireDocument struct {
	Markdown string       `json:"markdown,omitempty"`
	HTML     string       `json:"html,omitempty"`
	Metadata wireMetadata `json:"metadata"`
}

// wireMetadata is a Document's metadata in the API's key order. ContentType
// appears in deliveries but not in status responses (seed: "metadata has
// the fields above minus contentType").
type wireMetadata struct {
	Title       string `json:"title,omitempty"`
	Language    string `json:"language,omitempty"`
	SourceURL   string `json:"sourceURL"`
	URL         string `json:"url,omitempty"`
	StatusCode  int    `json:"statusCode,omitempty"`
	ContentType string `json:"contentType,omitempty"`
	ScrapeID    string `json:"scrapeId,omitempty"`
	ProxyUsed   string `json:"proxyUsed,omitempty"`
	CacheState  string `json:"cacheState,omitempty"`
	CreditsUsed int    `json:"creditsUsed,omitempty"`
}

// failedDocument is the only element of a failed page's data.
type failedDocument struct {
	Metadata struct {
		SourceURL string `json:"sourceURL"`
	} `json:"metadata"`
}

// marshal writes compact JSON as JavaScript's JSON.stringify does: no HTML
// escaping of <, > and &, no trailing newline. Signatures are computed over
// these bytes, so they must match the real sender's serialisation.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// encodeEvent returns the delivery body of an event.
func encodeEvent(success bool, typ, crawlID, webhookID string, data []json.RawMessage, errText string, metadata json.RawMessage) ([]byte, error) {
	if data == nil {
		data = []json.RawMessage{}
	}
	return marshal(wireEvent{
		Success: success, Type: typ, ID: crawlID, WebhookID: webhookID,
		Data: data, Error: errText, Metadata: metadata,
	})
}
