package receiver

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

// TestWALFullAnswers503: a log that cannot take the delivery (past
// RECEIVER_WAL_MAX_BYTES) makes the answer 503, never 2xx, even though the
// stream took it; once the sender retries on a log with room, it is a
// duplicate.
func TestWALFullAnswers503(t *testing.T) {
	env := walEnv(t, t.TempDir(), t.TempDir())
	env["RECEIVER_WAL_MAX_BYTES"] = "1"
	r := startReceiver(t, env)
	body, _ := page(t, "# no room")
	a := r.deliver(t, body)
	if a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, `"error":"unavailable"`) ||
		!strings.Contains(a.body, "stable storage") || a.header.Get("Retry-After") == "" {
		t.Fatalf("delivery on a full log: %d %s (Retry-After %q), want 503 unavailable", a.status, a.body, a.header.Get("Retry-After"))
	}
}

// TestWALReplayedAtStart: what the log holds from an earlier process (a
// crash after the log's sync, before the stream's) is in the stream once
// the receiver says it is ready, and a sender's retry of it is then a
// duplicate.
func TestWALReplayedAtStart(t *testing.T) {
	walDir := t.TempDir()
	body, id := page(t, "# left in the log")
	w, err := wal.Open(wal.Options{Dir: walDir, Retention: time.Minute, MaxBytes: 1 << 30, Logger: zerolog.Nop()})
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

// TestWALRetentionMustOutlastTheSync: a retention shorter than four times the
// lazy server's sync interval is refused at start, naming the
// setting.
func TestWALRetentionMustOutlastTheSync(t *testing.T) {
	env := walEnv(t, t.TempDir(), filepath.Join(t.TempDir(), "wal"))
	env["WEBHOOK_SECRETS"] = testSecret
	env["NATS_SYNC_INTERVAL"] = "2s"
	env["RECEIVER_WAL_RETENTION"] = "3s"
	cfg, err := Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "RECEIVER_WAL_RETENTION") || !strings.Contains(err.Error(), "NATS_SYNC_INTERVAL") {
		t.Fatalf("Validate: %v, want RECEIVER_WAL_RETENTION refused", err)
	}
}
