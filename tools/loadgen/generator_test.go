package main

import (
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/verify"
)

// TestGenerator: the precomputed-prefix signature is the HMAC of the whole
// body, the body is a valid delivery, and ids do not repeat.
func TestGenerator(t *testing.T) {
	g := newGenerator(5000)
	seen := map[string]bool{}
	for range 100 {
		var d delivery
		g.next(&d)
		body := g.body(&d)
		if got, want := string(d.sig[:]), verify.Header(secret, body); got != want {
			t.Fatalf("signature %s, want %s", got, want)
		}
		h, err := events.Validate(body)
		if err != nil {
			t.Fatal(err)
		}
		if h.WebhookID != string(d.id[:]) || seen[h.WebhookID] {
			t.Fatalf("webhookId %s (generated %s) repeated or changed", h.WebhookID, d.id)
		}
		seen[h.WebhookID] = true
	}
}
