package sinkcmd_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/sinkcmd"
)

// TestProbeSubcommand: `sink probe URL` is the container healthcheck; it
// needs no configuration and fails unless the URL answers 2xx.
func TestProbeSubcommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"ready", []string{"sink", "probe", srv.URL + "/readyz"}, ""},
		{"unavailable", []string{"sink", "probe", srv.URL + "/other"}, "503"},
		{"no url", []string{"sink", "probe"}, "usage: probe URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sinkcmd.Run(context.Background(), tc.args, func(string) string { return "" }, io.Discard, io.Discard)
			if tc.want == "" && err != nil {
				t.Fatalf("probe: %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("probe: %v, want an error with %q", err, tc.want)
			}
		})
	}
}
