package crawlapi

import (
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/testkit/logtest"
)

const testKey = "sk-test-0123456789"

func newTestClient(t *testing.T, base string, mod func(*ClientConfig)) *Client {
	t.Helper()
	log, _ := logtest.WithoutSecret(t, testKey)
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
