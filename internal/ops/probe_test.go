package ops

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	mux.HandleFunc("/down", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)

	// A port nobody listens on: listen, note the port, close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/healthz"
	ln.Close()

	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string // "" for success
	}{
		{"2xx", []string{ts.URL + "/ok"}, ""},
		{"503", []string{ts.URL + "/down"}, "503 Service Unavailable"},
		{"404", []string{ts.URL + "/nope"}, "404 Not Found"},
		{"refused", []string{closed}, "connection refused"},
		{"no url", nil, "usage: probe URL"},
		{"two urls", []string{"a", "b"}, "usage: probe URL"},
		{"bad url", []string{"http://[::1"}, "probe http://[::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Probe(context.Background(), tc.args)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Fatalf("err %q is not one line", err)
			}
		})
	}

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		err := Probe(context.Background(), []string{ts.URL + "/slow"})
		if err == nil {
			t.Fatal("a hanging server passed the probe")
		}
		// It gave up because its own timeout ran out, and says so.
		if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "Timeout") && !strings.Contains(err.Error(), "deadline exceeded") {
			t.Fatalf("err = %v, want the probe's timeout", err)
		}
	})
}
