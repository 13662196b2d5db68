// Package deliverytest gives tests the deliveries they post: the shared,
// byte-exact fixtures of testdata/fixtures with their signatures, and a
// crawl.page built around a markdown. Test tooling: nothing in the product
// imports it.
package deliverytest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// Fixture reads the delivery name of testdata/fixtures (a test runs in its
// package's folder, two below the module's root) and its signature for
// the fixtures' secret, "test-secret", from SIGNATURES.tsv.
func Fixture(t testing.TB, name string) (body []byte, sig string) {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", "fixtures")
	body, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	tsv, err := os.ReadFile(filepath.Join(dir, "SIGNATURES.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(tsv), "\n") {
		if f := strings.Split(line, "\t"); len(f) == 2 && f[0] == name {
			return body, f[1]
		}
	}
	t.Fatalf("no signature for %s", name)
	return nil, ""
}

// Page builds a crawl.page delivery of markdown with a fresh webhookId.
func Page(t testing.TB, markdown string) (body []byte, webhookID string) {
	t.Helper()
	webhookID = uuid.NewString()
	ev := map[string]any{
		"success": true, "type": "crawl.page", "id": "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c", "webhookId": webhookID,
		"data": []any{map[string]any{"markdown": markdown, "metadata": map[string]any{
			"sourceURL": "https://example.com/" + webhookID, "statusCode": 200}}},
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b, webhookID
}
