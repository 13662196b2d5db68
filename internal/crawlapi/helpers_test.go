package crawlapi

import (
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"
	"github.com/rs/zerolog"
)

const testKey = "sk-test-0123456789"

// testLogger returns a logger whose output is checked, at the end of the
// test, never to contain the API key.
func testLogger(t *testing.T) (zerolog.Logger, *logtest.Buffer) {
	t.Helper()
	buf := &logtest.Buffer{}
	t.Cleanup(func() {
		if strings.Contains(buf.String(), testKey) {
			t.Errorf("the API key reached the logs:\n%s", buf.String())
		}
	})
	return zerolog.New(buf), buf
}

func newTestClient(t *testing.T, base string, mod func(*ClientConfig)) *Client {
	t.Helper()
	log, _ := testLogger(t)
	cfg := ClientConfig{BaseURL: base, Key: testKey, MinBackoff: time.Millisecond, MaxBackoff: 3 * time.Second,
		NotFoundWait: time.Millisecond, Attempts: 5}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewClient(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
