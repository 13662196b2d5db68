package receivercmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestProbeSubcommand: `receiver probe URL` is the container healthcheck:
// nil against a live receiver's /healthz, a one-line error against a route
// that answers 404 and against a missing URL.
func TestProbeSubcommand(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL()})
	noEnv := func(string) string { return "" }
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"healthz", []string{"receiver", "probe", r.URL + "/healthz"}, ""},
		{"readyz", []string{"receiver", "probe", r.URL + "/readyz"}, ""},
		{"404", []string{"receiver", "probe", r.URL + "/nope"}, "404"},
		{"no url", []string{"receiver", "probe"}, "usage: probe URL"},
	} {
		var out bytes.Buffer
		err := Run(context.Background(), tc.args, noEnv, &out, &out)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
		}
		if out.Len() != 0 {
			t.Errorf("%s: probe wrote %q; it should be quiet", tc.name, out.String())
		}
	}
}
