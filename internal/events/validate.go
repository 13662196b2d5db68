package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/google/uuid"
)

// ErrInvalid is wrapped by every validation error, so callers can branch
// with errors.Is(err, events.ErrInvalid).
var ErrInvalid = errors.New("invalid payload")

// InvalidError says which field of a delivery is wrong and why.
type InvalidError struct {
	// Field is the JSON name of the offending field ("webhookId",
	// "data[0]"), or empty when the body as a whole is not an object.
	Field string
	// Reason is a short human explanation.
	Reason string
}

func (e *InvalidError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Head is what the pipeline needs to know of a delivery without decoding its
// documents: enough to route, deduplicate and account for it.
type Head struct {
	Type      string
	CrawlID   string
	WebhookID string
	Success   bool
	// Documents is the number of elements of data.
	Documents int
}

// envelope is the wire shape with every field left raw, so that each can be
// type-checked and named in the error.
type envelope struct {
	Success   json.RawMessage `json:"success"`
	Type      json.RawMessage `json:"type"`
	ID        json.RawMessage `json:"id"`
	WebhookID json.RawMessage `json:"webhookId"`
	Data      json.RawMessage `json:"data"`
	Error     json.RawMessage `json:"error"`
	Metadata  json.RawMessage `json:"metadata"`
}

// MaxTypeLength bounds the event type, which becomes a subject token.
const MaxTypeLength = 128

// Validate checks a delivery body and returns its Head. The rules:
// the body is a JSON object; type is a non-empty string that is a valid
// subject token (letters, digits, '.', '_', '-'); id and webhookId are UUID
// strings; success is a boolean; data is an array of objects; error, when
// present and not null, is a string; metadata, when present and not null,
// is an object. Unknown fields are allowed: the API adds fields over time.
func Validate(body []byte) (Head, error) {
	var h Head
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return h, invalid("", "body is empty")
	}
	if body[0] != '{' {
		return h, invalid("", "body is not a JSON object")
	}
	if !utf8.Valid(body) {
		return h, invalid("", "body is not valid UTF-8")
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return h, invalid("", "body is not valid JSON: %v", err)
	}
	var err error
	if h.Success, err = boolField("success", env.Success); err != nil {
		return h, err
	}
	if h.Type, err = stringField("type", env.Type); err != nil {
		return h, err
	}
	if err := checkType(h.Type); err != nil {
		return h, err
	}
	if h.CrawlID, err = uuidField("id", env.ID); err != nil {
		return h, err
	}
	if h.WebhookID, err = uuidField("webhookId", env.WebhookID); err != nil {
		return h, err
	}
	if h.Documents, err = dataField(env.Data); err != nil {
		return h, err
	}
	if !isNull(env.Error) && kind(env.Error) != '"' {
		return h, invalid("error", "must be a string")
	}
	if !isNull(env.Metadata) && kind(env.Metadata) != '{' {
		return h, invalid("metadata", "must be an object")
	}
	return h, nil
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

func kind(raw json.RawMessage) byte {
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

func boolField(name string, raw json.RawMessage) (bool, error) {
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "", "null":
		return false, invalid(name, "is required")
	}
	return false, invalid(name, "must be a boolean")
}

func stringField(name string, raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", invalid(name, "is required")
	}
	if kind(raw) != '"' {
		return "", invalid(name, "must be a string")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalid(name, "must be a string")
	}
	if s == "" {
		return "", invalid(name, "must not be empty")
	}
	return s, nil
}

func uuidField(name string, raw json.RawMessage) (string, error) {
	s, err := stringField(name, raw)
	if err != nil {
		return "", err
	}
	u, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return "", invalid(name, "must be a UUID like 0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
	}
	// The canonical lower-case form, so that the same id always dedups.
	return u.String(), nil
}

func checkType(t string) error {
	if len(t) > MaxTypeLength {
		return invalid("type", "must be at most %d characters", MaxTypeLength)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return invalid("type", "may hold only letters, digits, '.', '_' and '-'")
		}
	}
	if t[0] == '.' || t[len(t)-1] == '.' || bytes.Contains([]byte(t), []byte("..")) {
		return invalid("type", "must not have empty dot-separated parts")
	}
	return nil
}

func dataField(raw json.RawMessage) (int, error) {
	if isNull(raw) {
		return 0, invalid("data", "is required")
	}
	if kind(raw) != '[' {
		return 0, invalid("data", "must be an array of documents")
	}
	var docs []json.RawMessage
	if err := json.Unmarshal(raw, &docs); err != nil {
		return 0, invalid("data", "must be an array of documents")
	}
	for i, d := range docs {
		if kind(d) != '{' {
			return 0, invalid(fmt.Sprintf("data[%d]", i), "must be an object")
		}
	}
	return len(docs), nil
}
