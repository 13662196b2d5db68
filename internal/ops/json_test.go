package ops

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWriteJSON(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	if err := WriteJSON(rec, http.StatusUnauthorized, map[string]string{"message": "want sha256=<hex> & more"}); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("status %d, want 401", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if got, want := rec.Body.String(), "{\"message\":\"want sha256=<hex> & more\"}\n"; got != want {
		t.Errorf("body %q, want %q", got, want)
	}
}

func TestWriteJSONUnencodable(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	if err := WriteJSON(rec, http.StatusOK, make(chan int)); err == nil {
		t.Fatal("no error for a value JSON cannot encode")
	}
	if rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
		t.Errorf("wrote %q with headers %v", rec.Body.String(), rec.Header())
	}
}
