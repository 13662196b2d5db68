package crawlsim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/events"
	"github.com/crawlhouse/crawlhouse/internal/verify"
)

const fixtures = "../../../testdata/fixtures" // byte-exact copies of ../shared/fixtures

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return b
}

func fixtureSignatures(t *testing.T) map[string]string {
	t.Helper()
	sigs := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(readFixture(t, "SIGNATURES.tsv")))
	for sc.Scan() {
		if name, sig, ok := strings.Cut(sc.Text(), "\t"); ok {
			sigs[name] = sig
		}
	}
	if len(sigs) == 0 {
		t.Fatal("SIGNATURES.tsv is empty")
	}
	return sigs
}

// The simulator's encoding must be the real sender's byte for byte: the
// signature is over the bytes, so any difference in key order, escaping or
// spacing would make a receiver that passes against crawlsim fail against
// the real API.
func TestEncodingReproducesFixtures(t *testing.T) {
	t.Parallel()
	const crawlID = "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c"
	meta := json.RawMessage(`{"tenant":"acme"}`)
	page, _ := marshal(wireDocument{
		Markdown: "# Example Domain\n\nThis domain is for use in illustrative examples.",
		Metadata: wireMetadata{Title: "Example Domain", Language: "en", SourceURL: "https://example.com/",
			URL: "https://example.com/", StatusCode: 200, ContentType: "text/html; charset=UTF-8",
			ScrapeID: "7c9e6679-7425-40de-944b-e07fc1f90ae7", ProxyUsed: "basic", CacheState: "miss", CreditsUsed: 1},
	})
	var failed failedDocument
	failed.Metadata.SourceURL = "https://example.com/broken"
	failedDoc, _ := marshal(failed)

	tests := []struct {
		name string
		body func() ([]byte, error)
	}{
		{"crawl-page.json", func() ([]byte, error) {
			return encodeEvent(true, "crawl.page", crawlID, "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", []json.RawMessage{page}, "", meta)
		}},
		{"crawl-page-failed.json", func() ([]byte, error) {
			return encodeEvent(false, "crawl.page", crawlID, "3b2f1c9e-8d7a-4c6b-9e5f-0a1b2c3d4e5f", []json.RawMessage{failedDoc}, "Request failed with status code 502", meta)
		}},
		{"crawl-completed.json", func() ([]byte, error) {
			return encodeEvent(true, "crawl.completed", crawlID, "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a", nil, "", meta)
		}},
	}
	sigs := fixtureSignatures(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.body()
			if err != nil {
				t.Fatal(err)
			}
			want := bytes.TrimRight(readFixture(t, tc.name), "\n")
			if !bytes.Equal(got, want) {
				t.Fatalf("bytes differ\n got %s\nwant %s", got, want)
			}
			if sig := verify.Header("test-secret", got); sig != sigs[tc.name] {
				t.Fatalf("signature %s, SIGNATURES.tsv has %s", sig, sigs[tc.name])
			}
		})
	}
}

func TestNoHTMLEscaping(t *testing.T) {
	t.Parallel()
	b, err := marshal(wireDocument{Markdown: "<a href=\"x\">&</a>"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`<a href=\"x\">&</a>`)) {
		t.Fatalf("HTML escaped as Go does, not as the sender: %s", b)
	}
}

// Every delivery of a simulated crawl has the real sender's shape: it
// validates, a successful page carries exactly one Document with
// metadata.scrapeId, a failed one success:false, an error, and data
// [{"metadata":{"sourceURL":…}}] without content.
func TestCrawlDeliveriesHaveTheSendersShape(t *testing.T) {
	t.Parallel()
	c, err := NewCrawl(Options{Pages: 40, Seed: 7, Faults: Faults{Failures: 0.25, Drops: 0.25, Oversized: 0.05, OversizeBytes: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	var failed, oversized int
	for _, p := range c.Pages {
		if p.Has(FaultOversized) {
			oversized++
		}
		ev, err := events.DecodeAccepted(p.Body)
		if err != nil {
			t.Fatalf("page %d: %v", p.Index, err)
		}
		if ev.Type != events.TypeCrawlPage || ev.ID != c.ID || ev.WebhookID != p.WebhookID || len(ev.Data) != 1 {
			t.Fatalf("page %d: envelope %+v", p.Index, ev)
		}
		if !bytes.HasPrefix(p.Body, []byte(`{"success":`)) || !bytes.HasSuffix(p.Body, []byte(`"metadata":{"tenant":"crawlsim"}}`)) {
			t.Fatalf("page %d: key order: %.80s", p.Index, p.Body)
		}
		d := ev.Data[0]
		if p.Success {
			if d.Metadata.ScrapeID != p.ScrapeID || d.Metadata.PageURL() != p.URL || d.Markdown == "" || ev.Error != "" {
				t.Fatalf("page %d: document %s", p.Index, d.Raw)
			}
			if p.Has(FaultOversized) {
				if len(d.Markdown) < 4096 {
					t.Fatalf("oversized page has %d bytes", len(d.Markdown))
				}
			}
			continue
		}
		failed++
		if ev.Success || ev.Error == "" || string(d.Raw) != `{"metadata":{"sourceURL":"`+p.URL+`"}}` {
			t.Fatalf("failed page %d: %s", p.Index, p.Body)
		}
	}
	if failed != 10 || oversized != 2 {
		t.Fatalf("failed %d oversized %d, want 10 and 2", failed, oversized)
	}
	again, _ := NewCrawl(Options{Pages: 40, Seed: 7, Faults: Faults{Failures: 0.25, Drops: 0.25, Oversized: 0.05, OversizeBytes: 4096}})
	if again.ID != c.ID || !bytes.Equal(again.Pages[39].Body, c.Pages[39].Body) {
		t.Fatal("same seed, different crawl")
	}
}

func TestFaultsAreExclusive(t *testing.T) {
	t.Parallel()
	c, err := NewCrawl(Options{Pages: 100, Faults: Faults{Drops: 0.3, Failures: 0.3, BadSignatures: 0.4, Duplicates: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, p := range c.Pages {
		excl := 0
		for _, f := range p.Faults {
			n[f]++
			if f == FaultDrop || f == FaultFail || f == FaultBadSignature {
				excl++
			}
		}
		if excl != 1 {
			t.Fatalf("page %d has faults %v", p.Index, p.Faults)
		}
	}
	if n[FaultDrop] != 30 || n[FaultFail] != 30 || n[FaultBadSignature] != 40 || n[FaultDuplicate] != 50 {
		t.Fatalf("fault counts %v", n)
	}
	if _, err := NewCrawl(Options{Pages: 1, Faults: Faults{Drops: 0.6, Failures: 0.6}}); err == nil {
		t.Fatal("drops+failures > 1 accepted")
	}
}
