package events

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestSenderGoldensValidate: every golden delivery of every sender version
// (testdata/fixtures/firecrawl-*/index.tsv says its type, job id and
// webhookId) is accepted with that type and job id, keyed by its webhookId,
// or when it has none by the key derived from its body.
func TestSenderGoldensValidate(t *testing.T) {
	t.Parallel()
	indexes, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "fixtures", "firecrawl-*", "index.tsv"))
	seen := 0
	for _, index := range indexes {
		if strings.Contains(index, "firecrawl-2026") {
			continue // the captured runs: TestDecodeAcceptedScansRealDeliveries
		}
		b, err := os.ReadFile(index)
		if err != nil {
			t.Fatal(err)
		}
		bodies, _ := filepath.Glob(filepath.Join(filepath.Dir(index), "*.body"))
		sc := bufio.NewScanner(bytes.NewReader(b))
		for i := 0; sc.Scan(); i++ {
			f := strings.Split(sc.Text(), "\t") // seq, type, job, webhookId, size
			body, err := os.ReadFile(bodies[i])
			if err != nil {
				t.Fatal(err)
			}
			h, err := Validate(body)
			if err != nil {
				t.Fatalf("%s: %v", bodies[i], err)
			}
			key, derived := f[3], f[3] == ""
			if derived {
				key = DerivedKey(body)
			}
			if h.Type != f[1] || h.CrawlID != f[2] || h.WebhookID != key || h.KeyDerived != derived {
				t.Errorf("%s: head %+v, want type %s job %s key %s (derived %v)", bodies[i], h, f[1], f[2], key, derived)
			}
			seen++
		}
	}
	if seen < 20 {
		t.Fatalf("%d golden deliveries, want every version's", seen)
	}
}

// TestDerivedKey: the same body always gives the same key, whatever JSON
// whitespace surrounds it; another body, even by one byte, another key.
func TestDerivedKey(t *testing.T) {
	t.Parallel()
	body := []byte(`{"success":true,"type":"crawl.page","id":"0199a0b1-1c2d-7e3f-8a4b-5c6d7e8f9a01","data":[]}`)
	k := DerivedKey(body)
	u, err := uuid.Parse(k)
	if err != nil || u.Version() != 8 {
		t.Fatalf("key %q: %v, version %d", k, err, u.Version())
	}
	if DerivedKey(append(append([]byte(" \n"), body...), '\n')) != k || DerivedKey(bytes.Clone(body)) != k {
		t.Error("the same delivery gave another key")
	}
	if DerivedKey(bytes.Replace(body, []byte(`true`), []byte(`false`), 1)) == k {
		t.Error("another delivery gave the same key")
	}
}

// TestMonitorPages reads both shapes the monitor sender has sent: data one
// object (2026-05-06) and a list with the judgement (2026-05-21 on), and
// skips what it cannot read.
func TestMonitorPages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, data string
		want       []MonitorPage
	}{
		{"object", `{"monitorId":"m","checkId":"c","url":"https://a/","status":"new","previousScrapeId":null,"currentScrapeId":"s2","error":null}`,
			[]MonitorPage{{MonitorID: "m", CheckID: "c", URL: "https://a/", Status: "new", CurrentScrapeID: "s2"}}},
		{"list", `[{"url":"https://a/","status":"changed","previousScrapeId":"s1","currentScrapeId":"s2","isMeaningful":false},{"url":5},7]`,
			[]MonitorPage{{CheckID: "job", URL: "https://a/", Status: "changed", PreviousScrapeID: "s1", CurrentScrapeID: "s2", IsMeaningful: new(bool)}}},
		{"other shapes", `"x"`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := MonitorPages(&Event{Type: TypeMonitorPage, ID: "job", RawData: []byte(tc.data)})
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if (g.IsMeaningful == nil) != (w.IsMeaningful == nil) || g.IsMeaningful != nil && *g.IsMeaningful != *w.IsMeaningful {
					t.Fatalf("isMeaningful %v, want %v", g.IsMeaningful, w.IsMeaningful)
				}
				g.IsMeaningful, w.IsMeaningful = nil, nil
				if g != w {
					t.Fatalf("got %+v, want %+v", g, w)
				}
			}
		})
	}
}

// TestRawEvents: a type that is neither a page nor a job's lifecycle is
// accepted whatever its data, success or error hold; its job id is kept
// when it is a string a message header can carry, cut to MaxJobIDLength.
func TestRawEvents(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", MaxJobIDLength) // two bytes each
	for _, tc := range []struct{ name, body, job string }{
		{"data an object", `{"success":true,"type":"monitor.check.completed","id":"c1","data":{"summary":{}}}`, "c1"},
		{"v0 jobId", `{"type":"extract.failed","jobId":"j","data":5,"error":{"x":1},"success":"no"}`, "j"},
		{"no job id", `{"type":"agent.started"}`, ""},
		{"id not a string", `{"type":"agent.started","id":7}`, ""},
		{"control characters", `{"type":"agent.started","id":"a\r\nNats-Msg-Id: x"}`, ""},
		{"long", `{"type":"agent.started","id":"` + long + `"}`, long[:MaxJobIDLength]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Validate([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if h.CrawlID != tc.job || !h.KeyDerived || h.Documents != 0 {
				t.Errorf("head %+v, want job id %q, a derived key", h, tc.job)
			}
		})
	}
	if _, err := Validate([]byte(`{"type":"monitor.page","webhookId":"x"}`)); err == nil {
		t.Error("a webhookId that is not a UUID was accepted")
	}
}
