// Package httpjson writes the JSON answers of crawlhouse's HTTP endpoints,
// the receiver's (through echo's response, which is an http.ResponseWriter)
// and the sink's alike, so that both binaries answer the same bytes.
package httpjson

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// Write answers v as JSON with status. v is encoded before anything is
// written, so an encoding error leaves the response untouched for the
// caller to answer otherwise. <, > and & are not escaped: messages such as
// "want sha256=<hex>" stay readable, and the answers are never HTML.
func Write(w http.ResponseWriter, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}
