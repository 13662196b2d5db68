package ops

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// WriteJSON answers v as JSON with status. v is encoded before anything is
// written, so an encoding error leaves the response untouched for the
// caller to answer otherwise. <, > and & are not escaped: messages such as
// "want sha256=<hex>" stay readable, and the answers are never HTML.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
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
