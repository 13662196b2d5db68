package receivercmd

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crawlhouse/crawlhouse/internal/delivery"
	"github.com/crawlhouse/crawlhouse/internal/wal"
	"github.com/rs/zerolog"
)

// walEnv is a receiver with its embedded server syncing lazily and the
// write-ahead log on, the durable fast layout of `make run`.
func walEnv(t *testing.T, store, walDir string) map[string]string {
	t.Helper()
	return map[string]string{
		"NATS_EMBEDDED":    "true",
		"NATS_URL":         "nats://127.0.0.1:-1",
		"NATS_STORE_DIR":   store,
		"NATS_SYNC_ALWAYS": "false",
		"RECEIVER_WAL_DIR": walDir,
	}
}

// TestWALAcceptsAndDeduplicates: with the log on, a delivery is answered
// 200 accepted and stored once; its retry is answered duplicate, as
// without the log; the log's metrics are served.
func TestWALAcceptsAndDeduplicates(t *testing.T) {
	r := startReceiver(t, walEnv(t, t.TempDir(), t.TempDir()))
	body, id := page(t, "# durable")
	if a := r.deliver(t, body); a.status != http.StatusOK || a.body != `{"status":"accepted","webhookId":"`+id+`"}` {
		t.Fatalf("first delivery: %d %s", a.status, a.body)
	}
	if a := r.deliver(t, body); a.status != http.StatusOK || a.body != `{"status":"duplicate","webhookId":"`+id+`"}` {
		t.Fatalf("retry: %d %s", a.status, a.body)
	}
	js := (&jetStream{t: t, url: r.NATS}).client(t)
	if n := streamMsgs(t, js); n != 1 {
		t.Errorf("stream holds %d messages, want 1", n)
	}
	resp, err := http.Get(r.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, _ := io.ReadAll(resp.Body)
	for _, name := range []string{"crawlhouse_receiver_wal_bytes", "crawlhouse_receiver_wal_sync_seconds_count 2", "crawlhouse_receiver_wal_replayed_total 0"} {
		if !strings.Contains(string(m), name) {
			t.Errorf("/metrics lacks %q", name)
		}
	}
}

// TestWALMaxBytesMustHoldTheMemtable: a bound the log could never work
// within (below 4 MiB, or below four of the largest bodies) is refused at
// start, naming the setting, instead of answering 503 to every delivery
// with the log empty.
func TestWALMaxBytesMustHoldTheMemtable(t *testing.T) {
	for _, c := range []struct{ name, max, body string }{
		{"below 4 MiB", "1048576", "65536"},
		{"below four bodies", "8388608", "4194304"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := walEnv(t, t.TempDir(), filepath.Join(t.TempDir(), "wal"))
			env["WEBHOOK_SECRETS"] = testSecret
			env["RECEIVER_WAL_MAX_BYTES"] = c.max
			env["WEBHOOK_MAX_BODY_BYTES"] = c.body
			env["RECEIVER_MAX_INFLIGHT_BYTES"] = "268435456"
			err := Run(context.Background(), []string{"receiver"}, func(k string) string { return env[k] }, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), "RECEIVER_WAL_MAX_BYTES: "+c.max+" is below") {
				t.Fatalf("start with RECEIVER_WAL_MAX_BYTES=%s, WEBHOOK_MAX_BODY_BYTES=%s: %v, want refused", c.max, c.body, err)
			}
		})
	}
}

// TestWALReplayedAtStart: what the log holds from an earlier process (a
// crash after the log's sync, before the stream's) is in the stream once
// the receiver says it is ready, and a sender's retry of it is then a
// duplicate.
func TestWALReplayedAtStart(t *testing.T) {
	walDir := t.TempDir()
	body, id := page(t, "# left in the log")
	w, err := wal.Open(wal.Options{Dir: walDir, MaxBytes: 1 << 30, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	// Written under another subject prefix: the replay publishes under
	// the one configured now.
	env := &delivery.Envelope{Subject: "old.prefix.crawl.page", WebhookID: id, CrawlID: "5f0b6f3e-2c1d-4a8e-9b7a-1d2e3f4a5b6c",
		Type: "crawl.page", ReceivedAt: time.Now().UTC(), Size: len(body), Body: body}
	if err := w.Append(env); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	r := startReceiver(t, walEnv(t, t.TempDir(), walDir))
	js := (&jetStream{t: t, url: r.NATS}).client(t)
	if n := streamMsgs(t, js); n != 1 {
		t.Fatalf("once ready, the stream holds %d messages, want the 1 replayed", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "CRAWL_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("Nats-Msg-Id") != id || string(m.Data) != string(body) || m.Subject != "crawl.events.crawl.page" {
		t.Errorf("replayed message: id %q, subject %q, body %d bytes; want %q, crawl.events.crawl.page and the delivery's %d bytes",
			m.Header.Get("Nats-Msg-Id"), m.Subject, len(m.Data), id, len(body))
	}
	if a := r.deliver(t, body); a.status != http.StatusOK || !strings.Contains(a.body, `"status":"duplicate"`) {
		t.Errorf("retry of the replayed delivery: %d %s, want 200 duplicate", a.status, a.body)
	}
}
