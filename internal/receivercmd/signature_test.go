package receivercmd

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/verify"
)

// firecrawlSecret signed the captured deliveries of testdata/firecrawl-2026
// (copies of the shared capture from the real crawl API).
const firecrawlSecret = "fc-harness-secret"

// captured is one delivery the real crawl API sent: its body and headers
// byte for byte.
type captured struct {
	name   string
	body   []byte
	header http.Header
}

func capturedDeliveries(t *testing.T) []captured {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", "fixtures", "firecrawl-2026", "run1")
	names, err := filepath.Glob(filepath.Join(dir, "*.body"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no captured deliveries in %s: %v", dir, err)
	}
	var out []captured
	for _, name := range names {
		body, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(strings.TrimSuffix(name, ".body") + ".headers")
		if err != nil {
			t.Fatal(err)
		}
		// The request line, then the headers as sent.
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(append(bytes.TrimRight(raw, "\r\n"), "\r\n\r\n"...))))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, captured{filepath.Base(name), body, req.Header})
	}
	return out
}

// postWith delivers body with the given headers.
func (r *runningReceiver) postWith(t *testing.T, body []byte, h map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.URL+"/webhooks/crawl", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	return do(t, req)
}

// TestRealDeliveriesAcceptedByDefault: with nothing but the secret
// configured, every delivery the real crawl API sent (signed in
// X-Firecrawl-Signature) is accepted and stored, and so is a delivery
// signed in the interface document's X-Service-Signature.
func TestRealDeliveriesAcceptedByDefault(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	r := startReceiver(t, map[string]string{"NATS_URL": js.URL(), "WEBHOOK_SECRETS": "other-secret," + firecrawlSecret})
	deliveries := capturedDeliveries(t)
	for _, d := range deliveries {
		sig := d.header.Get(verify.FirecrawlHeader)
		if sig == "" || d.header.Get(verify.DefaultHeader) != "" {
			t.Fatalf("%s: captured headers are not the real API's: %v", d.name, d.header)
		}
		if a := r.postWith(t, d.body, map[string]string{verify.FirecrawlHeader: sig}); a.status != 200 || !strings.Contains(a.body, `"status":"accepted"`) {
			t.Fatalf("%s: %d %s", d.name, a.status, a.body)
		}
	}
	body, _ := page(t, "signed in X-Service-Signature")
	if a := r.postWith(t, body, map[string]string{verify.DefaultHeader: verify.Header(firecrawlSecret, body)}); a.status != 200 {
		t.Fatalf("X-Service-Signature: %d %s", a.status, a.body)
	}
	if got, want := streamMsgs(t, js.client(t)), uint64(len(deliveries)+1); got != want {
		t.Fatalf("%d messages stored, want %d", got, want)
	}
}

// TestTrustedProxies: the client address that is logged comes from
// X-Forwarded-For only when the peer is a configured proxy; a sender
// elsewhere cannot put an address of its choosing in the logs.
func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	js := startJetStream(t, false)
	const forged = "203.0.113.77"
	for _, tc := range []struct {
		name, proxies, want, notWant string
	}{
		{"none configured: the peer", "", `"remote":"127.0.0.1"`, forged},
		{"peer not among them", "10.0.0.0/8,192.168.0.0/16", `"remote":"127.0.0.1"`, forged},
		{"peer is a trusted proxy", "10.0.0.0/8, 127.0.0.0/8", `"remote":"` + forged + `"`, `"remote":"127.0.0.1"`},
		{"peer is a trusted single address", "127.0.0.1", `"remote":"` + forged + `"`, `"remote":"127.0.0.1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startReceiver(t, map[string]string{"NATS_URL": js.URL(), "RECEIVER_TRUSTED_PROXIES": tc.proxies, "LOG_LEVEL": "warn"})
			body, _ := page(t, "x")
			// An unsigned delivery: refused, and logged with its address.
			a := r.postWith(t, body, map[string]string{"X-Forwarded-For": forged, "X-Real-IP": forged})
			if a.status != 401 {
				t.Fatalf("%d %s", a.status, a.body)
			}
			logs := r.logs.String()
			if !strings.Contains(logs, tc.want) || strings.Contains(logs, tc.notWant) {
				t.Fatalf("want %s and not %s in the logs:\n%s", tc.want, tc.notWant, logs)
			}
		})
	}
}
