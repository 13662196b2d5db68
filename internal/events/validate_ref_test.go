package events

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
)

// envelope is the wire shape with every field left raw, so that each can be
// type-checked and named in the error.
type refEnvelope struct {
	Success   json.RawMessage `json:"success"`
	Type      json.RawMessage `json:"type"`
	ID        json.RawMessage `json:"id"`
	JobID     json.RawMessage `json:"jobId"`
	WebhookID json.RawMessage `json:"webhookId"`
	Data      json.RawMessage `json:"data"`
	Error     json.RawMessage `json:"error"`
	Metadata  json.RawMessage `json:"metadata"`
}

// validateReference is the former Validate (encoding/json into RawMessages,
// then a second decode of data), kept to check the single-pass Validate
// against, written from Validate's rules independently of its scanner: the
// body is a JSON object; type is a non-empty string that is a valid subject
// token (letters, digits, '.', '_', '-'); webhookId, when not null, is a
// UUID string, else the key is the SHA-256 name of the body; the job id is
// id, else jobId. A type outside crawl.* and batch_scrape.* needs nothing
// more. Otherwise the job id is a UUID string; success is a boolean; error,
// when present and not null, is a string; metadata, when present and not
// null, is an object; a page event's data is an array of objects, and in a
// successful one every Document (decoded as the sink decodes it) has a
// PageURL. Unknown fields are allowed.
func validateReference(body []byte) (Head, error) {
	var h Head
	body = bytes.Trim(body, jsonSpace) // was bytes.TrimSpace: accepted U+00A0 around the object
	if len(body) == 0 {
		return h, invalid("", "body is empty")
	}
	if body[0] != '{' {
		return h, invalid("", "body is not a JSON object")
	}
	if !utf8.Valid(body) {
		return h, invalid("", "body is not valid UTF-8")
	}
	var env refEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return h, invalid("", "body is not valid JSON: %v", err)
	}
	jobID, jobName := env.ID, "id"
	if refIsNull(env.ID) && !refIsNull(env.JobID) {
		jobID, jobName = env.JobID, "jobId"
	}
	typ, typeErr := refStringField("type", env.Type)
	if typeErr == nil {
		typeErr = checkType(typ)
	}
	var err error
	if typeErr == nil && !strings.HasPrefix(typ, "crawl.") && !strings.HasPrefix(typ, "batch_scrape.") {
		// Anything else is kept whole: only webhookId can be wrong.
		h.Type, h.Success = typ, string(env.Success) == "true"
		var id string
		if json.Unmarshal(jobID, &id) == nil && !strings.ContainsAny(id, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f") {
			for len(id) > MaxJobIDLength {
				_, n := utf8.DecodeLastRuneInString(id)
				id = id[:len(id)-n]
			}
			h.CrawlID = id
		}
		h.WebhookID, h.KeyDerived, err = refKey(body, env.WebhookID)
		return h, err
	}
	if h.Success, err = refBoolField("success", env.Success); err != nil {
		return h, err
	}
	if typeErr != nil {
		return h, typeErr
	}
	h.Type = typ
	if h.CrawlID, err = refUuidField(jobName, jobID); err != nil {
		return h, err
	}
	if h.WebhookID, h.KeyDerived, err = refKey(body, env.WebhookID); err != nil {
		return h, err
	}
	if h.Type == TypeCrawlPage || h.Type == TypeBatchScrapePage {
		if h.Documents, err = refDataField(env.Data); err != nil {
			return h, err
		}
		// A successful page needs a URL as the sink's decoding reads it.
		if h.Success {
			var docs []Document
			if err := json.Unmarshal(env.Data, &docs); err != nil {
				return h, invalid("data", "does not decode: %v", err)
			}
			for i := range docs {
				if docs[i].Metadata.PageURL() == "" {
					return h, invalid(fmt.Sprintf("data[%d].metadata", i), "needs url or sourceURL")
				}
			}
		}
	}
	if !refIsNull(env.Error) && refKind(env.Error) != '"' {
		return h, invalid("error", "must be a string")
	}
	if !refIsNull(env.Metadata) && refKind(env.Metadata) != '{' {
		return h, invalid("metadata", "must be an object")
	}
	return h, nil
}

// refKey is the webhookId, or the SHA-256 name of the body when there is
// none.
func refKey(body []byte, raw json.RawMessage) (string, bool, error) {
	if refIsNull(raw) {
		return uuid.NewHash(sha256.New(), keySpace, body, 8).String(), true, nil
	}
	id, err := refUuidField("webhookId", raw)
	return id, false, err
}

func refIsNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

func refKind(raw json.RawMessage) byte {
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

func refBoolField(name string, raw json.RawMessage) (bool, error) {
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

func refStringField(name string, raw json.RawMessage) (string, error) {
	if refIsNull(raw) {
		return "", invalid(name, "is required")
	}
	if refKind(raw) != '"' {
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

func refUuidField(name string, raw json.RawMessage) (string, error) {
	s, err := refStringField(name, raw)
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

func refDataField(raw json.RawMessage) (int, error) {
	if refIsNull(raw) {
		return 0, invalid("data", "is required")
	}
	if refKind(raw) != '[' {
		return 0, invalid("data", "must be an array of documents")
	}
	var docs []json.RawMessage
	if err := json.Unmarshal(raw, &docs); err != nil {
		return 0, invalid("data", "must be an array of documents")
	}
	for i, d := range docs {
		if refKind(d) != '{' {
			return 0, invalid(fmt.Sprintf("data[%d]", i), "must be an object")
		}
	}
	return len(docs), nil
}
