package logs

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestScrubber: every credential the environment holds, whole or as a part
// of a URL, is replaced in lines and errors, also when escaped as JSON or
// in a URL; errors.Is still sees the wrapped error.
func TestScrubber(t *testing.T) {
	env := map[string]string{
		"WEBHOOK_SECRETS":             "whsec-one, whsec-two",
		"NATS_URL":                    "nats://crawl:nats\"pw@a:4222,nats://tok-en-1@b:4222",
		"CLICKHOUSE_PASSWORD":         "ch-pass",
		"CRAWL_API_KEY":               "fc-key-1234",
		"ALERT_WEBHOOK_URL":           "https://hooks.example.com/services/T01/B02/hook-secret?token=q-secret",
		"CLICKHOUSE_ADDR":             "user:dsn-pw@host:9000",
		"NATS_TOKEN":                  "ab", // too short to scrub
		"OTEL_EXPORTER_OTLP_HEADERS":  "x-honeycomb-team=hny-key-1,authorization=Bearer%20otel-tok",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otlp.example.com/v1/x?api_key=otel-q-key",
	}
	s := NewScrubber(Secrets(func(k string) string { return env[k] }))
	var out bytes.Buffer
	line := `{"a":"whsec-one whsec-two nats\"pw tok-en-1 ch-pass fc-key-1234 hook-secret q-secret dsn-pw hny-key-1 Bearer otel-tok otel-q-key","u":"nats%22pw"}` + "\n"
	if _, err := s.Writer(&out).Write([]byte(line)); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"whsec-one", "whsec-two", `nats\"pw`, "nats%22pw", "tok-en-1", "ch-pass", "fc-key-1234", "hook-secret", "q-secret", "dsn-pw", "hny-key-1", "otel-tok", "otel-q-key"} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("%q left in %s", secret, out.String())
		}
	}
	if !strings.Contains(out.String(), `{"a":"REDACTED REDACTED`) {
		t.Errorf("scrubbed line: %s", out.String())
	}
	err := s.Error(errors.Join(io.EOF, errors.New("dial nats://crawl:nats\"pw@a:4222")))
	if strings.Contains(err.Error(), `nats"pw`) || !errors.Is(err, io.EOF) {
		t.Errorf("scrubbed error %q (wraps EOF: %v)", err, errors.Is(err, io.EOF))
	}
	if plain := errors.New("nothing secret: ab"); s.Error(plain) != plain || s.Error(nil) != nil {
		t.Error("an error without secrets was changed")
	}
}
